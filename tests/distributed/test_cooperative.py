"""Cooperative minibatching on 2 and 3 gloo ranks; typed and untyped graphs are parameters.

Each spawned group runs several checks (process start-up dominates): the rank bodies
return what they sampled in the typed layout (an untyped batch as the one-type case,
``MiniBatch.as_typed``), and the comparisons with one process sampling the same global
batches run here.
"""

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import Partition
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.graph.sampled_subgraph import by_type
from graphpipe.ops import LayerSample
from graphpipe.ops.torch_random import uniform
from graphpipe.pipes import SubgraphSampler

from dist_harness import run_ranks, values
from sampling_checks import check_layer_nodes, seed_edge_ids

KINDS = ("untyped", "typed")
NUM_NODES = {"untyped": {"_N": 300}, "typed": {"author": 70, "paper": 120, "venue": 6}}
# Typed layer 0 samples two edge types with other fanouts (two kernel runs), and none of one.
FANOUTS = {
    "untyped": [3, 2],
    "typed": [
        {"author:writes:paper": 2, "paper:cites:paper": 3, "paper:in:venue": 1, "paper:written_by:author": 2, "venue:has:paper": 0},
        2,
    ],
}
FEATURE_DIMS = {"_N": 4, "author": 2, "paper": 3, "venue": 1}
# The seed whose lopsided batch (every seed on rank 0) reaches other ranks' vertices.
LOPSIDED_SEED = 4
# Samplers checked: the library's two, and (untyped) a minimal one defined here.
SAMPLERS = {"untyped": ("neighbor", "labor", "half"), "typed": ("neighbor", "labor")}
REVERSE = {"author:writes:paper": "paper:written_by:author", "paper:written_by:author": "author:writes:paper"}

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.usefixtures("kernels_for_child_processes"),  # the children load them from the cache
]


def edges_of(kind, seed=0):
    """``{etype: (src, dst)}`` type-local ids: in-neighbours concentrate on a few hubs, so
    neighbourhoods overlap, in a shuffled edge order (the user's edge ids differ from the
    graph's CSC positions)."""
    g = torch.Generator().manual_seed(seed)
    num_nodes = NUM_NODES[kind]
    edges = {}
    for etype in ["_N:_E:_N"] if kind == "untyped" else FANOUTS["typed"][0]:
        src_type, _, dst_type = parse_edge_type(etype)
        num_src, num_dst = num_nodes[src_type], num_nodes[dst_type]
        degrees = (1 + 12 * torch.rand(num_dst, generator=g) ** 2).to(torch.int64)
        dst = torch.repeat_interleave(torch.arange(num_dst), degrees)
        src = (num_src * torch.rand(dst.numel(), generator=g) ** 3).to(torch.int64)
        order = torch.randperm(dst.numel(), generator=g)
        edges[etype] = (src[order], dst[order])
    return edges


def graph_of(kind) -> gp.CSCGraph:
    edges = edges_of(kind)
    if kind == "untyped":
        return gp.CSCGraph.from_coo(*edges["_N:_E:_N"], num_nodes=NUM_NODES["untyped"]["_N"])
    return gp.CSCGraph.from_hetero_edges(edges, NUM_NODES["typed"])


def tables_of(kind):
    """{ntype: [n, dim]} float32, row ``v`` = ``1000 * type index + v`` plus column offsets."""
    return {
        t: (1000 * i + torch.arange(n, dtype=torch.float32))[:, None] + torch.arange(FEATURE_DIMS[t])
        for i, (t, n) in enumerate(sorted(NUM_NODES[kind].items()))
    }


def store_and_keys(kind, tables):
    """The FeatureStore of ``tables`` and the fetcher's keys (typed: in another order than
    the graph's node types: the exchanges must not depend on it)."""
    if kind == "untyped":
        return gp.FeatureStore({"feat": tables["_N"]}), ["feat"]
    store = gp.FeatureStore(node_features={(t, "feat"): table for t, table in tables.items()})
    return store, {"venue": ["feat"], "paper": ["feat"], "author": ["feat"]}


