"""SubgraphSampler: the one layer loop of every sampling stage, typed graphs and untyped."""

from __future__ import annotations

import copy
from bisect import bisect_right
from functools import partial
from itertools import accumulate
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from graphpipe._internal.checks import check_bool, check_fanouts, check_graphbolt_flags, check_int, check_reverse_edge_ids
from graphpipe.batch.item_set import HeteroItemSet
from graphpipe.batch.minibatch import LAYOUTS, MiniBatch, ReusedRows, with_fields
from graphpipe.ops.compile import compile_temporal, dtype_only, unique_and_compact_task
from graphpipe.distributed.cooperative import agree_on_seed, sample_subgraphs_cooperatively
from graphpipe.distributed.partitioned import check_whole_graph, part_of
from graphpipe.distributed.remote import LayersFromOwners
from graphpipe.graph.checks import ATTRIBUTES_HINT, check_edge_weights, check_item_seeds, check_typed_fanouts
from graphpipe.graph.csc_graph import CSCGraph, check_graph, smallest_index_dtype
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.graph.sampled_subgraph import SampledSubgraph
from graphpipe.graph.temporal import COMPARISONS, TEMPORAL_STRATEGIES, TimeFilter
from graphpipe.graph.sampling import (
    LayerTimes,
    SampledLayer,
    SeedEdgeExclusion,
    SeedNodes,
    append_layer,
    compact_layer,
    drop_seed_edges,
    node_ids_of_keys,
    sample_layer,
    seed_edge_exclusion,
    seed_edge_keys,
    seed_nodes,
    seed_times,
    segment_destinations,
    subtree_keys,
    typed_segments,
    typed_subgraph,
    untyped_subgraph,
)
from graphpipe.ops import LayerSample, derive_key
from graphpipe.ops.edge_lookup import EdgeExclusion, in_neighbours_sorted
from graphpipe.ops.temporal import UNTIMED
from graphpipe.pipes.base import Pipe, upstream
from graphpipe.pipes.capabilities import DIMENSIONS, SUPPORT, UnsupportedCombination, check_supported
from graphpipe.pipes.distributed_item_sampler import DistributedItemSampler, find_distributed_item_sampler
from graphpipe.pipes.feature_fetcher import FeatureFetcher
from graphpipe.pipes.hot_reuse import HotReuse
from graphpipe.pipes.item_sampler import ItemSampler

__all__ = ["GraphBoltTemporal", "SubgraphSampler", "edge_arrays"]


