"""The default placement (one Place per stage, from what the stages declare) and the one
rewrite that applies it."""

import re

import numba
import pytest
import torch

import graphpipe as gp
from graphpipe.pipes import FeatureFetcher, Transform
from graphpipe.loading import Place, Prefetcher, SideStream, ThreadPoolMap
from graphpipe.loading import policy
from graphpipe.transforms import default_placement, find, place, stages, thread_pool

from toy_pipes import (
    COMPILED, DeclaredSampler, UndeclaredSampler, WindowSampler, assert_same_batches, karate_chain, live_graphpipe_threads,
)

INLINE = Place()


def _types(pipe):
    return [type(stage).__name__ for stage in reversed(stages(pipe)) if not isinstance(stage, gp.loading.Timed)]


def _pool():
    cores = numba.get_num_threads()
    return Place("pool", min(cores, 8), max(1, cores // min(cores, 8)))


def _fetch_thread():
    return Place("thread")


def test_a_sampler_and_the_fetcher_after_it_share_a_pool():
    pipe = karate_chain()
    assert default_placement(pipe) == (INLINE, _pool(), _pool())
    new = place(pipe, default_placement(pipe))
    assert _types(new) == ["ItemSampler", "WindowSampler", "FeatureFetcher", "ThreadPoolMap", "Prefetcher"]
    assert _types(pipe) == ["ItemSampler", "WindowSampler", "FeatureFetcher"]  # the user's pipe is unchanged
    (pool,) = find(new, ThreadPoolMap)
    assert (pool.num_threads, pool.kernel_threads, pool.stages) == (_pool().threads, _pool().kernel_threads, 2)
    assert [type(stage).__name__ for stage in pool.wrapped_stages()] == ["FeatureFetcher", "WindowSampler"]
    assert_same_batches(list(karate_chain()), list(new))
    assert live_graphpipe_threads() == []


def test_a_fetcher_not_right_after_a_sampler_gets_a_thread_of_its_own():
    chain = karate_chain()
    pipe = chain.source.transform(lambda mb: mb).fetch_feature(chain.features, ["feat"])
    assert default_placement(pipe) == (INLINE, _pool(), INLINE, _fetch_thread())
    new = place(pipe, default_placement(pipe))
    assert _types(new) == [
        "ItemSampler", "WindowSampler", "ThreadPoolMap", "Prefetcher", "Transform", "FeatureFetcher", "Prefetcher"
    ]
    assert [p.kernel_threads for p in find(new, Prefetcher)] == [_fetch_thread().kernel_threads, None]
    assert_same_batches(list(karate_chain()), list(new))


class _OneReaderAtATime(gp.Feature):
    concurrent_reads = False


def test_a_fetcher_whose_feature_is_not_safe_in_several_threads_stays_out_of_the_pool():
    data = gp.datasets.karate_club()
    features = gp.FeatureStore({"feat": _OneReaderAtATime(data.features["node", "feat"].data)})
    pipe = karate_chain().source.fetch_feature(features, ["feat"])
    assert not pipe.thread_safe
    assert default_placement(pipe) == (INLINE, _pool(), _fetch_thread())
    assert_same_batches(list(karate_chain()), list(gp.DataLoader(pipe)))


def _declared_chain(sampler_class):
    data = gp.datasets.karate_club()
    items = gp.ItemSampler(gp.ItemSet((torch.arange(34), data.labels), names=("seeds", "labels")), 4, seed=7)
    return sampler_class(items).fetch_feature(data.features, ["feat"])


def test_a_sampler_written_on_the_base_gets_what_it_declares():
    """A Pipe subclass (not a SubgraphSampler) declaring role "sampler", thread safety and
    a compile task gets a pool and its task run; the same stage without the declarations
    runs inline and compiles nothing."""
    COMPILED.clear()
    loader = gp.DataLoader(_declared_chain(DeclaredSampler))
    assert loader.placement == (INLINE, _pool(), _pool())
    assert [type(inner).__name__ for inner in find(loader.rewritten, ThreadPoolMap)[0].wrapped_stages()] == [
        "FeatureFetcher", "DeclaredSampler"
    ]
    assert [name for name, _ in loader.compile_job.tasks][0] == "DeclaredSampler"
    assert loader.compile_job.wait(timeout=60) and COMPILED == ["DeclaredSampler"]
    assert "DeclaredSampler pool(" in loader.explain()
    plain = list(_declared_chain(DeclaredSampler))
    assert_same_batches_without_subgraphs(plain, list(loader))

    COMPILED.clear()
    undeclared = gp.DataLoader(_declared_chain(UndeclaredSampler))
    assert undeclared.placement == (INLINE, INLINE, _fetch_thread())
    assert find(undeclared.rewritten, ThreadPoolMap) == []
    assert "UndeclaredSampler" not in [name for name, _ in undeclared.compile_job.tasks]
    assert undeclared.compile_job.wait(timeout=60) and COMPILED == []
    assert_same_batches_without_subgraphs(plain, list(undeclared))


def assert_same_batches_without_subgraphs(left, right):
    assert len(left) == len(right) == 9
    for a, b in zip(left, right):
        assert a.batch_index == b.batch_index and torch.equal(a.input_nodes, b.input_nodes)
        assert torch.equal(a.node_features["feat"], b.node_features["feat"])


class _Collective(UndeclaredSampler):
    role = "sampler"
    thread_safe = True
    collective = True


def test_a_collective_sampler_runs_in_a_thread_one_batch_at_a_time():
    pipe = _declared_chain(_Collective)
    assert default_placement(pipe) == (INLINE, Place("thread"), _fetch_thread())


def test_a_collective_sampler_stays_in_the_training_process_with_workers():
    """Found in review: with num_workers the stages before the first fetcher went to the
    workers, a collective one too (two batches in it at once, in two processes)."""
    pipe = _declared_chain(_Collective)
    assert default_placement(pipe, 2) == (Place("workers", 2), Place("thread"), _fetch_thread())
    with pytest.raises(ValueError, match=r"num_workers=2, but the pipe's first stage, _Collective, is a fetcher, a collective"):
        default_placement(_Collective(None), 2)  # a collective source


def test_worker_processes_run_the_stages_before_the_first_fetcher():
    pipe = karate_chain()
    assert default_placement(pipe, 2) == (INLINE, Place("workers", 2), _fetch_thread())
    new = place(pipe, default_placement(pipe, 2))
    assert _types(new) == ["ItemSampler", "Shard", "WindowSampler", "ProcessWorkers", "FeatureFetcher", "Prefetcher"]
    (workers,) = find(new, gp.loading.ProcessWorkers)
    assert workers.num_workers == 2 and isinstance(workers.source, WindowSampler)
    sampler_only = karate_chain().source
    assert default_placement(sampler_only, 2) == (INLINE, Place("workers", 2))
    assert _types(place(sampler_only, default_placement(sampler_only, 2))) == [
        "ItemSampler", "Shard", "WindowSampler", "ProcessWorkers"
    ]


def test_copies_to_cuda_and_stages_already_placed_stay_out_of_worker_processes(monkeypatch):
    """Found in review: without a fetcher, num_workers put a copy_to("cuda") in the workers
    (a CUDA context each, batches between processes as CUDA handles); and it put the workers
    on a stage a pool of the user's already ran, which then failed at the first batch."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    sampled = karate_chain().source  # ItemSampler -> WindowSampler
    assert default_placement(sampled.copy_to("cuda"), 2) == (INLINE, Place("workers", 2), Place("stream"))
    first = gp.ItemSampler(gp.ItemSet(34), 8).copy_to("cuda").sample_neighbor(gp.datasets.karate_club().graph, [2])
    assert default_placement(first, 2) == (Place("workers", 2), Place("stream"), Place("stream"))
    pooled = ThreadPoolMap(karate_chain(), 2, stages=2)
    with pytest.raises(ValueError, match=r"num_workers=2 would run WindowSampler .* already runs it elsewhere"):
        default_placement(pooled, 2)


def test_under_numbas_workqueue_layer_the_chain_runs_in_one_thread(monkeypatch):
    monkeypatch.setattr(policy, "kernels_thread_safe", lambda: False)
    pipe = karate_chain()
    assert default_placement(pipe) == (INLINE, INLINE, Place("thread"))
    new = place(pipe, default_placement(pipe))
    assert _types(new) == ["ItemSampler", "WindowSampler", "FeatureFetcher", "Prefetcher"]
    assert_same_batches(list(karate_chain()), list(new))


def test_stages_the_pipe_already_runs_elsewhere_are_left_where_they_are():
    pooled = thread_pool(WindowSampler, 2)(karate_chain())  # the sampler is in a pool already
    assert _types(pooled) == ["ItemSampler", "WindowSampler", "ThreadPoolMap", "FeatureFetcher"]
    assert default_placement(pooled) == (INLINE, INLINE, INLINE, _fetch_thread())
    # the fetcher already feeds a thread (the prefetch's), its consumer's
    assert default_placement(pooled.prefetch()) == (INLINE,) * 5


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")
def _cuda_chain_without_cuda(monkeypatch):
    """``karate_chain().copy_to("cuda")`` where CUDA is not available: it warns (once per
    process, so the record of earlier warnings is emptied first) and stays on the CPU."""
    from graphpipe._internal import devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    with pytest.warns(UserWarning, match=r"copy_to\('cuda'\): CUDA is not available; batches stay on the CPU"):
        return karate_chain().copy_to("cuda")


def test_a_copy_to_cuda_without_cuda_stays_inline(monkeypatch):
    pipe = _cuda_chain_without_cuda(monkeypatch)
    assert default_placement(pipe) == (INLINE, _pool(), _pool(), INLINE)


def test_cuda_batches_are_sampled_and_fetched_on_side_streams_and_copies_are_pinned(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # what "cuda" resolves to
    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(gp.ItemSet(34), 8).copy_to("cuda").sample_neighbor(data.graph, [3, 2])
    pipe = pipe.fetch_feature(data.features, ["feat"])
    assert default_placement(pipe) == (INLINE, Place("stream"), Place("stream"), Place("stream"))
    new = place(pipe, default_placement(pipe))
    assert _types(new) == [
        "ItemSampler", "PinMemory", "CopyTo", "SideStream", "Prefetcher", "Waiter",
        "NeighborSampler", "SideStream", "Prefetcher", "Waiter",
        "FeatureFetcher", "SideStream", "Prefetcher", "Waiter",
    ]  # fmt: skip
    assert [side.device for side in find(new, SideStream)] == [torch.device("cuda:0")] * 3
    (copy,) = find(new, gp.CopyTo)
    assert copy.non_blocking and not find(pipe, gp.CopyTo)[0].non_blocking
    # a copy after CPU stages: they are pooled as usual, the copy staged on a stream
    last = karate_chain().copy_to("cuda:0")
    assert default_placement(last) == (INLINE, _pool(), _pool(), Place("stream"))
    text = gp.transforms.describe(place(last, default_placement(last)))
    assert re.search(r"CopyTo\(cuda:0\) +runs in: thread 2, CUDA side stream", text)
    assert re.search(r"PinMemory +runs in: thread 2\n", text)


@pytest.mark.cuda
def test_pinned_copies_on_a_side_stream_give_the_plain_batches():
    pipe = karate_chain().copy_to("cuda")
    new = place(pipe, default_placement(pipe))
    assert find(new, Transform) == [] and len(find(new, gp.loading.PinMemory)) == 1
    out = list(new)
    assert all(mb.node_features["feat"].is_cuda for mb in out)
    assert_same_batches(list(karate_chain()), [mb.to("cpu") for mb in out])


def test_a_placement_is_checked():
    with pytest.raises(ValueError, match=r"Place: `kind` must be one of \('inline', 'thread', 'pool', 'stream', 'workers'\)"):
        Place("gpu")
    with pytest.raises(ValueError, match=r"Place: `threads` must be an int >= 1, got 0"):
        Place("pool", 0)
    with pytest.raises(ValueError, match=r"place: `placement` must be 3 Place values, one per stage"):
        place(karate_chain(), [Place("thread")])
    assert str(Place("pool", 4, 2)) == "pool(4, kernels on 2)" and str(Place("workers", 3)) == "workers(3)"


def test_thread_pool_wraps_every_stage_of_the_type():
    new = thread_pool(FeatureFetcher, 3)(karate_chain())
    (pool,) = find(new, ThreadPoolMap)
    assert isinstance(pool.source, FeatureFetcher) and pool.num_threads == 3
    assert thread_pool(FeatureFetcher, 3).__name__ == "thread_pool(FeatureFetcher, 3)"
    assert _types(thread_pool(FeatureFetcher, 3)(new)) == _types(new)  # a wrapped stage is left alone
    assert_same_batches(list(karate_chain()), list(new))
    with pytest.raises(ValueError, match=r"thread_pool: `num_threads` must be an int >= 1, got -1"):
        thread_pool(FeatureFetcher, -1)


def test_a_pool_of_several_threads_refuses_a_stage_that_is_not_thread_safe():
    """A fetcher reading a GPUCachedFeature (its CPU fallback here) must not fetch several
    batches at once: in a pool of 4 it gave wrong rows. A pool of one thread is accepted."""
    data = gp.datasets.karate_club()
    cached = gp.gpu_cached_feature(data.features, "feat", 8 * 4 * data.features.size("node", None, "feat")[0], device="cpu")
    chain = gp.ItemSampler(data.train_set, 4).sample_neighbor(data.graph, [2]).fetch_feature(cached, ["feat"])
    assert chain.thread_safe is False
    with pytest.raises(ValueError, match=r"ThreadPoolMap: FeatureFetcher declares that its process must not run for several batches at once \(`thread_safe` is False; .*\); pass num_threads=1"):
        thread_pool(FeatureFetcher, 4)(chain)
    batches = list(gp.DataLoader(chain, transforms=[thread_pool(FeatureFetcher, 1)]))
    assert all(torch.equal(mb.node_features["feat"], data.features.read("node", None, "feat", mb.input_nodes)) for mb in batches)


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


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("role", "Sampler", r"Odd.role must be one of \('source', 'sampler', 'fetcher', 'copy', 'other'\)"),
        ("thread_safe", "no", "Odd.thread_safe must be True, False or None"),
        ("collective", 1, "Odd.collective must be a bool"),
        ("device", "cpu", "Odd.device must be a torch.device or None"),
    ],
)
def test_a_declaration_the_placement_cannot_read_is_refused_naming_the_stage(name, value, message):
    """Found in review: role='Sampler' was placed inline silently, thread_safe='no' pooled,
    device='cpu' crashed with "'str' object has no attribute 'type'"."""

    class Odd(gp.Pipe):
        def __init__(self, source):
            super().__init__()
            self.source = source

        def process(self, minibatch):
            return minibatch

    setattr(Odd, name, value)
    with pytest.raises(ValueError, match=message):
        gp.DataLoader(Odd(gp.ItemSampler(gp.ItemSet(torch.arange(4), names="seeds"), 2)))
