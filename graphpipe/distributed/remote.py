"""Independent minibatches on a partitioned graph: each rank samples its own batch, asking
the owners for what its part does not hold.

A part graph (:func:`~graphpipe.distributed.load_partition`) holds only the in-edges of
the vertices its rank owns, and its features only their rows. A sampler that is not
cooperative, over a part, with a :class:`~graphpipe.DistributedItemSampler` upstream,
samples every rank's OWN batch (its seeds, the whole fanout tree) as one process would
over the whole graph: its one layer loop (``SubgraphSampler.sample_subgraphs``) runs with
:class:`LayersFromOwners`. Per layer, on global ids (a typed graph is a view with offsets,
as in :mod:`graphpipe.graph.sampling`):

1. the rank's frontier (the layer's destinations) goes to the owners (all-to-all, node
   types together, as :mod:`~graphpipe.distributed.cooperative` sends them);
2. each owner samples, per requesting rank, the vertices that rank asked for, with the
   sampler's one-layer step: the layer's key is ``derive_key(seed, batch_index, layer)``,
   the requester's, since the ranks agree on ``seed`` when the sampler is built and a
   DistributedItemSampler stamps every rank's batch ``i`` with the same ``batch_index``;
   the kernels key each variate by global vertex id, so the edges do not depend on which
   rank samples (LABOR-0's per-vertex variates included);
3. the owner sends back, per requesting rank, each segment's sampled in-edges (global
   source ids, the user's edge ids, LABOR's edge weights), which the requester puts back
   in its own segment order: the layer one process samples. The requester compacts it
   (or appends a row per edge: ``deduplicate=False``, temporal block batches) and lays
   it out (block or pyg layout) as usual.

Where a hop depends on its root seed, the frontier travels as rows that say it
(:func:`_request_rows`): disjoint subtrees (``disjoint=True``, temporal pyg batches) as
node keys ``id * S + subtree`` with ``S``; temporal batches with the closed time window
of the entry's root seed and, for rows (block), the row's key, so that the owner filters
and draws as the requester's loop would (:func:`~graphpipe.graph.sampling.sample_layer`
with the requester's :class:`~graphpipe.graph.sampling.LayerTimes`). An owner needs the
times of the in-edges it holds and of their sources: a part graph holds its edges' edge
attributes and every node's node attributes (``[num_nodes]``; its ``indptr`` has a row per
owned vertex only: the layer loop reads it through ``CSCGraph.in_edge_rows``). How
a segment is filtered (binary search on time-sorted in-edges or a scan, rejection draws)
follows the whole graph's facts, agreed over the parts once per filter
(:func:`_agreed_time_filter`).

With ``exclude_seed_edges=True`` the owners learn every rank's node pairs (and their
rows among its seeds) once per batch (one all-gather) and exclude, for each requester,
the seed edges of ITS pairs among the in-edges they hold; batches without deduplication
drop them after sampling, at the requester, as one process does. Feature rows (:func:`fetch_features_from_owners`) are read by their
owners (a node's: its owner; an edge's: its destination's) and sent back. Negatives that
must not be edges (:func:`sample_negatives_from_owners`) are checked by the owners of
their destinations, one round of exchanges per redraw.

Every call is collective: all ranks join every exchange of every layer, also with no
request (an empty share of a global batch), in the same order (the loader runs such
stages one batch at a time; the sampler and the negative sampler on the sampling group,
in one thread, the fetcher on the feature group). LABOR-k, whose layer is drawn jointly,
gets every in-edge of the frontier from the owners (with the seed edges each requester
excludes marked) and draws the layer at the requester (:func:`_sample_jointly_here`):
``8 * 3 * in-edges`` bytes received instead of the sampled edges. Cooperative temporal
sampling and temporal LABOR-k are refused on parts by their stages.

Cost per layer and rank: 5 all-to-alls (request counts and ids; reply header, segment
degrees, edge rows), ``8 * frontier`` bytes sent (disjoint: 16; temporal: 24 to 40) and
``8 * (segments + 2 or 3 * edges)`` bytes received; a vertex several ranks ask for is
sampled once per requester.
"""

from __future__ import annotations