class SubgraphSampler(Pipe):
    """Base of sampling stages: samples layers from the seeds outwards and compacts them.

    Layer ``L-1`` (``fanouts[-1]``) samples in-neighbours of the seeds, layer ``L-2``
    samples in-neighbours of the nodes of layer ``L-1``, and so on; each layer is
    relabelled with :func:`~graphpipe.ops.unique_and_compact` so that its destinations
    are a prefix of its sources. Subclasses implement :meth:`sample_segments` (the
    built-in samplers) or :meth:`sample_layer` (untyped graphs); they inherit
    ``thread_safe = True`` (a loader's pool samples several batches at once), so they keep
    no per-batch state on ``self`` and draw from :meth:`layer_key`, or set it False.

    One loop serves typed and untyped graphs (:mod:`graphpipe.graph.sampling`): it runs
    on global node ids, a typed graph's types being contiguous id ranges, and lays each
    layer out per type at the end (GraphBolt's heterogeneous layout: dicts per node type
    and edge type, type-local ids). A typed layer samples every (destination, edge type)
    with that edge type's fanout (``fanouts[l]``: an int for every edge type, a dict edge
    type -> int, or a list in edge type id order; 0 samples none of that type).

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

    ``disjoint=True`` (``layout="pyg"``, node seeds; PyG's ``disjoint``): one subtree per
    seed, as pyg-lib's disjoint mode: a node reached from two seeds is two nodes, sampled
    independently (its variates keyed by (node, subtree)), deduplicated only within its
    subtree; ``MiniBatch.subtree_ids`` (``to_pyg().batch``) gives each input node's seed.

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
    shared batch together (:mod:`graphpipe.distributed.cooperative`, the same loop on
    global ids): node seeds move to the ranks that own them; link seeds stay on their
    rank, whose ``compacted_seeds`` index the rows that
    ``cooperative_exchange(mb, mb.num_layers, h)`` brings back after the last layer, and
    ``exclude_seed_edges`` excludes the seed edges of the whole global batch. Over a part
    of a partitioned dataset (``load_partition``) with a DistributedItemSampler upstream,
    a sampler that is not cooperative samples each rank's own batch, the owners sampling
    the in-edges the part lacks (:mod:`graphpipe.distributed.remote`): the batch one
    process samples over the whole graph. Which
    combinations of graph, task, mode, device and layout work is one table
    (:mod:`graphpipe.pipes.capabilities`); the others raise
    :class:`~graphpipe.pipes.capabilities.UnsupportedCombination`.

    Edge ids: samplers work on CSC positions; the layers map them through
    :meth:`CSCGraph.map_edge_ids`, so ``original_edge_ids`` (and ``to_pyg().e_id``,
    DGL's ``EID``, edge features fetched by them) are the ids of the edges as the user
    gave them to ``CSCGraph.from_edge_index`` / ``from_coo`` (within their type on a
    typed graph).

    Link prediction: ``seeds`` may be ``[N, 2]`` node pairs, or ``[N, k]`` hyperlinks
    (GraphBolt's, ``k > 2`` nodes each, untyped graphs); on a typed graph a dict edge type
    ``"src:relation:dst"`` -> ``[N, 2]`` type-local pairs (a ``HeteroItemSet`` keyed by
    edge type). The layers are then sampled from their distinct nodes (ascending: the
    last layer's destinations; temporal: a row per endpoint, not deduplicated), and
    ``compacted_seeds`` holds the pairs in those local ids (typed: ``{edge type: [N, 2]}``,
    column 0 local to the source type's destinations, column 1 to the destination
    type's). With ``exclude_seed_edges=True`` no layer contains an edge ``u -> v`` (of
    the pair's edge type) of a pair ``(u, v)``
    of ``seeds`` (positives and negatives alike, as GraphBolt's ``exclude_seed_edges``;
    parallel edges included), so the model never sees an edge it must predict;
    ``include_reverse_edges=True`` also excludes their reverse edges: on a typed graph
    the edges ``v -> u`` of the reverse edge type ``reverse_etypes_mapping`` names
    (GraphBolt's form, ``{"user:like:item": "item:liked-by:user"}``); on an untyped graph
    the edges ``reverse_edge_ids`` maps them to (DGL's ``reverse_eids``: user edge id ->
    the user edge id of its reverse), or without it every edge ``v -> u`` (GraphBolt's
    homogeneous rule). Neighbor sampling (CPU and GPU) skips those edges inside its kernel,
    so a destination still gets ``min(fanout, in-edges left)`` uniformly among the others;
    LABOR drops them from the sample (fewer edges for those destinations; its
    ``edge_weights`` are rescaled to estimate the mean over the in-edges left). Excluded edges are found per batch by binary search where every
    node's sources are sorted (per edge type), else by a scan of the seed nodes' in-edges.
    GraphBolt's stage form, ``sampler.exclude_seed_edges(include_reverse_edges=...,
    reverse_etypes_mapping=...)``, gives the same sampler with these options.

    Temporal sampling (``time_attr``, PyG's: a node or an edge attribute; or
    ``node_timestamp_attr_name`` / ``edge_timestamp_attr_name``, GraphBolt's, both
    applying when both are given): every layer samples only the in-edges whose times are
    valid for the node's root seed (``MiniBatch.timestamp``, the items' ``timestamp``
    field): ``comparison`` ``"<"`` or ``"<="`` (default: ``"<="`` for node seeds in the pyg
    layout, as PyG, else ``"<"``), ``time_window`` ``w``: later than ``t - w``;
    ``temporal_strategy`` ``"uniform"`` (the sampler's draws among the valid in-edges) or
    ``"last"`` (the ``fanout`` latest). A node is one row per root: per subtree
    (``layout="pyg"``: disjoint, PyG's temporal NeighborLoader) or per sampled edge
    (``layout="block"``: no deduplication, GraphBolt's temporal layout; also
    ``deduplicate=False`` without times). ``deduplicate`` (default None): True, but False
    for temporal block layers, where True is refused. See :mod:`graphpipe.graph.temporal`.

    Hot-vertex reuse (``hot_reuse``, a :class:`~graphpipe.HotReuse`; NeutronOrch's; typed or
    untyped, independent block batches): the bottom layer does not expand the hot
    destinations other than the batch's seeds, and the
    batch carries their reused bottom-layer rows (``MiniBatch.reused``); see
    :mod:`graphpipe.pipes.hot_reuse`.

    GraphBolt's ``overlap_fetch`` (fetch a pinned graph on a side CUDA stream),
    ``asynchronous`` (run the sampler's steps in background threads),
    ``num_gpu_cached_edges`` and ``gpu_cache_threshold`` (its GPU cache of in-edges) are
    accepted and do nothing: the :class:`~graphpipe.DataLoader` decides where each stage runs and
    overlaps them itself (``loader.explain()`` shows it).
    """

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        fanouts: Sequence,
        seed: Optional[int] = None,
        cooperative: bool = False,
        layout: str = "block",
        disjoint: bool = False,
        exclude_seed_edges: bool = False,
        include_reverse_edges: bool = False,
        reverse_edge_ids: Optional[torch.Tensor] = None,
        reverse_etypes_mapping: Optional[Mapping[str, str]] = None,
        overlap_fetch: bool = False,
        asynchronous: bool = False,
        num_gpu_cached_edges: int = 0,
        gpu_cache_threshold: int = 1,
        time_attr: Optional[str] = None,
        node_timestamp_attr_name: Optional[str] = None,
        edge_timestamp_attr_name: Optional[str] = None,
        comparison: Optional[str] = None,
        time_window: Optional[int] = None,
        temporal_strategy: str = "uniform",
        deduplicate: Optional[bool] = None,
        hot_reuse: Optional[HotReuse] = None,
    ):
        super().__init__()
        name = type(self).__name__
        check_graph(graph, name)
        check_graphbolt_flags(name, overlap_fetch=overlap_fetch, asynchronous=asynchronous,
                               num_gpu_cached_edges=num_gpu_cached_edges, gpu_cache_threshold=gpu_cache_threshold)  # fmt: skip
        _check_no_fetch_before(source, name)
        _check_layout(layout, name)
        self.source, self.graph = source, graph
        self.typed = graph.is_heterogeneous
        self.graph_kind = "typed" if self.typed else "untyped"
        self.on_gpu = graph.indptr.is_cuda or graph.indices.is_cuda
        if self.on_gpu and graph.indptr_nodes is not None:  # the GPU kernels read an indptr row per node id
            raise UnsupportedCombination(
                f"{name}: a compact graph (an indptr row per owned vertex: a part of a partitioned dataset) is sampled "
                f"on the CPU; keep it in host memory and put copy_to('cuda') after the sampler (and the feature fetcher)"
            )
        self._init_mode(cooperative, disjoint, deduplicate, layout, time_attr, node_timestamp_attr_name,
                        edge_timestamp_attr_name, comparison, time_window, temporal_strategy)  # fmt: skip
        # A part graph holds only the owned vertices' in-edges: independent batches ask the owners for the others'.
        self.on_part = not self.cooperative and part_of(graph) is not None
        if self.on_part and not any(isinstance(stage, DistributedItemSampler) for stage in upstream(source)):
            check_whole_graph(graph, name)  # without one, the ranks cannot ask the owners
        self.layout = layout
        self.no_skip = (0,) * len(graph.schema.node_types)
        # The batches' device: the graph's, or the one the nearest upstream stage declares (copy_to).
        declared = next((stage.device for stage in upstream(source) if stage.device is not None), None)
        known = {"device": "GPU"} if self.on_gpu or (declared is not None and declared.type == "cuda") else {}
        self.items_task = _task_of_items(source, graph, name)  # None: no ItemSampler upstream
        if self.items_task is not None:
            known["task"] = self.items_task
        check_supported(name, graph=self.graph_kind, mode=self.mode, layout=layout, **known)
        # Whether a batch is in a supported cell whatever its seeds are (then none is checked).
        devices = ("GPU",) if self.on_gpu else DIMENSIONS["device"]
        self.any_seeds_supported = all(
            SUPPORT[(self.graph_kind, task, self.mode, device, layout)] is None
            for task in DIMENSIONS["task"]
            for device in devices
        )
        # edge_type_fanouts[layer][t]: the fanout of edge type id t (0: none sampled; untyped: the one type);
        # fanouts[layer]: one int when a layer uses one for every type, else a dict.
        if self.typed:
            self.edge_type_fanouts: List[List[int]] = check_typed_fanouts(fanouts, graph.edge_types, name)
        else:
            self.edge_type_fanouts = [[fanout] for fanout in check_fanouts(fanouts, name)]
        self.fanouts = [
            layer[0] if len(set(layer)) == 1 else dict(zip(graph.edge_types, layer)) for layer in self.edge_type_fanouts
        ]
        self.seed = self._agreed_seed(seed, name)
        self._init_exclusion(exclude_seed_edges, include_reverse_edges, reverse_edge_ids, reverse_etypes_mapping)
        self.check_sampler_options()
        self.hot_reuse = _checked_hot_reuse(hot_reuse, self, name)  # last: a sampler that raised claims no HotReuse

    def check_sampler_options(self) -> None:
        """A subclass's checks of its own options against the mode (``self.time_filter``,
        ``disjoint``, ``cooperative``, ``on_part``), run by ``__init__`` before it claims a
        ``hot_reuse``; the options are set as attributes before ``super().__init__``."""

    def _agreed_seed(self, seed, name: str) -> int:
        """The sampler's seed (random if None), the same on every rank when its batches are
        collective (one collective, here, not one per batch)."""
        seed = None if seed is None else check_int(seed, "seed", name)
        if self.cooperative or self.on_part:
            where = f"{name} ({'cooperative' if self.cooperative else 'over a part'})"
            try:
                source = find_distributed_item_sampler(self, where)
            except ValueError:
                source = None  # the first batch reports the missing DistributedItemSampler
            seed = agree_on_seed(source, seed, where)
        return int(torch.randint(0, 2**62, ())) if seed is None else seed

    def _init_mode(self, cooperative, disjoint, deduplicate, layout, *time_options) -> None:
        """``cooperative``, ``disjoint``, ``deduplicate``, ``time_filter`` and ``mode`` (the
        capability table's) from the options."""
        name = type(self).__name__
        self.cooperative = check_bool(cooperative, "cooperative", name)
        self.time_filter = _time_filter(self.graph, name, *time_options)
        temporal = self.time_filter is not None
        if check_bool(disjoint, "disjoint", name) and self.cooperative:
            raise ValueError(f"{name}: `disjoint=True` grows one subtree per seed on one process; pass cooperative=False")
        # Temporal sampling filters every node against its root seed's time, so a node is
        # one row per root: one per subtree (pyg layout) or per sampled edge (block).
        rows = temporal and layout == "block"
        self.deduplicate = not rows if deduplicate is None else check_bool(deduplicate, "deduplicate", name)
        if not self.deduplicate and layout != "block":
            raise ValueError(
                f"{name}: `deduplicate=False` (a row per sampled edge, GraphBolt's) builds block layers: "
                f"pass layout='block'"
            )
        if self.deduplicate and rows:
            raise ValueError(
                f"{name}: `deduplicate=True` does not apply to temporal block layers: each sampled edge is a row of "
                f"its own (GraphBolt's temporal layout), filtered by its root seed's time; leave `deduplicate` unset "
                f"(None) or pass deduplicate=False"
            )
        self.disjoint = disjoint or (temporal and layout == "pyg")
        self.mode = (
            "temporal" if temporal else "cooperative" if self.cooperative else "disjoint" if disjoint else "independent"
        )
        if temporal and self.cooperative:
            raise UnsupportedCombination(
                f"{name}: temporal sampling filters every hop by its root seed's time, which cooperative batches do "
                f"not keep (their rows are shared by all seeds; GraphBolt refuses it too); pass cooperative=False"
            )

    def _init_exclusion(self, exclude_seed_edges, include_reverse_edges, reverse_edge_ids, reverse_etypes_mapping) -> None:
        """Check the exclusion arguments once: ``reverse_edge_types`` per edge type id (-1:
        none) and ``reverse_positions`` (CSC position -> CSC position of its reverse)."""
        name = type(self).__name__
        for arg, value in (("exclude_seed_edges", exclude_seed_edges), ("include_reverse_edges", include_reverse_edges)):
            check_bool(value, arg, name)
        if include_reverse_edges and not exclude_seed_edges:
            raise ValueError(f"{name}: `include_reverse_edges=True` needs `exclude_seed_edges=True`")
        for arg, value in (("reverse_edge_ids", reverse_edge_ids), ("reverse_etypes_mapping", reverse_etypes_mapping)):
            if value is not None and not include_reverse_edges:
                raise ValueError(
                    f"{name}: `{arg}` says which edges are reverses, but `include_reverse_edges` is False; pass "
                    f"include_reverse_edges=True to exclude them"
                )
        if exclude_seed_edges:
            if self.items_task not in (None, "link"):
                raise ValueError(_NEEDS_PAIRS.format(name=name, got=f"an ItemSet of {self.items_task} seeds"))
            check_supported(name, graph=self.graph_kind, task="link", mode=self.mode, layout=self.layout)
            if self.on_gpu:
                raise UnsupportedCombination(
                    f"{name}: `exclude_seed_edges=True` looks edges up in host memory; keep the graph on the CPU "
                    f"(pinned with graph.pin_memory_() for GPU sampling) instead of graph.to('cuda')"
                )
        self.excludes_seed_edges = exclude_seed_edges
        self.include_reverse_edges = include_reverse_edges
        self.reverse_positions = None
        if self.typed:
            self.reverse_edge_types = _reverse_edge_types(self.graph, include_reverse_edges, reverse_etypes_mapping, reverse_edge_ids, name)
        else:
            if reverse_etypes_mapping is not None:
                raise ValueError(f"{name}: `reverse_etypes_mapping` names edge types, but the graph is untyped; use `reverse_edge_ids`")
            part = part_of(self.graph)
            if reverse_edge_ids is not None and part is not None:  # a reverse edge may be another owner's
                raise UnsupportedCombination(
                    f"{name}: `reverse_edge_ids` maps every edge of the whole graph to its reverse, but the graph is "
                    f"part {part[0]} of the partitioned dataset '{part[1]}', which holds only the in-edges of the "
                    f"vertices rank {part[0]} owns; pass include_reverse_edges=True without reverse_edge_ids (every "
                    f"edge v -> u of a seed pair (u, v) is then excluded: the reverses of an undirected graph, "
                    f"GraphBolt's rule), or load the whole graph (CSCGraph.load(path, mmap=True)) on each rank"
                )
            if reverse_edge_ids is not None:
                self.reverse_positions = _reverse_positions(self.graph, reverse_edge_ids, name)
            self.reverse_edge_types = (0 if include_reverse_edges and reverse_edge_ids is None else -1,)
        type_per_edge = self.graph.type_per_edge if self.typed else None
        self.sorted_indices = exclude_seed_edges and in_neighbours_sorted(self.graph.indptr, self.graph.indices, type_per_edge)

    def exclude_seed_edges(
        self,
        include_reverse_edges: bool = False,
        reverse_etypes_mapping: Optional[Mapping[str, str]] = None,
        asynchronous: bool = False,
        reverse_edge_ids: Optional[torch.Tensor] = None,
    ) -> "SubgraphSampler":
        """GraphBolt's ``exclude_seed_edges`` stage: a copy of this sampler (same source,
        seed and options; this one is unchanged) built with ``exclude_seed_edges=True`` and
        these arguments, so the seed edges are skipped while sampling (see the class doc).
        ``asynchronous`` is accepted and does nothing, as for the samplers."""
        check_graphbolt_flags(f"{type(self).__name__}.exclude_seed_edges", asynchronous=asynchronous)
        sampler = copy.copy(self)
        sampler._init_exclusion(True, include_reverse_edges, reverse_edge_ids, reverse_etypes_mapping)
        return sampler

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

    def uniform_draw_key(self, batch_index: int, layer: int) -> Optional[int]:
        """The layer's key if this sampler draws each destination's in-edges uniformly
        without replacement (temporal sampling may then draw a large unsorted range's valid
        in-edges by rejection instead of listing them), else None."""
        return None

    def layer_key(self, batch_index: int, layer: int) -> int:
        """The 64-bit key of every random variate of one layer of one batch."""
        return derive_key(self.seed, batch_index, layer)

    def sample_segments(
        self,
        indptr: torch.Tensor,
        nodes: torch.Tensor,
        fanout: int,
        key_ids: Optional[torch.Tensor],
        exclude: Optional[EdgeExclusion],
        layer: int,
        minibatch: MiniBatch,
        candidates: Optional[torch.Tensor] = None,
    ) -> LayerSample:
        """Sample the in-edge ranges ``[indptr[v], indptr[v + 1])`` of ``nodes`` with
        ``fanout`` for GNN layer ``layer``, the first destinations skipping what
        ``exclude`` names: the graph's own ``indptr`` and node ids, or a typed layer's
        segments (``indptr``: their bounds, ``nodes``: even positions, destination ``i``
        keyed by ``key_ids[i]`` where variates are per destination; see
        :mod:`graphpipe.ops.typed_sampling`). ``candidates`` (temporal sampling): ``[C]``
        int64 CSC positions: ``indptr`` indexes them, not the graph's in-edges
        (:func:`edge_arrays`), and the sample's ``edge_ids`` are positions in them."""
        raise NotImplementedError(f"{type(self).__name__} defines sample_layer only: it samples untyped graphs")

    def sample_layer(
        self, nodes: torch.Tensor, layer: int, minibatch: MiniBatch, exclude: Optional[EdgeExclusion] = None
    ) -> LayerSample:
        """Untyped graphs: in-edges of ``nodes`` (``[num_dst]`` int64 global ids, checked by
        the caller: the kernels behind it do not check them again) for GNN
        layer ``layer``, none of the in-edges ``exclude`` names for the first destinations.
        A sampler for untyped graphs may define this (``(nodes, layer, minibatch)``: it is
        then never given an ``exclude``) instead of :meth:`sample_segments`; it reads a
        node's in-edges in row ``graph.in_edge_rows(nodes, where)`` of ``graph.indptr``
        (the node itself unless the graph is a compact part)."""
        rows = self.graph.in_edge_rows(nodes, type(self).__name__)
        key_ids = None if rows is nodes else nodes  # variates keyed by node id, as on the whole graph
        return self.sample_segments(self.graph.indptr, rows, self.fanouts[layer], key_ids, exclude, layer, minibatch)

    def sample_frontier(
        self, nodes, counts, skipped, layer: int, minibatch: MiniBatch, exclude: Optional[SeedEdgeExclusion], subtrees: int = 1,
        windows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None, roots: Optional[torch.Tensor] = None,
    ) -> LayerSample:
        """The uncompacted layer ``layer`` of the destinations ``nodes`` (node keys,
        type-major, ``counts`` per node type; see :func:`~graphpipe.graph.sampling.sample_layer`)
        but the first ``skipped`` of each type. Temporal: ``windows`` ``([R], [R])`` of the
        seeds, and each destination's root: ``roots`` (rows, no deduplication) or its
        subtree."""
        if skipped is not self.no_skip:
            starts = list(accumulate(counts, initial=0))
            parts = [nodes[starts[i] + skip : starts[i + 1]] for i, skip in enumerate(skipped)]
            nodes = parts[0] if len(parts) == 1 else torch.cat(parts)  # untyped: a view, no copy
            counts = tuple(count - skip for count, skip in zip(counts, skipped))
        if not self.typed and subtrees == 1 and windows is None:
            if self.fanouts[layer] == 0:  # no segments, as a typed layer's edge type of fanout 0
                nodes, exclude = nodes[:0], None
            if exclude is None:  # a sampler without exclusion may define sample_layer(nodes, layer, minibatch)
                return self.sample_layer(nodes, layer, minibatch)
            return self.sample_layer(nodes, layer, minibatch, exclude=exclude.edges)
        kernel = partial(self.sample_segments, layer=layer, minibatch=minibatch)
        times = None
        if windows is not None:
            root = nodes % subtrees if roots is None else roots
            row_keys = None if roots is None else torch.arange(nodes.numel())
            draw_key = self.uniform_draw_key(minibatch.batch_index, layer)
            times = LayerTimes(self.time_filter, windows[0][root], windows[1][root], row_keys, draw_key)
        return sample_layer(self.graph, nodes, counts, self.edge_type_fanouts[layer], kernel, exclude, subtrees, times)

    def sample_bottom_reusing(self, nodes, counts, seed_counts, minibatch: MiniBatch, exclude) -> Tuple[LayerSample, ReusedRows]:
        """The bottom layer with hot-vertex reuse: the destinations ``nodes`` (type-major,
        ``counts`` per type, each type led by its ``seed_counts`` seeds, never reused) that
        are hot get no in-edges; the others are sampled as without reuse (their variates are
        keyed by node, not position), and the sample is spread back over every segment."""
        starts = list(accumulate(counts, initial=0))
        hot, reused = self.hot_reuse.reused_rows(self, nodes, minibatch.batch_index, _seed_mask(counts, seed_counts))
        cold_counts = tuple(int((~hot[a:b]).sum()) for a, b in zip(starts, starts[1:]))
        sample = self.sample_frontier(nodes[~hot], cold_counts, self.no_skip, 0, minibatch, exclude)
        segment_dst = self._segment_dst(counts, 0)
        indptr = torch.zeros(segment_dst.numel() + 1, dtype=torch.int64)
        indptr[1:][~hot[segment_dst]] = sample.indptr.diff()  # the edges per segment, then their running sums
        indptr.cumsum_(0)
        self.hot_reuse.count_skipped(self._skipped_in_edges(nodes, counts, reused.positions))
        return LayerSample(indptr, sample.indices, sample.edge_ids, sample.edge_weights), reused

    def _skipped_in_edges(self, nodes: torch.Tensor, counts: Sequence[int], positions: torch.Tensor) -> int:
        """How many in-edges the bottom layer would have sampled (NS; LABOR at most) for its
        hot destinations ``nodes[positions]`` (``nodes`` type-major, ``counts`` per type):
        per edge type, min(fanout, in-degree of that type)."""
        fanouts, hot_ids = self.edge_type_fanouts[0], nodes[positions]
        if not self.typed:
            degrees = (self.graph.indptr[hot_ids + 1] - self.graph.indptr[hot_ids]).to(torch.int64)
            return int((degrees if fanouts[0] < 0 else degrees.clamp(max=fanouts[0])).sum())
        node_types = torch.searchsorted(torch.tensor(list(accumulate(counts))), positions, right=True)
        hot_counts = torch.bincount(node_types, minlength=len(counts)).tolist()  # positions ascend: hot_ids are type-major
        bounds, keys = typed_segments(self.graph, hot_ids, hot_counts, fanouts)
        degrees, caps = (bounds[1::2] - bounds[::2]).to(torch.int64), torch.tensor(fanouts)[keys % len(fanouts)]
        return int(torch.where(caps < 0, degrees, torch.minimum(degrees, caps)).sum())

    def bottom_destinations(self, first: int, stop: int) -> List[torch.Tensor]:
        """Per batch with ``first <= batch_index < stop`` (read again from the ItemSampler
        upstream, through the stages between it and this sampler), ``[k]`` int64 global ids:
        its bottom layer's destinations but its seeds, its upper layers sampled as
        :meth:`sample_subgraphs` samples them (the same keys), for
        :meth:`HotReuse.counted_hot_set`."""
        chain = upstream(self.source)
        at = next(i for i, stage in enumerate(chain) if isinstance(stage, ItemSampler))
        between = [stage for stage in reversed(chain[:at]) if type(stage).process is not Pipe.process]
        reached = []
        for minibatch in chain[at].batches_in(first, stop):
            for stage in between:
                minibatch = stage.process(minibatch)
            seeds = self.batch_seeds(minibatch)
            exclusion = self.seed_edge_exclusion(seeds) if self.excludes_seed_edges else None
            nodes, counts = seeds.nodes, seeds.counts
            for layer in reversed(range(1, len(self.fanouts))):
                sample = self.sample_frontier(nodes, counts, self.no_skip, layer, minibatch, exclusion)
                step = compact_layer(self.graph, nodes, counts, self.no_skip, sample)
                nodes, counts = step.rows, step.row_counts
            reached.append(nodes[~_seed_mask(counts, seeds.counts)])
        return reached

    def sample_hot_layer(self, hot: torch.Tensor, super_index: int) -> Tuple[SampledSubgraph, torch.Tensor]:
        """The bottom layer of the hot vertices ``hot`` (``[H]`` ascending global ids) for
        super-batch ``super_index`` (its own key), and its input nodes (global ids)."""
        minibatch = MiniBatch(batch_index=-(super_index + 1))
        counts = tuple(torch.searchsorted(hot, torch.tensor(self.graph.schema.node_type_offset, dtype=torch.int64)).diff().tolist())
        sample = self.sample_frontier(hot, counts, self.no_skip, 0, minibatch, None)
        subgraph = self.lay_out(compact_layer(self.graph, hot, counts, self.no_skip, sample), 0)
        return subgraph, subgraph.original_row_node_ids

    def label(self) -> str:
        if self.hot_reuse is None:
            return type(self).__name__
        reuse = self.hot_reuse
        hot = f"{reuse.hot_ratio:.1%} of each super-batch's vertices hot, by counts" if reuse.counted else f"{reuse.hot_ratio:.1%} hot"
        return f"{type(self).__name__} (hot reuse: {hot}, super-batch {reuse.super_batch})"

    def stats(self):
        return {} if self.hot_reuse is None else self.hot_reuse.stats()

    def reset_stats(self) -> None:
        if self.hot_reuse is not None:
            self.hot_reuse.reset_stats()

    def lay_out(self, step: SampledLayer, layer: int) -> SampledSubgraph:
        """Layer ``layer`` as a SampledSubgraph (typed: GraphBolt's heterogeneous layout)."""
        if self.typed:
            return typed_subgraph(self.graph, step, self.edge_type_fanouts[layer])
        return untyped_subgraph(self.graph, step)

    def sample_subgraphs(self, minibatch: MiniBatch, layers=None) -> MiniBatch:
        """Fill ``sampled_subgraphs``, ``input_nodes`` and ``layout`` of ``minibatch``
        (and ``compacted_seeds`` for link seeds, ``subtree_ids`` when disjoint).

        Disjoint sampling runs the same loop on node keys ``global id * S + subtree``
        (``S`` seeds, :func:`~graphpipe.graph.sampling.subtree_keys`): a node reached from
        two seeds is two nodes, and the layers are laid out in global ids. ``layers``: what
        samples, excludes, appends and lays out each layer: this sampler (None), or over a
        part graph a :class:`~graphpipe.distributed.remote.LayersFromOwners`."""
        seeds = self.batch_seeds(minibatch)
        layers = self if layers is None else layers
        exclusion = dropped = None
        if self.excludes_seed_edges and self.deduplicate:
            exclusion = layers.seed_edge_exclusion(seeds)
        elif self.excludes_seed_edges:  # a node is many rows: drop its seed edges after sampling, as GraphBolt
            # an untyped graph's `reverse_edge_ids` are read as every edge v -> u
            reverse = (0,) if not self.typed and self.reverse_positions is not None else self.reverse_edge_types
            dropped = seed_edge_keys(self.graph, seeds, reverse)
        nodes, counts = seeds.nodes, seeds.counts
        subtrees = max(nodes.numel(), 1) if self.disjoint else 1
        windows = None if self.time_filter is None else self.seed_windows(minibatch, seeds)
        roots = torch.arange(nodes.numel()) if windows is not None and not self.deduplicate else None
        if self.disjoint:
            nodes = subtree_keys(nodes)
        skipped = self.no_skip  # pyg layout: per type, the destinations sampled already
        subgraphs: List[SampledSubgraph] = []
        for layer in reversed(range(len(self.fanouts))):
            # The seeds, the only destinations with excluded in-edges, lead every block
            # layer's destinations of their type and are pyg's first frontier; disjoint
            # subtrees reach an endpoint again in any hop, so they exclude by node.
            exclude = exclusion if self.layout == "block" or self.disjoint or not subgraphs else None
            if layer == 0 and self.hot_reuse is not None:
                sample, reused = self.sample_bottom_reusing(nodes, counts, seeds.counts, minibatch, exclude)
                minibatch = with_fields(minibatch, reused=reused)
            else:
                sample = layers.sample_frontier(nodes, counts, skipped, layer, minibatch, exclude, subtrees, windows, roots)
            if self.deduplicate:
                step = compact_layer(self.graph, nodes, counts, skipped, sample, subtrees)
            else:
                step, roots = layers.append_rows(nodes, counts, layer, sample, dropped, roots)
            subgraphs.append(layers.lay_out(node_ids_of_keys(step, subtrees), layer))  # now: the sample's sources are freed
            if self.layout == "pyg":
                skipped = counts
            nodes, counts = step.rows, step.row_counts
        subgraphs.reverse()
        return with_fields(
            minibatch, sampled_subgraphs=subgraphs, input_nodes=subgraphs[0].original_row_node_ids, layout=self.layout,
            compacted_seeds=None if seeds.links is None else self.compacted_seeds(seeds),
            subtree_ids=self.subtree_ids(nodes, counts, subtrees, seeds, minibatch) if self.disjoint else None,
        )  # fmt: skip

    def seed_edge_exclusion(self, seeds: SeedNodes) -> SeedEdgeExclusion:
        """The seed edges (and their reverses) of the link seeds ``seeds`` that the
        sampler's options exclude, found in its graph (by node when disjoint)."""
        return seed_edge_exclusion(
            self.graph, seeds, self.reverse_edge_types, self.reverse_positions, self.sorted_indices, by_node=self.disjoint
        )

    def append_rows(self, nodes, counts, layer: int, sample: LayerSample, dropped, roots, edge_types=None):
        """A layer without deduplication (GraphBolt's temporal layout): its edges of seed
        pairs (``dropped``: :func:`~graphpipe.graph.sampling.seed_edge_keys`, or None)
        dropped, then every sampled edge a row. Returns ``(SampledLayer, [num_rows] int64
        each row's seed row)`` (None when ``roots`` is). ``edge_types``: the sample's edge
        type ids where its edge ids are not the graph's CSC positions (see
        :func:`~graphpipe.graph.sampling.drop_seed_edges`)."""
        edge_dst = self.edge_destinations(sample, counts, layer)
        if dropped is not None:
            sample = drop_seed_edges(self.graph, sample, nodes, edge_dst, dropped, edge_types)
            edge_dst = self.edge_destinations(sample, counts, layer)
        step, order = append_layer(self.graph, nodes, counts, sample)
        return step, None if roots is None else torch.cat([roots, roots[edge_dst]])[order]

    def edge_destinations(self, sample: LayerSample, counts, layer: int) -> torch.Tensor:
        """``[num_edges]`` int64: each sampled edge's destination, a position in the layer's
        destinations (every destination sampled: block layout)."""
        return torch.repeat_interleave(self._segment_dst(counts, layer), sample.indptr.diff(), output_size=sample.indices.numel())

    def _segment_dst(self, counts, layer: int) -> torch.Tensor:
        """``[S]`` int64: each segment's destination in layer ``layer`` of the destinations
        ``counts`` per type, all sampled."""
        return segment_destinations(self.graph.schema, counts, self.edge_type_fanouts[layer])[1]

    def seed_windows(self, minibatch: MiniBatch, seeds: SeedNodes) -> Tuple[torch.Tensor, torch.Tensor]:
        """Temporal batches: the closed time windows ``([R], [R])`` int64 of the seed rows."""
        name = type(self).__name__
        time_filter = self.time_filter
        if not seeds.nodes.numel():  # a rank's empty share of a global batch may come without times
            return seeds.nodes, seeds.nodes
        if minibatch.timestamp is not None:
            indexes = _triplet_indexes(minibatch) if self.disjoint else None
            times = seed_times(self.graph, minibatch.seeds, minibatch.timestamp, seeds, not self.disjoint, name, indexes)
        elif self.layout == "pyg" and seeds.links is None and time_filter.node_time is not None:
            times = time_filter.node_time[seeds.nodes]  # pyg-lib's default: the seeds' own times
            untimed = seeds.nodes[times == UNTIMED]
            if untimed.numel():  # pyg-lib refuses a seed type without times; they would keep no timed edge
                schema, node = self.graph.schema, int(untimed[0])
                type_id = bisect_right(schema.node_type_offset, node) - 1
                raise ValueError(
                    f"{name}: seed node {node - schema.node_type_offset[type_id]} of type "
                    f"{schema.node_types[type_id]!r} has no node time {time_filter.node_name!r}; give the seeds' times "
                    f"as an ItemSet field named 'timestamp'"
                )
        else:
            raise ValueError(
                f"{name}: temporal sampling needs the seeds' times: an ItemSet field named 'timestamp', e.g. "
                f"ItemSet((seeds, times), names=('seeds', 'timestamp')); the batch has no `timestamp`"
            )
        comparison = time_filter.comparison or ("<=" if self.layout == "pyg" and seeds.links is None else "<")
        return time_filter.seed_windows(times, comparison)

    def subtree_ids(self, keys: torch.Tensor, counts, subtrees: int, seeds: SeedNodes, minibatch: MiniBatch):
        """Disjoint batches: PyG's ``batch`` of each input node, ``[num_input]`` int64
        (typed: per node type), from their node keys: the subtree (its seed's position in
        the batch); link seeds of one edge type: its seed row's position among its node
        type's rows modulo the number of positive pairs (PyG's ``batch % num_pos``); of
        several: its pair's position over the edge types in the batch's order."""
        ids = keys % subtrees
        if seeds.links is not None and len(seeds.links) == 1:
            starts = torch.tensor(list(accumulate(seeds.counts, initial=0))[:-1])
            row_type = torch.repeat_interleave(torch.arange(len(seeds.counts)), torch.tensor(seeds.counts))
            ids = (ids - starts[row_type[ids]]) % max(_num_positives(minibatch), 1)
        elif seeds.links is not None:
            pair_of_row, first = torch.empty(seeds.nodes.numel(), dtype=torch.int64), 0
            for pairs, local in seeds.links.values():
                pair_of_row[local] = torch.arange(first, first + local.size(0))[:, None].expand_as(local)
                first += local.size(0)
            ids = pair_of_row[ids]
        if not self.typed:
            return ids
        return dict(zip(self.graph.node_types, ids.split(list(counts))))

    def batch_seeds(self, minibatch: MiniBatch) -> SeedNodes:
        """The batch's seeds as the layer loops take them, checked once (node pairs when
        ``exclude_seed_edges``). A typed batch of link items without pairs (``seeds``
        ``{}``: a rank's empty share of a global batch) is link seeds without pairs."""
        name = type(self).__name__
        self.check_batch(minibatch)
        indexes = _triplet_indexes(minibatch) if self.disjoint else None  # pyg rows: PyG's triplets
        link_task = self.items_task == "link" or self.excludes_seed_edges
        unique, row_major = self.deduplicate and not self.disjoint, not self.disjoint
        seeds = seed_nodes(self.graph, minibatch.seeds, name, unique, row_major, indexes, link_task)
        if self.excludes_seed_edges and (seeds.links is None or any(pairs.size(1) != 2 for pairs, _ in seeds.links.values())):
            raise ValueError(_NEEDS_PAIRS.format(name=name, got=_shapes(minibatch.seeds)))
        return seeds

    def compacted_seeds(self, seeds: SeedNodes):
        """The link seeds in local ids of the last layer's destinations: ``[N, k]``, or
        ``{edge type: [N, 2]}`` on a typed graph (columns local to their node types)."""
        if not self.typed:
            return seeds.links[0][1]
        schema = self.graph.schema
        starts = list(accumulate(seeds.counts, initial=0))
        return {
            schema.edge_types[etype]: local - torch.tensor([starts[schema.edge_type_ends[etype][0]], starts[schema.edge_type_ends[etype][1]]])
            for etype, (_, local) in seeds.links.items()
        }

    def check_batch(self, minibatch: MiniBatch) -> None:
        """Refuse a batch whose seeds (their task, their device) make an unsupported cell."""
        if minibatch.seeds is None:
            raise ValueError(f"{type(self).__name__}: the MiniBatch has no `seeds` to sample from")
        if self.any_seeds_supported:
            return
        seeds = minibatch.seeds
        given = [seeds] if isinstance(seeds, torch.Tensor) else list(seeds.values())
        values = [v for v in given if isinstance(v, torch.Tensor)]
        task, gpu = _task_of_shapes([v.shape for v in values]), any(v.is_cuda for v in values)
        device = "GPU" if gpu or self.on_gpu else "CPU"
        if SUPPORT[(self.graph_kind, task, self.mode, device, self.layout)] is not None:
            check_supported(
                type(self).__name__, graph=self.graph_kind, task=task, mode=self.mode, device=device, layout=self.layout
            )

    @property
    def collective(self) -> bool:
        """Cooperative batches, and batches over a part, are collective calls: the loader
        samples them one at a time."""
        return self.cooperative or self.on_part

    def process(self, minibatch: MiniBatch) -> MiniBatch:
        """The per-batch work: :meth:`sample_subgraphs`, or with ``cooperative=True`` this
        rank's part of the global batch (:func:`~graphpipe.distributed.cooperative.sample_subgraphs_cooperatively`),
        or over a part graph this rank's batch, asking the owners
        (:class:`~graphpipe.distributed.remote.LayersFromOwners`)."""
        if self.cooperative:
            seeds = self.batch_seeds(minibatch)
            source = find_distributed_item_sampler(self, f"{type(self).__name__} (cooperative)")
            return sample_subgraphs_cooperatively(self, minibatch, seeds, source)
        if self.on_part:
            source = find_distributed_item_sampler(self, f"{type(self).__name__} (over a part)")
            return self.sample_subgraphs(minibatch, LayersFromOwners(self, source))
        return self.sample_subgraphs(minibatch)

    role = "sampler"  # the Pipe protocol's declarations
    thread_safe = True  # batches share no state: a pool samples several at once
    # Whether a layer's destinations are sampled jointly (LABOR-k): each draw depends on the
    # whole layer's neighbourhoods, not on its destination's alone.
    samples_layer_jointly = False

    def state_options(self) -> Dict[str, object]:
        """Pipe protocol: the fanouts per layer and edge type, the layout, the seed edges
        excluded, the times, the hot-vertex reuse and the weights (subclasses add theirs)."""
        exclusion = {"exclude_seed_edges": self.excludes_seed_edges, "include_reverse_edges": self.include_reverse_edges,
                     "reverse_edge_types": list(self.reverse_edge_types), "reverse_edge_ids": self.reverse_positions is not None}  # fmt: skip
        time = self.time_filter
        times = None if time is None else [time.node_name, time.edge_name, time.comparison, time.time_window, time.strategy]
        layout = {"layout": self.layout, "mode": self.mode, "deduplicate": self.deduplicate}
        hot_reuse = None if self.hot_reuse is None else self.hot_reuse.state_options()
        options = {"fanouts": self.edge_type_fanouts, **layout, **exclusion, "times": times, "hot_reuse": hot_reuse}
        return {**options, "weights": getattr(self, "weights", None)}

    def compile_task(self):
        """A picklable call compiling this sampler's layer kernels (subclasses with numba
        kernels return one; see :mod:`graphpipe.ops.compile`), or None."""
        return None

    def compile_tasks(self) -> list:
        """Pipe protocol: the layer kernels (:meth:`compile_task`) and unique-and-compact's,
        for a graph in host memory."""
        if self.graph.indptr.is_cuda:
            return []
        tasks = [self.compile_task(), unique_and_compact_task(self.graph.total_num_nodes)]
        if self.time_filter is not None:
            arrays = self.time_filter.arrays
            kinds = (arrays.node_time.size > 0, arrays.edge_time.size > 0, arrays.edge_order.size > 0)
            tasks.append(partial(compile_temporal, dtype_only(self.graph.indptr), dtype_only(self.graph.indices), *kinds))
        return [task for task in tasks if task is not None]


