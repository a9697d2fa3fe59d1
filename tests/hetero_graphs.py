"""Typed test graphs and the property checks the heterogeneous sampling tests share.

``hetero_graph`` builds a random typed graph with :meth:`CSCGraph.from_hetero_edges` and
keeps the input edge lists, so a sampled edge ``(etype, type-local edge id)`` can be
checked against the edge the user gave. ``check_typed_batch`` asserts the layout of a
typed MiniBatch (GraphBolt's) and the sampled counts per destination and edge type.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch

from graphpipe import CSCGraph
from graphpipe.graph.edge_types import parse_edge_type

NUM_NODES = {"author": 30, "paper": 40, "venue": 5}
EDGE_TYPES = ["author:writes:paper", "paper:cites:paper", "paper:written_by:author", "venue:hosts:paper"]


def uniform_typed_edges(num_nodes: Dict[str, int], num_edges: Dict[str, int], gen: torch.Generator) -> Dict[str, torch.Tensor]:
    """``{etype: [2, m]}`` int64 edges with uniform random endpoints of each edge type's
    node types (parallel edges and self-loops allowed), ``num_edges[etype]`` of each type."""
    edges = {}
    for etype, m in num_edges.items():
        src, _, dst = parse_edge_type(etype)
        edges[etype] = torch.stack(
            [torch.randint(num_nodes[src], (m,), generator=gen), torch.randint(num_nodes[dst], (m,), generator=gen)]
        )
    return edges


def typed_edges(
    graph: CSCGraph, edge_types: Optional[List[str]] = None
) -> Dict[str, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``{etype: (src, dst, edge_ids)}`` of a typed graph (of ``edge_types``, default all):
    every edge of the type in CSC order, endpoints as type-local int64 ids, ``edge_ids``
    its ids within the type."""
    offsets, type_id = graph.node_type_offset.tolist(), graph.node_type_to_id
    src, dst = graph.edge_index()
    per_edge = graph.type_per_edge.to(torch.int64)
    out = {}
    for etype in edge_types or graph.edge_types:
        src_type, _, dst_type = parse_edge_type(etype)
        at = per_edge == graph.edge_type_to_id[etype]
        ids = graph.map_edge_ids(torch.nonzero(at).view(-1))
        out[etype] = (src[at] - offsets[type_id[src_type]], dst[at] - offsets[type_id[dst_type]], ids)
    return out


def random_typed_edges(num_src: int, num_dst: int, max_degree: int, gen: torch.Generator, parallel: bool = False):
    """``(src, dst)`` int64 edge lists in a shuffled order: skewed in-degrees (some nodes
    none), distinct sources per destination unless ``parallel``."""
    src, dst = [], []
    for v in range(num_dst):
        d = int(max_degree * float(torch.rand((), generator=gen)) ** 2)
        if parallel:
            s = torch.randint(0, num_src, (d,), generator=gen)
        else:
            s = torch.randperm(num_src, generator=gen)[: min(d, num_src)]
        src.append(s)
        dst.append(torch.full((s.numel(),), v, dtype=torch.int64))
    src, dst = torch.cat(src), torch.cat(dst)
    order = torch.randperm(src.numel(), generator=gen)  # not grouped by target
    return src[order], dst[order]


def hetero_graph(seed: int = 0, zero_weights: bool = True, parallel: bool = False):
    """``(graph, edges)``: a random typed graph over ``NUM_NODES`` / ``EDGE_TYPES`` with a
    float32 edge attribute ``"w"`` (about a fifth zeros when ``zero_weights``) and an
    int64 ``"eid"`` (the edge's id within its type), and the input edge lists
    ``{etype: (src, dst)}`` in type-local ids."""
    gen = torch.Generator().manual_seed(seed)
    max_degree = {"author:writes:paper": 12, "paper:cites:paper": 20, "paper:written_by:author": 8, "venue:hosts:paper": 3}
    edges, weights, eids = {}, {}, {}
    for etype in EDGE_TYPES:
        s, _, d = parse_edge_type(etype)
        edges[etype] = random_typed_edges(NUM_NODES[s], NUM_NODES[d], max_degree[etype], gen, parallel)
        w = torch.rand(edges[etype][0].numel(), generator=gen) + 0.1
        if zero_weights:
            w[torch.rand(w.numel(), generator=gen) < 0.2] = 0.0
        weights[etype] = w
        eids[etype] = torch.arange(w.numel())
    graph = CSCGraph.from_hetero_edges(edges, NUM_NODES, edge_attributes={"w": weights, "eid": eids})
    return graph, edges