import copy
import weakref
from functools import partial
from itertools import accumulate
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from graphpipe._internal.checks import check_node_ids, check_node_pairs
from graphpipe.batch.item_set import pairs_with_negatives
from graphpipe.batch.minibatch import MiniBatch, with_fields
from graphpipe.distributed.cooperative import _all_to_all, _ask_owners, _collective, _link_rows, _send_to_owners
from graphpipe.distributed.cooperative import _to_every_rank, check_lockstep, exclusion_of_rows
from graphpipe.distributed.partitioned import check_part_owners
from graphpipe.graph.checks import check_typed_pairs
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.graph.sampling import (
    LayerTimes,
    SeedEdgeExclusion,
    SeedNodes,
    distinct_endpoints,
    held_queries,
    sample_layer,
    segment_destinations,
    typed_subgraph,
    types_of_segments,
    untyped_subgraph,
)
from graphpipe.graph.temporal import TimeFilter
from graphpipe.ops import LayerSample, derive_key, torch_random
from graphpipe.ops.edge_lookup import EdgeExclusion, EdgeQueries
from graphpipe.ops.edge_lookup import seed_edge_exclusion as find_edges
from graphpipe.ops.negative_sampling import MAX_ATTEMPTS
from graphpipe.ops.neighbor_sampling import sample_neighbors
from graphpipe.ops.temporal import UNTIMED, time_keys
from graphpipe.ops.typed_sampling import sample_segments

__all__ = ["LayersFromOwners", "fetch_features_from_owners", "sample_negatives_from_owners"]


class LayersFromOwners:
    """Where the layers of this rank's own batch over a part graph are sampled: by the
    owners of their destinations. :meth:`~graphpipe.pipes.subgraph_sampler.SubgraphSampler.sample_subgraphs`
    calls these methods (the sampler's own, with the same signatures) in its one loop
    (disjoint and temporal batches and rows without deduplication included), and gets the
    MiniBatch one process samples over the whole graph.

    Built per batch; collective: every rank samples its batch of the same ``batch_index``
    on the sampling group of the DistributedItemSampler ``source`` (``sampler.seed`` is the
    same on every rank).
    """

    def __init__(self, sampler, source):
        where = f"{type(sampler).__name__} (over a part)"
        check_lockstep(source, where, "a part's batches ask the other ranks", ", and every rank must answer every batch's requests")
        check_part_owners(sampler.graph, source.partition, source.rank, where)
        self.sampler, self.source = sampler, source
        self.time_filter = None if sampler.time_filter is None else _agreed_time_filter(sampler.time_filter, source.sampling_group)

    def seed_edge_exclusion(self, seeds: SeedNodes) -> List[SeedEdgeExclusion]:
        """Per requesting rank, the seed edges (and reverses) of ITS node pairs that this
        rank's part holds, over the segments of that rank's seed rows this rank owns (per
        node type, in that rank's order: they lead the vertices that rank asks it for in a
        layer; disjoint: of its distinct endpoints, found by node in every layer)."""
        sampler, source, exclusions = self.sampler, self.source, []
        for everyone in _seeds_of_ranks(sampler.graph, seeds, source.world_size, source.sampling_group):
            if sampler.disjoint:
                everyone = distinct_endpoints(sampler.graph, everyone)
            starts = list(accumulate(everyone.counts, initial=0))
            mine = source.partition.owner(everyone.nodes) == source.rank
            owned = [torch.nonzero(mine[a:b]).flatten() for a, b in zip(starts, starts[1:])]
            exclusions.append(exclusion_of_rows(sampler, everyone, owned))
        return exclusions

    def sample_frontier(self, nodes, counts, skipped, layer: int, minibatch, exclude, subtrees=1, windows=None, roots=None) -> LayerSample:
        """The sampler's ``sample_frontier``, each destination sampled by its owner
        (``exclude``: per requesting rank, see :func:`_sample_at_owners`); a sampler that
        samples a layer jointly (LABOR-k) gets every in-edge from the owners and samples here."""
        batch_roots = _Roots(subtrees, self.time_filter, windows, roots)
        sampler, args = self.sampler, (nodes, counts, skipped, layer, minibatch, exclude, self.source, batch_roots)
        if not sampler.samples_layer_jointly:
            return _sample_at_owners(sampler, *args)
        return _sample_jointly_here(sampler, _sample_at_owners(sampler, *args, answer=_neighbourhoods_asked), nodes, counts, skipped, layer, minibatch)

    def append_rows(self, nodes, counts, layer: int, sample: LayerSample, dropped, roots):
        """The sampler's ``append_rows`` of a layer the owners sampled: its edge ids are the
        user's, so on a typed graph the edge types of the seed edges to drop come from the
        sample's segments."""
        sampler, types = self.sampler, None
        if dropped is not None and sampler.typed:
            schema = sampler.graph.schema
            sampled, _ = segment_destinations(schema, counts, sampler.edge_type_fanouts[layer])
            types = torch.repeat_interleave(types_of_segments(schema, counts, sampled), sample.indptr.diff())
        return sampler.append_rows(nodes, counts, layer, sample, dropped, roots, types)

    def lay_out(self, step, layer: int):
        """The sampler's ``lay_out``; the owners gave the user's edge ids already."""
        view = _UserEdgeIds(self.sampler.graph)
        if self.sampler.typed:
            return typed_subgraph(view, step, self.sampler.edge_type_fanouts[layer])
        return untyped_subgraph(view, step)


