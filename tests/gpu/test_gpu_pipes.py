"""The user's GPU chain (issue 6): seeds copied to CUDA, sampling on a pinned or device
graph, UVA fetch from pinned features, optional GPU cache. Needs CUDA; on CPU-only CI
the same chain runs on CPU (the fallback test)."""

import warnings

import pytest
import torch
from cuda_syncs import host_syncs

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


def sampled(seeds, graph, sampler="NS", **options):
    if sampler == "NS":
        return seeds.sample_neighbor(graph, [4, 3], seed=2, **options)
    return seeds.sample_layer_neighbor(graph, [4, 3], seed=2, **options)


def cpu_reference(graph, feats, items, sampler="NS"):
    store = gp.FeatureStore({"feat": feats.clone()})
    pipe = sampled(gp.ItemSampler(items, 64, shuffle=True, seed=1), graph, sampler)
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
    if torch.cuda.is_available():
        assert 0.0 < cached["feat"].hit_rate < 1.0
    else:  # the rows are in host memory already: the cache holds none
        assert cached["feat"].capacity == 0 and cached["feat"].hit_rate == 0.0


@pytest.mark.cuda
@pytest.mark.parametrize("sampler", ["NS", "LABOR-0"])
@pytest.mark.parametrize("graph_place", ["pinned", "device"])
@pytest.mark.parametrize("policy", [None, "static", "clock"])
def test_gpu_chain_equals_cpu_chain(sampler, graph_place, policy):
    graph, feats, items = setup()
    want = cpu_reference(graph, feats, items, sampler)
    g = graph.pin_memory_() if graph_place == "pinned" else graph.to("cuda")
    store = gp.FeatureStore({"feat": feats.clone()}).pin_memory_()
    if policy is not None:
        store = gp.gpu_cached_feature(store, "feat", max_bytes=300 * 64, policy=policy,
                                      hotness=gp.hotness_from_degree(graph) if policy == "static" else None)
    pipe = sampled(gp.ItemSampler(items, 64, shuffle=True, seed=1).copy_to("cuda"), g, sampler)
    pipe = pipe.fetch_feature(store, ["feat"])
    got = batches(pipe)
    assert got[0].input_nodes.is_cuda and got[0].node_features["feat"].is_cuda
    assert_same_batches(got, want)
    got_loader = batches(gp.DataLoader(pipe))
    assert_same_batches(got_loader, want)


@pytest.mark.cuda
@pytest.mark.parametrize("sampler", ["NS", "LABOR-0"])
def test_gpu_link_chain_equals_cpu_chain(sampler):
    """Link prediction on the GPU (the capability table's untyped link cell): the same
    negatives, labels, sampled edges (seed edges excluded) and features as the CPU chain."""
    graph, feats, _ = setup()
    dst = torch.repeat_interleave(torch.arange(graph.total_num_nodes), graph.indptr.diff())
    pairs = torch.stack([graph.indices, dst], 1)[:: 37]
    items = gp.ItemSet(pairs, names="seeds")

    def chain(source, g, store):
        pipe = source.sample_uniform_negative(g, 2, seed=1)
        return sampled(pipe, g, sampler, exclude_seed_edges=True).fetch_feature(store, ["feat"])

    want = batches(chain(gp.ItemSampler(items, 32, shuffle=True, seed=1), graph, gp.FeatureStore({"feat": feats.clone()})))
    store = gp.FeatureStore({"feat": feats.clone()}).pin_memory_()
    got = batches(gp.DataLoader(chain(gp.ItemSampler(items, 32, shuffle=True, seed=1).copy_to("cuda"), graph.pin_memory_(), store)))
    assert got[0].seeds.is_cuda
    assert_same_batches(got, want)
    for a, b in zip(got, want):
        assert torch.equal(a.seeds.cpu(), b.seeds) and torch.equal(a.labels.cpu(), b.labels)
        assert torch.equal(a.compacted_seeds.cpu(), b.compacted_seeds)


