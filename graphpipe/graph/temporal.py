"""Temporal sampling on a :class:`~graphpipe.CSCGraph`: its timestamps, time-sorted copies,
and the filter a sampler applies to every layer.

Timestamps are int64 graph attributes: node times (``node_attributes``, ``[num_nodes]``;
on a typed graph a node type filled with :data:`~graphpipe.ops.temporal.UNTIMED` has
none) and edge times (``edge_attributes``, ``[num_edges]`` by CSC position). A seed's
time ``t`` gives its window ``[lo, hi]``: ``hi = t`` (``comparison="<="``, PyG's) or ``t -
1`` (``"<"``, GraphBolt's), ``lo = t - time_window + 1`` (GraphBolt's open window ``(t -
w, t)``) or unbounded. Every hop is filtered against the window of its *root* seed.
"""

from __future__ import annotations

import warnings
from typing import Optional, Tuple

import numpy as np
import torch

from graphpipe.graph.build import smallest_index_dtype
from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.temporal import (
    UNTIMED,
    TimeArrays,
    is_time_sorted,
    latest_candidates,
    narrow_to_window,
    time_keys,
    valid_candidates,
)
from graphpipe.ops.typed_sampling import SegmentSampler, sample_segments

__all__ = ["COMPARISONS", "TEMPORAL_STRATEGIES", "TimeFilter", "sort_by_time", "timestamps"]

COMPARISONS = ("<", "<=")
TEMPORAL_STRATEGIES = ("uniform", "last")
_LATEST = np.iinfo(np.int64).max


def timestamps(graph, name: str, kind: str, argument: str, where: str) -> torch.Tensor:
    """The ``kind`` (``"node"`` or ``"edge"``) attribute ``name`` of ``graph`` as ``[n]``
    int64 timestamps, checked: 1-D, one per node (edge), an integer dtype."""
    table = graph.node_attributes if kind == "node" else graph.edge_attributes
    if not isinstance(name, str) or name not in table:
        raise ValueError(
            f"{where}: `{argument}`={name!r} is not a {kind} attribute of the graph; its {kind} attributes: {sorted(table)}"
        )
    t = table[name]
    size = graph.total_num_nodes if kind == "node" else graph.total_num_edges
    if t.dim() != 1 or t.numel() != size or t.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"{where}: `{argument}`={name!r} must name [{size}] int64 timestamps (one per {kind}), got a "
            f"{list(t.shape)} {t.dtype} tensor"
        )
    return t.to(torch.int64)


def _arrays(graph, node_time: Optional[torch.Tensor], edge_time: Optional[torch.Tensor]) -> TimeArrays:
    order = graph.map_edge_ids(torch.arange(graph.total_num_edges)) if graph.original_edge_ids is not None else None
    empty = np.zeros(0, np.int64)
    return TimeArrays(
        graph.indices.numpy(),
        empty if node_time is None else node_time.numpy(),
        empty if edge_time is None else edge_time.numpy(),
        empty if order is None else order.to(torch.int64).numpy(),
    )


def _segment_ids(graph) -> torch.Tensor:
    """``[num_edges]`` int64: each CSC position's segment (destination, and edge type)."""
    dst = torch.repeat_interleave(torch.arange(graph.total_num_nodes), graph.indptr.diff().to(torch.int64))
    if not graph.is_heterogeneous:
        return dst
    return dst * len(graph.edge_types) + graph.type_per_edge.to(torch.int64)