class _Roots(NamedTuple):
    """What the owners need of a batch whose hops depend on their root seed.

    Attributes:
        subtrees: disjoint batches (the pyg layout of temporal ones too): ``S``, one
            subtree per seed row, node keys ``global id * S + subtree``; else 1.
        time_filter: temporal batches: the sampler's TimeFilter as the whole graph's
            (:func:`_agreed_time_filter`); else None.
        windows: temporal batches: ``([R], [R])`` int64 closed windows of the seed rows.
        rows: temporal rows (block layout, no deduplication): ``[n]`` int64 each
            destination row's seed row; else None (a destination's root is its subtree).
    """

    subtrees: int = 1
    time_filter: Optional[TimeFilter] = None
    windows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
    rows: Optional[torch.Tensor] = None


class _UserEdgeIds:
    """A graph's schema for laying out layers whose edge ids are the user's already (the
    owners mapped them: a CSC position means nothing outside its part)."""

    def __init__(self, graph):
        self.schema = graph.schema

    @staticmethod
    def sampled_edge_ids(ids: torch.Tensor) -> torch.Tensor:
        return ids


def _frontier(nodes: torch.Tensor, counts: Sequence[int], skipped: Sequence[int]) -> Tuple[torch.Tensor, Tuple[int, ...]]:
    """The destinations a layer samples: ``nodes`` (type-major, ``counts`` per type) but
    the first ``skipped`` of each type (pyg layout: sampled by an earlier layer)."""
    if not any(skipped):
        return nodes, tuple(counts)
    starts = list(accumulate(counts, initial=0))
    kept = torch.cat([nodes[start + skip : end] for start, end, skip in zip(starts, starts[1:], skipped)])
    return kept, tuple(count - skip for count, skip in zip(counts, skipped))


