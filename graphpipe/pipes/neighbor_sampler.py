"""NeighborSampler: uniform or weighted neighbor sampling, GraphBolt's ``sample_neighbor``."""

from __future__ import annotations

from functools import partial
from typing import Callable, Dict, Mapping, Optional, Sequence, Union

import torch

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph
from graphpipe.ops import LayerSample, sample_neighbors
from graphpipe.ops.edge_lookup import EdgeExclusion
from graphpipe.ops.compile import compile_sample_neighbors, dtype_only
from graphpipe.ops.neighbor_sampling import FanoutTooLarge
from graphpipe._internal.checks import as_int, check_node_ids
from graphpipe.graph.checks import check_typed_seeds, check_edge_weights
from graphpipe.pipes.base import Pipe, functional_pipe
from graphpipe.pipes.subgraph_sampler import SubgraphSampler

__all__ = ["NeighborSampler", "sample_graph_neighbors"]


@functional_pipe("sample_neighbor")
class NeighborSampler(SubgraphSampler):
    """Sample a fixed number of in-neighbours per node, layer by layer from the seeds.

    ``fanouts[i]`` is the fanout of GNN layer ``i``, so the LAST entry applies to the
    seeds and ``sampled_subgraphs[0]`` is the layer nearest the input features. With
    ``fanouts=[15, 10, 5]``::

        input_nodes ──[subgraphs[0], fanout 15]──> h1 ──[subgraphs[1], 10]──> h2 ──[subgraphs[2], 5]──> seeds
                           ^ sampled last                                              ^ sampled first

    Every layer's destinations are a prefix of its sources, and layer ``l``'s
    destinations are layer ``l + 1``'s sources.

    A node with ``d`` in-edges gets ``min(d, fanout)`` distinct in-edges (every subset
    equally likely), or exactly ``fanout`` independent draws with ``replace=True`` (none
    when ``d == 0``); ``-1`` takes all in-edges. With ``weights`` the draws are
    proportional to that edge attribute and zero-weight edges are never taken (without
    replacement: successive sampling by weight). A node's sample depends only on the
    seed, the batch index, the layer and the node, not on the rest of the batch.

    Args:
        source: a pipe of MiniBatches with ``seeds`` (e.g. an ``ItemSampler``).
        graph: the :class:`~graphpipe.CSCGraph` to sample from.
        fanouts: one int per GNN layer, ``>= 1`` or ``-1`` (all in-edges).
        replace: sample with replacement.
        weights: name of a 1-D finite, non-negative float (or bool mask) edge
            attribute of ``graph`` to sample by, or None for uniform sampling.
        seed: seed of the random keys (see :class:`SubgraphSampler`).
        cooperative: sample one batch together across ranks (see :class:`SubgraphSampler`).
        layout: ``"block"`` (default: GraphBolt/DGL blocks, every layer samples all its
            destinations) or ``"pyg"`` (PyG's ``NeighborLoader``: a node's neighbours are
            sampled once, at the hop where it is first reached; less work; for
            ``MiniBatch.to_pyg()``, not for ``blocks``). See :class:`SubgraphSampler`.
        exclude_seed_edges: with node-pair seeds (link prediction), sample no edge
            ``u -> v`` of a pair ``(u, v)``; a destination then draws its fanout among
            its other in-edges (see :class:`SubgraphSampler`).
        include_reverse_edges: also exclude the seed edges' reverse edges.
        reverse_edge_ids: ``[num_edges]`` user edge id -> user edge id of its reverse
            (DGL's ``reverse_eids``); without it the reverse of ``(u, v)`` is every edge
            ``v -> u``.

    Example::

        pipe = ItemSampler(train_set, 1024, shuffle=True).sample_neighbor(graph, [15, 10, 5])
        pyg_pipe = ItemSampler(train_set, 1024, shuffle=True).sample_neighbor(graph, [15, 10, 5], layout="pyg")
    """

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        fanouts: Sequence[int],
        replace: bool = False,
        weights: Optional[str] = None,
        seed: Optional[int] = None,
        cooperative: bool = False,
        layout: str = "block",
        exclude_seed_edges: bool = False,
        include_reverse_edges: bool = False,
        reverse_edge_ids: Optional[torch.Tensor] = None,
    ):
        super().__init__(
            source, graph, fanouts, seed=seed, cooperative=cooperative, layout=layout,
            exclude_seed_edges=exclude_seed_edges, include_reverse_edges=include_reverse_edges,
            reverse_edge_ids=reverse_edge_ids,
        )  # fmt: skip
        self.replace = bool(replace)
        self.weights = weights
        self.probs = None if weights is None else check_edge_weights(graph, weights, type(self).__name__)

    def sample_layer(
        self, nodes: torch.Tensor, layer: int, minibatch: MiniBatch, exclude: Optional[EdgeExclusion] = None
    ) -> LayerSample:
        """In-edges of ``nodes`` (``[num_dst]`` int64) sampled with ``fanouts[layer]``,
        skipping those ``exclude`` names."""
        try:
            return sample_neighbors(
                self.graph.indptr,
                self.graph.indices,
                nodes,
                self.fanouts[layer],
                key=self.layer_key(minibatch.batch_index, layer),
                replace=self.replace,
                probs=self.probs,
                exclude=exclude,
            )
        except FanoutTooLarge as error:
            raise ValueError(f"{type(self).__name__}: `fanouts[{layer}]` is too large: {error}") from error

    def sample_segments(
        self, bounds: torch.Tensor, segments: torch.Tensor, key_ids: torch.Tensor, fanout: int, layer: int, minibatch: MiniBatch
    ) -> LayerSample:
        """Typed graphs: the segments' in-edges, each keyed by its node and edge type."""
        try:
            return sample_neighbors(
                bounds, self.graph.indices, segments, fanout, key=self.layer_key(minibatch.batch_index, layer),
                replace=self.replace, probs=self.probs, key_ids=key_ids,
            )  # fmt: skip
        except FanoutTooLarge as error:
            raise ValueError(f"{type(self).__name__}: `fanouts[{layer}]` is too large: {error}") from error

    def compile_task(self) -> Callable[[], None]:
        """A picklable call that compiles (or loads from numba's cache) the CPU kernels of
        ``sample_layer`` for this graph's dtypes, these fanouts and options
        (:func:`graphpipe.loading.compile.compile_kernels`)."""
        fanouts = [f for layer in getattr(self, "edge_type_fanouts", [self.fanouts]) for f in layer if f != 0]
        indptr, indices, probs = (dtype_only(t) for t in (self.graph.indptr, self.graph.indices, self.probs))
        return partial(compile_sample_neighbors, indptr, indices, fanouts, replace=self.replace, probs=probs)


