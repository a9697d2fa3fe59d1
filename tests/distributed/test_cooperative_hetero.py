"""Cooperative minibatching on typed graphs, 2 and 3 gloo ranks.

Each rank samples (and fetches features for) the global batches cooperatively, twice
(determinism), and returns what it got; here the union over ranks of every layer's
typed edges is compared with one process sampling the same global batches with the
same seed, and each rank's share is checked on its own (edges exist with their type,
destinations owned, typed layout well formed, labels and features of the right nodes).
"""

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.distributed import Partition
from graphpipe.distributed.cooperative import fetch_node_features_cooperatively

from dist_harness import run_ranks, values

NUM_NODES = {"author": 70, "paper": 120, "venue": 6}
# Layer 0 samples two edge types with other fanouts (two kernel runs), and none of one.
FANOUTS = [
    {"author:writes:paper": 2, "paper:cites:paper": 3, "paper:in:venue": 1, "paper:written_by:author": 2, "venue:has:paper": 0},
    2,
]
NUM_ITEMS = {"paper": 60, "author": 30}
FEATURE_DIMS = {"author": 2, "paper": 3, "venue": 1}
KINDS = ("neighbor", "labor")

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.usefixtures("kernels_for_child_processes"),
]


def typed_edges(seed=0):
    """{etype: (src, dst)} type-local ids; sources concentrate on a few hubs so that the
    ranks' neighbourhoods overlap, destinations have 0 to ~8 in-edges per edge type."""
    g = torch.Generator().manual_seed(seed)
    edges = {}
    for etype in FANOUTS[0]:
        src_type, _, dst_type = parse_edge_type(etype)
        num_dst, num_src = NUM_NODES[dst_type], NUM_NODES[src_type]
        degrees = (9 * torch.rand(num_dst, generator=g) ** 2).to(torch.int64)
        dst = torch.repeat_interleave(torch.arange(num_dst), degrees)
        src = (num_src * torch.rand(dst.numel(), generator=g) ** 2).to(torch.int64)
        order = torch.randperm(dst.numel(), generator=g)  # type-local edge ids != CSC positions
        edges[etype] = (src[order], dst[order])
    return edges


def typed_graph() -> gp.CSCGraph:
    return gp.CSCGraph.from_hetero_edges(typed_edges(), NUM_NODES)


def feature_tables():
    """{ntype: [n, dim]} float32, row ``v`` = ``1000 * type index + v`` plus column offsets."""
    return {
        t: (1000 * i + torch.arange(n, dtype=torch.float32))[:, None] + torch.arange(FEATURE_DIMS[t])
        for i, (t, n) in enumerate(sorted(NUM_NODES.items()))
    }


def items() -> gp.HeteroItemSet:
    """Papers labelled ``10 * id`` (int64), authors ``(id, -id)`` (float32 rows)."""
    paper = torch.arange(NUM_ITEMS["paper"])
    author = torch.arange(NUM_ITEMS["author"])
    return gp.HeteroItemSet(
        {
            "paper": gp.ItemSet((paper, 10 * paper), names=("seeds", "labels")),
            "author": gp.ItemSet((author, torch.stack([author, -author], 1).float()), names=("seeds", "labels")),
        }
    )


def make_sampler(kind, source, graph, cooperative):
    if kind == "neighbor":
        return source.sample_neighbor(graph, FANOUTS, seed=7, cooperative=cooperative)
    return source.sample_layer_neighbor(graph, FANOUTS, seed=7, cooperative=cooperative)


class _Feature:
    def __init__(self, table):
        self.table = table

    def read(self, ids):
        return self.table[ids]


class FakeTypedFetcher:
    """What fetch_node_features_cooperatively needs of the typed FeatureFetcher: its
    ``source``, ``features["node", ntype, name]`` and ``node_feature_keys`` {ntype: [names]}."""

    def __init__(self, source):
        self.source = source
        self.features = {("node", t, "feat"): _Feature(table) for t, table in feature_tables().items()}
        # Keys in another order than the graph's node types: the exchanges must not depend on it.
        self.node_feature_keys = {"venue": ["feat"], "paper": ["feat"], "author": ["feat"]}


def typed_store():
    """A FeatureStore of the typed tables when this checkout's store takes typed keys
    (the typed FeatureFetcher), else None: the tests then use FakeTypedFetcher only."""
    try:
        store = gp.FeatureStore(node_features={(t, "feat"): table for t, table in feature_tables().items()})
        store["node", "paper", "feat"]
    except (TypeError, KeyError, ValueError):
        return None
    return store


def triples(subgraph):
    """{etype: [num_edges, 3] (dst, src, type-local edge id)} type-local node ids."""
    out = {}
    for etype, csc in subgraph.sampled_csc.items():
        src_type, _, dst_type = parse_edge_type(etype)
        counts = csc.indptr[1:] - csc.indptr[:-1]
        dst = torch.repeat_interleave(subgraph.original_column_node_ids[dst_type], counts)
        src = subgraph.original_row_node_ids[src_type][csc.indices]
        out[etype] = torch.stack([dst, src, subgraph.original_edge_ids[etype]], 1)
    return out


