"""Sampling layers of a :class:`~graphpipe.CSCGraph`, typed or untyped, in global node ids.

A typed graph is a view over an untyped one: the nodes of a type are a contiguous range
of global ids (``node_type_offset``), so every step above the kernels is written once,
on global ids, for both (an untyped graph is the one-type case of its
:class:`~graphpipe.graph.csc_graph.TypeSchema`). A layer's destinations are kept
*type-major*: per node type in id order, that type's destinations. A layer is
:func:`seed_nodes` (first layer only), :func:`sample_layer` (one segment per
destination and edge type, sampled through one ``indptr``), :func:`compact_layer` (one
``unique_and_compact`` over global ids, whose stable split by node type is GraphBolt's
typed layout), then :func:`untyped_subgraph` / :func:`typed_subgraph`.
"""

from __future__ import annotations

import weakref
from itertools import accumulate
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch

from graphpipe._internal.checks import NOT_TIME_DTYPES, as_int, check_node_ids
from graphpipe.graph.checks import ATTRIBUTES_HINT, check_edge_weights, check_typed_pairs, check_typed_seeds, refuse_typed_seeds
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.graph.temporal import TimeFilter
from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph
from graphpipe.ops import LayerSample, sample_neighbors, unique_and_compact
from graphpipe.ops.labor import Variates, sample_labor
from graphpipe.ops.edge_lookup import EdgeExclusion, EdgeQueries
from graphpipe.ops.edge_lookup import seed_edge_exclusion as find_excluded_edges
from graphpipe.ops.typed_sampling import SegmentSampler, sample_segments, typed_segments_of_nodes

__all__ = [
    "SampledLayer",
    "SeedEdgeExclusion",
    "SeedNodes",
    "LayerTimes",
    "append_layer",
    "compact_layer",
    "distinct_endpoints",
    "held_queries",
    "drop_seed_edges",
    "seed_edge_keys",
    "link_seed_nodes",
    "sample_graph_neighbors",
    "sample_layer",
    "seed_times",
    "segment_destinations",
    "link_rows",
    "seed_edge_exclusion",
    "node_ids_of_keys",
    "seed_nodes",
    "subtree_keys",
    "typed_segments",
    "typed_subgraph",
    "types_of_segments",
    "untyped_subgraph",
]


class SeedNodes(NamedTuple):
    """A batch's seeds as the layer loop takes them.

    Attributes:
        nodes: ``[n]`` int64 global ids, type-major (node seeds per node type in id
            order; link seeds: their distinct endpoints, ascending).
        counts: per node type id, how many of ``nodes`` are of that type.
        links: link seeds only: edge type id (0 on an untyped graph) -> ``([N, k]`` int64
            global ids, ``[N, k]`` int64 positions in ``nodes)``; else None.
    """

    nodes: torch.Tensor
    counts: Tuple[int, ...]
    links: Optional[Dict[int, Tuple[torch.Tensor, torch.Tensor]]] = None


class SeedEdgeExclusion(NamedTuple):
    """The edges a link batch must not sample, per *seed segment*: for each edge type id
    ``t`` in order, one segment per seed of ``t``'s destination type (untyped: one per
    seed node).

    Attributes:
        edges: an :class:`~graphpipe.ops.edge_lookup.EdgeExclusion` over the seed segments.
        segment_offsets: ``num_edge_types + 1`` ints: edge type ``t``'s seed segments.
        position_offsets: ``num_edge_types + 1`` ints: where their positions start.
        nodes: disjoint sampling: ``[m]`` int64 ascending global ids of the distinct
            endpoints the seeds are (:func:`distinct_endpoints`): every destination of every
            layer whose node is one skips its segments (an endpoint is a row of several
            subtrees); None: the seeds lead each type's destinations.
    """

    edges: EdgeExclusion
    segment_offsets: Tuple[int, ...]
    position_offsets: Tuple[int, ...]
    nodes: Optional[torch.Tensor] = None


class SampledLayer(NamedTuple):
    """One sampled layer in global ids, before it is laid out as a SampledSubgraph.

    Attributes:
        dst: ``[num_dst]`` int64 destinations, type-major.
        dst_counts: destinations per node type.
        skipped: per node type, its first destinations that sampled no in-edges (pyg
            layout: sampled by an earlier layer).
        sample: the in-edges of the other destinations (typed: of their segments, edge
            type major), ``edge_ids`` CSC positions.
        src: ``[num_src]`` int64: ``dst``, then the new source nodes ascending.
        local: ``[num_edges]`` int64 positions of the sampled sources in ``src``.
        rows: ``src`` type-major (per node type: its destinations, then its new nodes;
            untyped: ``src``): the next layer's destinations.
        row_counts: ``rows`` per node type.
    """

    dst: torch.Tensor
    dst_counts: Tuple[int, ...]
    skipped: Tuple[int, ...]
    sample: LayerSample
    src: torch.Tensor
    local: torch.Tensor
    rows: torch.Tensor
    row_counts: Tuple[int, ...]


def seed_nodes(
    graph, seeds, where: str, unique: bool = True, row_major: bool = True, indexes=None, link_task: bool = False
) -> SeedNodes:
    """Check a batch's ``seeds`` against ``graph`` (the user's ids: checked here, once)
    and give them as :class:`SeedNodes`: ``[n]`` node ids, ``[N, k]`` node pairs or
    hyperlinks; on a typed graph a dict node type -> ``[n]`` type-local ids, or edge type
    ``"src:relation:dst"`` -> ``[N, 2]`` type-local pairs. ``unique=False``: every
    endpoint of a link seed is a node of its own (:func:`link_rows`, in ``row_major``
    order or column by column; ``indexes``: PyG's triplet rows). ``link_task``: the seeds
    are link items, so an empty dict (a rank's empty share of a typed link batch) is
    link seeds without pairs (``links`` ``{}``), not node seeds."""
    if not graph.is_heterogeneous:
        if not isinstance(seeds, torch.Tensor) or seeds.dim() != 2:
            refuse_typed_seeds(seeds, where)
            nodes = check_node_ids(seeds, graph.total_num_nodes, "seeds", where)
            return SeedNodes(nodes, (nodes.numel(),))
        if seeds.size(1) < 2:
            raise ValueError(
                f"{where}: 2-D `seeds` must be node pairs [N, 2] or hyperlinks [N, k] with k >= 2, got shape "
                f"{tuple(seeds.shape)} (node seeds are 1-D)"
            )
        pairs = {0: check_node_ids(seeds.reshape(-1), graph.total_num_nodes, "seeds", where).view(seeds.shape)}
        return link_seed_nodes(graph, pairs) if unique else SeedNodes(*link_rows(graph.schema, pairs, row_major, {0: indexes}))
    offsets = graph.schema.node_type_offset
    pairs_given = isinstance(seeds, Mapping) and any(isinstance(ids, torch.Tensor) and ids.dim() == 2 for ids in seeds.values())
    if pairs_given or (link_task and isinstance(seeds, Mapping) and not seeds):
        pairs = {}
        for key, ids in seeds.items():
            etype, src_type, dst_type = check_typed_pairs(key, ids, graph.schema, where)
            pairs[etype] = ids.to(torch.int64) + torch.tensor([offsets[src_type], offsets[dst_type]], device=ids.device)
        by_id = {schema_id: (indexes or {}).get(key) for schema_id, key in zip(pairs, seeds)}
        return link_seed_nodes(graph, pairs) if unique else SeedNodes(*link_rows(graph.schema, pairs, row_major, by_id))
    by_type = check_typed_seeds(seeds, graph, where)
    nodes = torch.cat([ids + offsets[i] for i, ids in enumerate(by_type.values())])
    return SeedNodes(nodes, tuple(ids.numel() for ids in by_type.values()))