def items(kind, num_items=None):
    """Node items labelled ``10 * id`` (untyped, typed papers: int64) or ``(id, -id)``
    (typed authors: float32 rows); typed: the first ``num_items`` of 60 papers then 30 authors."""
    if kind == "untyped":
        seeds = torch.arange(300 if num_items is None else num_items)
        return gp.ItemSet((seeds, 10 * seeds), names=("seeds", "labels"))
    papers = min(60, 90 if num_items is None else num_items)
    paper, author = torch.arange(papers), torch.arange((90 if num_items is None else num_items) - papers)
    return gp.HeteroItemSet(
        {
            "paper": gp.ItemSet((paper, 10 * paper), names=("seeds", "labels")),
            "author": gp.ItemSet((author, torch.stack([author, -author], 1).float()), names=("seeds", "labels")),
        }
    )


class HalfEdgeSampler(SubgraphSampler):
    """Keeps in-edge ``e`` when ``uniform(key, e) < 1/2``: a minimal vertex-keyed sampler."""

    def sample_layer(self, nodes, layer, minibatch):
        key = self.layer_key(minibatch.batch_index, layer)
        indptr = self.graph.indptr.to(torch.int64)
        starts, ends = indptr[nodes], indptr[nodes + 1]
        edge_ids = torch.cat([torch.arange(int(s), int(e)) for s, e in zip(starts, ends)] or [torch.empty(0, dtype=torch.int64)])
        owner = torch.repeat_interleave(torch.arange(nodes.numel()), ends - starts)
        keep = uniform(key, edge_ids) < 0.5
        edge_ids, owner = edge_ids[keep], owner[keep]
        out_indptr = torch.zeros(nodes.numel() + 1, dtype=torch.int64)
        out_indptr[1:] = torch.cumsum(torch.bincount(owner, minlength=nodes.numel()), 0)
        return LayerSample(out_indptr, self.graph.indices[edge_ids].to(torch.int64), edge_ids)


def make_sampler(sampler, source, graph, fanouts, cooperative, seed=7, **options):
    if sampler == "neighbor":
        return source.sample_neighbor(graph, fanouts, seed=seed, cooperative=cooperative, **options)
    if sampler == "labor":
        return source.sample_layer_neighbor(graph, fanouts, seed=seed, cooperative=cooperative, **options)
    return HalfEdgeSampler(source, graph, fanouts, seed=seed, cooperative=cooperative)


def contiguous_partition(graph, world_size):
    """Global ids split into ``world_size`` contiguous ranges (typed: types mix on a rank)."""
    return torch.arange(graph.total_num_nodes) * world_size // graph.total_num_nodes


def triples(subgraph):
    """{etype: [num_edges, 3] (dst, src, edge id)} type-local ids of a typed (view of a) layer."""
    out = {}
    for etype, csc in subgraph.sampled_csc.items():
        src_type, _, dst_type = parse_edge_type(etype)
        dst = torch.repeat_interleave(subgraph.original_column_node_ids[dst_type], csc.indptr.diff())
        out[etype] = torch.stack([dst, subgraph.original_row_node_ids[src_type][csc.indices], subgraph.original_edge_ids[etype]], 1)
    return out


def summary(mb):
    """What a rank sampled, every field by type (picklable: no process groups)."""
    view = mb.as_typed()
    return {
        "batch_index": mb.batch_index,
        "raw_seeds": mb.seeds,
        **{name: getattr(view, name) for name in ("seeds", "labels", "item_ids", "input_nodes", "compacted_seeds")},
        "triples": [triples(sg) for sg in view.sampled_subgraphs],
        "dst": [sg.original_column_node_ids for sg in view.sampled_subgraphs],
        "feat": {t: x for (t, _), x in view.node_features.items()},
    }


