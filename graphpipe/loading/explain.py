"""Where each stage of a pipe graph runs, as text, Graphviz DOT source, or a matplotlib figure."""

from __future__ import annotations

from typing import Dict, List, Tuple

from graphpipe.pipes.base import Pipe, upstream
from graphpipe.loading.stages import Timed

__all__ = ["MAIN", "locations", "describe", "to_graphviz", "draw"]

MAIN = "main thread"


def locations(pipe: Pipe) -> Dict[int, str]:
    """``{id(stage): where its per-batch work runs}`` for every stage of ``pipe``'s graph.

    The sink runs in the consumer's (main) thread; walking up the ``.source`` links, each
    stage says where its upstream runs (``Pipe.upstream_location``: a ``prefetch`` moves
    it to a new thread, ``ProcessWorkers`` to worker processes) and, if it wraps its
    source (a thread pool, a CUDA stream), where the wrapped stages' work runs
    (``Pipe.wrapped_location``). Threads are numbered from the start of the chain; one a
    stage starts in worker processes is "N worker processes, thread k in each".
    """
    where: Dict[int, str] = {}
    threads: List[str] = []

    def new_thread() -> str:  # a thread of the stage being walked, `here`
        threads.append(f"thread #{len(threads)}")
        process = here.split(", ")[0]  # a thread started in worker processes runs in each of them
        return f"{process}, {threads[-1]} in each" if "worker process" in process else threads[-1]

    here, wrapped, after = MAIN, 0, MAIN  # wrapped: stages left that run at `here` inside a wrapper
    for stage in upstream(pipe):
        where[id(stage)] = here
        if wrapped:
            wrapped -= 1
            here = here if wrapped else after
        elif stage.wraps_source:
            after = stage.upstream_location(here, new_thread)
            wrapped, here = len(stage.wrapped_stages()), stage.wrapped_location(here)
        else:
            here = stage.upstream_location(here, new_thread)
    # Number the threads upstream first: "thread 1" is where the chain starts.
    count = len(threads)
    for temporary in reversed(range(count)):
        for key, location in where.items():
            where[key] = location.replace(f"thread #{temporary}", f"thread {count - temporary}")
    return where


def _rows(pipe: Pipe) -> List[Tuple[str, str]]:
    """``(label, where it runs)`` of each stage, upstream first, without the loader's timers."""
    where = locations(pipe)
    stages = [stage for stage in reversed(upstream(pipe)) if not isinstance(stage, Timed)]
    return [(stage.label(), where.get(id(stage), "?")) for stage in stages]


def describe(pipe: Pipe) -> str:
    """One line per stage, upstream first: its label and where it runs."""
    rows = _rows(pipe)
    width = max(len(label) for label, _ in rows)
    digits = len(str(len(rows)))
    return "\n".join(
        f"  {i:>{digits}}. {label:<{width}}  runs in: {location}" for i, (label, location) in enumerate(rows, 1)
    )


def to_graphviz(pipe: Pipe) -> str:
    """Graphviz DOT source of ``pipe``'s graph: one box per stage, labelled with where it runs."""
    rows = _rows(pipe)  # a chain: each reads from the one before
    lines = ["digraph pipe {", "  rankdir=LR;", '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb"];']
    lines += [f'  s{i} [label="{label}\\n{location}"];' for i, (label, location) in enumerate(rows)]
    lines += [f"  s{i - 1} -> s{i};" for i in range(1, len(rows))]
    lines.append("}")
    return "\n".join(lines)


def draw(pipe: Pipe, ax=None):
    """A matplotlib figure of ``pipe``'s graph: one column per stage (upstream on the left),
    one lane per place where work runs (the main thread, each background thread, a
    pool, worker processes), named on the left; arrows follow the batches."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    rows = _rows(pipe)  # a chain: each reads from the one before
    lanes = list(dict.fromkeys(location for _, location in rows))
    lanes.sort(key=lambda lane: lane == MAIN)  # the training loop's lane at the bottom, next to "your loop"
    lane_of = {location: i for i, location in enumerate(lanes)}
    if ax is None:
        _, ax = plt.subplots(figsize=(2.0 + 1.45 * len(rows), 0.5 + 0.75 * len(lanes)))
    colours = [plt.cm.Pastel1(i % 9) for i in range(len(lanes))]
    width, height = 0.84, 0.5
    for i, location in enumerate(lanes):
        ax.axhspan(-i - 0.45, -i + 0.45, color=colours[i], alpha=0.35, linewidth=0)
        ax.text(-0.6, -i, location, ha="right", va="center", fontsize=8, style="italic")
    centres = []
    for column, (label, location) in enumerate(rows):
        row = lane_of[location]
        centres.append((column, -row))
        ax.add_patch(
            FancyBboxPatch(
                (column - width / 2, -row - height / 2), width, height, boxstyle="round,pad=0.02",
                facecolor=colours[row], edgecolor="#555555", linewidth=0.8,
            )
        )
        ax.text(column, -row, label, ha="center", va="center", fontsize=7.5)
    for (xa, ya), (xb, yb) in zip(centres, centres[1:]):
        ax.annotate(
            "", xy=(xb - width / 2, yb), xytext=(xa + width / 2, ya),
            arrowprops=dict(arrowstyle="->", color="#333333", shrinkA=0, shrinkB=0),
        )
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(-len(lanes) + 0.5, 0.5)
    ax.axis("off")
    return ax.figure
