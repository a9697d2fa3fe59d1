"""Cooperative minibatching and DistributedItemSampler on 2 and 3 gloo ranks.

Each spawned group runs several checks (process start-up dominates): the rank bodies
return what they sampled, and the comparisons with a single-process reference run here.
"""

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import Partition
from graphpipe.ops import LayerSample
from graphpipe.ops.torch_random import uniform
from graphpipe.pipes import Pipe, SubgraphSampler

from dist_harness import run_ranks, values

NUM_NODES = 300
FANOUTS = [3, 2]
LOPSIDED_SEED = 4
FEAT_DIM = 4

# Samplers checked: the library's neighbor sampler, LABOR-0 once it is registered, and a
# minimal sampler defined here.
KINDS = ("neighbor", "half") + (("labor",) if "sample_layer_neighbor" in Pipe._functional_names else ())

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.usefixtures("kernels_for_child_processes"),  # the children load them from the cache
]


def power_law_coo(num_nodes=NUM_NODES, seed=0):
    """``(src, dst)`` of a graph whose in-neighbours concentrate on a few hubs, so
    neighbourhoods overlap, in a shuffled edge order (the user's edge ids differ from the
    graph's CSC positions)."""
    g = torch.Generator().manual_seed(seed)
    degrees = (1 + 12 * torch.rand(num_nodes, generator=g) ** 2).to(torch.int64)
    dst = torch.repeat_interleave(torch.arange(num_nodes), degrees)
    src = (num_nodes * torch.rand(dst.numel(), generator=g) ** 3).to(torch.int64)
    src = torch.where(src == dst, (src + 1) % num_nodes, src)
    order = torch.randperm(dst.numel(), generator=g)
    return src[order], dst[order]


def power_law_graph(num_nodes=NUM_NODES, seed=0) -> gp.CSCGraph:
    src, dst = power_law_coo(num_nodes, seed)
    return gp.CSCGraph.from_coo(src, dst, num_nodes=num_nodes)


def features() -> torch.Tensor:
    return torch.arange(NUM_NODES * FEAT_DIM, dtype=torch.float32).reshape(NUM_NODES, FEAT_DIM)


def items(num_items=NUM_NODES) -> gp.ItemSet:
    seeds = torch.arange(num_items)
    return gp.ItemSet((seeds, 10 * seeds), names=("seeds", "labels"))


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


def make_sampler(kind, source, graph, cooperative):
    if kind == "neighbor":
        return source.sample_neighbor(graph, FANOUTS, seed=7, cooperative=cooperative)
    if kind == "labor":
        return source.sample_layer_neighbor(graph, FANOUTS, seed=7, cooperative=cooperative)
    return HalfEdgeSampler(source, graph, FANOUTS, seed=7, cooperative=cooperative)


def triples(subgraph):
    """``[num_edges, 3]`` (dst, src, edge id) global ids of a sampled layer."""
    dst_local = subgraph.edge_index()[1]
    return torch.stack(
        [
            subgraph.original_column_node_ids[dst_local],
            subgraph.original_row_node_ids[subgraph.sampled_csc.indices],
            subgraph.original_edge_ids,
        ],
        dim=1,
    )


def summary(mb):
    return {
        "batch_index": mb.batch_index,
        "seeds": mb.seeds,
        "labels": mb.labels,
        "input_nodes": mb.input_nodes,
        "triples": [triples(sg) for sg in mb.sampled_subgraphs],
        "dst": [sg.original_column_node_ids for sg in mb.sampled_subgraphs],
        "feat": mb.node_features.get("feat"),
    }


def check_exchange(mb, rank, world_size):
    """Forward and backward of cooperative_exchange vs the single-process answer.

    The global table is ``T[v] = v + (0.5, 1.5, ...)``; rank ``r``'s loss is
    ``sum_j (r + 1) * W[src_j] * out_j``, so the gradient of owned row ``v`` must be
    ``W[v] * (sum of r + 1 over the ranks that requested v)``. Also a directional
    finite-difference check of the total loss in float64 (gradcheck-style, collective-safe).
    """
    errors = []
    table = torch.arange(NUM_NODES, dtype=torch.float64)[:, None] + torch.arange(3, dtype=torch.float64) + 0.5
    weights = torch.cos(torch.arange(NUM_NODES, dtype=torch.float64))[:, None] * torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    for layer, sg in enumerate(mb.sampled_subgraphs):
        local_ids = sg.exchange.local_node_ids
        if layer > 0:
            assert torch.equal(local_ids, mb.sampled_subgraphs[layer - 1].original_column_node_ids)
        h = table[local_ids].clone().requires_grad_()
        out = gp.cooperative_exchange(mb, layer, h)
        src = sg.original_row_node_ids
        errors.append(float((out - table[src]).abs().max()) if src.numel() else 0.0)
        loss = ((rank + 1) * weights[src] * out).sum()
        loss.backward()
        requested = [None] * world_size
        dist.all_gather_object(requested, src)
        expected = torch.zeros(NUM_NODES, 3, dtype=torch.float64)
        for r, ids in enumerate(requested):
            expected.index_add_(0, ids, (r + 1) * weights[ids])
        errors.append(float((h.grad - expected[local_ids]).abs().max()) if local_ids.numel() else 0.0)
        # Directional derivative of the total loss: central difference vs <grad, d>.
        direction = torch.sin(local_ids.to(torch.float64) * 1.7)[:, None].expand(-1, 3)
        eps = 1e-3  # the loss is linear in h: no truncation error, and a larger step less roundoff

        def total(x):
            value = ((rank + 1) * weights[src] * gp.cooperative_exchange(mb, layer, x)).sum().reshape(1)
            dist.all_reduce(value)
            return float(value)

        with torch.no_grad():
            numeric = (total(h + eps * direction) - total(h - eps * direction)) / (2 * eps)
        analytic = (h.grad * direction).sum().reshape(1)
        dist.all_reduce(analytic)
        errors.append(abs(numeric - float(analytic)) / max(1.0, abs(numeric)))
    return max(errors)