def exchange_error(mb, rank, world_size, tables):
    """cooperative_exchange, forward and backward, vs the single-process answer: tables
    ``T_t[v]``, rank ``r``'s loss ``sum (r + 1) * W_t[src] * out_t``, so owned row ``v``'s
    gradient is ``W_t[v] * (sum of r + 1 over the ranks that requested v)``. The typed loss
    leaves "venue" out on purpose: its gradient is zero, and no rank hangs."""
    typed = mb.is_heterogeneous
    tables = {t: x.double() for t, x in tables.items()}
    weights = {t: torch.cos(x) for t, x in tables.items()}
    errors = []
    for layer, sg in enumerate(mb.sampled_subgraphs):
        plans = by_type(sg.exchange, "_N")
        if layer > 0:
            previous = by_type(mb.sampled_subgraphs[layer - 1].original_column_node_ids, "_N")
            assert all(torch.equal(plan.local_node_ids, previous[t]) for t, plan in plans.items())
        h = {t: tables[t][plan.local_node_ids].clone().requires_grad_() for t, plan in plans.items()}
        out = by_type(gp.cooperative_exchange(mb, layer, h if typed else h["_N"]), "_N")
        src = by_type(sg.original_row_node_ids, "_N")
        errors += [float((out[t].detach() - tables[t][src[t]]).abs().sum()) for t in out]
        sum(((rank + 1) * weights[t][src[t]] * out[t]).sum() for t in out if t != "venue").backward()
        requested = [None] * world_size
        dist.all_gather_object(requested, src)
        for t, rows in h.items():
            expected = torch.zeros_like(tables[t])
            for r, ids in enumerate(requested if t != "venue" else []):
                expected.index_add_(0, ids[t], (r + 1) * weights[t][ids[t]])
            errors.append(float((rows.grad - expected[plans[t].local_node_ids]).abs().sum()))
    return max(errors)


def cooperative_rank(rank, world_size, kind, batch_size, use_partition, check_workers=False):
    """One rank: per sampler two cooperative epochs (the second from a fresh pipeline:
    determinism) with exchange checks, and an independent one; with ``check_workers``,
    independent batches from 2 worker processes per rank."""
    graph, tables = graph_of(kind), tables_of(kind)
    store, keys = store_and_keys(kind, tables)
    partition = contiguous_partition(graph, world_size) if use_partition else None
    out = {}
    for sampler in SAMPLERS[kind]:
        runs = []
        for run in range(2):
            source = gp.DistributedItemSampler(
                items(kind), batch_size, shuffle=True, seed=5, drop_uneven_inputs=True, partition=partition
            )
            pipe = make_sampler(sampler, source, graph, FANOUTS[kind], True).fetch_feature(store, keys, cooperative=True)
            batches = []
            for mb in gp.DataLoader(pipe):
                for sg in mb.as_typed().sampled_subgraphs:
                    check_layer_nodes(graph.schema, sg)
                batches.append(summary(mb))
                if sampler == "neighbor" and run == 0:
                    with pytest.raises(ValueError, match="must be a non-empty dict" if kind == "typed" else "must be a tensor"):
                        gp.cooperative_exchange(mb, 0, {"x": torch.zeros(3)} if kind == "untyped" else torch.zeros(3, 2))
                    with pytest.raises(ValueError, match="exchanges the outputs of link batches"):
                        gp.cooperative_exchange(mb, mb.num_layers, torch.zeros(3))  # refused before any collective
                    out["exchange_error"] = max(out.get("exchange_error", 0.0), exchange_error(mb, rank, world_size, tables))
            runs.append(batches)
        out[sampler, "cooperative"] = runs
        independent = gp.DistributedItemSampler(items(kind), batch_size, shuffle=True, seed=5)
        pipe = make_sampler(sampler, independent, graph, FANOUTS[kind], False).fetch_feature(store, keys)
        out[sampler, "independent"] = [summary(mb) for mb in gp.DataLoader(pipe)]
        out[sampler, "independent_len"] = len(independent)
        if check_workers and sampler == "neighbor":
            fresh = gp.DistributedItemSampler(items(kind), batch_size, shuffle=True, seed=5)
            pipe = make_sampler(sampler, fresh, graph, FANOUTS[kind], False).fetch_feature(store, keys)
            in_workers = [summary(mb) for mb in gp.DataLoader(pipe, num_workers=2)]
            out["workers_equal"] = len(in_workers) == len(out[sampler, "independent"]) and all(
                a["batch_index"] == b["batch_index"] and torch.equal(a["raw_seeds"], b["raw_seeds"])
                and all(torch.equal(x[e], y[e]) for x, y in zip(a["triples"], b["triples"]) for e in x)
                for a, b in zip(in_workers, out[sampler, "independent"])
            )
    return out