def sort_by_time(graph, node_timestamp_attr_name: Optional[str] = None, edge_timestamp_attr_name: Optional[str] = None):
    """:meth:`CSCGraph.sort_by_time`: a copy whose in-edges of every destination (and
    edge type) are sorted by time key (the later of the source's node time and the
    edge's time, whichever named), ties by the user's edge id. ``O(E log E)``, once."""
    where = "CSCGraph.sort_by_time"
    if node_timestamp_attr_name is None and edge_timestamp_attr_name is None:
        raise ValueError(f"{where}: name the timestamps to sort by: node_timestamp_attr_name and/or edge_timestamp_attr_name")
    node_time = None if node_timestamp_attr_name is None else timestamps(graph, node_timestamp_attr_name, "node", "node_timestamp_attr_name", where)
    edge_time = None if edge_timestamp_attr_name is None else timestamps(graph, edge_timestamp_attr_name, "edge", "edge_timestamp_attr_name", where)
    arrays = _arrays(graph, node_time, edge_time)
    order = arrays.edge_order if arrays.edge_order.size else np.arange(graph.total_num_edges)
    perm = torch.from_numpy(np.lexsort((order, time_keys(arrays, graph.total_num_edges), _segment_ids(graph).numpy())))
    from_graph = graph.map_edge_ids(perm) if graph.original_edge_ids is not None else perm
    typed = graph.typed_fields()
    if typed is not None:
        typed["type_per_edge"] = graph.type_per_edge[perm]
    return type(graph)._build(
        graph.indptr, graph.indices[perm], {name: t[perm] for name, t in graph.edge_attributes.items()},
        graph.node_attributes, from_graph.to(smallest_index_dtype(max(graph.total_num_edges - 1, 0)) if graph.original_edge_ids is None else graph.original_edge_ids.dtype),
        level="shapes", typed=typed,
    )  # fmt: skip


