"""What combination of graph, task, mode, device and layout the samplers support: one table.

Every cell of {untyped, typed} x {node, link, hyperlink} x {independent, cooperative,
disjoint, temporal} x {CPU, GPU} x {block, pyg} is supported unless a rule of :data:`UNSUPPORTED` matches it;
the first matching rule gives the reason. The stages call :func:`check_supported` when
they are built (with what they know then) and per batch where the batch decides (its
seeds: node ids, pairs or hyperlinks, on a GPU or not), and every unsupported cell
raises :class:`UnsupportedCombination`. :func:`capability_table` renders the table for
the README.

"disjoint" is PyG's ``disjoint=True``: one subtree per seed node (``to_pyg().batch``).
"temporal" is temporal sampling (``time_attr``, ``node_timestamp_attr_name``, ...): every
hop filtered by its root seed's time, a node being one row per root: per subtree in the
pyg layout (PyG's temporal NeighborLoader), per sampled edge in the block layout
(GraphBolt's temporal samplers, no deduplication).
"GPU" means the batch is sampled on a GPU: CUDA seeds, or a graph on a CUDA device.

Over a part of a partitioned dataset (``graphpipe.distributed.load_partition``) the
table holds as it is: "cooperative" cells are sampled by the owners for the global batch;
the "independent", "disjoint" and "temporal" cells (a sampler that is not cooperative,
with a DistributedItemSampler upstream) by each rank for its own batch, the owners
sampling the in-edges its part lacks (``graphpipe.distributed.remote``), as one process
samples them over the whole graph (tested bit for bit on the CPU, node and link seeds,
typed and untyped, both layouts; P = 1 to 4, hash and METIS; temporal ones with node
and edge times, "uniform" and "last", disjoint ones and ``deduplicate=False``: P = 1 to
3). The stages refuse over a part: temporal LABOR with ``importance_sampling`` not 0,
``reverse_edge_ids`` on an untyped part, and hot-vertex reuse.
"""

from __future__ import annotations

from itertools import product
from typing import Dict, Optional, Tuple

__all__ = ["DIMENSIONS", "SUPPORT", "UNSUPPORTED", "UnsupportedCombination", "capability_table", "check_supported"]


class UnsupportedCombination(NotImplementedError):
    """A combination of graph kind, task, mode, device and layout (or a stage option) that
    graphpipe does not sample; the message names it and what to do instead."""


DIMENSIONS: Dict[str, Tuple[str, ...]] = {
    "graph": ("untyped", "typed"),
    "task": ("node", "link", "hyperlink"),
    "mode": ("independent", "cooperative", "disjoint", "temporal"),
    "device": ("CPU", "GPU"),
    "layout": ("block", "pyg"),
}

_HOST_MEMORY = (
    "keep the graph and the seeds in host memory and put "
    "copy_to('cuda') after the sampler (and the feature fetcher)"
)
# (what the rule matches, why it is not supported); the first match wins.
UNSUPPORTED = (
    (
        {"graph": "typed", "task": "hyperlink"},
        "hyperlinks ([N, k > 2] seeds) are sampled on untyped graphs only; typed link seeds are "
        "[N, 2] pairs per edge type",
    ),
    ({"graph": "typed", "device": "GPU"}, "typed graphs are sampled on the CPU: " + _HOST_MEMORY),
    (
        {"mode": "cooperative", "layout": "pyg"},
        "cooperative sampling exchanges the rows of every destination of every layer, so it builds "
        "block layers only (layout='block')",
    ),
    (
        {"mode": "cooperative", "device": "GPU"},
        "cooperative sampling runs on the CPU (its ids cross ranks through gloo); keep the seeds in "
        "host memory and put copy_to('cuda') after the fetcher: the model's cooperative_exchange "
        "runs on the GPU",
    ),
    (
        {"mode": "disjoint", "layout": "block"},
        "disjoint subtrees are PyG's NeighborLoader sampling (disjoint=True), so they are laid out as PyG "
        "batches only (layout='pyg'; to_pyg() gives `batch`)",
    ),
    ({"mode": "disjoint", "device": "GPU"},
     "disjoint sampling keys each subtree's variates on the CPU; " + _HOST_MEMORY),
    (
        {"mode": "disjoint", "task": "hyperlink"},
        "disjoint sampling grows one subtree per seed node; hyperlinks need disjoint=False",
    ),
    ({"mode": "temporal", "device": "GPU"}, "temporal sampling runs on the CPU; " + _HOST_MEMORY),
    (
        {"mode": "temporal", "task": "hyperlink", "layout": "pyg"},
        "temporal hyperlinks are GraphBolt's: sample them with layout='block'",
    ),
)


def _reason(cell: Dict[str, str]) -> Optional[str]:
    return next((why for rule, why in UNSUPPORTED if all(cell[key] == value for key, value in rule.items())), None)


# Every cell (a tuple of DIMENSIONS' values in order) -> None (supported) or the reason.
SUPPORT: Dict[Tuple[str, ...], Optional[str]] = {
    cell: _reason(dict(zip(DIMENSIONS, cell))) for cell in product(*DIMENSIONS.values())
}


def check_supported(where: str, **known: str) -> None:
    """Raise :class:`UnsupportedCombination` (naming ``where``) when no cell that agrees
    with ``known`` (a value for some of :data:`DIMENSIONS`, e.g. ``graph="typed",
    mode="cooperative"``) is supported; the others may still be refused once known."""
    reasons = [
        reason for cell, reason in SUPPORT.items() if all(value == known.get(key, value) for key, value in zip(DIMENSIONS, cell))
    ]
    if None not in reasons:
        described = ", ".join(f"{key}={known[key]}" for key in DIMENSIONS if key in known)
        raise UnsupportedCombination(f"{where}: {described} is not supported: {reasons[0]}")


def capability_table() -> str:
    """The table as markdown: one row per graph kind, task and mode, one column per device
    and layout; unsupported cells name a numbered reason listed below the table."""
    columns = list(product(DIMENSIONS["device"], DIMENSIONS["layout"]))
    lines = [
        "| graph | task | mode | " + " | ".join(f"{device}, {layout}" for device, layout in columns) + " |",
        "|---" * (3 + len(columns)) + "|",
    ]
    numbers: Dict[str, int] = {}
    for graph, task, mode in product(DIMENSIONS["graph"], DIMENSIONS["task"], DIMENSIONS["mode"]):
        reasons = [SUPPORT[(graph, task, mode, device, layout)] for device, layout in columns]
        cells = ["yes" if why is None else f"no ({numbers.setdefault(why, len(numbers) + 1)})" for why in reasons]
        lines.append(f"| {graph} | {task} | {mode} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"{number}. {reason[0].upper()}{reason[1:]}." for reason, number in numbers.items()]
    return "\n".join(lines)