def reference(kind, sampler, global_batch_size):
    """Single-process batches of the same global batches, same keys."""
    source = gp.ItemSampler(items(kind), global_batch_size, shuffle=True, seed=5)
    return [summary(mb) for mb in make_sampler(sampler, source, graph_of(kind), FANOUTS[kind], False)]


def as_set(rows):
    return {tuple(r) for r in rows.tolist()}


def cat_types(dicts, node_types):
    """Per node type, the rows of every dict in ``dicts`` (a type missing: none)."""
    return {t: torch.cat([d.get(t, torch.empty(0, dtype=torch.int64)) for d in dicts]) for t in node_types}


def check_union(got, expected, graph):
    """The ranks' layers together hold exactly the reference's edges, each once, and
    its destinations, each on one rank."""
    for layer in range(len(expected["triples"])):
        for etype in graph.schema.edge_types:
            union = torch.cat([g["triples"][layer][etype] for g in got])
            assert union.shape[0] == expected["triples"][layer][etype].shape[0], (layer, etype)
            assert as_set(union) == as_set(expected["triples"][layer][etype]), (layer, etype)
        dsts = cat_types([g["dst"][layer] for g in got], graph.schema.node_types)
        for t, ids in dsts.items():
            assert sorted(ids.tolist()) == sorted(expected["dst"][layer][t].tolist()), (layer, t)


def check_against_reference(results, kind, batch_size, use_partition):
    world_size = len(results)
    graph, edges, tables = graph_of(kind), edges_of(kind), tables_of(kind)
    schema = graph.schema
    offsets = dict(zip(schema.node_types, schema.node_type_offset))
    partition = Partition(world_size, contiguous_partition(graph, world_size) if use_partition else None)
    item_sets = items(kind).item_sets if kind == "typed" else {"_N": items(kind)}
    fields = {t: dict(zip(("seeds", "labels"), s[:])) for t, s in item_sets.items()}
    assert max(r["exchange_error"] for r in results) < 1e-9
    for sampler in SAMPLERS[kind]:
        ref = reference(kind, sampler, batch_size * world_size)
        ref_full = [b for b in ref if sum(s.numel() for s in b["seeds"].values()) >= world_size]  # drop_uneven_inputs
        first, again = zip(*(r[sampler, "cooperative"] for r in results))
        assert all(len(batches) == len(ref_full) for batches in first + again)
        for a, b in zip(sum(first, []), sum(again, [])):  # determinism: a second epoch from a fresh pipeline
            assert all(torch.equal(x[e], y[e]) for x, y in zip(a["triples"], b["triples"]) for e in x)
        for i, expected in enumerate(ref_full):
            got = [batches[i] for batches in first]
            assert {g["batch_index"] for g in got} == {expected["batch_index"]}
            for t, seeds in cat_types([g["seeds"] for g in got], schema.node_types).items():
                assert sorted(seeds.tolist()) == sorted(expected["seeds"].get(t, torch.empty(0)).tolist())
            for rank, g in enumerate(got):
                for t, seeds in g["seeds"].items():  # the seeds this rank owns, their labels and items
                    assert bool((partition.owner(seeds + offsets[t]) == rank).all())
                    assert torch.equal(fields[t]["seeds"][g["item_ids"][t]], seeds)
                    assert torch.equal(g["labels"][t], fields[t]["labels"][g["item_ids"][t]])
                for t in schema.node_types:
                    assert torch.equal(g["feat"][t], tables[t][g["input_nodes"][t]])
                for layer_dst in g["dst"]:
                    for t, dst in layer_dst.items():
                        assert bool((partition.owner(dst + offsets[t]) == rank).all())
                for layer in g["triples"]:
                    for etype, rows in layer.items():
                        dst, src, eid = rows.unbind(1)  # every edge exists, with its type
                        assert torch.equal(edges[etype][1][eid], dst) and torch.equal(edges[etype][0][eid], src)
            check_union(got, expected, graph)
            for t, inputs in cat_types([g["input_nodes"] for g in got], schema.node_types).items():
                assert set(inputs.tolist()) == set(expected["input_nodes"][t].tolist())
        # Independent (non-cooperative) batches: the same items, and each rank's seed layer
        # holds exactly the reference's edges of its seeds (samples are keyed by vertex).
        per_rank = [r[sampler, "independent"] for r in results]
        for i, expected in enumerate(ref):
            got = [batches[i] for batches in per_rank if i < len(batches)]
            for t, seeds in cat_types([g["seeds"] for g in got], schema.node_types).items():
                assert sorted(seeds.tolist()) == sorted(expected["seeds"].get(t, torch.empty(0)).tolist())
            for g in got:
                for etype, mine in expected["triples"][-1].items():
                    dst_type = parse_edge_type(etype)[2]
                    mine = mine[torch.isin(mine[:, 0], g["seeds"].get(dst_type, torch.empty(0, dtype=torch.int64)))]
                    assert as_set(g["triples"][-1][etype]) == as_set(mine)
        assert sum(r[sampler, "independent_len"] for r in results) >= len(ref)
    # The layers sampled edges of every sampled edge type (the comparisons are not vacuous).
    sampled = {e for r in results for b in r["neighbor", "cooperative"][0] for layer in b["triples"] for e, x in layer.items() if x.numel()}
    assert sampled == set(schema.edge_types)