def _sample_at_owners(sampler, nodes, counts, skipped, layer: int, minibatch, exclusions, source, roots: _Roots, answer=None) -> LayerSample:
    """The uncompacted layer ``layer`` of the destinations ``nodes`` (node keys,
    type-major) but the first ``skipped`` of each type, each sampled by its owner:
    :meth:`~graphpipe.pipes.subgraph_sampler.SubgraphSampler.sample_frontier`'s result,
    with the user's edge ids in ``edge_ids``. ``exclusions``: per requesting rank, the
    seed edges to skip (see :meth:`LayersFromOwners.seed_edge_exclusion`), or None; ``roots``: the
    batch's, with ``rows`` those of ``nodes``; ``answer``: what an owner sends
    (:func:`_sample_asked`, or :func:`_neighbourhoods_asked`)."""
    graph, group, partition = sampler.graph, source.sampling_group, source.partition
    num_types, world_size = len(counts), source.world_size
    answer = _sample_asked if answer is None else answer
    front, front_counts = _frontier(nodes, counts, skipped)
    ids = front if roots.subtrees == 1 else torch.div(front, roots.subtrees, rounding_mode="floor")
    # An empty frontier's answer: the dtypes, and whether it gives edge weights.
    empty = answer(sampler, front[:0], (0,) * num_types, layer, minibatch, None, None)
    weighted = empty.edge_weights is not None
    route = _send_to_owners(ids, front_counts, partition, group, _request_rows(sampler, front, roots))
    pieces = [arrived.split(received) for arrived, received in zip(route.arrived, route.received)]
    replies = []
    for rank in range(world_size):  # each requester's vertices, sampled with its seed edges excluded
        asked = torch.cat([pieces[t][rank] for t in range(num_types)])
        asked_counts = tuple(route.received[t][rank] for t in range(num_types))
        exclude = None if exclusions is None or exclusions[rank].segment_offsets[-1] == 0 else exclusions[rank]  # no seed here
        replies.append(answer(sampler, asked, asked_counts, layer, minibatch, exclude, roots.time_filter))
    sent = torch.tensor([[r.indptr.numel() - 1, r.indices.numel()] for r in replies], dtype=torch.int64)
    header = torch.empty_like(sent)
    _collective(dist.all_to_all_single, header, sent, group=group)
    degrees, _ = _all_to_all(torch.cat([r.indptr.diff() for r in replies]).to(torch.int64), sent[:, 0].tolist(), header[:, 0].tolist(), group)
    columns = [torch.cat([r.indices.to(torch.int64) for r in replies]), torch.cat([graph.map_edge_ids(r.edge_ids) for r in replies])]
    if weighted:  # float32 weights travel as their bits
        columns.append(torch.cat([r.edge_weights for r in replies]).view(torch.int32).to(torch.int64))
    rows, _ = _all_to_all(torch.stack(columns, 1), sent[:, 1].tolist(), header[:, 1].tolist(), group)
    # Segment order: per sampled edge type, per destination of its type.
    segment_nodes = ids[segment_destinations(graph.schema, front_counts, sampler.edge_type_fanouts[layer])[1]]
    arrived_order = torch.argsort(partition.owner(segment_nodes), stable=True)  # segments as the owners replied
    mine = torch.empty_like(degrees)
    mine[arrived_order] = degrees
    indptr = torch.zeros(mine.numel() + 1, dtype=empty.indptr.dtype)
    torch.cumsum(mine, 0, out=indptr[1:])
    first = torch.empty_like(degrees)
    first[arrived_order] = torch.cumsum(degrees, 0) - degrees  # each segment's first row in `rows`
    at = torch.repeat_interleave(first - indptr[:-1], mine, output_size=rows.shape[0]) + torch.arange(rows.shape[0])
    rows = rows[at]
    weights = rows[:, 2].to(torch.int32).view(torch.float32) if weighted else None
    edge_ids = rows[:, 1].to(graph.map_edge_ids(empty.edge_ids).dtype)
    indices = rows[:, 0] if roots.subtrees > 1 else rows[:, 0].to(empty.indices.dtype)  # node keys stay int64
    return LayerSample(indptr, indices, edge_ids, weights)


def _neighbourhoods_asked(sampler, asked: torch.Tensor, counts, layer: int, minibatch, exclude, time_filter) -> LayerSample:
    """For a layer sampled jointly (LABOR-k): every in-edge, of the layer's sampled edge
    types, of the destinations one rank asked for (``[n]`` global ids, type-major, ``counts``
    per type), in :func:`~graphpipe.graph.sampling.sample_layer`'s segments; its
    ``edge_weights`` are float32 1.0 where that rank's seed-edge exclusion ``exclude`` names
    the edge, else 0.0 (see :func:`_sample_jointly_here`)."""
    graph = sampler.graph
    everything = [0 if fanout == 0 else -1 for fanout in sampler.edge_type_fanouts[layer]]

    def every_edge(indptr, nodes, fanout, key_ids, excluded):  # whole in-edge ranges, in CSC order
        return sample_neighbors(indptr, graph.indices, nodes, -1, key=0)
    full = sample_layer(graph, asked, counts, everything, every_edge)
    named = torch.zeros(full.edge_ids.numel(), dtype=torch.float32)
    if exclude is not None:  # a destination is one segment (deduplicated layers): its seed edges are its own
        named[torch.isin(full.edge_ids, exclude.edges.positions)] = 1.0
    return LayerSample(full.indptr, full.indices, full.edge_ids, named)


def _sample_jointly_here(sampler, full: LayerSample, nodes, counts, skipped, layer: int, minibatch) -> LayerSample:
    """The layer the sampler draws over the neighbourhoods ``full`` the owners sent
    (:func:`_neighbourhoods_asked`, user edge ids), with the calls and the seed-edge
    exclusion :func:`~graphpipe.graph.sampling.sample_layer` makes on the whole graph:
    one process's layer, bit for bit."""
    _, front_counts = _frontier(nodes, counts, skipped)
    fanouts, schema = sampler.edge_type_fanouts[layer], sampler.graph.schema
    num_segments = full.indptr.numel() - 1
    sampled, _ = segment_destinations(schema, front_counts, fanouts)
    segment_fanouts = torch.tensor(fanouts, dtype=torch.int64)[types_of_segments(schema, front_counts, sampled)]
    indptr = full.indptr.to(torch.int64)
    named = torch.nonzero(full.edge_weights > 0).flatten()  # ascending, so each segment's are a run
    exclusion = EdgeExclusion(torch.searchsorted(named, indptr), named) if named.numel() else None
    kernel = partial(sampler.sample_segments, layer=layer, minibatch=minibatch, indices=full.indices)
    bounds = torch.stack([indptr[:-1], indptr[1:]], 1).reshape(-1)
    local = sample_segments(bounds, torch.zeros(num_segments, dtype=torch.int64), segment_fanouts, kernel, exclusion)
    return LayerSample(local.indptr, local.indices, full.edge_ids[local.edge_ids], local.edge_weights)