class TimeFilter:
    """A sampler's temporal constraint, fixed when the sampler is built: which timestamps,
    the comparison, the window and the strategy; per layer it samples only the in-edges
    valid for each destination's root seed (:meth:`sample`).

    Args:
        graph: the graph (host memory).
        node_name, edge_name: the node / edge attributes holding int64 timestamps, or None.
        comparison: ``"<"``, ``"<="``, or None: ``"<="`` for node seeds in the pyg layout
            (PyG's), else ``"<"``.
        time_window: None or an int ``w >= 0``: also ``t > seed_time - w``.
        strategy: ``"uniform"`` (the sampler's draws among the valid in-edges) or
            ``"last"`` (the ``fanout`` latest valid in-edges).
        where: the sampler's name, for errors.
    """

    def __init__(self, graph, node_name, edge_name, comparison, time_window, strategy, where: str):
        self.graph, self.node_name, self.edge_name = graph, node_name, edge_name
        self.comparison = comparison
        self.time_window = time_window
        self.strategy = strategy
        node_time = None if node_name is None else timestamps(graph, node_name, "node", "node timestamps", where)
        edge_time = None if edge_name is None else timestamps(graph, edge_name, "edge", "edge timestamps", where)
        self.node_time = node_time
        keys = time_keys(self.arrays, graph.total_num_edges)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), torch.nonzero(_segment_ids(graph).diff()).flatten() + 1,
                            torch.tensor([graph.total_num_edges])]).numpy()  # fmt: skip
        self.is_sorted = is_time_sorted(starts, keys, self.arrays.edge_order)
        if not self.is_sorted:
            warnings.warn(
                f"{where}: the graph's in-edges are not sorted by time, so sampled rows scan their in-edges (O(in-degree); "
                f"unweighted neighbor sampling draws a large range by rejection instead); sort them once with "
                f"graph = graph.sort_by_time({node_name!r}, {edge_name!r}) to find the valid ones by binary search",
                stacklevel=2,
            )
        # Sorted in-edges are cut by binary search, but a window's lower bound on two kinds
        # of times at once is no cut of the keys: those batches scan.
        self.cuts = self.is_sorted and (time_window is None or node_time is None or edge_time is None)
        self.untimed_edge_types = _untimed_edge_types(graph, node_time, edge_time)

    @property
    def arrays(self) -> TimeArrays:
        """The graph's arrays the kernels read (made once per process: not pickled)."""
        if self.__dict__.get("_arrays") is None:
            where = "TimeFilter"
            node_time = None if self.node_name is None else timestamps(self.graph, self.node_name, "node", "node timestamps", where)
            edge_time = None if self.edge_name is None else timestamps(self.graph, self.edge_name, "edge", "edge timestamps", where)
            self.__dict__["_arrays"] = _arrays(self.graph, node_time, edge_time)
        return self.__dict__["_arrays"]

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_arrays", "node_time")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        node_time = self.graph.node_attributes[self.node_name] if self.node_name is not None else None
        self.node_time = None if node_time is None else node_time.to(torch.int64)

    def seed_windows(self, times: torch.Tensor, comparison: str) -> Tuple[torch.Tensor, torch.Tensor]:
        """``([R], [R])`` int64 closed windows ``[lo, hi]`` of seeds at ``times`` ``[R]``."""
        times = times.to(torch.int64)
        floor = torch.iinfo(torch.int64).min + 1  # keep t - 1 above UNTIMED
        hi = times if comparison == "<=" else times.clamp(min=floor) - 1
        if self.time_window is None:
            lo = torch.full_like(times, UNTIMED)
        else:
            lo = (times.clamp(min=floor + self.time_window) - self.time_window + 1).clamp(min=floor)
        return lo, hi

    def sample(
        self, bounds, lo, hi, key_ids, fanouts, kernel: SegmentSampler, exclude=None, edge_types=None, whole_ranges=False,
        draw_key=None,
    ) -> LayerSample:
        """Sample segment ``s`` of ``bounds`` (``[2S]``, :mod:`graphpipe.ops.typed_sampling`)
        among its in-edges valid in ``[lo[s], hi[s]]`` with ``fanouts[s]``, but those
        ``exclude`` names. ``edge_types``: ``[S]`` segment edge type ids (typed graphs),
        whose untimed types are not constrained; ``whole_ranges``: the segments are whole
        in-edge ranges of a typed graph (no time order across types); ``draw_key``: the
        layer's key when ``kernel`` draws uniformly without replacement (then large unsorted
        segments are drawn by rejection, :func:`~graphpipe.ops.temporal.valid_candidates`).
        ``kernel`` takes ``candidates=``: the CSC positions its ``indptr`` indexes when not
        the graph's."""
        is_sorted = self.is_sorted and not whole_ranges
        if edge_types is not None and self.untimed_edge_types.numel():
            free = torch.isin(edge_types, self.untimed_edge_types)
            lo, hi = lo.masked_fill(free, UNTIMED), hi.masked_fill(free, _LATEST)
        if self.strategy == "last":
            indptr, positions = latest_candidates(bounds, lo, hi, fanouts, self.arrays, is_sorted, exclude)
            indices = torch.from_numpy(self.arrays.indices)[positions].to(torch.int64)
            return LayerSample(indptr, indices, positions)
        if self.cuts and is_sorted and exclude is None:
            return sample_segments(narrow_to_window(bounds, lo, hi, self.arrays), key_ids, fanouts, kernel)
        draws = None if draw_key is None else (draw_key, key_ids, fanouts)
        candidate_bounds, positions = valid_candidates(bounds, lo, hi, self.arrays, exclude, draws)

        def among_candidates(indptr, nodes, fanout, key_ids, exclude):
            return kernel(indptr, nodes, fanout, key_ids, exclude, candidates=positions)

        sample = sample_segments(candidate_bounds, key_ids, fanouts, among_candidates)
        return sample._replace(edge_ids=positions[sample.edge_ids])


def _untimed_edge_types(graph, node_time, edge_time) -> torch.Tensor:
    """The ids of the edge types no timestamp constrains (typed graphs): their source
    type has no node times (all UNTIMED) and their edges no edge times."""
    if not graph.is_heterogeneous:
        return torch.empty(0, dtype=torch.int64)
    schema = graph.schema
    untimed = []
    for t, (src, _) in enumerate(schema.edge_type_ends):
        lo, hi = schema.node_type_offset[src], schema.node_type_offset[src + 1]
        node_timed = node_time is not None and bool((node_time[lo:hi] != UNTIMED).any())
        edge_timed = edge_time is not None and bool((edge_time[graph.type_per_edge == t] != UNTIMED).any())
        if not node_timed and not edge_timed:
            untimed.append(t)
    return torch.tensor(untimed, dtype=torch.int64)