@pytest.mark.parametrize("kind", KINDS)
def test_cooperative_two_ranks_hash_partition(kind, tmp_path):
    # Untyped: 300 items, 2 ranks x 16: 9 full global batches and a last one of 12.
    reference(kind, "neighbor", 2)  # compiles the kernels here, once, before the ranks load them
    results = values(run_ranks(cooperative_rank, 2, tmp_path, args=(kind, 16, False, kind == "untyped")))
    check_against_reference(results, kind, 16, False)
    assert all(r.get("workers_equal", True) for r in results)


def lopsided_items(kind):
    """Six seeds that rank 0 owns under the contiguous partition of 3 ranks."""
    seeds = torch.arange(6)
    return gp.ItemSet(seeds, names="seeds") if kind == "untyped" else gp.HeteroItemSet({"author": gp.ItemSet(seeds, names="seeds")})


def uneven_rank(rank, world_size, kind):
    """Three ranks, user partition; then the uneven-epoch cases."""
    out = cooperative_rank(rank, world_size, kind, 12 if kind == "untyped" else 7, True)
    graph = graph_of(kind)
    # 74 items, 3 ranks x 4: six full global batches and 2 items left (fewer than ranks).
    dropped = gp.DistributedItemSampler(items(kind, 74), 4, shuffle=True, seed=1, drop_uneven_inputs=True)
    out["dropped_batches"] = [mb.batch_index for mb in gp.DataLoader(make_sampler("neighbor", dropped, graph, FANOUTS[kind], True))]
    # All seeds owned by rank 0: the other ranks own no seeds but still sample the
    # vertices they own further out.
    lopsided = gp.DistributedItemSampler(lopsided_items(kind), 2, seed=1, partition=contiguous_partition(graph, world_size))
    pipe = make_sampler("neighbor", lopsided, graph, FANOUTS[kind], True, seed=LOPSIDED_SEED)
    out["lopsided"] = [summary(mb) for mb in gp.DataLoader(pipe)]
    starred = gp.DistributedItemSampler(items(kind, 74), 4, seed=1, drop_uneven_inputs=True)
    with pytest.raises(NotImplementedError, match="importance_sampling=0"):
        starred.sample_layer_neighbor(graph, FANOUTS[kind], importance_sampling=-1, cooperative=True)
    uneven = gp.DistributedItemSampler(items(kind, 74), 4, shuffle=True, seed=1)
    with pytest.raises(ValueError, match="drop_uneven_inputs=True"):
        list(gp.DataLoader(make_sampler("neighbor", uneven, graph, FANOUTS[kind], True)))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_cooperative_three_ranks_user_partition_and_uneven_inputs(kind, tmp_path):
    reference(kind, "labor", 3)
    batch_size = 12 if kind == "untyped" else 7
    results = values(run_ranks(uneven_rank, 3, tmp_path, args=(kind,)))
    check_against_reference(results, kind, batch_size, True)
    assert [r["dropped_batches"] for r in results] == [list(range(6))] * 3
    source = gp.ItemSampler(lopsided_items(kind), 6)
    (expected,) = [summary(mb) for mb in make_sampler("neighbor", source, graph_of(kind), FANOUTS[kind], False, seed=LOPSIDED_SEED)]
    got = [r["lopsided"][0] for r in results]
    assert [sum(s.numel() for s in g["seeds"].values()) for g in got] == [6, 0, 0]
    check_union(got, expected, graph_of(kind))
    assert any(x.numel() for g in got[1:] for x in g["triples"][0].values())