def _request_rows(sampler, front: torch.Tensor, roots: _Roots) -> Optional[torch.Tensor]:
    """What the owners sample the destinations ``front`` (node keys) by when their hops
    depend on their root (disjoint, temporal): ``[n, c]`` int64 rows: the node key; ``S``
    (disjoint); the closed window ``lo, hi`` of its root (temporal); the key of its
    variates, its position (temporal rows). Else None: the owners get the ids."""
    if not sampler.disjoint and roots.time_filter is None:
        return None
    columns = [front]
    if sampler.disjoint:
        columns.append(torch.full_like(front, roots.subtrees))
    if roots.time_filter is not None:
        root = front % roots.subtrees if roots.rows is None else roots.rows
        columns += [roots.windows[0][root], roots.windows[1][root]]
        if roots.rows is not None:
            columns.append(torch.arange(front.numel()))
    return torch.stack(columns, 1)


def _sample_asked(sampler, asked: torch.Tensor, counts, layer: int, minibatch, exclude, time_filter) -> LayerSample:
    """The in-edges of the destinations one rank asked for (type-major, ``counts`` per
    type), as that rank would sample them: ``asked`` its ids, or :func:`_request_rows`'
    rows (with ``time_filter``, the agreed one, for temporal rows)."""
    num_nodes, where = sampler.graph.total_num_nodes, f"{type(sampler).__name__} (remote sampling; do the ranks load the same dataset?)"
    if asked.dim() == 1:  # checked here, against this rank's graph: the kernels read what they are given
        asked = check_node_ids(asked, num_nodes, "node ids another rank asked for", where)
        return sampler.sample_frontier(asked, counts, sampler.no_skip, layer, minibatch, exclude)
    keys, columns = asked[:, 0], list(asked[:, 1:].t().contiguous())
    subtrees = 1
    if sampler.disjoint:
        subtrees = int(columns.pop(0)[0]) if keys.numel() else 1
    check_node_ids(keys, num_nodes * subtrees, "node keys another rank asked for", where)
    times = None
    if time_filter is not None:
        row_keys = columns[2] if len(columns) > 2 else None
        times = LayerTimes(time_filter, columns[0], columns[1], row_keys, sampler.uniform_draw_key(minibatch.batch_index, layer))
    kernel = partial(sampler.sample_segments, layer=layer, minibatch=minibatch)
    return sample_layer(sampler.graph, keys, counts, sampler.edge_type_fanouts[layer], kernel, exclude, subtrees, times)


_AGREED_FILTERS: "weakref.WeakKeyDictionary[TimeFilter, TimeFilter]" = weakref.WeakKeyDictionary()


def _agreed_time_filter(time_filter: TimeFilter, group) -> TimeFilter:
    """``time_filter`` (of a part graph) with what it knows of the graph agreed over
    the parts, as the whole graph's: whether every node's in-edges are sorted by time,
    whether a key is untimed, which edge types have no times. A part's own may differ
    (it holds only its vertices' in-edges), and they choose how a segment is sampled
    (binary search or scan, rejection draws, "last" or uniform), so an owner samples
    as one process does. One all-reduce at a filter's first batch (every rank's first
    batch is collective), kept while the filter lives."""
    agreed = _AGREED_FILTERS.get(time_filter)
    if agreed is not None:
        return agreed
    graph = time_filter.graph
    untimed_types = torch.zeros(len(graph.schema.edge_types), dtype=torch.int64)
    untimed_types[time_filter.untimed_edge_types] = 1
    no_untimed_key = not bool((time_keys(time_filter.arrays, graph.total_num_edges) == UNTIMED).any())
    facts = torch.cat([torch.tensor([int(time_filter.is_sorted), int(no_untimed_key)]), untimed_types])
    _collective(dist.all_reduce, facts, dist.ReduceOp.MIN, group=group)  # true on every part: true of the graph
    agreed = copy.copy(time_filter)
    agreed.is_sorted = bool(facts[0])
    agreed.cuts_windows = agreed.is_sorted and (time_filter.node_name is None or time_filter.edge_name is None) and bool(facts[1])
    agreed.untimed_edge_types = torch.nonzero(facts[2:]).flatten()
    _AGREED_FILTERS[time_filter] = agreed
    return agreed