def link_seed_nodes(graph, pairs: Mapping[int, torch.Tensor]) -> SeedNodes:
    """:class:`SeedNodes` of link seeds: ``pairs`` maps an edge type id (0 on an untyped
    graph) to ``[N, k]`` int64 GLOBAL ids (checked), sampled from their distinct
    endpoints, ascending (so type-major); no pairs (``{}``): no nodes."""
    flat = torch.cat([p.reshape(-1) for p in pairs.values()]) if pairs else torch.empty(0, dtype=torch.int64)
    nodes, local = unique_and_compact(flat.new_empty(0), flat, graph.total_num_nodes)
    cuts = torch.searchsorted(nodes, torch.tensor(graph.schema.node_type_offset, device=nodes.device)).tolist()
    links, at = {}, 0
    for etype, p in pairs.items():
        links[etype] = (p, local[at : at + p.numel()].view(p.shape))
        at += p.numel()
    return SeedNodes(nodes, tuple(b - a for a, b in zip(cuts, cuts[1:])), links)


def link_rows(schema, values: Mapping[int, torch.Tensor], row_major: bool, indexes: Optional[Mapping] = None):
    """Link seeds without deduplication: ``values`` (edge type id -> ``[N, k]``, ids or
    anything aligned with them) laid out type-major, per node type in (edge type, column)
    order (GraphBolt's temporal layout); an untyped batch ``row_major`` (GraphBolt's
    ``seeds.view(-1)``) or column by column (PyG's ``cat([src, dst])``). ``indexes``
    (edge type id -> ``[N]`` or None): pairs with per-positive negatives (GraphBolt's
    layout: ``P`` positives, then ``k`` negatives each): one source row per positive
    and the destinations as PyG's triplets, ``dst_pos`` then negative ``j`` of every
    positive for ``j = 0, 1, ...``.

    Returns:
        ``(rows, counts, links)``: ``[R]`` the values, rows per node type, and edge type
        id -> ``(values, [N, k] int64 positions in rows)``.
    """
    pieces: List[List[Tuple[int, int, torch.Tensor, torch.Tensor]]] = [[] for _ in schema.node_types]
    for etype, v in values.items():  # (edge type, column, values, each pair's row among them)
        ends = schema.edge_type_ends[etype] if v.size(1) == 2 else (0,) * v.size(1)
        if row_major and len(schema.node_types) == 1:
            pieces[0].append((etype, -1, v.reshape(-1), torch.arange(v.numel(), device=v.device)))
            continue
        index = None if indexes is None else indexes.get(etype)
        for column, node_type in enumerate(ends):
            pieces[node_type].append((etype, column, *_link_column(v, column, index)))
    counts = tuple(sum(p.numel() for _, _, p, _ in type_pieces) for type_pieces in pieces)
    rows = [p for type_pieces in pieces for _, _, p, _ in type_pieces]
    rows = torch.cat(rows) if rows else torch.empty(0, dtype=torch.int64)  # no values: no rows
    at = list(accumulate(counts, initial=0))
    local = {etype: (v, torch.empty(v.shape, dtype=torch.int64, device=v.device)) for etype, v in values.items()}
    for node_type, type_pieces in enumerate(pieces):
        for etype, column, p, row_of_pair in type_pieces:
            positions = at[node_type] + row_of_pair
            if column < 0:
                local[etype][1].copy_(positions.view(local[etype][1].shape))
            else:
                local[etype][1][:, column] = positions
            at[node_type] += p.numel()
    return rows, counts, local


def negatives_layout(indexes: Optional[torch.Tensor], num_pairs: int) -> Optional[Tuple[int, int]]:
    """``(P, k)`` when ``indexes`` (``[num_pairs]``) number sample_uniform_negative's layout:
    ``P`` positives (``arange(P)``), then ``k`` negatives of each (each repeated ``k`` times);
    else None."""
    if indexes is None:
        return None
    num_pos = int(indexes.max()) + 1 if indexes.numel() else 0
    k = (num_pairs - num_pos) // max(num_pos, 1)
    queries = torch.arange(num_pos, device=indexes.device)
    if num_pos * (1 + k) != num_pairs or not torch.equal(indexes.to(torch.int64), torch.cat([queries, queries.repeat_interleave(k)])):
        return None
    return num_pos, k