LINK_TYPES = {"untyped": ["_N:_E:_N"], "typed": ["author:writes:paper", "paper:cites:paper"]}


def link_items(kind):
    """40 node pairs that are edges, per link edge type (typed: a HeteroItemSet by edge type)."""
    edges = edges_of(kind)
    sets = {t: gp.ItemSet(torch.stack(edges[t], 1)[:40], names="seeds") for t in LINK_TYPES[kind]}
    return sets["_N:_E:_N"] if kind == "untyped" else gp.HeteroItemSet(sets)


def link_tables(kind):
    """{ntype: [n, 3]} float32 rows in (-1, 1), different per node (tanh does not saturate)."""
    return {t: torch.sin(0.37 * torch.arange(3 * n, dtype=torch.float32).view(n, 3) + i) for i, (t, n) in enumerate(sorted(NUM_NODES[kind].items()))}


def link_sampler(kind, source, cooperative):
    """NS excluding the batch's seed edges and their reverses (typed: REVERSE's edge types)."""
    mapping = {"reverse_etypes_mapping": REVERSE} if kind == "typed" else {}
    return make_sampler(
        "neighbor", source, graph_of(kind), FANOUTS[kind], cooperative, seed=2,
        exclude_seed_edges=True, include_reverse_edges=True, **mapping,
    )  # fmt: skip


def aggregate(subgraph, h):
    """One layer of a sum-aggregation GNN on a typed (view of a) layer, float64."""
    out = {t: h[t][:n].clone() for t, n in subgraph.num_dst_nodes.items()}
    for etype, csc in subgraph.sampled_csc.items():
        src_type, _, dst_type = parse_edge_type(etype)
        columns = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
        out[dst_type] = out[dst_type].index_add(0, columns, 0.5 * h[src_type][csc.indices])
    return {t: torch.tanh(x) for t, x in out.items()}


def link_scores(mb, h, exchange=None):
    """``{etype: [N]}`` dot-product scores of the batch's pairs after the GNN; ``h``: rows
    of ``input_nodes`` by type; ``exchange(layer, h)``: cooperative_exchange by type."""
    view = mb.as_typed()
    for layer, subgraph in enumerate(view.sampled_subgraphs):
        h = aggregate(subgraph, exchange(layer, h) if exchange and layer > 0 else h)
    if exchange:
        h = exchange(len(view.sampled_subgraphs), h)  # the rows of this rank's pairs' endpoints
    # Not symmetric in the pair's ends, so swapped columns would show.
    return {
        etype: (h[parse_edge_type(etype)[0]][pairs[:, 0], :-1] * h[parse_edge_type(etype)[2]][pairs[:, 1], 1:]).sum(1)
        for etype, pairs in view.compacted_seeds.items()
    }


def link_loss(scores, seeds):
    """A loss whose weight per pair depends on the pair only: the ranks' losses add up
    to the loss of one process on the global batch."""
    return sum((s * torch.cos(7 * seeds[e][:, 0] + 3 * seeds[e][:, 1] + len(e))).sum() for e, s in scores.items())