def typed_in_degrees(edges, num_nodes, etype: str, weights: Optional[Dict[str, torch.Tensor]] = None) -> torch.Tensor:
    """``[num_nodes[dst]]`` int64 in-degree of type ``etype`` (positive-weight edges only
    when ``weights`` is given)."""
    dst = edges[etype][1]
    keep = torch.ones(dst.numel(), dtype=torch.bool) if weights is None else weights[etype] > 0
    return torch.bincount(dst[keep], minlength=num_nodes[parse_edge_type(etype)[2]])


def expected_count(degree: int, fanout: int, replace: bool) -> int:
    """Sampled in-edges of one (destination, edge type) with ``degree`` candidates."""
    if fanout == 0 or degree == 0:
        return 0
    if fanout == -1:
        return degree
    return fanout if replace else min(fanout, degree)


def sampled_edges(minibatch, layer: int) -> Dict[str, Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per edge type of layer ``layer``: ``(src, dst, edge_ids, dst_position)`` with
    type-local node ids, the type-local edge ids and each edge's destination column."""
    sub = minibatch.sampled_subgraphs[layer]
    out = {}
    for etype, csc in sub.sampled_csc.items():
        s, _, d = parse_edge_type(etype)
        columns = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
        out[etype] = (
            sub.original_row_node_ids[s][csc.indices],
            sub.original_column_node_ids[d][columns],
            sub.original_edge_ids[etype],
            columns,
        )
    return out


def check_typed_batch(
    graph: CSCGraph,
    edges,
    minibatch,
    edge_type_fanouts: List[List[int]],
    replace: bool = False,
    weights: Optional[Dict[str, torch.Tensor]] = None,
    exact_counts: bool = True,
) -> None:
    """Assert GraphBolt's typed layout and the sampled edges of every layer of ``minibatch``.

    Every edge exists in ``edges`` with its type and type-local edge id; per type, a
    layer's destinations are a prefix of its unique sources and the next layer's
    sources; counts per (destination, edge type) follow the fanouts (in ``"pyg"`` layout
    only for the destinations the layer samples); no edge twice without replacement."""
    num_nodes = graph.num_nodes_per_type
    node_types, edge_types = graph.node_types, graph.edge_types
    subs = minibatch.sampled_subgraphs
    assert len(subs) == len(edge_type_fanouts)
    pyg = minibatch.layout == "pyg"
    for i, sub in enumerate(subs):
        assert set(sub.original_row_node_ids) == set(node_types) == set(sub.original_column_node_ids)
        assert set(sub.sampled_csc) == set(edge_types) == set(sub.original_edge_ids)
        for t in node_types:
            rows, cols = sub.original_row_node_ids[t], sub.original_column_node_ids[t]
            assert rows.dtype == cols.dtype == torch.int64
            assert torch.equal(rows[: cols.numel()], cols), (i, t)
            assert torch.unique(rows).numel() == rows.numel(), (i, t)
            new = rows[cols.numel() :]
            assert bool((new[1:] > new[:-1]).all()), "new nodes ascending"
            assert rows.numel() == 0 or int(rows.max()) < num_nodes[t]
            if i + 1 < len(subs):
                assert torch.equal(cols, subs[i + 1].original_row_node_ids[t]), (i, t)
            else:
                seeds = minibatch.seeds.get(t, torch.empty(0, dtype=torch.int64))
                assert torch.equal(cols, seeds.to(torch.int64)), t
        if i == 0:
            for t in node_types:
                assert torch.equal(minibatch.input_nodes[t], sub.original_row_node_ids[t])
        found = sampled_edges(minibatch, i)
        for t_id, etype in enumerate(edge_types):
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
            fanout = edge_type_fanouts[i][t_id]
            degree = typed_in_degrees(edges, num_nodes, etype, weights)[cols]
            expected = torch.tensor([expected_count(int(g), fanout, replace) for g in degree], dtype=torch.int64)
            if pyg and i + 1 < len(subs):
                expected[: subs[i + 1].original_column_node_ids[d].numel()] = 0  # sampled at an earlier hop
            counts = csc.indptr.diff()
            if exact_counts:
                assert torch.equal(counts, expected), (i, etype, counts, expected)
            else:
                assert bool((counts <= torch.where(expected > 0, degree, 0)).all()), (i, etype)
            if not replace:
                pairs = columns * (int(eids.max()) + 1 if eids.numel() else 1) + eids
                assert torch.unique(pairs).numel() == pairs.numel(), f"{etype}: an edge sampled twice"