class GraphBoltTemporal:
    """GraphBolt's temporal stages' signature, for a sampler class to derive from first
    (``class TemporalNeighborSampler(GraphBoltTemporal, NeighborSampler)``): ``prob_name``
    is the sampler's ``weights``, and the timestamps must be named."""

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        fanouts: Sequence,
        replace: bool = False,
        prob_name: Optional[str] = None,
        node_timestamp_attr_name: Optional[str] = None,
        edge_timestamp_attr_name: Optional[str] = None,
        **options,
    ):
        if node_timestamp_attr_name is None and edge_timestamp_attr_name is None and options.get("time_attr") is None:
            raise ValueError(
                f"{type(self).__name__}: name the timestamps: node_timestamp_attr_name and/or edge_timestamp_attr_name "
                f"(int64 node / edge attributes of the graph)"
            )
        super().__init__(
            source, graph, fanouts, replace=replace, weights=prob_name, node_timestamp_attr_name=node_timestamp_attr_name,
            edge_timestamp_attr_name=edge_timestamp_attr_name, **options,
        )  # fmt: skip


def edge_arrays(indices: torch.Tensor, probs: Optional[torch.Tensor], candidates: Optional[torch.Tensor]):
    """``(indices, probs)`` a sampling kernel reads: the graph's, or their rows at the
    ``candidates`` positions (see :meth:`SubgraphSampler.sample_segments`)."""
    if candidates is None:
        return indices, probs
    return indices[candidates], None if probs is None else probs[candidates]