def link_rank(rank, world_size, kind):
    """Cooperative link batches (negatives, seed and reverse edges excluded, features
    fetched): the scores and the input rows' gradients of a GNN, and the layers."""
    graph = graph_of(kind)
    store, keys = store_and_keys(kind, link_tables(kind))
    source = gp.DistributedItemSampler(link_items(kind), 4, shuffle=True, seed=0, drop_uneven_inputs=True)
    pipe = link_sampler(kind, source.sample_uniform_negative(graph, 2, seed=1), True).fetch_feature(store, keys, cooperative=True)
    out = []
    for mb in gp.DataLoader(pipe):
        view = mb.as_typed()
        h = {t: x.double().requires_grad_() for (t, _), x in view.node_features.items()}

        def exchange(layer, rows):
            return by_type(gp.cooperative_exchange(mb, layer, rows if kind == "typed" else rows["_N"]), "_N")

        scores = link_scores(mb, h, exchange)
        link_loss(scores, view.seeds).backward()
        out.append({**summary(mb), "scores": {e: s.detach() for e, s in scores.items()}, "grads": {t: x.grad for t, x in h.items()}})
    return out


def brute_force_excluded(kind, edges, seeds):
    """{etype: edge ids} of every edge ``u -> v`` of a pair ``(u, v)`` of its type, and of
    every reverse edge ``v -> u`` (untyped: any; typed: of the REVERSE edge type)."""
    excluded = {e: [ids] for e, ids in seed_edge_ids(edges, seeds).items()}
    for etype, pairs in seeds.items():
        reverse = etype if kind == "untyped" else REVERSE.get(etype)
        if reverse is not None:
            excluded.setdefault(reverse, []).append(seed_edge_ids(edges, {reverse: pairs.flip(1)})[reverse])
    return {e: torch.cat(ids) for e, ids in excluded.items()}


@pytest.mark.parametrize("kind", KINDS)
def test_cooperative_link_batches(kind, tmp_path):
    """Every rank keeps its pairs (with their negatives); the union of the ranks' layers is
    what one process samples for the global batch (its seed edges and reverses excluded),
    and the scores and input-row gradients of a GNN equal that process's."""
    results = values(run_ranks(link_rank, 2, tmp_path, args=(kind,)))
    graph, edges = graph_of(kind), edges_of(kind)
    tables = {t: x.double() for t, x in link_tables(kind).items()}
    reference = link_sampler(kind, gp.ItemSampler(link_items(kind), 8), False)
    assert len(results[0]) == len(results[1]) > 0
    for got in zip(*results):
        seeds = {e: torch.cat([g["seeds"][e] for g in got if e in g["seeds"]]) for e in LINK_TYPES[kind]}
        raw = seeds["_N:_E:_N"] if kind == "untyped" else seeds
        mb = reference.sample_subgraphs(gp.MiniBatch(seeds=raw, batch_index=got[0]["batch_index"]))
        expected = summary(mb)
        check_union(got, expected, graph)
        excluded = brute_force_excluded(kind, edges, seeds)
        for layer in range(len(FANOUTS[kind])):
            for etype, ids in excluded.items():
                union = torch.cat([g["triples"][layer][etype][:, 2] for g in got])
                assert not bool(torch.isin(union, ids).any()), (layer, etype)
        assert sum(ids.numel() for ids in excluded.values()) > 0
        h = {t: tables[t][ids].requires_grad_() for t, ids in expected["input_nodes"].items()}
        scores = link_scores(mb, h)
        link_loss(scores, seeds).backward()
        at = dict.fromkeys(seeds, 0)
        for g in got:  # each rank has the scores of its own pairs, in their order
            for etype, pairs in g["seeds"].items():
                n = pairs.shape[0]
                assert torch.allclose(g["scores"][etype], scores[etype][at[etype] : at[etype] + n].detach(), atol=1e-12)
                at[etype] += n
        for t, x in h.items():  # each input row's gradient: the sum over the ranks that read it
            total = torch.zeros_like(tables[t])
            for g in got:
                total.index_add_(0, g["input_nodes"][t], g["grads"][t])
            assert torch.allclose(total[expected["input_nodes"][t]], x.grad, atol=1e-12), t


