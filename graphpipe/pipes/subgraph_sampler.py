"""SubgraphSampler: the layer loop shared by every sampling stage."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence

import torch

from graphpipe.graph.csc_graph import CSCGraph, smallest_index_dtype
from graphpipe.batch.minibatch import LAYOUTS, MiniBatch
from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph
from graphpipe.ops import LayerSample, derive_key, unique_and_compact
from graphpipe.ops.edge_lookup import EdgeExclusion, in_neighbours_sorted, seed_edge_exclusion
from graphpipe.ops.compile import unique_and_compact_task
from graphpipe._internal.checks import check_fanouts, check_int, check_node_ids, check_reverse_edge_ids
from graphpipe.graph.checks import check_edge_weights, check_graph, check_typed_fanouts
from graphpipe.distributed.cooperative import agree_on_seed, sample_subgraphs_cooperatively
from graphpipe.pipes.base import Pipe, upstream
from graphpipe.pipes.distributed_item_sampler import find_distributed_item_sampler
from graphpipe.pipes.feature_fetcher import FeatureFetcher
from graphpipe.pipes.hetero_sampling import sample_hetero_layer, sample_hetero_subgraphs

__all__ = ["SubgraphSampler"]


class SubgraphSampler(Pipe):
    """Base of sampling stages: samples layers from the seeds outwards and compacts them.

    Layer ``L-1`` (``fanouts[-1]``) samples in-neighbours of the seeds, layer ``L-2``
    samples in-neighbours of the nodes of layer ``L-1``, and so on; each layer is
    relabelled with :func:`~graphpipe.ops.unique_and_compact` so that its destinations
    are a prefix of its sources. Subclasses implement :meth:`sample_layer`.

    ``layout`` says which nodes a layer samples (recorded in ``MiniBatch.layout``):

    * ``"block"`` (default; GraphBolt's and DGL's blocks): layer ``l`` samples the
      in-edges of ALL its destinations (every node known after the layers before), so
      each GNN layer aggregates fresh neighbours for every node it updates.
    * ``"pyg"`` (PyG's ``NeighborLoader``): a node's in-edges are sampled once, at the
      hop where it is first reached: layer ``l`` samples only the nodes its previous
      layer added (the suffix of its destinations); its other destinations get no
      in-edges. Sources are still deduplicated against every node known so far. Less
      work, fewer nodes, and ``MiniBatch.to_pyg()`` returns the batch as is; the layers
      are not blocks for block-based models (``MiniBatch.blocks`` refuses them).

    A node's in-edges depend only on the seed, the batch, the layer and the node
    (LABOR with importance sampling excepted: its probabilities depend on the layer's
    sampled nodes), so a ``"pyg"`` batch holds exactly the nodes and edges that
    ``to_pyg()`` keeps of the ``"block"`` batch with the same seed.

    Randomness: layer ``layer`` of the batch with ``batch_index`` b draws every variate
    from the key ``layer_key(b, layer) = derive_key(seed, b, layer)``, and kernels key
    each variate by global vertex ids, never by thread or position. ``seed=None`` draws
    the seed once from torch's global generator (cooperative samplers: rank 0's draw,
    agreed on in one collective when the sampler is built; a given seed is checked to be
    the same on every rank and never replaced).

    ``cooperative=True`` makes the ranks of a ``torch.distributed`` group sample one
    shared batch together (see :mod:`graphpipe.distributed`); block layout only.

    Edge ids: samplers work on CSC positions; :meth:`compact_layer` maps them through
    :meth:`CSCGraph.map_edge_ids`, so ``original_edge_ids`` (and ``to_pyg().e_id``,
    DGL's ``EID``, edge features fetched by them) are the ids of the edges as the user
    gave them to ``CSCGraph.from_edge_index`` / ``from_coo``.

    Link prediction: ``seeds`` may be ``[N, 2]`` node pairs, or ``[N, k]`` hyperlinks
    (GraphBolt's, ``k > 2`` nodes each). The layers are then sampled from their distinct
    nodes (ascending: the last layer's destinations), and ``compacted_seeds`` holds the
    pairs (hyperlinks) in those local ids, ``[N, k]``. With
    ``exclude_seed_edges=True`` no layer contains an edge ``u -> v`` of a pair ``(u,
    v)`` of ``seeds`` (positives and negatives alike, as GraphBolt's
    ``exclude_seed_edges``; parallel edges included), so the model never sees an edge it
    must predict; ``include_reverse_edges=True`` also excludes their reverse edges: the
    edges ``reverse_edge_ids`` maps them to (DGL's ``reverse_eids``: user edge id -> the
    user edge id of its reverse), or without it every edge ``v -> u`` (GraphBolt's
    homogeneous rule). Neighbor sampling on CPU skips those edges inside its kernel, so
    a destination still gets ``min(fanout, in-edges left)`` uniformly among the others;
    LABOR and the GPU paths drop them from the sample (fewer edges for those
    destinations; LABOR's ``edge_weights`` are rescaled to estimate the mean over the
    in-edges left). Excluded edges are found per batch by binary search where every
    node's sources are sorted, else by a scan of the seed nodes' in-edges.
    """

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        fanouts: Sequence[int],
        seed: Optional[int] = None,
        cooperative: bool = False,
        layout: str = "block",
        exclude_seed_edges: bool = False,
        include_reverse_edges: bool = False,
        reverse_edge_ids: Optional[torch.Tensor] = None,
    ):
        super().__init__()
        name = type(self).__name__
        check_graph(graph, name)
        _check_no_fetch_before(source, name)
        if not isinstance(layout, str) or layout not in LAYOUTS:
            raise ValueError(
                f"{name}: `layout` must be 'block' (GraphBolt/DGL blocks: every layer samples all its "
                f"destinations) or 'pyg' (PyG's NeighborLoader: each node's neighbours are sampled once, at the "
                f"hop where it is first reached), got {layout!r}"
            )
        if cooperative and layout != "block":
            raise NotImplementedError(
                f"{name}: cooperative=True supports layout='block' only (the ranks exchange the rows of "
                f"every destination of every layer), got layout={layout!r}"
            )
        self.source = source
        self.graph = graph
        if graph.is_heterogeneous:
            self._init_typed(fanouts)
        else:
            self.fanouts: List[int] = check_fanouts(fanouts, name)
        seed = None if seed is None else check_int(seed, "seed", name)
        self.cooperative = bool(cooperative)
        if self.cooperative:
            where = f"{name} (cooperative)"
            try:
                source = find_distributed_item_sampler(self, where)
            except ValueError:
                source = None  # the first batch reports the missing DistributedItemSampler
            seed = agree_on_seed(source, seed, where)  # one collective, here, not one per batch
        self.layout = layout
        self.seed = int(torch.randint(0, 2**62, ())) if seed is None else seed
        self._init_exclusion(exclude_seed_edges, include_reverse_edges, reverse_edge_ids)

    def _init_typed(self, fanouts) -> None:
        """Typed graphs: ``edge_type_fanouts[layer][t]`` is the fanout of edge type id ``t``
        (0: none sampled), ``fanouts[layer]`` one int when a layer uses one for every
        type, else a dict edge type -> fanout."""
        name = type(self).__name__
        if self.graph.indptr.is_cuda:
            raise NotImplementedError(f"{name}: heterogeneous graphs are sampled on the CPU; keep the graph in host memory")
        self.edge_type_fanouts: List[List[int]] = check_typed_fanouts(fanouts, self.graph.edge_types, name)
        self.fanouts = [
            layer[0] if len(set(layer)) == 1 else dict(zip(self.graph.edge_types, layer))
            for layer in self.edge_type_fanouts
        ]

    def _init_exclusion(self, exclude_seed_edges, include_reverse_edges, reverse_edge_ids) -> None:
        """Check the exclusion arguments; map ``reverse_edge_ids`` to CSC positions."""
        name = type(self).__name__
        for arg, value in (("exclude_seed_edges", exclude_seed_edges), ("include_reverse_edges", include_reverse_edges)):
            if not isinstance(value, bool):
                raise TypeError(f"{name}: `{arg}` must be a bool, got {value!r}")
        if include_reverse_edges and not exclude_seed_edges:
            raise ValueError(f"{name}: `include_reverse_edges=True` needs `exclude_seed_edges=True`")
        if reverse_edge_ids is not None and not include_reverse_edges:
            raise ValueError(
                f"{name}: `reverse_edge_ids` says which edges are reverses, but `include_reverse_edges` is False; "
                f"pass include_reverse_edges=True to exclude them"
            )
        if exclude_seed_edges and self.graph.is_heterogeneous:
            raise NotImplementedError(
                f"{name}: `exclude_seed_edges=True` (link prediction) is not supported on heterogeneous graphs yet"
            )
        if exclude_seed_edges and self.cooperative:
            raise NotImplementedError(f"{name}: `exclude_seed_edges=True` is not supported with cooperative=True")
        if exclude_seed_edges and (self.graph.indptr.is_cuda or self.graph.indices.is_cuda):
            raise NotImplementedError(
                f"{name}: `exclude_seed_edges=True` looks edges up in host memory; keep the graph on the CPU "
                f"(pinned with graph.pin_memory_() for GPU sampling) instead of graph.to('cuda')"
            )
        self.exclude_seed_edges = exclude_seed_edges
        self.include_reverse_edges = include_reverse_edges
        self.reverse_positions = None if reverse_edge_ids is None else _reverse_positions(self.graph, reverse_edge_ids, name)
        self.sorted_indices = exclude_seed_edges and in_neighbours_sorted(self.graph.indptr, self.graph.indices)

    def __getstate__(self):
        """Sampling weights taken from a memory-mapped graph (``CSCGraph.load(mmap=True)``)
        are left out and re-derived on unpickling, so worker processes read the graph's
        file instead of receiving a copy of its weights in shared memory."""
        state = dict(super().__getstate__())
        if self.graph.source_path is not None and state.get("probs") is not None:
            state["probs"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if getattr(self, "weights", None) is not None and self.probs is None:
            self.probs = check_edge_weights(self.graph, self.weights, type(self).__name__)

    def layer_key(self, batch_index: int, layer: int) -> int:
        """The 64-bit key of every random variate of one layer of one batch."""
        return derive_key(self.seed, batch_index, layer)

    def sample_layer(
        self, nodes: torch.Tensor, layer: int, minibatch: MiniBatch, exclude: Optional[EdgeExclusion] = None
    ) -> LayerSample:
        """Sample in-edges of ``nodes`` (``[num_dst]`` int64 global ids) for GNN layer
        ``layer``, none of the in-edges ``exclude`` names for the first destinations."""
        raise NotImplementedError

    def sample_segments(
        self, bounds: torch.Tensor, segments: torch.Tensor, key_ids: torch.Tensor, fanout: int, layer: int, minibatch: MiniBatch
    ) -> LayerSample:
        """Typed graphs: sample the in-edge ranges ``[bounds[s], bounds[s + 1])`` of the
        segments ``s`` in ``segments`` (even positions) with ``fanout`` for GNN layer
        ``layer``, segment ``i`` keyed by ``key_ids[i]`` where variates are per
        destination (see :mod:`graphpipe.ops.typed_sampling`)."""
        raise NotImplementedError(f"{type(self).__name__} does not sample heterogeneous graphs")

    def sample_typed_layer(self, nodes, layer: int, minibatch: MiniBatch) -> SampledSubgraph:
        """Typed graphs: one layer for the destinations ``nodes`` (node type -> type-local
        ids), compacted per node type (:func:`~graphpipe.pipes.hetero_sampling.sample_hetero_layer`)."""
        return sample_hetero_layer(self, nodes, layer, minibatch)

    def compact_layer(self, nodes: torch.Tensor, sample: LayerSample) -> SampledSubgraph:
        """The :class:`SampledSubgraph` of one layer whose destinations are ``nodes``.

        ``sample`` holds the in-edges of the LAST ``len(sample.indptr) - 1`` of
        ``nodes`` (all of them in block layout; the nodes the previous layer added in
        pyg layout): the destinations before them get no in-edges. Sources are
        ``nodes`` followed by the new ones (:func:`~graphpipe.ops.unique_and_compact`),
        and the sample's CSC positions become the user's edge ids.
        """
        src_nodes, local_indices = unique_and_compact(nodes, sample.indices, self.graph.num_nodes)
        indptr = sample.indptr
        skipped = nodes.numel() - (indptr.numel() - 1)
        if skipped:
            indptr = torch.cat([indptr.new_zeros(skipped), indptr])
        return SampledSubgraph(
            sampled_csc=CSCFormat(indptr, local_indices),
            original_row_node_ids=src_nodes,
            original_column_node_ids=nodes,
            original_edge_ids=self.graph.map_edge_ids(sample.edge_ids),
            edge_weights=sample.edge_weights,
        )

    def sample_subgraphs(self, minibatch: MiniBatch) -> MiniBatch:
        """Fill ``sampled_subgraphs``, ``input_nodes`` and ``layout`` of ``minibatch``
        (and ``compacted_seeds`` for node pairs)."""
        name = type(self).__name__
        if minibatch.seeds is None:
            raise ValueError(f"{name}: the MiniBatch has no `seeds` to sample from")
        if self.graph.is_heterogeneous:
            seeds = minibatch.seeds.values() if isinstance(minibatch.seeds, dict) else [minibatch.seeds]
            if any(t.is_cuda for t in seeds):
                raise NotImplementedError(
                    f"{name}: heterogeneous graphs are sampled on the CPU, but the seeds are on a GPU; "
                    f"put copy_to('cuda') after the sampler (and the feature fetcher), not before it"
                )
            return sample_hetero_subgraphs(self, minibatch)
        if isinstance(minibatch.seeds, dict):
            raise ValueError(
                f"{name}: `seeds` is a dict of node types {sorted(minibatch.seeds)} (from a HeteroItemSet), but the "
                f"graph is homogeneous; sample a typed graph (CSCGraph.from_hetero_edges) or use an ItemSet"
            )
        compacted_seeds = exclusion = None
        if minibatch.is_link_batch:
            links = _check_links(minibatch.seeds, self.graph.num_nodes, name)
            nodes, local = unique_and_compact(links.new_empty(0), links.reshape(-1), self.graph.num_nodes)
            compacted_seeds = local.view(links.shape)
            if self.exclude_seed_edges:
                if links.size(1) != 2:
                    raise ValueError(
                        f"{name}: `exclude_seed_edges=True` needs node pairs as seeds ([N, 2]), got hyperlinks of "
                        f"shape {tuple(links.shape)}"
                    )
                exclusion = self.seed_edge_exclusion(links, compacted_seeds, nodes.numel())
        elif self.exclude_seed_edges:
            raise ValueError(
                f"{name}: `exclude_seed_edges=True` needs node pairs as seeds ([N, 2]), got seeds of shape "
                f"{tuple(minibatch.seeds.shape)}"
            )
        else:
            nodes = check_node_ids(minibatch.seeds, self.graph.num_nodes, "seeds", name)
        frontier_start = 0  # pyg layout: nodes[frontier_start:] were added by the previous layer
        subgraphs: List[SampledSubgraph] = []
        for layer in reversed(range(len(self.fanouts))):
            frontier = nodes[frontier_start:] if self.layout == "pyg" else nodes
            # The seeds, the only destinations with excluded in-edges, lead every block
            # layer's destinations and are pyg's first frontier (later ones never hold them).
            if exclusion is not None and (frontier_start == 0 or self.layout == "block"):
                sample = self.sample_layer(frontier, layer, minibatch, exclude=exclusion)
            else:  # a sampler without exclusion may define sample_layer(nodes, layer, minibatch)
                sample = self.sample_layer(frontier, layer, minibatch)
            subgraph = self.compact_layer(nodes, sample)
            subgraphs.append(subgraph)
            frontier_start = nodes.numel()
            nodes = subgraph.original_row_node_ids
        subgraphs.reverse()
        return replace(
            minibatch, sampled_subgraphs=subgraphs, input_nodes=nodes, layout=self.layout, compacted_seeds=compacted_seeds
        )

    def seed_edge_exclusion(self, pairs: torch.Tensor, compacted_seeds: torch.Tensor, num_seed_nodes: int) -> EdgeExclusion:
        """The edges no layer of this batch may sample (see the class doc), per seed node."""
        return seed_edge_exclusion(
            self.graph.indptr,
            self.graph.indices,
            pairs.cpu(),
            compacted_seeds.cpu(),
            num_seed_nodes,
            sorted_indices=self.sorted_indices,
            reverse_pairs=self.include_reverse_edges,
            reverse_positions=self.reverse_positions,
        )

    @property
    def collective(self) -> bool:
        """Cooperative batches are collective calls: the loader samples them one at a time."""
        return self.cooperative

    def process(self, minibatch: MiniBatch) -> MiniBatch:
        """The per-batch work: :meth:`sample_subgraphs`, or with ``cooperative=True`` this
        rank's part of the global batch (:func:`~graphpipe.distributed.cooperative.sample_subgraphs_cooperatively`)."""
        if self.cooperative:
            # Typed seeds are a dict; node pairs of a type are refused where they are checked.
            if not self.graph.is_heterogeneous and minibatch.is_link_batch:
                raise NotImplementedError(
                    f"{type(self).__name__}: cooperative=True samples node seeds only; node pairs (link "
                    f"prediction) need independent batches (cooperative=False)"
                )
            source = find_distributed_item_sampler(self, f"{type(self).__name__} (cooperative)")
            return sample_subgraphs_cooperatively(self, minibatch, source)
        return self.sample_subgraphs(minibatch)

    role = "sampler"  # the Pipe protocol's declarations
    thread_safe = True  # batches share no state: a pool samples several at once

    def compile_task(self):
        """A picklable call compiling this sampler's layer kernels (subclasses with numba
        kernels return one; see :mod:`graphpipe.ops.compile`), or None."""
        return None

    def compile_tasks(self) -> list:
        """Pipe protocol: the layer kernels (:meth:`compile_task`) and unique-and-compact's,
        for a graph in host memory."""
        if self.graph.indptr.is_cuda:
            return []
        return [task for task in (self.compile_task(), unique_and_compact_task(self.graph.num_nodes)) if task is not None]


def _check_no_fetch_before(source, where: str) -> None:
    """Refuse node features fetched upstream of a sampler: they are the rows of the seeds
    (or of an earlier sampler's nodes), not of the ``input_nodes`` this sampler makes."""
    if any(isinstance(stage, FeatureFetcher) and stage.node_feature_keys for stage in upstream(source)):
        raise ValueError(
            f"{where}: a fetch_feature stage upstream of this sampler reads node features before the sampler "
            f"makes the batch's input_nodes, so they would be the seeds' rows only; put fetch_feature after the "
            f"sampler: ItemSampler(...).sample_neighbor(graph, fanouts).fetch_feature(features, keys)"
        )


def _check_links(seeds: torch.Tensor, num_nodes: int, where: str) -> torch.Tensor:
    """``seeds``, ``[N, k]`` node pairs (``k == 2``) or hyperlinks (``k > 2``), as int64
    after checking every id is in ``[0, num_nodes)``."""
    if seeds.size(1) < 2:
        raise ValueError(
            f"{where}: 2-D `seeds` must be node pairs [N, 2] or hyperlinks [N, k] with k >= 2, got shape "
            f"{tuple(seeds.shape)} (node seeds are 1-D)"
        )
    return check_node_ids(seeds.reshape(-1), num_nodes, "seeds", where).view(seeds.shape)


def _reverse_positions(graph: CSCGraph, reverse_edge_ids: torch.Tensor, where: str) -> torch.Tensor:
    """``[num_edges]``: CSC position -> CSC position of its reverse edge, from the user's
    ``reverse_edge_ids`` (user edge id -> user edge id of its reverse), after checking
    that every edge maps to one with swapped endpoints. ``O(num_edges)``, once."""
    num_edges = graph.num_edges
    reverse = check_reverse_edge_ids(reverse_edge_ids, num_edges, where)
    user_ids = graph.map_edge_ids(torch.arange(num_edges))  # CSC position -> user id
    position_of = torch.empty(num_edges, dtype=torch.int64)
    position_of[user_ids] = torch.arange(num_edges)
    positions = position_of[reverse[user_ids]]
    src, dst = graph.edge_index()
    bad = (src[positions] != dst) | (dst[positions] != src)
    if bool(bad.any()):
        e = int(bad.nonzero()[0])
        raise ValueError(
            f"{where}: `reverse_edge_ids` must map every edge u -> v to an edge v -> u, but edge "
            f"{int(user_ids[e])} ({int(src[e])} -> {int(dst[e])}) maps to edge {int(reverse[user_ids[e]])} "
            f"({int(src[positions[e]])} -> {int(dst[positions[e]])})"
        )
    return positions.to(smallest_index_dtype(max(num_edges - 1, 0)))