def _triplet_indexes(minibatch: MiniBatch):
    """The batch's ``indexes`` where a negative sampler made them (its ``item_ids`` are the
    positives only), laid out in disjoint subtrees as PyG's triplets; pairs whose items
    carry their own ``indexes`` are each a subtree of its own, as PyG's
    ``edge_label_index`` without negative sampling."""
    indexes, item_ids, seeds = minibatch.indexes, minibatch.item_ids, minibatch.seeds
    if indexes is None or item_ids is None:
        return indexes
    if not isinstance(indexes, Mapping):
        return indexes if item_ids.numel() < seeds.size(0) else None
    return {key: ids for key, ids in indexes.items() if key not in item_ids or item_ids[key].numel() < seeds[key].size(0)}


def _num_positives(minibatch: MiniBatch) -> int:
    """The positive pairs of a link batch (PyG's ``num_pos``): its items (``item_ids``; a
    negative sampler leaves them alone), else those ``indexes`` name, else every pair."""
    item_ids, seeds = minibatch.item_ids, minibatch.seeds
    if item_ids is not None:
        return sum(ids.numel() for ids in item_ids.values()) if isinstance(item_ids, Mapping) else item_ids.numel()
    indexes = minibatch.indexes if isinstance(minibatch.indexes, Mapping) else {None: minibatch.indexes}
    pairs = seeds if isinstance(seeds, Mapping) else {None: seeds}
    return sum(
        (int(indexes[key].max()) + 1 if indexes[key].numel() else 0) if indexes.get(key) is not None else ids.size(0)
        for key, ids in pairs.items()
    )