def summary(mb):
    return {
        "batch_index": mb.batch_index,
        "seeds": mb.seeds,
        "labels": mb.labels,
        "item_ids": mb.item_ids,
        "input_nodes": mb.input_nodes,
        "triples": [triples(sg) for sg in mb.sampled_subgraphs],
        "subgraphs": [
            {field: getattr(sg, field) for field in ("sampled_csc", "original_row_node_ids", "original_column_node_ids", "original_edge_ids", "edge_weights")}
            for sg in mb.sampled_subgraphs
        ],
        "feat": mb.node_features,
    }


def exchange_error(mb, rank, world_size):
    """Typed cooperative_exchange, forward and backward, vs the single-process answer:
    tables ``T_t[v]``, rank ``r``'s loss ``sum (r + 1) * W_t[src] * out_t``, so owned row
    ``v``'s gradient is ``W_t[v] * (sum of r + 1 over the ranks that requested v)``."""
    tables = {t: x.double() for t, x in feature_tables().items()}
    weights = {t: torch.cos(x) for t, x in tables.items()}
    errors = []
    for layer, sg in enumerate(mb.sampled_subgraphs):
        h = {t: tables[t][plan.local_node_ids].clone().requires_grad_() for t, plan in sg.exchange.items()}
        out = gp.cooperative_exchange(mb, layer, h)
        src = sg.original_row_node_ids
        errors += [float((out[t].detach() - tables[t][src[t]]).abs().sum()) for t in out]
        # The loss leaves "venue" out on purpose: its gradient is zero, and no rank hangs.
        loss = sum(((rank + 1) * weights[t][src[t]] * out[t]).sum() for t in ("author", "paper"))
        loss.backward()
        requested = [None] * world_size
        dist.all_gather_object(requested, src)
        for t, rows in h.items():
            expected = torch.zeros_like(tables[t])
            if t != "venue":
                for r, ids in enumerate(requested):
                    expected.index_add_(0, ids[t], (r + 1) * weights[t][ids[t]])
            errors.append(float((rows.grad - expected[sg.exchange[t].local_node_ids]).abs().sum()))
    return max(errors)


def cooperative_rank(rank, world_size, batch_size, use_partition):
    graph = typed_graph()
    partition = contiguous_partition(graph, world_size) if use_partition else None
    out = {}
    for kind in KINDS:
        runs = []
        for _ in range(2):
            source = gp.DistributedItemSampler(
                items(), batch_size, shuffle=True, seed=5, drop_uneven_inputs=True, partition=partition
            )
            sampler = make_sampler(kind, source, graph, True)
            store = typed_store() if kind == "neighbor" and not runs else None
            if store is None:
                fetcher = FakeTypedFetcher(sampler)
                pipe = sampler
            else:  # the library's typed FeatureFetcher calls fetch_node_features_cooperatively
                pipe = sampler.fetch_feature(store, node_feature_keys=FakeTypedFetcher(None).node_feature_keys, cooperative=True)
            batches = []
            for mb in gp.DataLoader(pipe):
                if store is None:
                    mb.node_features = fetch_node_features_cooperatively(fetcher, mb, source)
                batches.append(summary(mb))
                if kind == "neighbor" and not runs:
                    out["exchange_error"] = max(out.get("exchange_error", 0.0), exchange_error(mb, rank, world_size))
                    with pytest.raises(ValueError, match=r"`h` must be a non-empty dict \{node type: rows\}"):
                        gp.cooperative_exchange(mb, 0, torch.zeros(3, 2))  # refused before any collective
            runs.append(batches)
        out[kind] = runs
    return out


def contiguous_partition(graph, world_size):
    """Global ids split into ``world_size`` contiguous ranges (types mix on a rank)."""
    return torch.arange(graph.num_nodes) * world_size // graph.num_nodes


def reference(kind, global_batch_size):
    source = gp.ItemSampler(items(), global_batch_size, shuffle=True, seed=5)
    return [summary(mb) for mb in make_sampler(kind, source, typed_graph(), False)]


def as_set(rows):
    return {tuple(r) for r in rows.tolist()}


def check_well_formed(subgraph, graph):
    """The typed layout of one rank's layer: every type has an entry, destinations lead
    their type's sources, new sources ascending and distinct, indptr and indices in range."""
    assert set(subgraph["original_row_node_ids"]) == set(graph.node_types)
    assert set(subgraph["sampled_csc"]) == set(subgraph["original_edge_ids"]) == set(graph.edge_types)
    for t in graph.node_types:
        rows, cols = subgraph["original_row_node_ids"][t], subgraph["original_column_node_ids"][t]
        assert torch.equal(rows[: cols.numel()], cols)
        assert torch.unique(rows).numel() == rows.numel()
        new = rows[cols.numel() :]
        assert torch.equal(new, torch.sort(new).values)
    for etype, csc in subgraph["sampled_csc"].items():
        src_type, _, dst_type = parse_edge_type(etype)
        assert csc.indptr.numel() == subgraph["original_column_node_ids"][dst_type].numel() + 1
        assert int(csc.indptr[-1]) == csc.indices.numel() == subgraph["original_edge_ids"][etype].numel()
        assert csc.indices.numel() == 0 or int(csc.indices.max()) < subgraph["original_row_node_ids"][src_type].numel()
        if subgraph["edge_weights"] is not None:
            assert subgraph["edge_weights"][etype].numel() == csc.indices.numel()