def _seeds_of_ranks(graph, seeds: SeedNodes, world_size: int, group) -> List[SeedNodes]:
    """Every rank's link seeds of its batch, per rank, as that rank's :class:`SeedNodes`
    (its distinct endpoints, or its seed rows without deduplication): one exchange of
    rows (source, destination, edge type id, their two positions in that rank's seeds)."""
    positions = [local for _, local in seeds.links.values()]
    mine = torch.cat([_link_rows(seeds), torch.cat(positions) if positions else torch.empty(0, 2, dtype=torch.int64)], 1)
    counts, rows = _to_every_rank(mine, world_size, group)
    offsets = graph.schema.node_type_offset
    by_rank = []
    for block in rows.split(counts):
        nodes = torch.empty(int(block[:, 3:].max()) + 1 if block.numel() else 0, dtype=torch.int64)
        nodes[block[:, 3:].reshape(-1)] = block[:, :2].reshape(-1)
        types = torch.bucketize(nodes, torch.tensor(offsets[1:-1]), right=True)
        links = {etype: (block[block[:, 2] == etype, :2], block[block[:, 2] == etype, 3:]) for etype in torch.unique_consecutive(block[:, 2]).tolist()}
        by_rank.append(SeedNodes(nodes, tuple(torch.bincount(types, minlength=len(offsets) - 1).tolist()), links))
    return by_rank


def fetch_features_from_owners(fetcher, minibatch: MiniBatch, source, graph) -> Tuple[dict, List[dict]]:
    """The features ``fetcher`` reads (``fetcher.fetched_features()``) for this rank's own
    batch, each row read by its owner (a node's; an edge's destination's) and sent back:
    node rows of ``input_nodes``, edge rows of each layer's ``original_edge_ids``. A
    collective call on the feature group of the DistributedItemSampler ``source``, in the
    fetcher's key order (the same on every rank); the ids of a node type (of an edge type
    in a layer) travel once for all its features, the rows of all keys together.

    Returns ``(node features, edge features per layer)``, keyed as the batch's (a name, or
    ``(type, name)`` when typed), with the batch's own; ``graph``: the (part) graph the
    sampler upstream samples.
    """
    if not minibatch.sampled_subgraphs:
        raise ValueError("FeatureFetcher (over a part): put a sampler before fetch_feature (its input nodes are read)")
    input_nodes = minibatch.input_nodes if isinstance(minibatch.input_nodes, dict) else {None: minibatch.input_nodes}
    asked: Dict[tuple, tuple] = {}  # (kind, type, layer) -> its ids' exchange
    pending = []
    for kind, key, feature in fetcher.fetched_features():
        type_name = key[0] if isinstance(key, tuple) else None
        for layer in range(minibatch.num_layers) if kind == "edge" else (None,):
            where = (kind, type_name, layer)
            if where not in asked:
                ids, owners = _ids_and_owners(minibatch, input_nodes, kind, type_name, layer, graph.schema, source.partition)
                asked[where] = _ask_owners(ids, owners, source.world_size, source.feature_group)
            pending.append((layer, key, _start_reading(feature, asked[where], source.feature_group)))
    node_features, edge_features = dict(minibatch.node_features), [dict(layer) for layer in minibatch.edge_features]
    if any(layer is not None for layer, _, _ in pending):  # as over the whole graph: none read, no layers added
        edge_features += [{} for _ in range(minibatch.num_layers - len(edge_features))]
    for layer, key, finish in pending:
        (node_features if layer is None else edge_features[layer])[key] = finish()
    return node_features, edge_features