def sample_graph_neighbors(
    graph: CSCGraph,
    seeds: Union[torch.Tensor, Mapping[str, torch.Tensor]],
    fanouts,
    replace: bool = False,
    probs_name: Optional[str] = None,
) -> SampledSubgraph:
    """One layer of in-edges of ``seeds``, GraphBolt's graph-level
    ``FusedCSCSamplingGraph.sample_neighbors`` (:meth:`CSCGraph.sample_neighbors`).

    Args:
        graph: the graph (homogeneous or typed).
        seeds: ``[n]`` node ids, or for a typed graph a dict node type -> ``[n_t]``
            type-local ids (types left out sample nothing).
        fanouts: a 1-D tensor or list (or an int): one fanout (``>= 0`` or -1), or for a
            typed graph one per edge type in edge type id order. One fanout on a typed
            graph applies to a node's in-edges of all types together, as GraphBolt's.
        replace: draw with replacement.
        probs_name: an edge attribute of ``graph`` to sample proportionally to.

    Returns:
        A :class:`SampledSubgraph` as GraphBolt returns it, not compacted:
        ``sampled_csc`` (per edge type ``"src:relation:dst"`` for a typed graph) has an
        ``indptr`` over the seeds (of the edge type's destination type) and ``indices``
        that are the sources' ids in the graph (type-local); ``original_edge_ids`` the
        edges' ids (within their type); ``original_row_node_ids`` and
        ``original_column_node_ids`` are None. Draws follow torch's global generator
        (``torch.manual_seed``).
    """
    where = "CSCGraph.sample_neighbors"
    counts = _graph_fanouts(fanouts, graph, where)
    if probs_name is not None and probs_name not in graph.edge_attributes:
        raise KeyError(
            f"{where}: `probs_name`={probs_name!r} is not an edge attribute of the graph; known edge attributes: "
            f"{sorted(graph.edge_attributes)}"
        )
    key = int(torch.randint(0, 2**62, ()))
    if graph.is_heterogeneous and (len(counts) > 1 or len(graph.edge_types) == 1):
        # A fanout per edge type: one layer of the typed sampler, its sources mapped back to their ids.
        sampler = NeighborSampler(None, graph, [counts], replace=replace, weights=probs_name, seed=key)
        layer = sampler.sample_subgraphs(MiniBatch(seeds=check_typed_seeds(seeds, graph, where))).sampled_subgraphs[0]
        csc = {
            etype: CSCFormat(part.indptr, layer.original_row_node_ids[parse_edge_type(etype)[0]][part.indices])
            for etype, part in layer.sampled_csc.items()
        }
        return SampledSubgraph(csc, None, None, layer.original_edge_ids)
    probs = None if probs_name is None else check_edge_weights(graph, probs_name, where)
    if not graph.is_heterogeneous:
        if isinstance(seeds, Mapping):
            raise TypeError(f"{where}: the graph is homogeneous, so `seeds` must be a tensor of node ids, got a dict")
        nodes = check_node_ids(seeds, graph.num_nodes, "seeds", where)
        indptr, indices, positions = _sampled(graph, nodes, counts[0], key, replace, probs)
        return SampledSubgraph(CSCFormat(indptr, indices), None, None, graph.map_edge_ids(positions))
    # One fanout for all edge types: a node draws among all its in-edges, then they are split by type.
    nodes = check_typed_seeds(seeds, graph, where)
    offsets = graph.node_type_offset.tolist()
    type_id = graph.node_type_to_id
    csc: Dict[str, CSCFormat] = {}
    edge_ids: Dict[str, torch.Tensor] = {}
    for dst_type, ids in nodes.items():
        indptr, indices, positions = _sampled(graph, ids + offsets[type_id[dst_type]], counts[0], key, replace, probs)
        edge_types = graph.type_per_edge[positions].to(torch.int64)
        dst = torch.repeat_interleave(torch.arange(ids.numel()), indptr.diff())
        for t, etype in enumerate(graph.edge_types):
            src_type, _, end = parse_edge_type(etype)
            if end != dst_type:
                continue
            mask = edge_types == t
            per_dst = torch.bincount(dst[mask], minlength=ids.numel())
            csc[etype] = CSCFormat(torch.cat([per_dst.new_zeros(1), per_dst.cumsum(0)]), indices[mask] - offsets[type_id[src_type]])
            edge_ids[etype] = graph.map_edge_ids(positions[mask])
    return SampledSubgraph({t: csc[t] for t in graph.edge_types}, None, None, {t: edge_ids[t] for t in graph.edge_types})


