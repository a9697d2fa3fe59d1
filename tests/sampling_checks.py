"""Brute-force checks of sampled MiniBatches, one checker for typed and untyped graphs.

An untyped batch is checked as the one-type case (GraphBolt's ``"_N"`` / ``"_N:_E:_N"``,
the graph's ``schema``): :func:`typed_view` lays it out as a typed batch, so every
property is asserted by the same code. ``edges`` are the graph's input edge lists per
edge type, ``(src, dst)`` in type-local ids, indexed by the user's edge ids.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Tuple

import torch

from graphpipe import CSCGraph, SampledSubgraph
from graphpipe.graph.edge_types import parse_edge_type
from hetero_graphs import hetero_graph, random_typed_edges

NODE, EDGE = "_N", "_N:_E:_N"  # the one type of an untyped graph
KINDS = ("untyped", "typed")


def untyped_graph(seed: int = 0, num_nodes: int = 60, max_degree: int = 25):
    """``(graph, edges)``: a random untyped graph with skewed in-degrees (distinct sources
    per node) and a float32 ``"w"`` edge attribute (a fifth zeros), built from a shuffled
    COO list (user edge ids are not CSC positions)."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = random_typed_edges(num_nodes, num_nodes, max_degree, gen)
    w = torch.rand(src.numel(), generator=gen) + 0.1
    w[torch.rand(src.numel(), generator=gen) < 0.2] = 0.0
    graph = CSCGraph.from_coo(src, dst, num_nodes, edge_attributes={"w": w})
    return graph, {EDGE: (src, dst)}


def graph_and_edges(kind: str, seed: int = 0) -> Tuple[CSCGraph, Dict[str, Tuple[torch.Tensor, torch.Tensor]]]:
    return untyped_graph(seed) if kind == "untyped" else hetero_graph(seed=seed)


def user_weights(graph: CSCGraph, name: str = "w") -> Dict[str, torch.Tensor]:
    """``{edge type: [E_t]}`` the edge attribute ``name`` in the user's edge id order."""
    schema, attr = graph.schema, graph.edge_attributes[name]
    ids = graph.map_edge_ids(torch.arange(graph.total_num_edges))
    types = graph.type_per_edge.to(torch.int64) if graph.is_heterogeneous else torch.zeros(graph.total_num_edges, dtype=torch.int64)
    out = {}
    for t, etype in enumerate(schema.edge_types):
        mask = types == t
        per_type = torch.empty(int(mask.sum()))
        per_type[ids[mask]] = attr[mask]
        out[etype] = per_type
    return out


def seed_items(kind: str, edges, task: str, count: int = 40) -> dict:
    """Seeds of a task on a graph kind: node ids, or ``[N, 2]`` pairs that are edges (per
    edge type on a typed graph: two of them), as ItemSet fields by type (untyped: one)."""
    if task == "node":
        if kind == "untyped":
            return {NODE: torch.arange(count)}
        return {"paper": torch.arange(0, 40, 2), "author": torch.arange(0, 30, 3)}
    etypes = [EDGE] if kind == "untyped" else ["author:writes:paper", "paper:cites:paper"]
    return {t: torch.stack(edges[t], 1)[:count] for t in etypes}


def typed_view(minibatch):
    """``minibatch`` in the typed layout (an untyped one as the one-type case)."""
    if minibatch.is_heterogeneous:
        return minibatch
    subgraphs = [
        SampledSubgraph(
            {EDGE: sg.sampled_csc},
            {NODE: sg.original_row_node_ids},
            {NODE: sg.original_column_node_ids},
            {EDGE: sg.original_edge_ids},
            None if sg.edge_weights is None else {EDGE: sg.edge_weights},
        )
        for sg in minibatch.sampled_subgraphs
    ]
    link = minibatch.seeds.dim() == 2
    return replace(
        minibatch,
        seeds={EDGE if link else NODE: minibatch.seeds},
        sampled_subgraphs=subgraphs,
        input_nodes={NODE: minibatch.input_nodes},
        compacted_seeds=None if minibatch.compacted_seeds is None else {EDGE: minibatch.compacted_seeds},
    )