def check_against_reference(results, batch_size, use_partition):
    world_size = len(results)
    graph = typed_graph()
    edges = typed_edges()
    offsets = dict(zip(graph.node_types, graph.node_type_offset.tolist()))
    partition = Partition(world_size, contiguous_partition(graph, world_size) if use_partition else None)
    tables = feature_tables()
    labels = {t: dict(zip(("seeds", "labels"), s[:])) for t, s in items().item_sets.items()}
    assert max(r["exchange_error"] for r in results) < 1e-9
    for kind in KINDS:
        ref = [b for b in reference(kind, batch_size * world_size) if sum(s.numel() for s in b["seeds"].values()) >= world_size]
        first, again = zip(*(r[kind] for r in results))
        assert all(len(batches) == len(ref) for batches in first)
        for rank in range(world_size):  # determinism: a second epoch from a fresh pipeline
            for a, b in zip(first[rank], again[rank]):
                for layer_a, layer_b in zip(a["triples"], b["triples"]):
                    assert all(torch.equal(layer_a[t], layer_b[t]) for t in graph.edge_types)
        for i, expected in enumerate(ref):
            got = [batches[i] for batches in first]
            assert {g["batch_index"] for g in got} == {expected["batch_index"]}
            for t in graph.node_types:
                seeds = torch.cat([g["seeds"].get(t, torch.empty(0, dtype=torch.int64)) for g in got])
                assert sorted(seeds.tolist()) == sorted(expected["seeds"].get(t, torch.empty(0)).tolist())
            for rank, g in enumerate(got):
                for t, seeds in g["seeds"].items():
                    assert seeds.numel() and bool((partition.owner(seeds + offsets[t]) == rank).all())
                    assert torch.equal(g["labels"][t], labels[t]["labels"][g["item_ids"][t]])
                    assert torch.equal(labels[t]["seeds"][g["item_ids"][t]], seeds)
                for t in graph.node_types:
                    assert torch.equal(g["feat"][t, "feat"], tables[t][g["input_nodes"][t]])
                for subgraph in g["subgraphs"]:
                    check_well_formed(subgraph, graph)
                    for t, dst in subgraph["original_column_node_ids"].items():
                        assert bool((partition.owner(dst + offsets[t]) == rank).all())
                for layer in g["triples"]:
                    for etype, rows in layer.items():
                        dst, src, eid = rows.unbind(1)  # every edge exists, with its type
                        assert torch.equal(edges[etype][1][eid], dst) and torch.equal(edges[etype][0][eid], src)
            for layer in range(len(FANOUTS)):
                for etype in graph.edge_types:
                    union = torch.cat([g["triples"][layer][etype] for g in got])
                    assert union.shape[0] == expected["triples"][layer][etype].shape[0]
                    assert as_set(union) == as_set(expected["triples"][layer][etype])
                for t in graph.node_types:
                    dsts = torch.cat([g["subgraphs"][layer]["original_column_node_ids"][t] for g in got])
                    assert sorted(dsts.tolist()) == sorted(expected["subgraphs"][layer]["original_column_node_ids"][t].tolist())
            for t in graph.node_types:
                inputs = set(torch.cat([g["input_nodes"][t] for g in got]).tolist())
                assert inputs == set(expected["input_nodes"][t].tolist())
    # The layers sampled edges of every sampled edge type (the comparison is not vacuous).
    sampled = {etype for r in results for b in r["neighbor"][0] for layer in b["triples"] for etype, x in layer.items() if x.numel()}
    assert sampled == set(graph.edge_types)


def test_cooperative_hetero_two_ranks_hash_partition(tmp_path):
    reference("neighbor", 2)  # compiles the typed kernels here, once, before the ranks load them
    results = values(run_ranks(cooperative_rank, 2, tmp_path, args=(10, False)))
    check_against_reference(results, 10, False)


def test_cooperative_hetero_three_ranks_user_partition(tmp_path):
    reference("labor", 3)
    results = values(run_ranks(cooperative_rank, 3, tmp_path, args=(7, True)))
    check_against_reference(results, 7, True)
    # Global ids 0-65 (authors) are rank 0's, 66-130 (authors, papers 0-60) rank 1's:
    # rank 2 owns no seed of any batch, yet samples the papers and venues it owns further out.
    for kind in KINDS:
        assert all(b["seeds"] == {} and b["labels"] == {} for b in results[2][kind][0])
        assert any(x.numel() for b in results[2][kind][0] for x in b["triples"][0].values())