def cooperative_rank(rank, world_size, num_items, batch_size, use_partition, check_workers=False):
    """One rank: cooperative and independent epochs with both samplers, exchange checks;
    with ``check_workers``, independent batches from 2 worker processes per rank."""
    graph = power_law_graph()
    store = gp.FeatureStore({"feat": features()})
    partition = (torch.arange(NUM_NODES) * world_size // NUM_NODES) if use_partition else None
    out = {}
    for kind in KINDS:
        source = gp.DistributedItemSampler(
            items(num_items), batch_size, shuffle=True, seed=5, drop_uneven_inputs=True, partition=partition
        )
        pipe = make_sampler(kind, source, graph, True).fetch_feature(store, ["feat"], cooperative=True)
        batches, exchange_error = [], 0.0
        for mb in gp.DataLoader(pipe):
            batches.append(summary(mb))
            if kind == "neighbor":
                exchange_error = max(exchange_error, check_exchange(mb, rank, world_size))
        out[kind, "cooperative"] = batches
        out[kind, "exchange_error"] = exchange_error
        independent = gp.DistributedItemSampler(items(num_items), batch_size, shuffle=True, seed=5)
        pipe = make_sampler(kind, independent, graph, False).fetch_feature(store, ["feat"])
        out[kind, "independent"] = [summary(mb) for mb in gp.DataLoader(pipe)]
        out[kind, "independent_len"] = len(independent)
        if check_workers and kind == "neighbor":
            fresh = gp.DistributedItemSampler(items(num_items), batch_size, shuffle=True, seed=5)
            pipe = make_sampler(kind, fresh, graph, False).fetch_feature(store, ["feat"])
            in_workers = [summary(mb) for mb in gp.DataLoader(pipe, num_workers=2)]
            out["workers_equal"] = len(in_workers) == len(out[kind, "independent"]) and all(
                a["batch_index"] == b["batch_index"] and torch.equal(a["seeds"], b["seeds"])
                and all(torch.equal(x, y) for x, y in zip(a["triples"], b["triples"]))
                for a, b in zip(in_workers, out[kind, "independent"])
            )
    return out


def reference(kind, num_items, global_batch_size):
    """Single-process batches of the same global batches, same keys."""
    source = gp.ItemSampler(items(num_items), global_batch_size, shuffle=True, seed=5)
    return [summary(mb) for mb in make_sampler(kind, source, power_law_graph(), False)]


def as_set(rows):
    return {tuple(r) for r in rows.tolist()}


def check_against_reference(results, num_items, batch_size, use_partition):
    world_size = len(results)
    coo_src, coo_dst = power_law_coo()
    table = features()
    partition = Partition(world_size, (torch.arange(NUM_NODES) * world_size // NUM_NODES) if use_partition else None)
    for kind in KINDS:
        ref = reference(kind, num_items, batch_size * world_size)
        ref_full = [b for b in ref if b["seeds"].numel() >= world_size]  # drop_uneven_inputs
        per_rank = [r[kind, "cooperative"] for r in results]
        assert all(len(batches) == len(ref_full) for batches in per_rank)
        assert max(r[kind, "exchange_error"] for r in results) < 1e-6
        for i, expected in enumerate(ref_full):
            got = [batches[i] for batches in per_rank]
            assert {g["batch_index"] for g in got} == {expected["batch_index"]}
            seeds = torch.cat([g["seeds"] for g in got])
            assert sorted(seeds.tolist()) == sorted(expected["seeds"].tolist())
            for rank, g in enumerate(got):
                assert torch.equal(g["labels"], 10 * g["seeds"])
                assert bool((partition.owner(g["seeds"]) == rank).all())
                assert torch.equal(g["feat"], table[g["input_nodes"]])
                for layer_dst in g["dst"]:
                    assert bool((partition.owner(layer_dst) == rank).all())
                for t in g["triples"]:
                    dst, src, eid = t.unbind(1)  # eid: the user's edge id (COO position)
                    assert torch.equal(coo_dst[eid], dst) and torch.equal(coo_src[eid], src)
            for layer in range(len(FANOUTS)):
                union = torch.cat([g["triples"][layer] for g in got])
                assert union.shape[0] == expected["triples"][layer].shape[0]
                assert as_set(union) == as_set(expected["triples"][layer])
                dsts = torch.cat([g["dst"][layer] for g in got])
                assert sorted(dsts.tolist()) == sorted(expected["dst"][layer].tolist())
            inputs = set(torch.cat([g["input_nodes"] for g in got]).tolist())
            assert inputs == set(expected["input_nodes"].tolist())
        # Independent (non-cooperative) batches: the same items, and each rank's seed layer
        # holds exactly the reference's edges of its seeds (samples are keyed by vertex).
        per_rank = [r[kind, "independent"] for r in results]
        for i, expected in enumerate(ref):
            got = [batches[i] for batches in per_rank if i < len(batches)]
            seeds = torch.cat([g["seeds"] for g in got])
            assert sorted(seeds.tolist()) == sorted(expected["seeds"].tolist())
            for g in got:
                assert torch.equal(g["feat"], table[g["input_nodes"]])
                mine = expected["triples"][-1]
                mine = mine[torch.isin(mine[:, 0], g["seeds"])]
                assert as_set(g["triples"][-1]) == as_set(mine)
        assert sum(r[kind, "independent_len"] for r in results) >= len(ref)


def test_cooperative_two_ranks_hash_partition(tmp_path):
    # 300 items, 2 ranks x 16: 9 full global batches and a last one of 12.
    results = values(run_ranks(cooperative_rank, 2, tmp_path, args=(NUM_NODES, 16, False, True)))
    check_against_reference(results, NUM_NODES, 16, False)
    assert all(r["workers_equal"] for r in results)


def uneven_rank(rank, world_size):
    """Three ranks, user partition; then the uneven-epoch cases."""
    out = cooperative_rank(rank, world_size, 250, 12, True)
    # 74 items, 3 ranks x 4: six full global batches and 2 items left (fewer than ranks).
    dropped = gp.DistributedItemSampler(items(74), 4, shuffle=True, seed=1, drop_uneven_inputs=True)
    pipe = dropped.sample_neighbor(power_law_graph(), FANOUTS, seed=3, cooperative=True)
    out["dropped_batches"] = [mb.batch_index for mb in gp.DataLoader(pipe)]
    # All seeds owned by rank 0 (ids < 100 under the contiguous partition): the other
    # ranks own no seeds but still sample the vertices they own further out (under
    # LOPSIDED_SEED the seeds' sampled neighbours include vertices of rank 1).
    partition = torch.arange(NUM_NODES) * world_size // NUM_NODES
    lopsided = gp.DistributedItemSampler(items(6), 2, seed=1, partition=partition)
    pipe = lopsided.sample_neighbor(power_law_graph(), FANOUTS, seed=LOPSIDED_SEED, cooperative=True)
    out["lopsided"] = [summary(mb) for mb in gp.DataLoader(pipe)]
    if "labor" in KINDS:
        starred = gp.DistributedItemSampler(items(74), 4, seed=1, drop_uneven_inputs=True)
        try:
            starred.sample_layer_neighbor(power_law_graph(), FANOUTS, importance_sampling=-1, cooperative=True)
            out["labor_star_error"] = None
        except NotImplementedError as error:
            out["labor_star_error"] = str(error)
    uneven = gp.DistributedItemSampler(items(74), 4, shuffle=True, seed=1)
    pipe = uneven.sample_neighbor(power_law_graph(), FANOUTS, seed=3, cooperative=True)
    try:
        list(gp.DataLoader(pipe))
        out["uneven_error"] = None
    except ValueError as error:
        out["uneven_error"] = str(error)
    return out


def test_cooperative_three_ranks_user_partition_and_uneven_inputs(tmp_path):
    results = values(run_ranks(uneven_rank, 3, tmp_path))
    check_against_reference(results, 250, 12, True)
    assert [r["dropped_batches"] for r in results] == [list(range(7))[:6]] * 3
    for r in results:
        assert "drop_uneven_inputs=True" in r["uneven_error"]
    if "labor" in KINDS:
        assert all("importance_sampling=0" in r["labor_star_error"] for r in results)
    source = gp.ItemSampler(items(6), 6)
    (expected,) = [summary(mb) for mb in source.sample_neighbor(power_law_graph(), FANOUTS, seed=LOPSIDED_SEED)]
    got = [r["lopsided"][0] for r in results]
    assert [g["seeds"].numel() for g in got] == [6, 0, 0]
    for layer in range(len(FANOUTS)):
        union = torch.cat([g["triples"][layer] for g in got])
        assert as_set(union) == as_set(expected["triples"][layer]) and union.shape[0] == len(as_set(union))
    assert any(g["triples"][0].shape[0] for g in got[1:])


def failing_rank(rank, world_size):
    """Rank 1 fails after its first batch; rank 0 carries on and must get an error."""
    source = gp.DistributedItemSampler(items(), 8, shuffle=True, seed=5, drop_uneven_inputs=True)
    pipe = source.sample_neighbor(power_law_graph(), FANOUTS, seed=7, cooperative=True)
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