def failing_rank(rank, world_size):
    """Rank 1 fails after its first batch; rank 0 carries on and must get an error."""
    source = gp.DistributedItemSampler(items("untyped"), 8, shuffle=True, seed=5, drop_uneven_inputs=True)
    pipe = make_sampler("neighbor", source, graph_of("untyped"), FANOUTS["untyped"], True)
    for i, mb in enumerate(gp.DataLoader(pipe)):
        if rank == 1 and i == 1:
            raise RuntimeError("rank 1 fails on purpose")
    return "finished"


def test_failure_in_one_rank_stops_the_others(tmp_path):
    outcomes = run_ranks(failing_rank, 2, tmp_path, timeout=90)
    assert outcomes[1][0] == "error" and "fails on purpose" in outcomes[1][1]
    # Rank 0 fails in its next collective (gloo: the peer's connection closed) instead of hanging.
    assert outcomes[0][0] == "error", outcomes[0]
    assert "RuntimeError" in outcomes[0][1] and "fails on purpose" not in outcomes[0][1]


def _from_pyg_split_rank(rank, world_size):
    from torch_geometric.data import Data

    n = 40
    src = torch.arange(n)
    edge_index = torch.stack([torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src])])
    mask = torch.zeros(n, dtype=torch.bool)
    mask[30:38] = True
    data = Data(x=torch.randn(n, 2), y=torch.arange(n) % 3, edge_index=edge_index, train_mask=mask, val_mask=mask, test_mask=mask)
    ds = gp.datasets.from_pyg(data)
    source = gp.DistributedItemSampler(ds.train_set, 4, shuffle=False, partition=torch.arange(n) * world_size // n)
    pipe = source.sample_neighbor(ds.graph, [2], cooperative=True)
    return [(mb.seeds.tolist(), mb.labels.tolist(), mb.input_id.tolist()) for mb in gp.DataLoader(pipe)]


def test_cooperative_batches_of_a_from_pyg_split(tmp_path):
    """Found in review of a change: with PyG's input_id (node ids) in item_ids, the ranks
    read the item set at them as positions (IndexError, or other items); item_ids stay
    positions and input_id rides beside them."""
    pytest.importorskip("torch_geometric")
    batches = [b for rank in values(run_ranks(_from_pyg_split_rank, 2, tmp_path)) for b in rank]
    seeds = sorted(s for b in batches for s in b[0])
    assert seeds == list(range(30, 38))
    for seed_ids, labels, input_id in batches:
        assert labels == [s % 3 for s in seed_ids] and input_id == seed_ids


def _mismatched_datasets_rank(rank, world_size):
    """Rank 1 holds a 20-node graph, rank 0 a 40-node one; nodes 20..39 belong to rank 1."""
    n = 40 if rank == 0 else 20
    src = torch.arange(n)
    graph = gp.CSCGraph.from_coo(torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src]), num_nodes=n)
    items = gp.ItemSet(torch.arange(40) % n, names="seeds")  # rank 1's own seeds stay in its graph
    source = gp.DistributedItemSampler(items, 8, shuffle=True, seed=3, partition=torch.arange(40) * world_size // 40)
    for _ in gp.DataLoader(source.sample_neighbor(graph, [2], cooperative=True)):
        pass
    return "finished"


def test_seeds_from_a_rank_with_another_dataset_are_refused_not_read(tmp_path):
    """Found in review: the samplers no longer re-check ids per layer, so the ids other
    ranks send are checked where they arrive, against this rank's graph."""
    outcomes = run_ranks(_mismatched_datasets_rank, 2, tmp_path, timeout=90)
    assert outcomes[1][0] == "error", outcomes[1]
    assert "seeds from other ranks` holds node id" in outcomes[1][1] and "same dataset" in outcomes[1][1], outcomes[1][1]