def _time_filter(graph, name, time_attr, node_name, edge_name, comparison, time_window, strategy) -> Optional[TimeFilter]:
    """The sampler's :class:`~graphpipe.graph.temporal.TimeFilter`, or None: not temporal."""
    if time_attr is not None:
        if node_name is not None or edge_name is not None:
            raise ValueError(
                f"{name}: pass `time_attr` (PyG's: one node or edge attribute) or `node_timestamp_attr_name`/"
                f"`edge_timestamp_attr_name` (GraphBolt's), not both"
            )
        in_nodes, in_edges = time_attr in graph.node_attributes, time_attr in graph.edge_attributes
        if in_nodes and in_edges:
            raise ValueError(
                f"{name}: `time_attr`={time_attr!r} is both a node and an edge attribute of the graph; PyG's time_attr "
                f"is one of them: rename one, or pass node_timestamp_attr_name and edge_timestamp_attr_name (both apply)"
            )
        if not (in_nodes or in_edges):
            raise ValueError(
                f"{name}: `time_attr`={time_attr!r} is neither a node attribute {sorted(graph.node_attributes)} nor an "
                f"edge attribute {sorted(graph.edge_attributes)} of the graph; {ATTRIBUTES_HINT}"
            )
        node_name, edge_name = (("time_attr", time_attr), None) if in_nodes else (None, ("time_attr", time_attr))
    else:
        node_name = None if node_name is None else ("node_timestamp_attr_name", node_name)
        edge_name = None if edge_name is None else ("edge_timestamp_attr_name", edge_name)
    if node_name is None and edge_name is None:
        for arg, value, default in (("comparison", comparison, None), ("time_window", time_window, None), ("temporal_strategy", strategy, "uniform")):
            if value != default:
                raise ValueError(
                    f"{name}: `{arg}` applies to temporal sampling; name the timestamps with `time_attr` or "
                    f"`node_timestamp_attr_name`/`edge_timestamp_attr_name`"
                )
        return None
    if comparison is not None and comparison not in COMPARISONS:
        raise ValueError(f"{name}: `comparison` must be '<' (neighbours strictly earlier than the seed) or '<=', got {comparison!r}")
    if strategy not in TEMPORAL_STRATEGIES:
        raise ValueError(f"{name}: `temporal_strategy` must be 'uniform' or 'last' (the most recent neighbours), got {strategy!r}")
    if time_window is not None and not 0 <= check_int(time_window, "time_window", name) < 2**63:
        raise ValueError(
            f"{name}: `time_window` must be an int in [0, 2**63) (neighbours later than seed time - time_window), got {time_window}"
        )
    if graph.indptr.is_cuda or graph.indices.is_cuda:
        raise UnsupportedCombination(
            f"{name}: temporal sampling runs on the CPU; keep the graph in host memory and put copy_to('cuda') after the sampler"
        )
    return TimeFilter(graph, node_name, edge_name, comparison, time_window, strategy, name)