def in_degrees(graph, edges, etype: str, weights=None, excluded=None) -> torch.Tensor:
    """``[num nodes of the destination type]`` int64 in-degree of type ``etype`` (edges of
    positive weight only with ``weights``; without the ``excluded`` edge ids)."""
    schema = graph.schema
    dst = edges[etype][1]
    keep = torch.ones(dst.numel(), dtype=torch.bool) if weights is None else weights[etype] > 0
    if excluded is not None and etype in excluded:
        keep[excluded[etype]] = False
    d = schema.node_type_id[parse_edge_type(etype)[2]]
    return torch.bincount(dst[keep], minlength=schema.node_type_offset[d + 1] - schema.node_type_offset[d])


def expected_count(degree: int, fanout: int, replace: bool) -> int:
    """Sampled in-edges of one (destination, edge type) with ``degree`` candidates."""
    if fanout == 0 or degree == 0:
        return 0
    if fanout == -1:
        return degree
    return fanout if replace else min(fanout, degree)


def sampled_edges(minibatch, layer: int) -> Dict[str, Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per edge type of layer ``layer`` of a typed (view of a) batch: ``(src, dst,
    edge_ids, dst_position)``, type-local node ids, the edge ids and each edge's column."""
    sub = minibatch.sampled_subgraphs[layer]
    out = {}
    for etype, csc in sub.sampled_csc.items():
        s, _, d = parse_edge_type(etype)
        columns = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
        out[etype] = (sub.original_row_node_ids[s][csc.indices], sub.original_column_node_ids[d][columns], sub.original_edge_ids[etype], columns)
    return out


def _check_seed_layer(schema, minibatch, columns: Dict[str, torch.Tensor]) -> None:
    """The last layer's destinations: the seeds of each node type, or for link seeds each
    type's distinct endpoints ascending, to which ``compacted_seeds`` map the pairs."""
    seeds = minibatch.seeds
    if minibatch.compacted_seeds is None:
        for t in schema.node_types:
            assert torch.equal(columns[t], seeds.get(t, torch.empty(0, dtype=torch.int64)).to(torch.int64)), t
        return
    endpoints = {t: [] for t in schema.node_types}
    for etype, pairs in seeds.items():
        s, _, d = parse_edge_type(etype)
        local = minibatch.compacted_seeds[etype]
        assert local.shape == pairs.shape and local.dtype == torch.int64
        for column, node_type in enumerate([s] + [d] * (pairs.size(1) - 1)):  # (untyped hyperlinks: one type)
            endpoints[node_type].append(pairs[:, column])
            assert torch.equal(columns[node_type][local[:, column]], pairs[:, column])
    for t, ids in endpoints.items():
        expected = torch.unique(torch.cat(ids)) if ids else torch.empty(0, dtype=torch.int64)
        assert torch.equal(columns[t], expected), t


def seed_edge_ids(edges, seeds: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """``{edge type: ids}`` of the edges ``u -> v`` of each seed pair ``(u, v)`` of its type
    (``seeds`` as :func:`typed_view` gives them)."""
    out = {}
    for etype, pairs in seeds.items():
        src, dst = edges[etype]
        n = int(max(src.max(), dst.max(), pairs.max())) + 1
        out[etype] = torch.isin(src * n + dst, pairs[:, 0] * n + pairs[:, 1]).nonzero().flatten()
    return out


def check_batch(
    graph: CSCGraph,
    edges,
    minibatch,
    edge_type_fanouts: List[List[int]],
    replace: bool = False,
    weights: Optional[Dict[str, torch.Tensor]] = None,
    exact_counts: bool = True,
    excluded: Optional[Dict[str, torch.Tensor]] = None,
) -> None:
    """Assert GraphBolt's layout and the sampled edges of every layer of ``minibatch``.

    Every edge exists in ``edges`` with its type and edge id and none of ``excluded``
    (edge type -> edge ids) is sampled; per node type a layer's destinations are a
    prefix of its unique sources (the new ones ascending) and the next layer's sources,
    ids in range of their type; the last layer's are the seeds (link seeds: their
    distinct endpoints, which ``compacted_seeds`` map back to the pairs); counts per
    (destination, edge type) follow the fanouts (without the excluded edges; in ``"pyg"``
    layout only for the destinations the layer samples); no edge twice without replacement."""
    schema = graph.schema
    mb = typed_view(minibatch)
    subs = mb.sampled_subgraphs
    assert len(subs) == len(edge_type_fanouts)
    for i, sub in enumerate(subs):
        check_layer_nodes(schema, sub)
        if i + 1 < len(subs):
            for t in schema.node_types:
                assert torch.equal(sub.original_column_node_ids[t], subs[i + 1].original_row_node_ids[t]), (i, t)
        else:
            _check_seed_layer(schema, mb, sub.original_column_node_ids)
        _check_layer_edges(graph, edges, mb, i, edge_type_fanouts[i], replace, weights, exact_counts, excluded)
    for t in schema.node_types:
        assert torch.equal(mb.input_nodes[t], subs[0].original_row_node_ids[t])


def check_layer_nodes(schema, sub) -> None:
    """Per node type, a layer's destinations are a prefix of its unique sources, the new
    ones ascending, every id within its type's range."""
    assert set(sub.original_row_node_ids) == set(schema.node_types) == set(sub.original_column_node_ids)
    assert set(sub.sampled_csc) == set(schema.edge_types) == set(sub.original_edge_ids)
    offsets = schema.node_type_offset
    for n, t in enumerate(schema.node_types):
        rows, cols = sub.original_row_node_ids[t], sub.original_column_node_ids[t]
        assert rows.dtype == cols.dtype == torch.int64
        assert torch.equal(rows[: cols.numel()], cols), t
        assert torch.unique(rows).numel() == rows.numel(), t
        new = rows[cols.numel() :]
        assert bool((new[1:] > new[:-1]).all()), "new nodes ascending"
        assert rows.numel() == 0 or (int(rows.min()) >= 0 and int(rows.max()) < offsets[n + 1] - offsets[n])


def check_layers(graph: CSCGraph, edges, minibatch, edge_type_fanouts: List[List[int]], excluded=None) -> None:
    """:func:`check_batch` for each layer alone (cooperative batches: a layer's
    destinations are the nodes this rank owns, not the next layer's sources)."""
    mb = typed_view(minibatch)
    assert len(mb.sampled_subgraphs) == len(edge_type_fanouts)
    for i, sub in enumerate(mb.sampled_subgraphs):
        check_layer_nodes(graph.schema, sub)
        _check_layer_edges(graph, edges, mb, i, edge_type_fanouts[i], False, None, True, excluded)


def _check_layer_edges(graph, edges, mb, i, fanouts, replace, weights, exact_counts, excluded) -> None:
    schema = graph.schema
    subs = mb.sampled_subgraphs
    sub = subs[i]
    found = sampled_edges(mb, i)
    for t_id, etype in enumerate(schema.edge_types):
        s, _, d = parse_edge_type(etype)
        csc = sub.sampled_csc[etype]
        cols = sub.original_column_node_ids[d]
        assert csc.indptr.dtype == torch.int64 and csc.indices.dtype == torch.int64
        assert csc.indptr.numel() == cols.numel() + 1 and int(csc.indptr[0]) == 0
        assert csc.indices.numel() == int(csc.indptr[-1]) == sub.original_edge_ids[etype].numel()
        assert csc.indices.numel() == 0 or int(csc.indices.max()) < sub.original_row_node_ids[s].numel()
        src, dst, eids, columns = found[etype]
        assert torch.equal(edges[etype][0][eids], src), etype
        assert torch.equal(edges[etype][1][eids], dst), etype
        if weights is not None:
            assert bool((weights[etype][eids] > 0).all()), f"{etype}: a zero-weight edge was sampled"
        if excluded is not None and etype in excluded:
            assert not bool(torch.isin(eids, excluded[etype]).any()), f"{etype}: an excluded edge was sampled"
        degree = in_degrees(graph, edges, etype, weights, excluded)[cols]
        expected = torch.tensor([expected_count(int(g), fanouts[t_id], replace) for g in degree], dtype=torch.int64)
        if mb.layout == "pyg" and i + 1 < len(subs):
            expected[: subs[i + 1].original_column_node_ids[d].numel()] = 0  # sampled at an earlier hop
        counts = csc.indptr.diff()
        if exact_counts:
            assert torch.equal(counts, expected), (i, etype, counts, expected)
        else:
            assert bool((counts <= torch.where(expected > 0, degree, 0)).all()), (i, etype)
        if not replace:
            pairs = columns * (int(eids.max()) + 1 if eids.numel() else 1) + eids
            assert torch.unique(pairs).numel() == pairs.numel(), f"{etype}: an edge sampled twice"


def check_disjoint_batch(graph: CSCGraph, edges, minibatch, edge_type_fanouts: List[List[int]]) -> None:
    """A disjoint (``disjoint=True``) batch, read through ``to_pyg()`` as PyG's
    NeighborLoader gives it: every subtree is a valid NeighborLoader sample of its seed.
    Seed ``s`` is node ``s`` of its type with ``batch == s`` (node seeds; link seeds: both
    ends of pair ``s`` have ``batch == s``, PyG's disjoint LinkNeighborLoader); no (subtree, node) twice;
    every edge exists (by its ``e_id``) and joins two nodes of one subtree, going from a
    node of hop ``<= k`` to one first reached at hop ``k - 1``; each node of hops ``< L``
    has ``min(fanout, in-degree)`` distinct in-edges of each edge type (at most that for
    a pair's endpoint, which skips the batch's seed edges); each other node is reached by
    an edge of its subtree."""
    data = minibatch.to_pyg()
    typed = minibatch.is_heterogeneous
    schema, num_layers = graph.schema, len(edge_type_fanouts)
    node_store = (lambda t: data[t]) if typed else (lambda t: data)
    seeds = typed_view(minibatch).seeds
    hops, reached = {}, {}
    link = minibatch.is_link_batch  # a pair's two ends are two subtrees with one `batch` (PyG's)
    endpoints = {t: torch.empty(0, dtype=torch.int64) for t in schema.node_types}  # link: each type's, every subtree's rows of them
    for etype, pairs in seeds.items() if link else ():
        s, _, d = parse_edge_type(etype)
        endpoints[s], endpoints[d] = torch.cat([endpoints[s], pairs[:, 0]]), torch.cat([endpoints[d], pairs[:, 1]])
    for t in schema.node_types:
        store = node_store(t)
        keys = store.batch * graph.total_num_nodes + store.n_id
        assert link or keys.unique().numel() == keys.numel(), f"a node twice in one subtree ({t})"
        hops[t] = torch.repeat_interleave(torch.arange(num_layers + 1), torch.tensor(store.num_sampled_nodes))
        reached[t] = hops[t] == 0
    offset = 0  # subtrees are numbered over the seeds type-major (the graph's node type order)
    for t in (t for t in schema.node_types if t in seeds and not link):
        ids, store = seeds[t], node_store(t)
        assert torch.equal(store.n_id[: ids.numel()], ids) and store.batch_size == ids.numel()
        assert torch.equal(store.batch[: ids.numel()], torch.arange(offset, offset + ids.numel()))
        offset += ids.numel()
    for t_id, etype in enumerate(schema.edge_types):
        s, _, d = parse_edge_type(etype)
        store = data[tuple(etype.split(":"))] if typed else data
        src, dst = store.edge_index
        src_store, dst_store = node_store(s), node_store(d)
        assert torch.equal(src_store.batch[src], dst_store.batch[dst]), "an edge between two subtrees"
        assert torch.equal(edges[etype][0][store.e_id], src_store.n_id[src])
        assert torch.equal(edges[etype][1][store.e_id], dst_store.n_id[dst])
        edge_hop = torch.repeat_interleave(torch.arange(1, num_layers + 1), torch.tensor(store.num_sampled_edges))
        assert torch.equal(hops[d][dst], edge_hop - 1) and bool((hops[s][src] <= edge_hop).all())
        reached[s][src[hops[s][src] == edge_hop]] = True
        degree = in_degrees(graph, edges, etype)
        for node in range(dst_store.n_id.numel()):
            hop = int(hops[d][node])
            if hop == num_layers:
                continue
            mine = store.e_id[dst == node]
            assert mine.unique().numel() == mine.numel()
            fanout = edge_type_fanouts[num_layers - 1 - hop][t_id]
            expected = expected_count(int(degree[dst_store.n_id[node]]), fanout, False)
            if link and bool(torch.isin(dst_store.n_id[node], endpoints[d])):  # skips the batch's seed edges (exclude_seed_edges)
                assert mine.numel() <= expected
            else:
                assert mine.numel() == expected
    assert all(bool(r.all()) for r in reached.values()), "a node no edge of its subtree reaches"
