"""Where each stage of a pipe graph runs, as text, Graphviz DOT source, or a matplotlib figure."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..pipes.base import Pipe
from ..pipes.stages import Prefetcher, SideStream, ThreadPoolMap, Timed
from ..pipes.worker import ProcessWorkers
from .graph import stages

__all__ = ["placement", "describe", "stage_label", "to_graphviz", "draw"]

MAIN = "main thread"


def placement(pipe: Pipe) -> Dict[int, str]:
    """``{id(stage): where it runs}`` for every stage of ``pipe``'s graph.

    The sink runs in the consumer's (main) thread; a ``prefetch`` moves its upstream
    to a new thread, ``ProcessWorkers`` to worker processes; ``ThreadPoolMap`` and
    ``SideStream`` move only the stage they wrap (to a thread pool / a CUDA stream).
    """
    where: Dict[int, str] = {}
    thread_of: Dict[int, int] = {}

    def visit(stage: Pipe, location: str) -> None:
        if id(stage) in where:
            return
        where[id(stage)] = location
        source = getattr(stage, "source", None)
        if not isinstance(source, Pipe):
            return
        if isinstance(stage, Prefetcher):
            thread_of[id(stage)] = len(thread_of)
            visit(source, f"thread #{thread_of[id(stage)]}{_kernel_threads(stage)}")
        elif isinstance(stage, ProcessWorkers):
            visit(source, f"{stage.num_workers} worker processes")
        elif isinstance(stage, (ThreadPoolMap, SideStream)):
            # The wrapped stage's work runs elsewhere; its upstream is pulled right here.
            if isinstance(stage, ThreadPoolMap):
                where[id(source)] = f"pool of {stage.num_threads} threads{_kernel_threads(stage)}"
            else:
                where[id(source)] = f"{location}, CUDA side stream"
            if isinstance(source.source, Pipe):
                visit(source.source, location)
        else:
            visit(source, location)

    visit(pipe, MAIN)
    # Number the threads upstream first: "thread 1" is where the chain starts.
    count = len(thread_of)
    for temporary in reversed(range(count)):
        for key, location in where.items():
            where[key] = location.replace(f"thread #{temporary}", f"thread {count - temporary}")
    return where


def _kernel_threads(stage) -> str:
    """``", kernels on k threads"`` when a background stage sets its numba threads."""
    k = stage.kernel_threads
    return "" if k is None else f", kernels on {k} thread{'s' if k > 1 else ''}"


def stage_label(stage: Pipe) -> str:
    """A short name: the class and, for graphpipe primitives, their size."""
    name = type(stage).__name__
    if isinstance(stage, Prefetcher):
        return f"{name}({stage.buffer_size})"
    if isinstance(stage, ProcessWorkers):
        return f"{name}({stage.num_workers})"
    if isinstance(stage, ThreadPoolMap):
        return f"{name}({stage.num_threads})"
    device = getattr(stage, "device", None)
    return f"{name}({device})" if device is not None and not isinstance(stage, SideStream) else name


def _visible(pipe: Pipe) -> List[Pipe]:
    """Stages upstream first, without the loader's timers."""
    return [stage for stage in reversed(stages(pipe)) if not isinstance(stage, Timed)]


def describe(pipe: Pipe) -> str:
    """One line per stage, upstream first: its label and where it runs."""
    where = placement(pipe)
    rows = [(stage_label(stage), where.get(id(stage), "?")) for stage in _visible(pipe)]
    width = max(len(label) for label, _ in rows)
    digits = len(str(len(rows)))
    return "\n".join(
        f"  {i:>{digits}}. {label:<{width}}  runs in: {location}" for i, (label, location) in enumerate(rows, 1)
    )


def _edges(pipe: Pipe) -> Tuple[List[Pipe], List[Tuple[int, int]]]:
    nodes = _visible(pipe)
    index = {id(stage): i for i, stage in enumerate(nodes)}
    edges = []
    for i, stage in enumerate(nodes):
        source = getattr(stage, "source", None)
        while isinstance(source, Timed):
            source = source.source
        if id(source) in index:
            edges.append((index[id(source)], i))
    return nodes, edges


def to_graphviz(pipe: Pipe) -> str:
    """Graphviz DOT source of ``pipe``'s graph: one box per stage, labelled with where it runs."""
    where = placement(pipe)
    nodes, edges = _edges(pipe)
    lines = ["digraph pipe {", "  rankdir=LR;", '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb"];']
    for i, stage in enumerate(nodes):
        label = f"{stage_label(stage)}\\n{where.get(id(stage), '?')}"
        lines.append(f'  s{i} [label="{label}"];')
    lines += [f"  s{a} -> s{b};" for a, b in edges]
    lines.append("}")
    return "\n".join(lines)


def draw(pipe: Pipe, ax=None):
    """A matplotlib figure of ``pipe``'s graph (left to right), coloured by where stages run."""
    import matplotlib.pyplot as plt

    where = placement(pipe)
    nodes, edges = _edges(pipe)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 2.2 * len(nodes)), 2.2))
    locations = sorted({where.get(id(stage), "?") for stage in nodes})
    colours = {location: plt.cm.Pastel1(i % 9) for i, location in enumerate(locations)}
    for i, stage in enumerate(nodes):
        location = where.get(id(stage), "?")
        ax.text(
            i, 0, f"{stage_label(stage)}\n{location}", ha="center", va="center", fontsize=8,
            bbox=dict(boxstyle="round", facecolor=colours[location]),
        )
    for a, b in edges:
        ax.annotate("", xy=(b - 0.32, 0), xytext=(a + 0.32, 0), arrowprops=dict(arrowstyle="->"))
    ax.set_xlim(-0.6, len(nodes) - 0.4)
    ax.set_ylim(-1, 1)
    ax.axis("off")
    return ax.figure