def _check_layout(layout, where: str) -> None:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(
            f"{where}: `layout` must be 'block' (GraphBolt/DGL blocks: every layer samples all its "
            f"destinations) or 'pyg' (PyG's NeighborLoader: each node's neighbours are sampled once, at the "
            f"hop where it is first reached), got {layout!r}"
        )


_NEEDS_PAIRS = "{name}: `exclude_seed_edges=True` needs node pairs as seeds ([N, 2]), per edge type on a typed graph; got {got}"


def _task_of_shapes(shapes) -> str:
    """``"node"``, ``"link"`` or ``"hyperlink"``: the task of seeds of these shapes (GraphBolt's:
    ``[N, 2]`` pairs, ``[N, k > 2]`` hyperlinks; else node seeds, which :func:`~graphpipe.graph.sampling.seed_nodes`
    requires 1-D, so ``[N, 1]`` is refused there, as node seeds of the wrong shape)."""
    widest = max([shape[1] if len(shape) == 2 else 0 for shape in shapes], default=0)
    return "hyperlink" if widest > 2 else "link" if widest == 2 else "node"


def _task_of_items(source, graph: CSCGraph, where: str) -> Optional[str]:
    """The task of the item set of the ItemSampler upstream of ``source``, if there is one,
    after checking its seeds against ``graph`` (once, when the sampler is built)."""
    for stage in upstream(source):
        if isinstance(stage, ItemSampler):
            items = stage.item_set
            seeds = {key: one.field("seeds") for key, one in items.item_sets.items()} if isinstance(items, HeteroItemSet) else None
            check_item_seeds(items.field("seeds") if seeds is None else seeds, graph, f"{where} (the items upstream)")
            return _task_of_shapes(ids.shape for ids in (seeds.values() if seeds else [items.field("seeds")]))
    return None


