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
from graphpipe.graph.checks import ATTRIBUTES_HINT
from graphpipe.ops.edge_lookup import EdgeExclusion
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
            f"{where}: `{argument}`={name!r} is not a {kind} attribute of the graph; its {kind} "
            f"attributes: {sorted(table)}; {ATTRIBUTES_HINT}"
        )
    t = table[name]
    size = graph.total_num_nodes if kind == "node" else graph.total_num_edges
    if t.dim() != 1 or t.numel() != size or t.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"{where}: `{argument}`={name!r} must name [{size}] int64 timestamps (one per {kind}), got a "
            f"{list(t.shape)} {t.dtype} tensor"
        )
    if t.dtype == torch.int32:  # int32's minimum marks no time (a typed graph's type left out), as int64's
        return t.to(torch.int64).masked_fill(t == torch.iinfo(torch.int32).min, UNTIMED)
    return t


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
    dst = torch.repeat_interleave(torch.arange(graph.indptr.numel() - 1), graph.indptr.diff().to(torch.int64))  # rows
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
        level="shapes", typed=typed, indptr_nodes=graph.indptr_nodes,
    )  # fmt: skip


class TimeFilter:
    """A sampler's temporal constraint, fixed when the sampler is built: which timestamps,
    the comparison, the window and the strategy; per layer it samples only the in-edges
    valid for each destination's root seed (:meth:`sample`).

    Args:
        graph: the graph (host memory).
        node_name, edge_name: ``(argument, name)``: the node / edge attribute holding int64
            timestamps and the argument that named it (for errors), or None.
        comparison: ``"<"``, ``"<="``, or None: ``"<="`` for node seeds in the pyg layout
            (PyG's), else ``"<"``.
        time_window: None or an int ``w >= 0``: also ``t > seed_time - w``.
        strategy: ``"uniform"`` (the sampler's draws among the valid in-edges) or
            ``"last"`` (the ``fanout`` latest valid in-edges).
        where: the sampler's name, for errors.
    """

    def __init__(self, graph, node_name, edge_name, comparison, time_window, strategy, where: str):
        self.graph = graph
        self.node_name, self.edge_name = (None if n is None else n[1] for n in (node_name, edge_name))
        self.comparison = comparison
        self.time_window = time_window
        self.strategy = strategy
        node_time, edge_time = (None if n is None else timestamps(graph, n[1], kind, n[0], where) for n, kind in ((node_name, "node"), (edge_name, "edge")))
        self.node_time = node_time
        self.__dict__["_arrays"] = _arrays(graph, node_time, edge_time)
        keys = time_keys(self.arrays, graph.total_num_edges)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), torch.nonzero(_segment_ids(graph).diff()).flatten() + 1,
                            torch.tensor([graph.total_num_edges])]).numpy()  # fmt: skip
        self.is_sorted = is_time_sorted(starts, keys, self.arrays.edge_order)
        if not self.is_sorted:
            warnings.warn(
                f"{where}: the graph's in-edges are not sorted by time, so sampled rows scan their in-edges (O(in-degree); "
                f"unweighted neighbor sampling draws a large range by rejection instead); sort them once with "
                f"graph = graph.sort_by_time({self.node_name!r}, {self.edge_name!r}) to find the valid ones by binary search",
                stacklevel=2,
            )
        # A window's lower bound is a cut of sorted keys only for one kind of times and no
        # untimed keys (always valid, they sort first); other windowed batches scan.
        self.cuts_windows = self.is_sorted and (node_time is None or edge_time is None) and not bool((keys == UNTIMED).any())
        self.untimed_edge_types = _untimed_edge_types(graph, node_time, edge_time)

    @property
    def arrays(self) -> TimeArrays:
        """The graph's arrays the kernels read (made once per process: not pickled)."""
        if self.__dict__.get("_arrays") is None:
            node_time, edge_time = (None if name is None else timestamps(self.graph, name, kind, "timestamps", "TimeFilter")
                                    for name, kind in ((self.node_name, "node"), (self.edge_name, "edge")))  # fmt: skip
            self.__dict__["_arrays"] = _arrays(self.graph, node_time, edge_time)
        return self.__dict__["_arrays"]

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_arrays", "node_time")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.node_time = None if self.node_name is None else timestamps(self.graph, self.node_name, "node", "timestamps", "TimeFilter")

    def seed_windows(self, times: torch.Tensor, comparison: str, time_window=None) -> Tuple[torch.Tensor, torch.Tensor]:
        """``([R], [R])`` int64 closed windows ``[lo, hi]`` of seeds at ``times`` ``[R]``
        (``time_window``: an int or ``[R]`` widths in place of the filter's)."""
        times = times.to(torch.int64)
        floor = torch.iinfo(torch.int64).min + 1  # keep t - 1 above UNTIMED
        hi = times if comparison == "<=" else times.clamp(min=floor) - 1
        width = self.time_window if time_window is None else time_window
        if width is None:
            return torch.full_like(times, UNTIMED), hi
        # (t - w, t): lo = t - (w - 1) without overflow; w = 0 is empty.
        width = torch.as_tensor(width, dtype=torch.int64).expand_as(times)
        below = (width - 1).clamp(min=0)
        lo = torch.where(times < floor + below, floor, times - below)
        return lo.masked_fill(width == 0, _LATEST), hi

    def sample(
        self, bounds, lo, hi, key_ids, fanouts, kernel: SegmentSampler, exclude=None, edge_types=None, whole_ranges=False,
        draw_key=None,
    ) -> LayerSample:
        """Sample segment ``s`` of ``bounds`` (``[2S]``, :mod:`graphpipe.ops.typed_sampling`)
        among its in-edges valid in ``[lo[s], hi[s]]`` with ``fanouts[s]``, but those
        ``exclude`` names. ``edge_types``: ``[S]`` segment edge type ids (typed graphs),
        whose untimed types are not constrained (``"last"``: drawn uniformly, as PyG's);
        ``whole_ranges``: the segments are whole in-edge ranges of a typed graph (no time
        order across types); ``draw_key``: the layer's key when ``kernel`` draws uniformly
        without replacement (then large unsorted segments are drawn by rejection,
        :func:`~graphpipe.ops.temporal.valid_candidates`). ``kernel`` takes ``candidates=``:
        the CSC positions its ``indptr`` indexes when not the graph's."""
        is_sorted = self.is_sorted and not whole_ranges
        free = None
        if edge_types is not None and self.untimed_edge_types.numel():
            free = torch.isin(edge_types, self.untimed_edge_types)
            lo, hi = lo.masked_fill(free, UNTIMED), hi.masked_fill(free, _LATEST)
        if self.strategy == "last":
            if free is None or not bool(free.any()):
                return self.latest(bounds, lo, hi, fanouts, is_sorted, exclude)
            latest = self.latest(bounds, lo, hi, fanouts.masked_fill(free, 0), is_sorted, exclude)
            uniform = self.uniform(
                bounds.view(-1, 2)[free].reshape(-1), lo[free], hi[free], key_ids[free], fanouts[free], kernel, is_sorted,
                _of_segments(exclude, free), draw_key,
            )  # fmt: skip
            return _by_segment(free, latest, uniform)
        return self.uniform(bounds, lo, hi, key_ids, fanouts, kernel, is_sorted, exclude, draw_key)

    def latest(self, bounds, lo, hi, fanouts, is_sorted, exclude) -> LayerSample:
        """``"last"``: each segment's ``fanouts[s]`` latest valid in-edges."""
        indptr, positions = latest_candidates(bounds, lo, hi, fanouts, self.arrays, is_sorted, exclude)
        return LayerSample(indptr, torch.from_numpy(self.arrays.indices)[positions].to(torch.int64), positions)

    def uniform(self, bounds, lo, hi, key_ids, fanouts, kernel, is_sorted, exclude, draw_key) -> LayerSample:
        """The sampler's draws among each segment's valid in-edges."""
        if is_sorted and exclude is None and (self.cuts_windows or bool((lo == UNTIMED).all())):
            return sample_segments(narrow_to_window(bounds, lo, hi, self.arrays), key_ids, fanouts, kernel)
        draws = None if draw_key is None else (draw_key, key_ids, fanouts)
        candidate_bounds, positions = valid_candidates(bounds, lo, hi, self.arrays, exclude, draws)

        def among_candidates(indptr, nodes, fanout, key_ids, exclude):
            return kernel(indptr, nodes, fanout, key_ids, exclude, candidates=positions)

        sample = sample_segments(candidate_bounds, key_ids, fanouts, among_candidates)
        return sample._replace(edge_ids=positions[sample.edge_ids])


