"""Brute-force checks of temporal batches (typed and untyped, both layouts).

Every sampled edge of every layer must be valid for its ROOT seed (the seed whose row or
subtree it hangs from): the source's node time and the edge's time (whichever are used;
an untimed node type constrains nothing) in the window ``[t - w + 1, t]`` (``"<="``) or
``[t - w + 1, t - 1]`` (``"<"``). Each sampled destination gets ``min(fanout, valid)``
in-edges (``"last"``: exactly the latest ones, ties to the larger edge id).
"""

from __future__ import annotations

import torch
from hetero_graphs import NUM_NODES, hetero_graph
from sampling_checks import EDGE, NODE, typed_view, untyped_graph

import graphpipe as gp
from graphpipe.graph.edge_types import parse_edge_type

UNTIMED = torch.iinfo(torch.int64).min
FANOUTS = [3, 2]


def timed_graph(kind: str, sort, seed: int = 0):
    """``(graph, edges, node_time, edge_time)``: node times per node type (typed: "venue"
    has none) ``"nts"``, edge times per edge type in user edge id order ``"ets"``; ``sort``:
    False, or the sampler options naming the times to sort by."""
    gen = torch.Generator().manual_seed(seed + 7)
    if kind == "untyped":
        base, edges = untyped_graph(seed)
        num_nodes = {NODE: base.total_num_nodes}
    else:
        base, edges = hetero_graph(seed=seed)
        num_nodes = dict(NUM_NODES)
    node_time = {t: torch.randint(0, 100, (n,), generator=gen) for t, n in num_nodes.items() if t != "venue"}
    edge_time = {e: torch.randint(0, 100, (src.numel(),), generator=gen) for e, (src, _) in edges.items()}
    if kind == "untyped":
        src, dst = edges[EDGE]
        graph = gp.CSCGraph.from_coo(src, dst, num_nodes[NODE], edge_attributes={"w": base.edge_attributes["w"].new_ones(src.numel()), "ets": edge_time[EDGE]}, node_attributes={"nts": node_time[NODE]})
    else:
        graph = gp.CSCGraph.from_hetero_edges({e: torch.stack(p) for e, p in edges.items()}, num_nodes, edge_attributes={"ets": edge_time}, node_attributes={"nts": node_time})
    if sort:
        graph = graph.sort_by_time(sort.get("node_timestamp_attr_name"), sort.get("edge_timestamp_attr_name"))
    return graph, edges, node_time, edge_time


def items(kind: str, edges, task: str, gen: torch.Generator, layout: str = "block"):
    """Seeds with times in [20, 100): node ids (typed: papers and authors) or edges as pairs
    (typed: of three edge types; pyg layout: of one, as PyG's LinkNeighborLoader)."""
    if task == "node":
        seeds = {NODE: torch.arange(40)} if kind == "untyped" else {"paper": torch.arange(0, 40, 2), "author": torch.arange(0, 30, 3)}
    else:
        types = ["author:writes:paper", "paper:cites:paper", "paper:written_by:author"] if layout == "block" else ["paper:written_by:author"]
        types = [EDGE] if kind == "untyped" else types
        seeds = {t: torch.stack(edges[t], 1)[:30] for t in types}
    sets = {t: gp.ItemSet((s, torch.randint(20, 100, (s.size(0),), generator=gen)), names=("seeds", "timestamp")) for t, s in seeds.items()}
    return sets[EDGE if task == "link" else NODE] if kind == "untyped" else gp.HeteroItemSet(sets)


def window(t: torch.Tensor, comparison: str, width):
    hi = t if comparison == "<=" else t - 1
    lo = torch.full_like(t, UNTIMED) if width is None else t - width + 1
    return lo, hi


def valid_mask(etype, eids, lo, hi, uses, edges, node_time, edge_time, schema):
    """Which edges ``eids`` of ``etype`` are valid for windows ``lo``/``hi`` (one per edge)."""
    s = parse_edge_type(etype)[0]
    ok = torch.ones(eids.numel(), dtype=torch.bool)
    if "node" in uses and s in node_time:
        t = node_time[s][edges[etype][0][eids]]
        ok &= (t >= lo) & (t <= hi)
    if "edge" in uses:
        t = edge_time[etype][eids]
        ok &= (t >= lo) & (t <= hi)
    return ok


def time_key(etype, eids, uses, edges, node_time, edge_time):
    s = parse_edge_type(etype)[0]
    key = torch.full((eids.numel(),), UNTIMED)
    if "node" in uses and s in node_time:
        key = torch.maximum(key, node_time[s][edges[etype][0][eids]])
    if "edge" in uses:
        key = torch.maximum(key, edge_time[etype][eids])
    return key


def seed_row_times(tv, layout):
    """Per node type, the time of each last-layer destination row (block) or of each
    subtree (pyg), from the batch's ``timestamp``."""
    if tv.compacted_seeds is None:
        return {t: tv.timestamp[t] for t in tv.seeds}
    out = {}
    for etype, local in tv.compacted_seeds.items():
        s, _, d = parse_edge_type(etype)
        for column, node_type in enumerate((s, d)):
            rows = out.setdefault(node_type, {})
            for pair, row in enumerate(local[:, column].tolist()):
                rows[row] = int(tv.timestamp[etype][pair])
    return {t: torch.tensor([rows[i] for i in range(len(rows))]) for t, rows in out.items()}