def _ids_and_owners(minibatch, input_nodes, kind, type_name, layer, schema, partition):
    """``([n] int64 ids to read, [n] int64 their owners)``: node ids (type-local) of
    ``input_nodes``, or the user's edge ids of layer ``layer`` (of edge type
    ``type_name``) with the owners of their destinations."""
    if kind == "node":
        ids = input_nodes.get(type_name)
        ids = torch.empty(0, dtype=torch.int64) if ids is None else ids.to(torch.int64)
        return ids, partition.owner(ids + (0 if type_name is None else schema.node_type_offset[schema.node_type_id[type_name]]))
    subgraph = minibatch.sampled_subgraphs[layer]
    if type_name is None:
        csc, ids, dst_ids, offset = subgraph.sampled_csc, subgraph.original_edge_ids, subgraph.original_column_node_ids, 0
    else:
        dst_type = parse_edge_type(type_name)[2]
        csc, ids = subgraph.sampled_csc[type_name], subgraph.original_edge_ids[type_name]
        dst_ids, offset = subgraph.original_column_node_ids[dst_type], schema.node_type_offset[schema.node_type_id[dst_type]]
    destinations = torch.repeat_interleave(dst_ids.to(torch.int64), csc.indptr.diff(), output_size=ids.numel())
    return ids.to(torch.int64), partition.owner(destinations + offset)


def _start_reading(feature, asked: tuple, group):
    """Read the rows this rank is asked for (:func:`_ask_owners`) and start sending them
    back; ``finish()`` returns the rows of the ids this rank asked for, in their order."""
    order, sent_to, received_from, ids = asked
    answered, work = _all_to_all(feature.read_valid(ids), received_from, sent_to, group, async_op=True)

    def finish() -> torch.Tensor:
        work.wait()
        rows = torch.empty_like(answered)
        rows[order] = answered
        return rows

    return finish


def sample_negatives_from_owners(sampler, minibatch: MiniBatch, source) -> MiniBatch:
    """``UniformNegativeSampler(exclude_existing_edges=True)``'s triplet negatives over a
    part graph: the draws of :func:`~graphpipe.ops.sample_uniform_negatives` (negative
    ``j`` of pair ``i``: attempt ``a`` draws with counter ``j + k * a``), each checked by
    the owner of the drawn destination (which holds its in-edges), a round of exchanges
    per attempt until every rank's negatives are non-edges: what one process draws.
    Temporal negatives (``node_timestamp_attr_name``) redraw a node later than the pair's
    time here first (a part holds every node's times), as one process does.

    A collective call on the sampling group of the DistributedItemSampler ``source``
    (also for a batch without pairs). Returns the batch with its negatives (GraphBolt's
    layout, as the sampler's ``process``)."""
    graph, where = sampler.graph, f"{type(sampler).__name__} (over a part)"
    if minibatch.indexes is not None:
        raise ValueError(f"{where}: the MiniBatch already has `indexes`; sample negatives for batches of positive pairs only")
    schema, offsets, seeds = graph.schema, graph.schema.node_type_offset, minibatch.seeds
    # batch key -> (global pairs, key, (first candidate, count), edge type id (-1: any), latest time or None)
    requests = {}
    if not graph.is_heterogeneous:
        pairs = check_node_pairs(seeds, graph.total_num_nodes, "seeds", where)
        key = derive_key(sampler.seed, minibatch.batch_index)
        requests[None] = (pairs, key, (0, graph.total_num_nodes), -1, sampler.latest(minibatch.timestamp, None))
    for name, pairs in (seeds.items() if graph.is_heterogeneous else ()):
        etype, src_type, dst_type = check_typed_pairs(name, pairs, schema, where)
        first = offsets[dst_type]
        global_pairs = pairs.to(torch.int64) + torch.tensor([offsets[src_type], first])
        key, candidates = derive_key(sampler.seed, minibatch.batch_index, etype), (first, offsets[dst_type + 1] - first)
        requests[name] = (global_pairs, key, candidates, etype, sampler.latest(minibatch.timestamp, name))
    negatives = _negatives_at_owners(list(requests.values()), sampler, source, where)
    fields = {}
    for (key, (pairs, _, (first, _), _, _)), drawn in zip(requests.items(), negatives):
        labels = minibatch.labels if key is None else (minibatch.labels or {}).get(key)
        local = seeds if key is None else seeds[key]
        fields[key] = pairs_with_negatives(local.to(torch.int64), labels, drawn - first)
    if not graph.is_heterogeneous:
        batch_seeds, labels, indexes = fields[None]
        return with_fields(minibatch, seeds=batch_seeds, labels=labels, indexes=indexes, timestamp=_times(minibatch.timestamp, indexes))
    times = minibatch.timestamp if isinstance(minibatch.timestamp, dict) else {}
    typed = {name: {key: f[i] for key, f in fields.items()} for i, name in enumerate(("seeds", "labels", "indexes"))}
    timestamp = {key: _times(times[key], f[2]) for key, f in fields.items() if key in times}
    return with_fields(minibatch, **typed, timestamp=timestamp or None)