def _of_segments(exclude: Optional[EdgeExclusion], keep: torch.Tensor) -> Optional[EdgeExclusion]:
    """``exclude`` over the segments ``keep`` (``[S]`` bool) marks, in their order."""
    if exclude is None:
        return None
    counts = exclude.indptr.diff()
    kept = keep[: counts.numel()]
    indptr = torch.zeros(int(kept.sum()) + 1, dtype=torch.int64)
    torch.cumsum(counts[kept], 0, out=indptr[1:])
    return EdgeExclusion(indptr, exclude.positions[torch.repeat_interleave(kept, counts)])


def _by_segment(second: torch.Tensor, first_sample: LayerSample, second_sample: LayerSample) -> LayerSample:
    """One sample of ``S`` segments from two: the segments ``second`` (``[S]`` bool) marks
    from ``second_sample`` (over those segments), the others from ``first_sample`` (over
    all ``S``, empty where ``second``)."""
    counts = first_sample.indptr.diff()
    counts[second] = second_sample.indptr.diff()
    segment = torch.cat([
        torch.repeat_interleave(torch.arange(counts.numel()), first_sample.indptr.diff()),
        torch.repeat_interleave(torch.nonzero(second).flatten(), second_sample.indptr.diff()),
    ])  # fmt: skip
    order = torch.sort(segment, stable=True).indices
    indptr = torch.zeros(counts.numel() + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr[1:])
    pick = lambda a, b: torch.cat([a, b])[order]  # noqa: E731
    return LayerSample(indptr, pick(first_sample.indices, second_sample.indices), pick(first_sample.edge_ids, second_sample.edge_ids))


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