@pytest.mark.cuda
def test_gpu_sampling_syncs_only_for_output_sizes():
    """Per layer: the nodes' id check, the output count, torch.unique's size and the number
    of new nodes; per batch: the seeds' copy from pageable memory (the ids and their item
    ids) and their id check."""
    graph, feats, items = setup()
    g = graph.to("cuda")
    pipe = gp.ItemSampler(items, 64, seed=1).copy_to("cuda").sample_neighbor(g, [4, 3], seed=2)
    it = iter(pipe)
    next(it)
    sites = host_syncs(lambda: next(it))
    assert len(sites) <= 4 * 2 + 3, ", ".join(sites)


class SlowFeature(gp.Feature):
    """Holds up the stream its reads are queued on before gathering, so that a consumer
    reading the rows before that stream is done would see unwritten memory."""

    def read(self, ids, out=None):
        torch.cuda._sleep(5_000_000)  # a few ms of GPU time on the reading stream
        return super().read(ids, out)


@pytest.mark.cuda
def test_side_streams_under_a_training_step_use_nothing_before_it_is_ready():
    """The DataLoader samples and fetches on side streams in background threads while
    the main stream trains. Each batch's features are read (1) right away, while the
    side stream's slow read may still run, and (2) again after a training step queued
    behind a long main-stream delay, after the batch was dropped: meanwhile the loader
    runs ahead and allocates the next batches on the side streams, so without
    ``record_stream`` that memory could be reused under the queued reads."""
    graph, feats, items = setup()
    want = cpu_reference(graph, feats, items)
    store = gp.FeatureStore({"feat": SlowFeature(feats.clone())}).pin_memory_()
    pipe = sampled(gp.ItemSampler(items, 64, shuffle=True, seed=1).copy_to("cuda"), graph.pin_memory_())
    loader = gp.DataLoader(pipe.fetch_feature(store, ["feat"]))
    assert "CUDA side stream" in loader.explain()
    model = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    early, late = [], []
    for _, mb in zip(range(len(want)), loader):
        x = mb.node_features["feat"]
        early.append(x.sum(0))
        torch.cuda._sleep(20_000_000)  # the main stream falls behind the loader
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        late.append(x.sum(0))
        del mb, x
    torch.cuda.synchronize()
    assert len(early) == len(want)
    for a, b, reference in zip(early, late, want):
        expected = reference.node_features["feat"].sum(0)
        assert torch.allclose(a.cpu(), expected, atol=1e-4) and torch.allclose(b.cpu(), expected, atol=1e-4)


@pytest.mark.cuda
def test_features_read_on_the_cpu_come_back_on_the_ids_gpu(tmp_path):
    """Feature.read's contract: ids on a GPU give rows on that GPU, for the features that
    gather on the CPU too (a file read with pread, a CPU cache)."""
    import numpy as np

    table = torch.rand(50, 4)
    np.save(tmp_path / "t.npy", table.numpy())
    ids = torch.tensor([3, 7, 3, 49], device="cuda")
    for feature in (gp.DiskBasedFeature(tmp_path / "t.npy"), gp.CPUCachedFeature(gp.Feature(table.clone()), 10 * 16)):
        rows = feature.read(ids)
        assert rows.device == ids.device and torch.equal(rows.cpu(), table[[3, 7, 3, 49]]), feature


@pytest.mark.cuda
def test_typed_graph_with_seeds_on_the_gpu_says_where_to_copy():
    from hetero_graphs import hetero_graph  # tests/, on the path through its conftest

    graph, _ = hetero_graph()
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(20))})
    with pytest.raises(NotImplementedError, match=r"typed graphs are sampled on the CPU.*copy_to\('cuda'\) after"):
        gp.ItemSampler(items, 8).copy_to("cuda").sample_neighbor(graph, [2, 2])  # refused when the chain is built