def _shapes(seeds) -> str:
    if isinstance(seeds, dict):
        return str({key: tuple(ids.shape) for key, ids in seeds.items()})
    return f"seeds of shape {tuple(seeds.shape)}"


def _check_no_fetch_before(source, where: str) -> None:
    """Refuse node features fetched upstream of a sampler: they are the rows of the seeds
    (or of an earlier sampler's nodes), not of the ``input_nodes`` this sampler makes; and
    a sampler upstream, whose layers this one would replace."""
    earlier = next((stage for stage in upstream(source) if isinstance(stage, SubgraphSampler)), None)
    if earlier is not None:
        raise ValueError(
            f"{where}: {type(earlier).__name__} upstream already samples the batches' layers, which this sampler "
            f"would replace; a pipe has one sampler"
        )
    if any(isinstance(stage, FeatureFetcher) and stage.node_feature_keys for stage in upstream(source)):
        raise ValueError(
            f"{where}: a fetch_feature stage upstream of this sampler reads node features before the sampler "
            f"makes the batch's input_nodes, so they would be the seeds' rows only; put fetch_feature after the "
            f"sampler: ItemSampler(...).sample_neighbor(graph, fanouts).fetch_feature(features, keys)"
        )


def _reverse_edge_types(graph: CSCGraph, include: bool, mapping, reverse_edge_ids, where: str) -> Tuple[int, ...]:
    """Per edge type id of a typed graph, the id of the edge type its reverse edges have
    (``reverse_etypes_mapping``, GraphBolt's form), -1 for none."""
    schema = graph.schema
    reverse = [-1] * len(schema.edge_types)
    if reverse_edge_ids is not None:
        raise ValueError(
            f"{where}: the graph is typed, so reverse edges are named by edge type: pass "
            f"reverse_etypes_mapping={{'src:rel:dst': 'dst:rev:src'}} instead of `reverse_edge_ids`"
        )
    if not include:
        return tuple(reverse)
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValueError(
            f"{where}: `include_reverse_edges=True` on a typed graph needs reverse_etypes_mapping, a dict edge type "
            f"-> its reverse edge type (GraphBolt's form, e.g. {{'user:like:item': 'item:liked-by:user'}}), got {mapping!r}"
        )
    for key, value in mapping.items():
        ids = [schema.edge_type_id.get(":".join(parse_edge_type(t, where))) for t in (key, value)]
        if None in ids:
            raise ValueError(
                f"{where}: `reverse_etypes_mapping` entry {key!r}: {value!r} names an edge type the graph lacks; its "
                f"edge types: {list(schema.edge_types)}"
            )
        (src, dst), (reverse_src, reverse_dst) = (schema.edge_type_ends[i] for i in ids)
        if (reverse_src, reverse_dst) != (dst, src):
            raise ValueError(
                f"{where}: `reverse_etypes_mapping` maps {key!r} to {value!r}, whose edges do not run the other way "
                f"(from the destination type to the source type)"
            )
        reverse[ids[0]] = ids[1]
    return tuple(reverse)


