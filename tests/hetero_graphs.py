"""Typed test graphs.

``hetero_graph`` builds a random typed graph with :meth:`CSCGraph.from_hetero_edges` and
keeps the input edge lists, so a sampled edge ``(etype, type-local edge id)`` can be
checked against the edge the user gave (``sampling_checks.check_batch``).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple  # noqa: F401

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
