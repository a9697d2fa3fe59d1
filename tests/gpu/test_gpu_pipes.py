"""The user's GPU chain (issue 6): seeds copied to CUDA, sampling on a pinned or device
graph, UVA fetch from pinned features, optional GPU cache. Needs CUDA; on CPU-only CI
the same chain runs on CPU (the fallback test)."""

import warnings

import pytest
import torch

import graphpipe as gp



def setup(num_nodes=2000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, num_nodes, (num_nodes * 8,), generator=gen)
    src = (torch.rand(num_nodes * 8, generator=gen) ** 2 * num_nodes).long()
    graph = gp.CSCGraph.from_coo(src, dst, num_nodes)
    feats = torch.randn(num_nodes, 16, generator=gen)
    items = gp.ItemSet(torch.arange(0, num_nodes, 3))
    return graph, feats, items


def batches(pipe, n=6):
    return [mb for _, mb in zip(range(n), pipe)]


def assert_same_batches(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.equal(a.input_nodes.cpu(), b.input_nodes)
        for sa, sb in zip(a.sampled_subgraphs, b.sampled_subgraphs):
            assert torch.equal(sa.original_edge_ids.cpu(), sb.original_edge_ids)
            assert torch.equal(sa.sampled_csc.indices.cpu(), sb.sampled_csc.indices)
            assert torch.equal(sa.sampled_csc.indptr.cpu(), sb.sampled_csc.indptr)
        assert torch.equal(a.node_features["feat"].cpu(), b.node_features["feat"])


def cpu_reference(graph, feats, items):
    store = gp.FeatureStore({"feat": feats.clone()})
    pipe = gp.ItemSampler(items, 64, shuffle=True, seed=1).sample_neighbor(graph, [4, 3], seed=2)
    return batches(pipe.fetch_feature(store, ["feat"]))


def test_cpu_fallback_runs_the_same_user_code():
    graph, feats, items = setup()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pinning without CUDA warns once
        graph.pin_memory_()
        store = gp.FeatureStore({"feat": feats.clone()}).pin_memory_()
    cached = gp.gpu_cached_feature(store, "feat", max_bytes=200 * 64, policy="clock")
    pipe = (gp.ItemSampler(items, 64, shuffle=True, seed=1).sample_neighbor(graph, [4, 3], seed=2)
            .fetch_feature(cached, ["feat"]))
    assert_same_batches(batches(pipe), cpu_reference(graph, feats, items))
    assert 0.0 < cached["feat"].hit_rate < 1.0


@pytest.mark.cuda
@pytest.mark.parametrize("graph_place", ["pinned", "device"])
@pytest.mark.parametrize("policy", [None, "static", "clock"])
def test_gpu_chain_equals_cpu_chain(graph_place, policy):
    graph, feats, items = setup()
    want = cpu_reference(graph, feats, items)
    g = graph.pin_memory_() if graph_place == "pinned" else graph.to("cuda")
    store = gp.FeatureStore({"feat": feats.clone()}).pin_memory_()
    if policy is not None:
        store = gp.gpu_cached_feature(store, "feat", max_bytes=300 * 64, policy=policy,
                                      hotness=gp.hotness_from_degree(graph) if policy == "static" else None)
    pipe = (gp.ItemSampler(items, 64, shuffle=True, seed=1).copy_to("cuda")
            .sample_neighbor(g, [4, 3], seed=2).fetch_feature(store, ["feat"]))
    got = batches(pipe)
    assert got[0].input_nodes.is_cuda and got[0].node_features["feat"].is_cuda
    assert_same_batches(got, want)
    got_loader = batches(gp.DataLoader(pipe))
    assert_same_batches(got_loader, want)


@pytest.mark.cuda
def test_gpu_sampling_syncs_only_for_output_sizes():
    """Per layer: the seeds' id check, candidate/output counts and torch.unique's size."""
    graph, feats, items = setup()
    g = graph.to("cuda")
    pipe = gp.ItemSampler(items, 64, seed=1).copy_to("cuda").sample_neighbor(g, [4, 3], seed=2)
    it = iter(pipe)
    next(it)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            next(it)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= 4 * 2 + 2, [str(w.message) for w in syncs]
