import re

import numba
import pytest
import torch

import graphpipe as gp
from graphpipe.pipes import FeatureFetcher, SubgraphSampler, Transform
from graphpipe.loading import Prefetcher, SideStream, ThreadPoolMap
from graphpipe.transforms import (
    default_transforms,
    gpu_side_streams,
    find,
    overlap_stages,
    pinned_copy,
    process_workers,
    stages,
    thread_pool,
)

from toy_pipes import WindowSampler, assert_same_batches, karate_chain, live_graphpipe_threads


def _types(pipe):
    return [type(stage).__name__ for stage in reversed(stages(pipe))]


def test_overlap_stages_puts_a_thread_after_the_sampler_and_the_fetcher():
    pipe = karate_chain()
    new = overlap_stages(pipe)
    assert _types(new) == ["ItemSampler", "WindowSampler", "ThreadPoolMap", "Prefetcher", "FeatureFetcher", "Prefetcher"]
    assert _types(pipe) == ["ItemSampler", "WindowSampler", "FeatureFetcher"]
    # CPU sampler: a pool of one thread per core (at most 8), the cores split among them;
    # the fetcher's thread gathers with a quarter of the cores.
    cores = numba.get_num_threads()
    (pool,) = find(new, ThreadPoolMap)
    assert (pool.num_threads, pool.kernel_threads) == (min(cores, 8), cores // min(cores, 8))
    assert [p.kernel_threads for p in find(new, Prefetcher)] == [max(1, cores // 4), None]
    text = gp.transforms.describe(new)
    assert re.search(rf"WindowSampler +runs in: pool of {min(cores, 8)} threads, kernels on {cores // min(cores, 8)} thread", text)
    assert re.search(rf"FeatureFetcher +runs in: thread 2, kernels on {max(1, cores // 4)} thread", text)
    assert _types(overlap_stages(new)) == _types(new)  # idempotent
    assert_same_batches(list(karate_chain()), list(new))
    assert live_graphpipe_threads() == []


def test_overlap_stages_uses_one_thread_under_numbas_workqueue_layer(monkeypatch):
    monkeypatch.setattr(gp.loading.policy, "_kernels_thread_safe", lambda: False)
    new = overlap_stages(karate_chain())
    assert _types(new) == ["ItemSampler", "WindowSampler", "FeatureFetcher", "Prefetcher"]
    assert _types(overlap_stages(new)) == _types(new)  # idempotent
    assert_same_batches(list(karate_chain()), list(new))


def test_overlap_stages_respects_existing_background_stages():
    pipe = thread_pool(WindowSampler, 2)(karate_chain())
    assert _types(overlap_stages(pipe)) == [
        "ItemSampler", "WindowSampler", "ThreadPoolMap", "Prefetcher", "FeatureFetcher", "Prefetcher"
    ]
    workers = process_workers(2)(karate_chain())
    assert _types(overlap_stages(workers)) == [
        "ItemSampler", "Shard", "WindowSampler", "ProcessWorkers", "FeatureFetcher", "Prefetcher"
    ]


def test_thread_pool_wraps_every_stage_of_the_type():
    new = thread_pool(FeatureFetcher, 3)(karate_chain())
    (pool,) = find(new, ThreadPoolMap)
    assert isinstance(pool.source, FeatureFetcher) and pool.num_threads == 3
    assert thread_pool(FeatureFetcher, 3).__name__ == "thread_pool(FeatureFetcher, 3)"
    assert_same_batches(list(karate_chain()), list(new))
    with pytest.raises(ValueError, match=r"thread_pool: `num_threads` must be an int >= 1, got -1"):
        thread_pool(FeatureFetcher, -1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")
def _cuda_chain_without_cuda(monkeypatch):
    """``karate_chain().copy_to("cuda")`` where CUDA is not available: it warns (once per
    process, so the record of earlier warnings is emptied first) and stays on the CPU."""
    from graphpipe._internal import devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    with pytest.warns(UserWarning, match=r"copy_to\('cuda'\): CUDA is not available; batches stay on the CPU"):
        return karate_chain().copy_to("cuda")


def test_pinned_copy_leaves_the_pipe_unchanged_without_cuda(monkeypatch):
    pipe = _cuda_chain_without_cuda(monkeypatch)
    assert pinned_copy(pipe) is pipe


def test_pinned_copy_graph_with_cuda_reported(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    pipe = karate_chain().copy_to("cuda:0")
    new = pinned_copy(pipe)
    assert _types(new) == [
        "ItemSampler", "WindowSampler", "FeatureFetcher", "Transform", "CopyTo", "SideStream", "Prefetcher", "Waiter"
    ]
    (side,) = find(new, SideStream)
    assert side.device == torch.device("cuda:0") and side.source.non_blocking and not pipe.non_blocking
    assert _types(pinned_copy(new)) == _types(new)  # idempotent
    text = gp.transforms.describe(overlap_stages(new))
    assert re.search(r" 2\. WindowSampler +runs in: pool of \d+ threads", text)
    assert re.search(r" 8\. CopyTo\(cuda:0\) +runs in: thread 3, CUDA side stream", text)
    assert re.search(r" 6\. Prefetcher\(2\) +runs in: thread 3", text)  # thread 3 pins batches and queues their copies
    assert re.search(r"11\. Waiter +runs in: main thread", text)


@pytest.mark.cuda
def test_pinned_copy_stages_copies_on_a_side_stream():
    pipe = karate_chain().copy_to("cuda")
    new = pinned_copy(pipe)
    assert _types(new) == [
        "ItemSampler", "WindowSampler", "FeatureFetcher", "Transform", "CopyTo", "SideStream", "Prefetcher", "Waiter"
    ]
    (copy,) = find(new, gp.CopyTo)
    assert copy.non_blocking and not pipe.non_blocking
    assert find(new, Transform)[0].fn is gp.MiniBatch.pin_memory
    expected = list(karate_chain())
    out = list(new)
    assert all(mb.node_features["feat"].is_cuda for mb in out)
    assert_same_batches(expected, [mb.to("cpu") for mb in out])
    cpu_copy = karate_chain().copy_to("cpu")
    assert pinned_copy(cpu_copy) is cpu_copy


def test_default_transforms_list():
    assert default_transforms() == [gpu_side_streams, overlap_stages, pinned_copy]
    names = [t.__name__ for t in default_transforms(3)]
    assert names == ["process_workers(3)", "gpu_side_streams", "overlap_stages", "pinned_copy"]


def test_gpu_side_streams_graph_with_cuda_reported(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # what "cuda" resolves to
    graph = gp.datasets.karate_club().graph
    features = gp.datasets.karate_club().features
    pipe = (
        gp.ItemSampler(gp.ItemSet(34), 8).copy_to("cuda").sample_neighbor(graph, [3, 2]).fetch_feature(features, ["feat"])
    )
    new = gpu_side_streams(pipe)
    assert _types(new) == [
        "ItemSampler", "CopyTo", "NeighborSampler", "SideStream", "Prefetcher", "Waiter",
        "FeatureFetcher", "SideStream", "Prefetcher", "Waiter",
    ]
    assert [side.device for side in find(new, SideStream)] == [torch.device("cuda:0")] * 2
    assert _types(gpu_side_streams(new)) == _types(new)  # idempotent
    assert _types(overlap_stages(new)) == _types(new)  # already in background threads
    # samplers and fetchers on CPU batches (before the copy) stay as they are
    cpu_first = gp.ItemSampler(gp.ItemSet(34), 8).sample_neighbor(graph, [3]).copy_to("cuda")
    assert gpu_side_streams(cpu_first) is cpu_first


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")
def test_gpu_side_streams_leaves_the_pipe_unchanged_without_cuda(monkeypatch):
    pipe = _cuda_chain_without_cuda(monkeypatch)
    assert gpu_side_streams(pipe) is pipe


def test_process_workers_cuts_before_feature_fetching_and_shards_the_item_sampler():
    new = process_workers(2)(karate_chain())
    assert _types(new) == ["ItemSampler", "Shard", "WindowSampler", "ProcessWorkers", "FeatureFetcher"]
    (workers,) = find(new, gp.loading.ProcessWorkers)
    assert workers.num_workers == 2 and isinstance(workers.source, SubgraphSampler)
    sampler_only = karate_chain().source
    assert _types(process_workers(2)(sampler_only)) == ["ItemSampler", "Shard", "WindowSampler", "ProcessWorkers"]
    with pytest.raises(ValueError, match=r"process_workers: `num_workers` must be an int >= 1, got 0"):
        process_workers(0)
    # The graph is what `.source` links reach: another attribute holding a pipe is not upstream.
    no_sampler = Transform(gp.loading.Timed(gp.loading.Timed(None)), lambda mb: mb)
    no_sampler.other = gp.ItemSampler(gp.ItemSet(4), 2)
    with pytest.raises(ValueError, match=r"exactly one ItemSampler to shard, found 0"):
        process_workers(2)(no_sampler)


def test_two_loaders_over_one_pipe_iterated_alternately_give_each_its_own_batches():
    pipe = karate_chain()
    alone = list(gp.DataLoader(karate_chain()))
    first, second = gp.DataLoader(pipe), gp.DataLoader(pipe)
    a, b = iter(first), iter(second)
    left, right = [], []
    for x, y in zip(a, b):  # both epochs live at once, pulled in turn
        left.append(x)
        right.append(y)
        next(iter(pipe))  # a plain iteration mid-epoch invalidates nothing
    assert_same_batches(left, alone)
    assert_same_batches(right, alone)
    first.close()
    second.close()


def test_iterating_the_pipe_outside_a_loader_changes_nothing_the_loader_produces():
    reference = [[mb.batch_index for mb in epoch] for epoch in _epochs(gp.DataLoader(karate_chain()), 2)]
    pipe = karate_chain()
    list(pipe)
    list(pipe)  # plain passes run epochs 0 and 1 of the ItemSampler's own counter
    gp.hotness_from_presampling(pipe.source, 34, num_batches=3)
    loader = gp.DataLoader(pipe)
    assert [[mb.batch_index for mb in epoch] for epoch in _epochs(loader, 2)] == reference
    assert reference[0][0] == 0
    assert_same_batches(list(gp.DataLoader(pipe)), list(gp.DataLoader(karate_chain())))


def _epochs(loader, n):
    epochs = [list(loader) for _ in range(n)]
    loader.close()
    return epochs