def check_temporal_batch(graph, edges, node_time, edge_time, mb, cfg):
    """Assert every sampled edge valid for its root, counts ``min(fanout, valid)``, and
    ``last`` = the latest valid in-edges; returns the number of edges checked."""
    tv = typed_view(mb)
    if not mb.is_heterogeneous:
        tv.timestamp = {EDGE if mb.seeds.dim() == 2 else NODE: mb.timestamp}
    schema, uses, layout = graph.schema, cfg["uses"], cfg["layout"]
    node_types = [NODE] if not graph.is_heterogeneous else list(schema.node_types)
    seeds_time = seed_row_times(tv, layout)
    if layout == "pyg":
        subtrees = {NODE: mb.subtree_ids} if not mb.is_heterogeneous else mb.subtree_ids
        if tv.compacted_seeds is None:  # subtrees number the node seeds type-major
            flat = torch.cat([tv.timestamp[t] for t in node_types if t in tv.timestamp])
            row_time = {t: flat[subtrees[t]] for t in node_types}
        else:  # one seed edge type, no negatives: PyG's batch is the pair's index
            pair_time = torch.cat([tv.timestamp[etype] for etype in tv.seeds])
            row_time = {t: pair_time[subtrees[t]] for t in node_types}
    else:
        row_time = {t: seeds_time.get(t, torch.empty(0, dtype=torch.int64)) for t in node_types}
    checked, num_layers = 0, len(tv.sampled_subgraphs)
    frontier_start = {t: 0 for t in node_types}
    for layer in reversed(range(num_layers)):
        sub = tv.sampled_subgraphs[layer]
        new_time = {t: row_time[t].clone() for t in node_types} if layout == "pyg" else {}
        src_rows = {t: sub.original_row_node_ids[t].numel() for t in node_types}
        if layout == "block":
            for t in node_types:
                n_dst = sub.original_column_node_ids[t].numel()
                new_time[t] = torch.cat([row_time[t][:n_dst], torch.full((src_rows[t] - n_dst,), UNTIMED)])
        for etype, csc in sub.sampled_csc.items():
            s, _, d = parse_edge_type(etype)
            cols = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
            eids = sub.original_edge_ids[etype].to(torch.int64)
            root_t = row_time[d][cols]
            assert torch.equal(edges[etype][0][eids], sub.original_row_node_ids[s][csc.indices])
            assert torch.equal(edges[etype][1][eids], sub.original_column_node_ids[d][cols])
            lo, hi = window(root_t, cfg["comparison"], cfg["window"])
            assert bool(valid_mask(etype, eids, lo, hi, uses, edges, node_time, edge_time, schema).all()), f"an invalid edge ({etype})"
            if layout == "block":  # every new row is made by exactly one edge and inherits its root
                new = csc.indices >= sub.original_column_node_ids[s].numel()
                assert bool((new_time[s][csc.indices[new]] == UNTIMED).all())
                new_time[s][csc.indices[new]] = root_t[new]
            else:
                assert torch.equal(row_time[s][csc.indices], root_t), "an edge between two subtrees"
            fanout = cfg["fanouts"][layer]
            all_eids = torch.arange(edges[etype][0].numel())
            for col in range(frontier_start[d], csc.indptr.numel() - 1):
                mine = all_eids[edges[etype][1] == sub.original_column_node_ids[d][col]]
                lo1, hi1 = window(row_time[d][col].expand(mine.numel()), cfg["comparison"], cfg["window"])
                valid = mine[valid_mask(etype, mine, lo1, hi1, uses, edges, node_time, edge_time, schema)]
                got = eids[csc.indptr[col] : csc.indptr[col + 1]]
                free = not (("node" in uses and s in node_time) or "edge" in uses)
                expected = mine if free else valid
                assert got.numel() == min(fanout, expected.numel()), (etype, col, got, expected)
                assert got.unique().numel() == got.numel()
                if cfg["strategy"] == "last" and not free:
                    key = time_key(etype, expected, uses, edges, node_time, edge_time)
                    order = sorted(range(expected.numel()), key=lambda j: (int(key[j]), int(expected[j])))
                    latest = sorted(int(expected[j]) for j in order[len(order) - got.numel() :])
                    assert sorted(got.tolist()) == latest
            checked += eids.numel()
        if layout == "block":
            assert all(bool((new_time[t] != UNTIMED).all()) for t in node_types), "a row no edge made"
        else:
            frontier_start = {t: sub.original_column_node_ids[t].numel() for t in node_types}
        row_time = new_time
    return checked


USES = {"node": {"node_timestamp_attr_name": "nts"}, "edge": {"edge_timestamp_attr_name": "ets"},
        "both": {"node_timestamp_attr_name": "nts", "edge_timestamp_attr_name": "ets"}}  # fmt: skip