def _reverse_positions(graph: CSCGraph, reverse_edge_ids: torch.Tensor, where: str) -> torch.Tensor:
    """``[num_edges]``: CSC position -> CSC position of its reverse edge, from the user's
    ``reverse_edge_ids`` (user edge id -> user edge id of its reverse), after checking
    that every edge maps to one with swapped endpoints. ``O(num_edges)``, once."""
    num_edges = graph.total_num_edges
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


def _seed_mask(counts, seed_counts) -> torch.Tensor:
    """``[sum(counts)]`` bool: the seeds, which lead each node type's ``counts`` destinations."""
    seeds = torch.zeros(sum(counts), dtype=torch.bool)
    for start, num_seeds in zip(accumulate(counts, initial=0), seed_counts):
        seeds[start : start + num_seeds] = True
    return seeds


def _checked_hot_reuse(hot_reuse, sampler, name: str) -> Optional[HotReuse]:
    """``hot_reuse`` if this sampler can stop at hot vertices in its bottom layer."""
    if hot_reuse is None:
        return None
    if not isinstance(hot_reuse, HotReuse):
        raise TypeError(f"{name}: `hot_reuse` must be a graphpipe.HotReuse, got {type(hot_reuse).__name__}")
    if sampler.mode != "independent" or sampler.layout != "block" or not sampler.deduplicate or sampler.on_part:
        raise UnsupportedCombination(
            f"{name}: hot-vertex reuse samples independent block batches (layout='block', no cooperative, "
            f"disjoint or temporal sampling, deduplicated, not over a part); this sampler is {sampler.mode}, "
            f"layout={sampler.layout!r}" + (", deduplicate=False" if not sampler.deduplicate else "")
            + (", over a part (load_partition)" if sampler.on_part else "")
        )
    if sampler.samples_layer_jointly:
        raise UnsupportedCombination(
            f"{name}: hot-vertex reuse needs each vertex's sample to be its own (NS, LABOR-0); LABOR with "
            f"importance_sampling={sampler.importance_sampling} draws a layer's vertices jointly: pass importance_sampling=0"
        )
    chain = upstream(sampler.source)
    if sampler.on_gpu or any(stage.device is not None and stage.device.type == "cuda" for stage in chain):
        raise UnsupportedCombination(
            f"{name}: hot-vertex reuse samples on the CPU, where the hot rows are computed (NeutronOrch's CPU side): "
            f"keep the graph and the batches in host memory up to the sampler and put copy_to('cuda') after it"
        )
    source = next((stage for stage in chain if isinstance(stage, ItemSampler)), None)
    if hot_reuse.counted and source is None:
        raise ValueError(
            f"{name}: `hot_reuse` with hotness='super_batch' reads each super-batch's batches again from the "
            f"ItemSampler (or DistributedItemSampler) upstream, by batch_index; found none in the chain"
        )
    hot_reuse.bind(sampler, name, None if source is None else (source.num_global_batches, len(source)))
    return hot_reuse