def _graph_fanouts(fanouts, graph: CSCGraph, where: str) -> list:
    """``fanouts`` of :func:`sample_graph_neighbors` as a list of ints (one, or one per
    edge type of a typed graph), each ``>= 0`` or -1."""
    values = fanouts.tolist() if isinstance(fanouts, torch.Tensor) and fanouts.dim() == 1 else fanouts
    values = [values] if as_int(values) is not None else values
    lengths = {1, len(graph.edge_types)} if graph.is_heterogeneous else {1}
    if not isinstance(values, (list, tuple)) or len(values) not in lengths:
        allowed = f"1 or {len(graph.edge_types)} (one per edge type)" if graph.is_heterogeneous else "1"
        raise ValueError(f"{where}: `fanouts` must be a 1-D tensor of {allowed} ints, got {fanouts!r}")
    counts = [as_int(value) for value in values]
    if any(count is None or count < -1 for count in counts):
        raise ValueError(f"{where}: `fanouts` must hold ints >= 0 or -1 (all in-edges), got {fanouts!r}")
    return counts


def _sampled(graph: CSCGraph, nodes: torch.Tensor, fanout: int, key: int, replace: bool, probs):
    """``(indptr, global source ids, CSC positions)`` of one layer over ``nodes``; fanout
    0 samples nothing."""
    if fanout == 0:
        empty = torch.empty(0, dtype=torch.int64)
        return torch.zeros(nodes.numel() + 1, dtype=torch.int64), empty, empty
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=key, replace=replace, probs=probs)
    return sample.indptr, sample.indices, sample.edge_ids