def _link_column(v: torch.Tensor, column: int, indexes: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Column ``column`` of ``[N, 2]`` pairs ``v`` as rows: ``(values, each pair's row)``;
    with ``indexes`` (``P`` positives and ``k`` negatives each) PyG's triplet rows."""
    if indexes is None:
        return v[:, column], torch.arange(v.size(0), device=v.device)
    layout = negatives_layout(indexes, v.size(0))
    if layout is None:
        raise ValueError(
            "disjoint link batches with `indexes` (PyG's triplet rows) need sample_uniform_negative's layout: P "
            "positives, then k negatives each, `indexes` arange(P) then each repeated k times; pairs that carry "
            "indexes of their own need the batch's `item_ids` (ItemSampler sets them)"
        )
    num_pos, k = layout
    if column == 0:
        return v[:num_pos, 0], indexes.to(torch.int64)
    negatives = v[num_pos:, 1].view(num_pos, k).t().reshape(-1)  # negative j of every positive, j = 0, 1, ...
    j = torch.arange(k, device=v.device).repeat(num_pos)
    positives = torch.arange(num_pos, device=v.device)
    rows_of_negatives = num_pos + j * num_pos + positives.repeat_interleave(k)
    return torch.cat([v[:num_pos, 1], negatives]), torch.cat([positives, rows_of_negatives])


def seed_times(
    graph, seeds, timestamp, nodes: SeedNodes, row_major: bool, where: str, indexes=None, argument: str = "timestamp"
) -> torch.Tensor:
    """``[R]`` int64: the time of each row of ``nodes`` (:func:`seed_nodes` with
    ``unique=False`` of ``seeds``), from the batch's ``timestamp`` (``[N]`` per node or
    link seed; typed: a dict keyed like ``seeds``)."""
    typed = graph.is_heterogeneous

    def times_of(key, ids):
        t = timestamp.get(key) if typed and isinstance(timestamp, Mapping) else None if typed else timestamp
        wrong = not isinstance(t, torch.Tensor) or t.dim() != 1 or t.numel() != ids.size(0)
        if wrong or t.is_floating_point() or t.dtype in NOT_TIME_DTYPES:
            got = f"a {tuple(t.shape)} {t.dtype} tensor" if isinstance(t, torch.Tensor) else repr(type(t).__name__)
            origin = " (an ItemSet field named 'timestamp')" if argument == "timestamp" else ""
            raise ValueError(
                f"{where}: `{argument}`{'' if key is None else f'[{key!r}]'} must be [{ids.size(0)}] int64 times, one per "
                f"seed{origin}, got {got}"
            )
        return t.to(torch.int64)

    if nodes.links is None:
        if not typed:
            return times_of(None, seeds)
        by_type = {t: seeds.get(t) for t in graph.node_types}
        return torch.cat([times_of(t, ids) if ids is not None else torch.empty(0, dtype=torch.int64) for t, ids in by_type.items()])
    schema = graph.schema  # untyped: the one-type case, its seeds and indexes keyed by None
    pairs, indexes = (seeds, indexes or {}) if typed else ({None: seeds}, {None: indexes})
    ids_of = {schema.edge_type_id[":".join(parse_edge_type(key, where))]: key for key in seeds} if typed else {0: None}
    values = {t: times_of(key, pairs[key])[:, None].expand(pairs[key].shape) for t, key in ids_of.items()}
    return link_rows(schema, values, row_major, {t: indexes.get(key) for t, key in ids_of.items()})[0]


def seed_edge_exclusion(
    graph,
    seeds: SeedNodes,
    reverse_edge_types: Sequence[int],
    reverse_positions: Optional[torch.Tensor],
    sorted_indices: bool,
    by_node: bool = False,
) -> SeedEdgeExclusion:
    """The edges no layer of a link batch may sample: every edge ``u -> v`` of the edge
    type of each seed pair ``(u, v)``, and its reverse edges: the edges ``v -> u`` of
    edge type ``reverse_edge_types[t]`` (``-1``: none; untyped: ``0`` for GraphBolt's
    homogeneous rule), or the edges ``reverse_positions`` maps them to (untyped).

    Args:
        graph: the graph (its CSC arrays in host memory).
        seeds: :func:`seed_nodes` of node pairs.
        reverse_edge_types: per edge type id, the id of its reverse edge type or -1.
        reverse_positions: ``[num_edges]`` CSC position -> CSC position of its reverse.
        sorted_indices: sources are sorted per node (per node and edge type).
        by_node: one segment per distinct endpoint, found by node id in every layer
            (disjoint sampling: :attr:`SeedEdgeExclusion.nodes`).
    """
    schema, typed = graph.schema, graph.is_heterogeneous
    if by_node:
        seeds = distinct_endpoints(graph, seeds)
    starts = list(accumulate(seeds.counts, initial=0))
    segments = list(accumulate((seeds.counts[d] for _, d in schema.edge_type_ends), initial=0))
    none = torch.empty(0, dtype=torch.int64)  # a batch without pairs excludes nothing
    rows: List[Tuple[torch.Tensor, ...]] = [(none, none, none, 0)]  # (nodes, sources, owners, edge type)
    reverse_owners = [none]
    for etype, (pairs, local) in seeds.links.items():
        pairs, local = pairs.cpu(), local.cpu()
        src_type, dst_type = schema.edge_type_ends[etype]
        rows.append((pairs[:, 1], pairs[:, 0], local[:, 1] - starts[dst_type] + segments[etype], etype))
        reverse_owners.append(local[:, 0])
        reverse = reverse_edge_types[etype]
        if reverse >= 0:
            rows.append((pairs[:, 0], pairs[:, 1], local[:, 0] - starts[src_type] + segments[reverse], reverse))
    nodes, sources, owners = (torch.cat([row[i] for row in rows]) for i in range(3))
    edge_types = torch.cat([torch.full_like(row[0], row[3]) for row in rows]) if typed else None
    queries = EdgeQueries(
        nodes, sources, owners, edge_types, None if reverse_positions is None else torch.cat(reverse_owners)
    )
    edges = find_excluded_edges(
        graph.indptr, graph.indices, held_queries(graph, queries), segments[-1], sorted_indices=sorted_indices,
        type_per_edge=graph.type_per_edge if typed else None, reverse_positions=reverse_positions,
    )  # fmt: skip
    return SeedEdgeExclusion(edges, tuple(segments), tuple(edges.indptr[segments].tolist()), seeds.nodes if by_node else None)


def distinct_endpoints(graph, seeds: SeedNodes) -> SeedNodes:
    """Link seeds ``seeds`` with one row per distinct endpoint, ascending (disjoint seeds
    are a row per pair end), the pairs' positions among those rows: ``seeds`` itself when
    its rows are so already (this function's own, as a part graph's owners pass them on)."""
    if bool((seeds.nodes[1:] > seeds.nodes[:-1]).all()):
        return seeds
    nodes, inverse = torch.unique(seeds.nodes, return_inverse=True)
    counts = torch.searchsorted(nodes, torch.tensor(graph.schema.node_type_offset, dtype=torch.int64)).diff()
    links = {etype: (pairs, inverse[local]) for etype, (pairs, local) in seeds.links.items()}
    return SeedNodes(nodes, tuple(counts.tolist()), links)


def _exclusion_by_node(graph, exclude: SeedEdgeExclusion, ids: torch.Tensor, counts: Sequence[int]) -> SeedEdgeExclusion:
    """``exclude`` (one segment per distinct endpoint, :attr:`SeedEdgeExclusion.nodes`) over
    the destinations ``ids`` (global ids, type-major, ``counts`` per type): per edge type,
    one segment per destination of its destination type: an endpoint's skips what that
    endpoint's segment names, the others nothing."""
    nodes, edges = exclude.nodes, exclude.edges
    at = torch.searchsorted(nodes, ids)
    found = nodes[at.clamp(max=nodes.numel() - 1)] == ids if nodes.numel() else torch.zeros_like(ids, dtype=torch.bool)
    node_starts = torch.searchsorted(nodes, torch.tensor(graph.schema.node_type_offset, dtype=torch.int64)).tolist()
    starts = list(accumulate(counts, initial=0))
    pieces = []  # per segment: its endpoint segment in `exclude`, or -1
    for etype, (_, dst_type) in enumerate(graph.schema.edge_type_ends):
        a, b = starts[dst_type], starts[dst_type + 1]
        pieces.append(torch.where(found[a:b], at[a:b] - node_starts[dst_type] + exclude.segment_offsets[etype], -1))
    source = torch.cat(pieces)
    first = edges.indptr[source.clamp(min=0)]
    lengths = torch.where(source >= 0, edges.indptr[source + 1] - first, 0)
    indptr = torch.zeros(source.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=indptr[1:])
    gather = torch.repeat_interleave(first - indptr[:-1], lengths, output_size=int(indptr[-1])) + torch.arange(int(indptr[-1]))
    segments = list(accumulate((counts[dst_type] for _, dst_type in graph.schema.edge_type_ends), initial=0))
    return SeedEdgeExclusion(EdgeExclusion(indptr, edges.positions[gather]), tuple(segments), tuple(indptr[segments].tolist()))


def held_queries(graph, queries: EdgeQueries) -> EdgeQueries:
    """``queries`` (``nodes``: ids) over the rows of ``graph.indptr``, those of nodes
    without a row (a part graph's nodes another rank owns: no in-edges here) left out."""
    rows, held = graph.held_rows(queries.nodes)
    queries = queries._replace(nodes=rows)
    if bool(held.all()):
        return queries
    return EdgeQueries(*(None if column is None else column[held] for column in queries))


def typed_segments(graph, rows: torch.Tensor, counts: Sequence[int], fanouts: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`~graphpipe.ops.typed_sampling.typed_segments_of_nodes`' ``(bounds, key_ids)``
    of ``rows`` (type-major, ``counts`` per node type): the in-edge segment of each row for
    every edge type into its node type whose fanout is not 0 (untyped: the whole range)."""
    if not graph.is_heterogeneous:  # one edge type: key (row, type 0) is the row
        rows = rows[:0] if fanouts[0] == 0 else rows
        return torch.stack([graph.indptr[rows], graph.indptr[rows + 1]], dim=1).reshape(-1), rows.to(torch.int64)
    schema, groups, start = graph.schema, [], 0
    for node_type, count in enumerate(counts):
        edge_types = [t for t in schema.edge_types_to[node_type] if fanouts[t] != 0]
        if edge_types and count:
            groups.append((rows[start : start + count], edge_types))
        start += count
    return typed_segments_of_nodes(graph.indptr, graph.type_per_edge, groups, len(schema.edge_types))


def seed_edge_keys(graph, seeds: SeedNodes, reverse_edge_types: Sequence[int]) -> torch.Tensor:
    """``[K]`` int64 keys (:func:`_edge_key`) of the edges :func:`drop_seed_edges` drops:
    every ``u -> v`` of each seed pair's edge type, and ``v -> u`` of its reverse edge
    type (``reverse_edge_types[t]``, -1: none)."""
    n = graph.total_num_nodes
    if len(graph.schema.edge_types) * n * n >= 2**63:
        raise ValueError(f"seed_edge_keys: {n} nodes of {len(graph.schema.edge_types)} edge types do not fit 63-bit edge keys")
    keys = []
    for etype, (pairs, _) in seeds.links.items():
        keys.append(_edge_key(etype, pairs[:, 0], pairs[:, 1], n))
        if reverse_edge_types[etype] >= 0:
            keys.append(_edge_key(reverse_edge_types[etype], pairs[:, 1], pairs[:, 0], n))
    return torch.cat(keys).unique() if keys else torch.empty(0, dtype=torch.int64)  # a batch without pairs drops none


def drop_seed_edges(
    graph, sample: LayerSample, dst: torch.Tensor, edge_dst: torch.Tensor, keys: torch.Tensor, edge_types: Optional[torch.Tensor] = None
) -> LayerSample:
    """``sample`` without its edges whose key is in ``keys`` (:func:`seed_edge_keys`), as
    GraphBolt's ``exclude_seed_edges`` removes them after sampling. ``dst``: the layer's
    ``[n]`` global destination ids; ``edge_dst``: each sampled edge's position in it;
    ``edge_types``: ``[num_edges]`` int64 their edge type ids where ``sample.edge_ids`` are
    not ``graph``'s CSC positions (typed graphs; None: read from ``graph``)."""
    if edge_types is None:
        edge_types = graph.type_per_edge[sample.edge_ids].to(torch.int64) if graph.is_heterogeneous else 0
    keep = ~torch.isin(_edge_key(edge_types, sample.indices, dst[edge_dst], graph.total_num_nodes), keys)
    if bool(keep.all()):
        return sample
    segments = sample.indptr.numel() - 1
    owner = torch.repeat_interleave(torch.arange(segments, device=keep.device), sample.indptr.diff(), output_size=keep.numel())
    indptr = torch.zeros(segments + 1, dtype=torch.int64, device=keep.device)
    torch.cumsum(torch.bincount(owner[keep], minlength=segments), 0, out=indptr[1:])
    weights = None if sample.edge_weights is None else sample.edge_weights[keep]
    return LayerSample(indptr, sample.indices[keep], sample.edge_ids[keep], weights)


def _edge_key(edge_type, src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``(edge_type * num_nodes + src) * num_nodes + dst``: an edge's int64 key, global ids."""
    return (src.to(torch.int64) + edge_type * num_nodes) * num_nodes + dst


def sample_layer(
    graph,
    nodes: torch.Tensor,
    counts: Sequence[int],
    fanouts: Sequence[int],
    kernel: SegmentSampler,
    exclude: Optional[SeedEdgeExclusion] = None,
    subtrees: int = 1,
    times: Optional[LayerTimes] = None,
) -> LayerSample:
    """The in-edges of ``nodes`` for one layer, uncompacted.

    Args:
        graph: the graph.
        nodes: ``[n]`` int64 node keys, type-major: global id ``* subtrees +`` subtree
            (:func:`subtree_keys`; the global ids when ``subtrees == 1``).
        counts: destinations per node type.
        fanouts: per edge type id, its fanout (0: none sampled, -1: all).
        kernel: samples in-edge ranges (:data:`~graphpipe.ops.typed_sampling.SegmentSampler`).
        exclude: the seed edges to skip; the seeds must lead each type's destinations
            (unless the exclusion is by node: :attr:`SeedEdgeExclusion.nodes`).
        subtrees: disjoint sampling (PyG's ``disjoint=True``): the number of subtrees (one
            per seed). A destination's variates are keyed by its key, so the same node
            samples independently in every subtree, and the sources inherit its subtree.
        times: temporal sampling: only the in-edges valid in each destination's window
            (:class:`LayerTimes`).

    Returns:
        A :class:`~graphpipe.ops.LayerSample` over one segment per sampled edge type
        (fanout not 0, ascending id) and destination of its destination type, edge type
        major (untyped: the one edge type, a segment per node unless the fanout is 0).
        ``indices`` are node keys (global ids ``* subtrees +`` the destination's subtree).
    """
    disjoint = subtrees > 1
    ids = torch.div(nodes, subtrees, rounding_mode="floor") if disjoint else nodes
    rows = graph.in_edge_rows(ids, "sample_layer")  # the kernels read indptr by row, key variates by id
    if exclude is not None and exclude.nodes is not None:
        exclude = _exclusion_by_node(graph, exclude, ids, counts)
    if not graph.is_heterogeneous and fanouts[0] != 0:  # fast path: a segment per row, no per-segment bookkeeping
        edges = None if exclude is None else exclude.edges
        if times is None:
            sample = kernel(graph.indptr, rows, fanouts[0], nodes if disjoint or rows is not ids else None, edges)
        else:
            lo, hi, key_ids = times.lo, times.hi, nodes if times.row_keys is None else times.row_keys
            fanout, bounds = torch.full_like(nodes, fanouts[0]), typed_segments(graph, rows, counts, fanouts)[0]
            sample = times.filter.sample(bounds, lo, hi, key_ids, fanout, kernel, edges, draw_key=times.draw_key)
        return _in_subtrees(sample, nodes, subtrees)
    schema = graph.schema
    sampled, segment_dst = segment_destinations(schema, counts, fanouts)
    sizes = [counts[schema.edge_type_ends[t][1]] for t in sampled]
    bounds, key_ids = typed_segments(graph, rows, counts, fanouts)
    if rows is not ids:  # keyed by (row, edge type): key by (node id, edge type), as on the whole graph
        num_types = len(schema.edge_types)
        key_ids = graph.indptr_nodes[torch.div(key_ids, num_types, rounding_mode="floor")] * num_types + key_ids % num_types
    segment_types = types_of_segments(schema, counts, sampled)
    segment_fanouts = torch.tensor(fanouts, dtype=torch.int64)[segment_types]
    segment_keys = nodes[segment_dst] if disjoint else None
    if segment_keys is not None:  # (node, edge type, subtree): one key per segment of every subtree
        key_ids = key_ids * subtrees + segment_keys % subtrees
    exclusion = _layer_exclusion(exclude, sampled, sizes)
    if times is None:
        sample = sample_segments(bounds, key_ids, segment_fanouts, kernel, exclusion)
    else:
        if times.row_keys is not None:  # (row, edge type): every row samples apart
            key_ids = times.row_keys[segment_dst] * len(schema.edge_types) + segment_types
        lo, hi = times.lo[segment_dst], times.hi[segment_dst]
        sample = times.filter.sample(bounds, lo, hi, key_ids, segment_fanouts, kernel, exclusion, segment_types, draw_key=times.draw_key)
    return sample if segment_keys is None else _in_subtrees(sample, segment_keys, subtrees)


class LayerTimes(NamedTuple):
    """A temporal layer's constraint, per destination of :func:`sample_layer`.

    Attributes:
        filter: the sampler's :class:`~graphpipe.graph.temporal.TimeFilter`.
        lo, hi: ``[n]`` int64 closed windows (the destination's root seed's).
        row_keys: ``[n]`` int64 keys of the destinations' variates when they are rows
            (no deduplication: a node may be several rows), else None (node keys).
        draw_key: the layer's key when the sampler draws uniformly without replacement
            (:meth:`~graphpipe.graph.temporal.TimeFilter.sample`), else None.
    """

    filter: TimeFilter
    lo: torch.Tensor
    hi: torch.Tensor
    row_keys: Optional[torch.Tensor] = None
    draw_key: Optional[int] = None


def segment_destinations(schema, counts: Sequence[int], fanouts: Sequence[int]) -> Tuple[List[int], torch.Tensor]:
    """A layer's sampled edge types (fanout not 0, a destination of their type) and
    ``[S]`` int64: each segment's destination, a position in the layer's type-major
    destinations (:func:`sample_layer`'s segment order)."""
    starts = list(accumulate(counts, initial=0))
    sampled = [t for t, (_, dst_type) in enumerate(schema.edge_type_ends) if fanouts[t] != 0 and counts[dst_type]]
    ranges = [torch.arange(starts[schema.edge_type_ends[t][1]], starts[schema.edge_type_ends[t][1] + 1]) for t in sampled]
    return sampled, torch.cat(ranges) if ranges else torch.empty(0, dtype=torch.int64)


def types_of_segments(schema, counts: Sequence[int], sampled: Sequence[int]) -> torch.Tensor:
    """``[S]`` int64: each segment's edge type id, for a layer's segments
    (``sampled``: :func:`segment_destinations`' edge types) over destinations ``counts`` per type."""
    sizes = [counts[schema.edge_type_ends[t][1]] for t in sampled]
    return torch.repeat_interleave(torch.tensor(sampled, dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64))


def append_layer(graph, dst: torch.Tensor, dst_counts, sample: LayerSample) -> Tuple[SampledLayer, torch.Tensor]:
    """Lay out a sampled layer WITHOUT deduplication (GraphBolt's temporal layout): every
    sampled edge adds a source row of its own, after ``dst``; on a typed graph the new
    rows are grouped by node type (stably: edge type, then destination order).

    Returns:
        ``(layer, order)``: the :class:`SampledLayer` and ``[num_rows]`` int64: row ``j``
        of ``layer.rows`` is ``cat([dst, sample.indices])[order[j]]``.
    """
    n, num_edges = dst.numel(), sample.indices.numel()
    # The next layer samples these rows unchecked: a corrupted `indices` (a mapped graph's
    # are not scanned when loaded) is refused here, as unique_and_compact refuses it.
    check_node_ids(sample.indices, graph.total_num_nodes, "indices", "a sampled layer's sources (is the graph file corrupted?)")
    if not graph.is_heterogeneous:
        src = torch.cat([dst, sample.indices])
        return SampledLayer(dst, dst_counts, (0,), sample, src, torch.arange(n, n + num_edges), src, (src.numel(),)), torch.arange(src.numel())
    offsets = graph.node_type_offset.to(torch.int64)
    types = torch.bucketize(sample.indices, offsets[1:-1], right=True)
    by_type = torch.sort(types, stable=True).indices
    local = torch.empty(num_edges, dtype=torch.int64)
    local[by_type] = torch.arange(n, n + num_edges)
    new_counts = torch.bincount(types, minlength=len(dst_counts)).tolist()
    pieces, dst_at, new_at = [], 0, n
    for dst_count, new_count in zip(dst_counts, new_counts):
        pieces += [torch.arange(dst_at, dst_at + dst_count), torch.arange(new_at, new_at + new_count)]
        dst_at, new_at = dst_at + dst_count, new_at + new_count
    src = torch.cat([dst, sample.indices[by_type]])
    rows_of_src = torch.cat(pieces)
    order = torch.cat([torch.arange(n), n + by_type])[rows_of_src]
    row_counts = tuple(d + c for d, c in zip(dst_counts, new_counts))
    skipped = (0,) * len(dst_counts)
    return SampledLayer(dst, tuple(dst_counts), skipped, sample, src, local, src[rows_of_src], row_counts), order


def subtree_keys(nodes: torch.Tensor) -> torch.Tensor:
    """Disjoint sampling: the ``[n]`` int64 keys of ``n`` seeds, one subtree each: seed
    ``i`` (global id ``v``) is ``v * n + i``. A key's subtree is ``key % n``, its node
    ``key // n``; keys order by node, then subtree, so type-major stays type-major."""
    return nodes * nodes.numel() + torch.arange(nodes.numel())


def _in_subtrees(sample: LayerSample, dst_keys: torch.Tensor, subtrees: int) -> LayerSample:
    """``sample`` with its sources as node keys: each in its destination's subtree."""
    if subtrees == 1:
        return sample
    subtree = torch.repeat_interleave(dst_keys % subtrees, sample.indptr.diff(), output_size=sample.indices.numel())
    return sample._replace(indices=sample.indices.to(torch.int64) * subtrees + subtree)


def _layer_exclusion(exclude: Optional[SeedEdgeExclusion], sampled: List[int], sizes: List[int]) -> Optional[EdgeExclusion]:
    """``exclude`` over a typed layer's segments: edge type ``t``'s seed segments lead its
    ``sizes`` segments (the seeds lead their type's destinations); None without segments."""
    if exclude is None or not sampled:
        return None
    segments, positions = exclude.segment_offsets, exclude.position_offsets
    counts = exclude.edges.indptr[1:] - exclude.edges.indptr[:-1]
    pieces, kept = [], []
    for t, size in zip(sampled, sizes):
        pieces += [counts[segments[t] : segments[t + 1]], counts.new_zeros(size - segments[t + 1] + segments[t])]
        kept.append(exclude.edges.positions[positions[t] : positions[t + 1]])
    indptr = torch.zeros(sum(sizes) + 1, dtype=torch.int64)
    torch.cumsum(torch.cat(pieces), 0, out=indptr[1:])
    return EdgeExclusion(indptr, torch.cat(kept))


def compact_layer(graph, dst: torch.Tensor, dst_counts, skipped, sample: LayerSample, subtrees: int = 1) -> SampledLayer:
    """Relabel a sampled layer: its sources are ``dst``, then the new nodes ascending
    (one :func:`~graphpipe.ops.unique_and_compact` over node keys, typed or not: global
    ids, or ``global id * subtrees + subtree`` when sampling disjoint subtrees)."""
    src, local = unique_and_compact(dst, sample.indices, graph.total_num_nodes * subtrees)
    if not graph.is_heterogeneous:
        return SampledLayer(dst, dst_counts, skipped, sample, src, local, src, (src.numel(),))
    # Global ids of a type are contiguous, so the new nodes (ascending) are grouped by type.
    cuts = torch.searchsorted(src[dst.numel() :], graph.node_type_offset.to(torch.int64) * subtrees).tolist()
    pieces, dst_at, new_at = [], 0, dst.numel()
    for dst_count, new_start, new_end in zip(dst_counts, cuts, cuts[1:]):
        pieces += [src[dst_at : dst_at + dst_count], src[new_at + new_start : new_at + new_end]]
        dst_at += dst_count
    row_counts = tuple(d + b - a for d, a, b in zip(dst_counts, cuts, cuts[1:]))
    return SampledLayer(dst, dst_counts, skipped, sample, src, local, torch.cat(pieces), row_counts)


def node_ids_of_keys(layer: SampledLayer, subtrees: int) -> SampledLayer:
    """``layer`` with global node ids in place of node keys (``key // subtrees``)."""
    if subtrees == 1:
        return layer
    ids = {name: torch.div(getattr(layer, name), subtrees, rounding_mode="floor") for name in ("dst", "src", "rows")}
    return layer._replace(**ids)


def untyped_subgraph(graph, layer: SampledLayer) -> SampledSubgraph:
    """The :class:`SampledSubgraph` of an untyped layer: the sample's CSC positions become
    the user's edge ids, and destinations skipped (pyg layout) or of a layer without
    segments (fanout 0) get no in-edges."""
    indptr = layer.sample.indptr
    if indptr.numel() == 1:
        indptr = indptr.new_zeros(layer.dst.numel() + 1)
    elif layer.skipped[0]:
        indptr = torch.cat([indptr.new_zeros(layer.skipped[0]), indptr])
    return SampledSubgraph(
        sampled_csc=CSCFormat(indptr, layer.local),
        original_row_node_ids=layer.src,
        original_column_node_ids=layer.dst,
        original_edge_ids=graph.sampled_edge_ids(layer.sample.edge_ids),
        edge_weights=layer.sample.edge_weights,
    )


def typed_subgraph(graph, layer: SampledLayer, fanouts: Sequence[int]) -> SampledSubgraph:
    """The :class:`SampledSubgraph` of a typed layer in GraphBolt's layout: ``sampled_csc``
    per edge type (``indptr`` over the destinations of its destination type, ``indices``
    local to the sources of its source type), node ids per node type, edge ids per edge
    type (within the type), all type-local; every type has an entry."""
    schema = graph.schema
    dst_counts, row_counts = layer.dst_counts, layer.row_counts
    new_counts = [rows - dsts for rows, dsts in zip(row_counts, dst_counts)]
    row_starts = list(accumulate(row_counts, initial=0))
    type_local = layer.rows - torch.repeat_interleave(torch.tensor(schema.node_type_offset[:-1]), torch.tensor(row_counts))
    rows = {t: type_local[row_starts[i] : row_starts[i + 1]] for i, t in enumerate(schema.node_types)}
    columns = {t: rows[t][: dst_counts[i]] for i, t in enumerate(schema.node_types)}
    # Position in `src` (destinations, then new nodes, each type-major) -> position among
    # the nodes of its type (its destinations, then its new nodes), for every source at once.
    num_dst = layer.dst.numel()
    shifts = list(accumulate(dst_counts, initial=0))[:-1]
    shifts += [num_dst + new_start - count for new_start, count in zip(accumulate(new_counts, initial=0), dst_counts)]
    runs = torch.tensor(list(dst_counts) + new_counts)
    position = torch.arange(layer.src.numel()) - torch.repeat_interleave(torch.tensor(shifts), runs)
    local = position[layer.local]
    edge_ids = graph.sampled_edge_ids(layer.sample.edge_ids)
    weights = layer.sample.edge_weights
    csc, original_edge_ids, edge_weights = {}, {}, {}
    slices = _edge_type_slices(schema, dst_counts, layer.skipped, layer.sample, fanouts)
    for etype, (indptr, e0, e1) in zip(schema.edge_types, slices):
        csc[etype] = CSCFormat(indptr, local[e0:e1])
        original_edge_ids[etype] = edge_ids[e0:e1]
        edge_weights[etype] = None if weights is None else weights[e0:e1]
    return SampledSubgraph(csc, rows, columns, original_edge_ids, None if weights is None else edge_weights)


def _edge_type_slices(schema, dst_counts, skipped, sample: LayerSample, fanouts) -> List[Tuple[torch.Tensor, int, int]]:
    """Per edge type id: ``(indptr over its destination type's destinations, first edge,
    end edge)`` of a typed layer's ``sample`` (:func:`sample_layer`'s segment order)."""
    frontier = [count - skip for count, skip in zip(dst_counts, skipped)]
    sampled = [t for t, (_, d) in enumerate(schema.edge_type_ends) if fanouts[t] != 0 and frontier[d]]
    segment_cuts = list(accumulate([frontier[schema.edge_type_ends[t][1]] for t in sampled], initial=0))
    edge_cuts = sample.indptr[segment_cuts].tolist()
    slices, j = [], 0
    for t, (_, dst_type) in enumerate(schema.edge_type_ends):
        if j < len(sampled) and sampled[j] == t:
            e0 = edge_cuts[j]
            indptr = sample.indptr[segment_cuts[j] : segment_cuts[j + 1] + 1] - e0
            if skipped[dst_type]:
                indptr = torch.cat([indptr.new_zeros(skipped[dst_type]), indptr])
            slices.append((indptr, e0, edge_cuts[j + 1]))
            j += 1
        else:
            slices.append((torch.zeros(dst_counts[dst_type] + 1, dtype=torch.int64), 0, 0))
    return slices


def sample_graph_neighbors(
    graph,
    seeds,
    fanouts,
    replace: bool = False,
    probs_name: Optional[str] = None,
    times: Optional[tuple] = None,
    labor: bool = False,
) -> SampledSubgraph:
    """:meth:`CSCGraph.sample_neighbors` (GraphBolt's graph-level ``sample_neighbors``):
    one layer with a key drawn from torch's generator, laid out per edge type; with
    ``times`` ``(seeds_timestamp, window, node attribute, edge attribute)``
    :meth:`CSCGraph.temporal_sample_neighbors`; with ``labor``
    :meth:`CSCGraph.sample_layer_neighbors` (LABOR-0, its weights as ``edge_weights``)."""
    where = "CSCGraph.sample_layer_neighbors" if labor else "CSCGraph.sample_neighbors" if times is None else "CSCGraph.temporal_sample_neighbors"
    if labor and replace:
        raise ValueError(f"{where}: LABOR samples without replacement; `replace` must be False")
    counts = _graph_fanouts(fanouts, graph, where)
    if probs_name is not None and probs_name not in graph.edge_attributes:
        raise KeyError(
            f"{where}: `probs_name`={probs_name!r} is not an edge attribute of the graph; known edge attributes: "
            f"{sorted(graph.edge_attributes)}; {ATTRIBUTES_HINT}"
        )
    probs = None if probs_name is None else check_edge_weights(graph, probs_name, where)
    key = int(torch.randint(0, 2**62, ()))

    def kernel(indptr, nodes, fanout, key_ids, exclude, candidates=None):
        if fanout == 0:
            return LayerSample.empty(nodes.numel(), nodes.device, weights=labor)
        indices = graph.indices if candidates is None else graph.indices[candidates]
        weights = probs if candidates is None or probs is None else probs[candidates]
        if labor:  # a source's variate is keyed by its id alone: the same draw for every destination
            return sample_labor(indptr, indices, nodes, fanout, variates=Variates(key), probs=weights, num_nodes=graph.total_num_nodes)
        return sample_neighbors(indptr, indices, nodes, fanout, key=key, replace=replace, probs=weights, key_ids=key_ids)

    if graph.is_heterogeneous and isinstance(seeds, torch.Tensor):
        raise ValueError(f"{where}: the graph is typed, so `seeds` must be a dict of node type -> ids")
    if not graph.is_heterogeneous and isinstance(seeds, Mapping):
        raise TypeError(f"{where}: the graph is homogeneous, so `seeds` must be a tensor of node ids, got a dict")
    start = seed_nodes(graph, seeds, where)
    if start.links is not None:
        raise ValueError(f"{where}: `seeds` must be node ids, got node pairs")
    layer_times = None if times is None else _graph_layer_times(graph, seeds, start, times, where)
    rows = graph.in_edge_rows(start.nodes, where)  # the kernels read indptr by row, key variates by id
    key_ids = None if rows is start.nodes else start.nodes
    if len(counts) == 1:  # one fanout (untyped, or every edge type together): whole in-edge ranges
        if layer_times is None:
            sample = kernel(graph.indptr, rows, counts[0], key_ids, None)
        else:
            nodes = start.nodes
            bounds = torch.stack([graph.indptr[rows], graph.indptr[rows + 1]], dim=1).reshape(-1)
            fanouts = torch.full((nodes.numel(),), counts[0], dtype=torch.int64)
            # A typed graph's time order holds per edge type, not across a node's whole range.
            sample = layer_times.filter.sample(bounds, layer_times.lo, layer_times.hi, nodes, fanouts, kernel, whole_ranges=graph.is_heterogeneous)
        if graph.is_heterogeneous:
            return _split_by_edge_type(graph, start, sample)
        return SampledSubgraph(CSCFormat(sample.indptr, sample.indices), None, None, graph.sampled_edge_ids(sample.edge_ids), sample.edge_weights)
    schema = graph.schema
    sample = sample_layer(graph, start.nodes, start.counts, counts, kernel, times=layer_times)
    slices = _edge_type_slices(schema, start.counts, tuple(0 for _ in start.counts), sample, counts)
    csc, edge_ids, weights = {}, {}, {}
    for etype, (src_type, _), (indptr, e0, e1) in zip(schema.edge_types, schema.edge_type_ends, slices):
        csc[etype] = CSCFormat(indptr, sample.indices[e0:e1] - schema.node_type_offset[src_type])
        edge_ids[etype] = graph.sampled_edge_ids(sample.edge_ids[e0:e1])
        weights[etype] = None if sample.edge_weights is None else sample.edge_weights[e0:e1]
    return SampledSubgraph(csc, None, None, edge_ids, None if sample.edge_weights is None else weights)


def _graph_layer_times(graph, seeds, start: SeedNodes, times: tuple, where: str) -> LayerTimes:
    """The :class:`LayerTimes` of :meth:`CSCGraph.temporal_sample_neighbors`' seeds: GraphBolt's
    strict ``<`` and open window ``(t - w, t)``; the graph's filter is made once per
    graph and timestamps (:func:`_graph_time_filter`)."""
    seeds_timestamp, window, node_name, edge_name = times
    if node_name is None and edge_name is None:
        raise ValueError(f"{where}: name the timestamps: node_timestamp_attr_name and/or edge_timestamp_attr_name")
    seed_time = seed_times(graph, seeds, seeds_timestamp, start, True, where, argument="seeds_timestamp")
    if window is not None:
        scalar = not isinstance(window, (torch.Tensor, Mapping)) or (isinstance(window, torch.Tensor) and window.dim() == 0)
        width = as_int(window) if scalar else None
        if scalar and width is None:
            raise ValueError(f"{where}: `seeds_pre_time_window` must be an int or a tensor of one per seed, got {window!r}")
        window = width if scalar else seed_times(graph, seeds, window, start, True, where, argument="seeds_pre_time_window")
        if not bool(((torch.as_tensor(window) >= 0) & (torch.as_tensor(window) < 2**63 - 1)).all()):
            raise ValueError(f"{where}: `seeds_pre_time_window` must be >= 0 (a window before the seed's time), got {window}")
    time_filter = _graph_time_filter(graph, node_name, edge_name, where)
    lo, hi = time_filter.seed_windows(seed_time, "<", window)
    return LayerTimes(time_filter, lo, hi)


_GRAPH_FILTERS: Dict[int, Dict[tuple, TimeFilter]] = {}


def _graph_time_filter(graph, node_name, edge_name, where: str) -> TimeFilter:
    """The graph method's :class:`TimeFilter` for these timestamps, made once per graph
    (its ``O(num_edges)`` checks) and dropped with the graph."""
    filters = _GRAPH_FILTERS.get(id(graph))
    if filters is None:
        filters = _GRAPH_FILTERS[id(graph)] = {}
        weakref.finalize(graph, _GRAPH_FILTERS.pop, id(graph), None)
    names = (node_name, edge_name)
    if names not in filters:
        arguments = (None if n is None else (argument, n) for n, argument in zip(names, ("node_timestamp_attr_name", "edge_timestamp_attr_name")))
        filters[names] = TimeFilter(graph, *arguments, "<", None, "uniform", where)
    return filters[names]


def _split_by_edge_type(graph, start: SeedNodes, sample: LayerSample) -> SampledSubgraph:
    """A layer sampled over whole in-edge ranges (one fanout for every edge type), split
    into GraphBolt's per-edge-type layout."""
    schema = graph.schema
    starts = list(accumulate(start.counts, initial=0))
    destination = torch.repeat_interleave(torch.arange(start.nodes.numel()), sample.indptr.diff())
    types = graph.type_per_edge[sample.edge_ids].to(torch.int64)
    csc, edge_ids, weights = {}, {}, {}
    for t, (etype, (src_type, dst_type)) in enumerate(zip(schema.edge_types, schema.edge_type_ends)):
        mask = types == t
        per_dst = torch.bincount(destination[mask] - starts[dst_type], minlength=start.counts[dst_type])
        indptr = torch.cat([per_dst.new_zeros(1), per_dst.cumsum(0)])
        csc[etype] = CSCFormat(indptr, sample.indices[mask] - schema.node_type_offset[src_type])
        edge_ids[etype] = graph.sampled_edge_ids(sample.edge_ids[mask])
        weights[etype] = None if sample.edge_weights is None else sample.edge_weights[mask]
    return SampledSubgraph(csc, None, None, edge_ids, None if sample.edge_weights is None else weights)


def _graph_fanouts(fanouts, graph, where: str) -> list:
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