def _times(timestamp: Optional[torch.Tensor], indexes: torch.Tensor) -> Optional[torch.Tensor]:
    """Each negative gets its positive's time, as the sampler's ``process``."""
    return None if timestamp is None else timestamp[indexes]


def _negatives_at_owners(requests, sampler, source, where: str) -> List[torch.Tensor]:
    """Per request ``(pairs [N, 2] global ids, key, (first, count), edge type, latest)``,
    ``[N, k]`` int64 negative destinations (global ids), none an edge ``u -> v'`` of the
    edge type nor (``latest``: ``[N]`` int64, or None) a node later than its pair's
    ``latest``: one round of :func:`_edges_at_owners` per attempt, every rank until the
    last rank's negatives are found."""
    k, graph = sampler.negative_ratio, sampler.graph
    sizes = [pairs.shape[0] * k for pairs, *_ in requests]

    def per_row(values):  # one value per request, repeated over its N * k draws
        return torch.repeat_interleave(torch.tensor(values, dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64))

    def per_draw(rows):  # [N] values of each request's pairs, repeated over their k draws
        return torch.cat([r.repeat_interleave(k) for r in rows]) if requests else torch.empty(0, dtype=torch.int64)
    vkey = per_draw(
        [torch_random.hash2(torch_random.hash2(torch_random.hash2(key, torch.arange(pairs.shape[0])), pairs[:, 0]), pairs[:, 1]) for pairs, key, *_ in requests]
    )  # fmt: skip
    src = per_draw([pairs[:, 0] for pairs, *_ in requests])
    slot = torch.cat([torch.arange(k).repeat(pairs.shape[0]) for pairs, *_ in requests]) if requests else vkey
    first, count = per_row([c[0] for _, _, c, _, _ in requests]), per_row([c[1] for _, _, c, _, _ in requests])
    etype = per_row([t for _, _, _, t, _ in requests])
    latest = None if sampler.node_time is None else per_draw([late for *_, late in requests])
    out, todo = torch.empty_like(vkey), torch.arange(vkey.numel())
    for attempt in range(MAX_ATTEMPTS):
        u = torch_random.uniform(vkey[todo], slot[todo] + k * attempt)
        drawn = first[todo] + torch.minimum((u * count[todo]).to(torch.int64), count[todo] - 1)
        redrawn = torch.zeros(todo.numel(), dtype=torch.bool)
        if latest is not None:  # later than the pair (an untimed node never is)
            times = sampler.node_time[drawn]
            redrawn = (times != UNTIMED) & (times > latest[todo])
        asked = ~redrawn
        redrawn[asked] = _edges_at_owners(src[todo][asked], drawn[asked], etype[todo][asked], graph, sampler.sorted_indices, source)
        out[todo[~redrawn]] = drawn[~redrawn]
        todo = todo[redrawn]
        left = torch.tensor([todo.numel()])
        _collective(dist.all_reduce, left, group=source.sampling_group)
        if int(left) == 0:
            return [rows.view(-1, k) for rows in out.split(sizes)]
    raise ValueError(
        f"{where}: found no negative destination in {MAX_ATTEMPTS} draws for some pair (of some rank): (nearly) every "
        f"candidate node is its source's neighbour (`exclude_existing_edges=True`)"
    )


def _edges_at_owners(src, dst, etype, graph, sorted_indices: bool, source) -> torch.Tensor:
    """``[Q]`` bool: whether ``src[i] -> dst[i]`` (global ids) is an edge of edge type
    ``etype[i]`` (-1: any), asked of the owners of ``dst``."""
    order, sent, received, asked = _ask_owners(torch.stack([src, dst, etype], 1), source.partition.owner(dst), source.world_size, source.sampling_group)
    typed = graph.is_heterogeneous
    queries = EdgeQueries(asked[:, 1], asked[:, 0], torch.arange(asked.shape[0]), asked[:, 2] if typed else None)
    found = find_edges(
        graph.indptr, graph.indices, held_queries(graph, queries), asked.shape[0], sorted_indices=sorted_indices,
        type_per_edge=graph.type_per_edge if typed else None,
    )  # fmt: skip
    answered, _ = _all_to_all((found.indptr.diff() > 0).to(torch.int64), received, sent, source.sampling_group)
    is_edge = torch.empty(src.numel(), dtype=torch.bool)
    is_edge[order] = answered.bool()
    return is_edge
