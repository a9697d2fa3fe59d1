import gc
import threading
import time
import traceback

import pytest
import torch

import graphpipe as gp
from graphpipe.pipes import Transform
from graphpipe.loading import Prefetcher, ThreadPoolMap
from graphpipe.transforms import find, thread_pool
from toy_pipes import live_graphpipe_threads


def _chain(fn=None, n=40, batch_size=4):
    """ItemSampler (karate labels cycled, shuffled, seed 3) -> [transform(fn)] -> fetch_feature -> transform."""
    data = gp.datasets.karate_club()
    items = gp.ItemSet((torch.arange(n) % 34, data.labels[torch.arange(n) % 34]), names=("seeds", "labels"))
    pipe = gp.ItemSampler(items, batch_size, shuffle=True, seed=3)
    if fn is not None:
        pipe = pipe.transform(fn)
    return pipe.fetch_feature(data.features, ["feat"]).transform(lambda mb: mb)


def _threads():
    gc.collect()
    # A loader's compile job (tests/pipes/test_compile_kernels.py) ends on its own.
    return [t for t in threading.enumerate() if t.name.startswith("graphpipe") and t.name != "graphpipe-compile"]


def _summary(batches):
    return [(mb.batch_index, mb.seeds.tolist(), mb.labels.tolist(), mb.node_features["feat"].tolist()) for mb in batches]


def test_default_and_no_transforms_give_the_plain_batches():
    reference = _chain()
    plain = _summary(list(reference) + list(reference))
    # the same pipe object, run with the defaults, then with no rewriting: the epoch advances
    for transforms in (None, []):
        pipe = _chain()
        loader = gp.DataLoader(pipe, transforms=transforms)
        assert _summary(list(loader) + list(loader)) == plain
        assert len(loader) == 10
    pipe = _chain()
    loader = gp.DataLoader(pipe)
    assert len(find(loader.rewritten, Prefetcher)) == 1 and find(pipe, Prefetcher) == []
    assert _threads() == []


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_pooled_sampler_reading_a_list_gives_the_plain_batches(num_workers):
    """Found in review: a stage given a pool whose source is a plain list (the documented
    source without epochs) raised AttributeError ('list' has no stream) in the loader."""
    data = gp.datasets.karate_club()
    batches = list(gp.ItemSampler(gp.ItemSet(torch.arange(34), names="seeds"), 4))
    pipe = gp.pipes.NeighborSampler(batches, data.graph, [3, 3], seed=1)
    loader = gp.DataLoader(pipe, num_workers=num_workers)
    assert num_workers or "pool" in loader.explain()
    key = lambda mb: (mb.seeds.tolist(), mb.input_nodes.tolist())  # noqa: E731
    assert [key(mb) for mb in loader] == [key(mb) for mb in pipe]
    loader.close()


def test_explain_names_every_stage_and_where_it_runs():
    loader = gp.DataLoader(_chain(lambda mb: mb))
    text = loader.explain()
    for name in ("ItemSampler", "Transform", "FeatureFetcher", "Prefetcher(2)"):
        assert name in text
    assert "Placement (the default policy): FeatureFetcher thread\n" in text
    assert "Transforms: none" in gp.DataLoader(_chain(), transforms=[]).explain()
    run = text.split("Pipe as run:")[1]
    assert "1. ItemSampler     runs in: thread 1" in run and "5. Transform       runs in: main thread" in run
    assert "your training loop runs in: main thread" in run
    dot = loader.to_graphviz()
    assert dot.startswith("digraph") and dot.count("->") == 4 and "thread 1" in dot


class _OwnThread(gp.Pipe):
    """A placement stage written outside graphpipe: it runs its upstream in a thread of its
    own (by a Prefetcher inside) and says so through Pipe.upstream_location."""

    def __init__(self, source):
        super().__init__()
        self.source = source

    def upstream_location(self, here, new_thread):
        return "my own thread"

    def stream(self, epoch, start=0):
        return Prefetcher(self.source, 1).stream(epoch, start)


class _Doubling(gp.Pipe):
    """A wrapper written outside graphpipe: runs its source's process twice, 'on a GPU'."""

    wraps_source = True

    def __init__(self, stage):
        super().__init__()
        self.source = stage

    def wrapped_location(self, here):
        return f"{here}, twice"

    def stream(self, epoch, start=0):
        for item in self.source.source.stream(epoch, start):
            self.source.process(item)
            yield self.source.process(item)


def test_new_placement_stages_need_no_change_in_explain_stats_or_transforms():
    """Where a stage runs comes from the stages' own hooks: explain(), stats() and the
    default transforms know nothing of these two classes."""
    chain = _chain(lambda mb: mb)
    fetcher = find(chain, gp.FeatureFetcher)[0]
    pipe = _OwnThread(_Doubling(fetcher)).transform(lambda mb: mb)
    loader = gp.DataLoader(pipe)
    run = loader.explain().split("Pipe as run:")[1]
    assert "1. ItemSampler     runs in: my own thread" in run
    assert "3. FeatureFetcher  runs in: my own thread, twice" in run
    assert "5. _OwnThread      runs in: main thread" in run
    assert "Prefetcher" not in run.split("_OwnThread")[0]  # the fetcher is not moved again
    assert _summary(loader) == _summary(_chain())
    stats = loader.stats()
    assert stats["FeatureFetcher in _Doubling"]["where"] == "my own thread, twice"
    assert stats["_OwnThread"]["work_s"] == 0.0 and stats["_OwnThread"]["batches"] == 10


def test_reprs_and_help_show_the_chain_and_the_stage():
    import pydoc

    pipe = _chain()
    assert repr(pipe) == "ItemSampler -> FeatureFetcher -> Transform"
    loader = gp.DataLoader(pipe)
    assert repr(loader).startswith("DataLoader(ItemSampler -> FeatureFetcher -> Transform), as run:\n  1. ItemSampler")
    assert "Prefetcher(2)" in repr(loader)
    text = pydoc.render_doc(pipe.fetch_feature, renderer=pydoc.plaintext)
    assert "fetch_feature(features: 'FeatureStore', node_feature_keys" in text  # no `source`
    assert "Fill ``node_features`` and ``edge_features`` of every MiniBatch" in text
    assert not {"list_files", "routed_decode", "shuffle"} & set(dir(pipe))
    assert {"sample_neighbor", "fetch_feature", "copy_to"} <= set(dir(pipe))


def test_draw_puts_each_stage_in_the_lane_of_where_it_runs():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import FancyBboxPatch
    from matplotlib.text import Annotation

    figure = gp.DataLoader(_chain()).draw()
    ax = figure.axes[0]
    texts = [t for t in ax.texts if not isinstance(t, Annotation)]
    lanes = {t.get_text(): t.get_position()[1] for t in texts if t.get_position()[0] < 0}
    assert set(lanes) == {"thread 1", "main thread"}
    boxes = {t.get_text(): t.get_position() for t in texts if t.get_position()[0] >= 0}
    assert list(boxes) == ["ItemSampler", "FeatureFetcher", "Prefetcher(2)", "Transform"]
    assert boxes["ItemSampler"][1] == boxes["FeatureFetcher"][1] == lanes["thread 1"]
    assert boxes["Prefetcher(2)"][1] == boxes["Transform"][1] == lanes["main thread"]
    patches = [p.get_extents() for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert len(patches) == 4 and not any(a.overlaps(b) for i, a in enumerate(patches) for b in patches[i + 1 :])
    assert len(ax.texts) - len(texts) == 3  # arrows


def test_stats_split_time_between_stages_and_the_consumer():
    def slow_upstream(minibatch):
        time.sleep(0.01)
        return minibatch

    loader = gp.DataLoader(_chain(slow_upstream))
    # no sampler stage: the default placement only threads the fetcher, so slow_upstream runs in thread 1
    for _ in loader:
        time.sleep(0.005)
    stats = loader.stats()
    assert list(stats) == ["ItemSampler", "Transform", "FeatureFetcher", "Prefetcher(2)", "Transform#2", "consumer"]
    assert all(row["batches"] == 10 for row in stats.values())
    assert stats["Transform"]["work_s"] >= 0.09 and stats["Transform"]["where"].startswith("thread 1")
    assert stats["consumer"]["work_s"] >= 0.045
    assert stats["Prefetcher(2)"]["wait_s"] > 0 and stats["Prefetcher(2)"]["work_s"] == 0
    assert stats["consumer"]["wait_s"] >= stats["Prefetcher(2)"]["wait_s"]


def test_stats_of_a_thread_pool_stage():
    def slow_upstream(minibatch):
        time.sleep(0.01)
        return minibatch

    loader = gp.DataLoader(_chain(slow_upstream), transforms=[thread_pool(Transform, 2)])
    assert len(list(loader)) == 10
    stats = loader.stats()
    assert list(stats) == ["ItemSampler", "Transform in ThreadPoolMap(2)", "FeatureFetcher", "Transform in ThreadPoolMap(2)#2", "consumer"]
    assert stats["Transform in ThreadPoolMap(2)"]["where"] == "pool of 2 threads"
    assert stats["Transform in ThreadPoolMap(2)"]["work_s"] >= 0.09
    assert stats["FeatureFetcher"]["where"] == "main thread"


def test_an_exception_in_a_background_stage_keeps_its_traceback():
    def fail_on_batch_2(minibatch):
        if minibatch.batch_index == 2:
            raise IndexError("bad batch 2")
        return minibatch

    loader = gp.DataLoader(_chain(fail_on_batch_2))
    seen = []
    with pytest.raises(IndexError, match="bad batch 2") as info:
        for minibatch in loader:
            seen.append(minibatch.batch_index)
    assert seen == [0, 1]
    assert "fail_on_batch_2" in [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert _threads() == []


def test_break_keyboard_interrupt_close_and_del_stop_every_thread():
    loader = gp.DataLoader(_chain(lambda mb: mb))
    for minibatch in loader:
        assert len(_threads()) == 1
        break
    assert _threads() == []
    with pytest.raises(KeyboardInterrupt):
        for minibatch in loader:
            raise KeyboardInterrupt
    assert _threads() == []
    iterator = iter(loader)
    next(iterator)
    loader.close()
    assert _threads() == []
    with pytest.raises(StopIteration):
        next(iterator)
    first = iter(loader)
    next(first)
    second = iter(loader)  # a new epoch ends the unfinished one
    assert _threads() == [] and next(second).batch_index == 40  # epoch 4
    del loader  # the threads stop; the iterator holds what it runs, not the loader
    assert _threads() == []
    assert next(second).batch_index == 41 and len(_threads()) == 1  # used again: they start again
    del first, second
    assert _threads() == []


def test_an_iterator_advanced_from_two_threads_at_once_says_so_and_loses_no_batch():
    entered, release = threading.Event(), threading.Event()

    def first_batch_waits(mb):
        if mb.batch_index == 0:
            entered.set()
            release.wait(10)
        return mb

    loader = gp.DataLoader(_chain(first_batch_waits), transforms=[])  # the chain runs in the caller's next()
    iterator = iter(loader)
    first = []
    puller = threading.Thread(target=lambda: first.append(next(iterator)))
    puller.start()
    assert entered.wait(10)
    with pytest.raises(RuntimeError, match=r"another thread is in next\(\) of this epoch's iterator"):
        next(iterator)
    release.set()
    puller.join(10)
    assert [mb.batch_index for mb in first + list(iterator)] == list(range(len(loader)))  # the epoch went on


def test_two_threads_starting_epochs_at_once_run_one_epoch():
    """Two threads' iter(loader) at once, while an epoch runs: the later start ends the
    earlier one's epoch (its loop says so), and one epoch runs to its end."""
    loader = gp.DataLoader(_chain(lambda mb: time.sleep(0.05) or mb))  # closing the running epoch waits for a batch
    running = iter(loader)
    next(running)
    start, outcomes = threading.Barrier(2), []

    def run_an_epoch():
        start.wait(10)
        taken = []
        try:
            for minibatch in loader:
                taken.append(minibatch.batch_index)
            outcomes.append((len(taken), None))
        except RuntimeError as error:
            outcomes.append((len(taken), str(error)))

    threads = [threading.Thread(target=run_an_epoch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    (ended, message), (finished, no_error) = sorted(outcomes, key=lambda outcome: outcome[1] is None)
    assert "ended by a new iter(loader)" in message and ended < len(loader)
    assert (finished, no_error) == (len(loader), None)


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"`pipe` must be a graphpipe pipe, got list"):
        gp.DataLoader([1, 2])
    with pytest.raises(ValueError, match=r"`num_workers` must be an int >= 0, got -1"):
        gp.DataLoader(_chain(), num_workers=-1)
    with pytest.raises(ValueError, match=r"`num_workers` applies to the default placement; .* place\(pipe, default_placement\(pipe, num_workers\)\)"):
        gp.DataLoader(_chain(), transforms=[], num_workers=2)
    with pytest.raises(TypeError, match=r"transform <lambda> returned int, not a pipe"):
        gp.DataLoader(_chain(), transforms=[lambda pipe: 3])
    with pytest.raises(TypeError, match=r"every transform must be a function pipe -> pipe, got 'x'"):
        gp.DataLoader(_chain(), transforms=["x"])
    with pytest.raises(TypeError, match=r"`transforms` must be a list of functions pipe -> pipe \(e.g. \[thread_pool\(...\)\]\), got <function"):
        gp.DataLoader(_chain(), transforms=thread_pool(gp.NeighborSampler, 2))


_HANGING_SCRIPT = """
import signal, sys, time
sys.path.insert(0, {toy_dir!r})
# As in a terminal: a suite started in the background by a shell without job control
# (`nohup ... &` in a script) ignores SIGINT, and its children inherit that.
signal.signal(signal.SIGINT, signal.default_int_handler)
import torch
import graphpipe as gp
from toy_pipes import WindowSampler


def hang(minibatch):
    if minibatch.batch_index >= 1:
        time.sleep(60)  # a kernel that does not return soon
    return minibatch


class HangingSampler(WindowSampler):
    def sample_layer(self, nodes, layer, minibatch):
        return super().sample_layer(nodes, layer, hang(minibatch))


if __name__ == "__main__":
    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(gp.ItemSet(34), 2)
    if sys.argv[1] == "transform":  # runs in the fetcher's prefetch thread
        pipe = pipe.transform(hang)
    else:  # runs on the sampler's thread pool
        pipe = HangingSampler(pipe, data.graph, [3, 2])
    for minibatch in gp.DataLoader(pipe.fetch_feature(data.features, ["feat"])):
        print("batch", minibatch.batch_index, flush=True)
"""


@pytest.mark.parametrize("stage", ["transform", "sampler"])
def test_ctrl_c_gets_through_a_hung_background_stage(tmp_path, stage):
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "hang.py"
    script.write_text(_HANGING_SCRIPT.format(toy_dir=os.path.dirname(__file__)))
    process = subprocess.Popen(
        [sys.executable, str(script), stage], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline() == "batch 0\n"
        time.sleep(0.5)  # the background stage is in its 60 s call by now
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        try:
            _, stderr = process.communicate(timeout=30)  # (a hang: 60 s)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"no exit 30 s after Ctrl-C; the process wrote:\n{process.communicate()[1]}")
        waited = time.monotonic() - interrupted
    finally:
        process.kill()
    assert process.returncode == -signal.SIGINT and stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert "still running a batch 2 s after being asked to stop" in stderr
    assert waited < 20, f"the process took {waited:.1f} s to exit after Ctrl-C"  # a hung stage: 60 s; 8.6 s seen on a slow VM


def test_close_returns_while_a_background_stage_is_stuck_and_warns(monkeypatch):
    monkeypatch.setattr(gp.loading.stages, "_STOP_TIMEOUT_S", 0.5)  # (2 s in use) a stuck stage is waited for this long
    release = threading.Event()

    def stuck(minibatch):
        if minibatch.batch_index >= 1:
            release.wait(60)
        return minibatch

    loader = gp.DataLoader(_chain(stuck))
    iterator = iter(loader)
    assert next(iterator).batch_index == 0
    time.sleep(0.2)
    with pytest.warns(RuntimeWarning, match=r"graphpipe-prefetch-\d+ still running a batch"):
        loader.close()
    assert len(_threads()) == 1  # left behind, a daemon
    assert all(thread.daemon for thread in _threads())
    release.set()
    for thread in _threads():
        thread.join(10)
    assert _threads() == []


def test_construction_explain_and_stats_walk_source_links_and_pickle_no_tensor(monkeypatch):
    """O(stages), whatever the tensors' sizes: a graph with 50M-edge weights (400 MB of
    arrays) costs DataLoader() what a tiny one costs: no tensor is pickled while
    building, explaining or reporting (the old walker, torch's traverse_dps, pickled every
    stage with its tensors: 0.9 s here). No wall-clock bound: timings are benchmarks' job."""
    num_nodes, num_edges = 1000, 50_000_000
    indptr = torch.linspace(0, num_edges, num_nodes + 1).long()
    graph = gp.CSCGraph(indptr, torch.zeros(num_edges, dtype=torch.int32), edge_attributes={"w": torch.zeros(num_edges)})
    pipe = (
        gp.ItemSampler(gp.ItemSet(num_nodes), 8)
        .sample_layer_neighbor(graph, [2], weights="w", seed=1)
        .fetch_feature(gp.FeatureStore({"x": torch.zeros(num_nodes, 2)}), ["x"])
    )
    pickled = []

    def refuse(tensor, *args):
        pickled.append(tuple(tensor.shape))
        raise AssertionError("a stage tensor was pickled")

    monkeypatch.setattr(torch.Tensor, "__reduce_ex__", refuse)
    loader = gp.DataLoader(pipe)
    loader.explain()
    loader.stats()
    loader.close()
    assert pickled == []


def test_stats_report_the_hit_rate_of_a_cached_feature_per_epoch():
    data = gp.datasets.karate_club()
    cached = gp.CPUCachedFeature(data.features["node", "feat"], max_cache_size_in_bytes=10 * 4 * 34)
    features = gp.FeatureStore({"feat": cached})
    seeds = torch.arange(40) % 5  # 5 rows, each read 8 times an epoch: misses only on first reads
    items = gp.ItemSet((seeds, data.labels[seeds]), names=("seeds", "labels"))
    loader = gp.DataLoader(gp.ItemSampler(items, 4).fetch_feature(features, ["feat"]))
    rates = []
    for _ in range(2):
        batches = list(loader)
        rates.append(loader.stats()["FeatureFetcher"]["cache_hit_rate"]["node/feat"])
        assert rates[-1] == cached.hit_rate
    assert 0.5 < rates[0] < 1.0 and rates[1] == 1.0  # counted per epoch (not 75 of 80 overall)
    assert all(torch.equal(mb.node_features["feat"], data.features["node", "feat"].data[mb.seeds]) for mb in batches)


class _Counting(gp.Pipe):
    """A stage of yours that declares per-epoch counters."""

    def __init__(self, source):
        super().__init__()
        self.source = source
        self.seen = 0

    def process(self, minibatch):
        self.seen += len(minibatch.seeds)
        return minibatch

    def stats(self):
        return {"seeds_seen": self.seen}

    def reset_stats(self):
        self.seen = 0


def test_stats_add_what_a_stage_declares_and_reset_it_each_epoch():
    loader = gp.DataLoader(_Counting(_chain(n=40)))
    for _ in range(2):
        assert len(list(loader)) == 10
        assert loader.stats()["_Counting"]["seeds_seen"] == 40  # the epoch's, not 80


def test_a_second_loader_starting_a_pipes_epoch_0_warns_once_that_it_repeats_it():
    """A GraphBolt script building its loader inside the epoch loop reshuffles there; here
    each new loader yielded epoch 0's batches again, without a word."""
    import warnings

    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(10), names="seeds"), 4, shuffle=True)
    loader = gp.DataLoader(pipe)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one loader over several epochs, or resumed at epoch 0: no warning
        first = [mb.seeds.tolist() for mb in loader]
        assert [mb.seeds.tolist() for mb in loader] != first
        loader.load_state_dict(gp.DataLoader(pipe).state_dict())
        assert [mb.seeds.tolist() for mb in loader] == first
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # placed otherwise: comparing placements, not epochs
        assert [mb.seeds.tolist() for mb in gp.DataLoader(pipe, transforms=[])] == first
    with pytest.warns(UserWarning, match=r"another DataLoader already ran epoch 0 of this pipe.*yields the same batches"):
        assert [mb.seeds.tolist() for mb in gp.DataLoader(pipe)] == first
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per pipe
        list(gp.DataLoader(pipe))


def test_a_pipe_of_yours_that_is_not_hashable_still_loads():
    class Comparable(Transform):
        __eq__ = object.__eq__  # defining __eq__ drops __hash__

    assert Comparable.__hash__ is None
    pipe = Comparable(gp.ItemSampler(gp.ItemSet(6, names="seeds"), 4), lambda mb: mb)
    assert [len(mb.seeds) for mb in gp.DataLoader(pipe)] == [4, 2]


class _FailsAt(gp.Pipe):
    """A stage failing at batch ``bad`` (role "sampler": the default placement pools it)."""

    def __init__(self, source, bad, role="sampler"):
        super().__init__()
        self.source, self.bad, self.role, self.thread_safe = source, bad, role, True

    def process(self, minibatch):
        if minibatch.batch_index == self.bad:
            raise ValueError(f"{self.role} fails at batch {self.bad}")
        return minibatch


@pytest.mark.parametrize("sampler_bad, upstream_bad, yielded", [(100, 6, 6), (2, 4, 2)])
def test_an_error_upstream_of_a_pool_comes_after_the_batches_before_it(sampler_bad, upstream_bad, yielded):
    """Found in review: an error pulling a pooled stage's input left at once, dropping the
    batches already submitted (up to 2 per thread) and hiding an earlier batch's own error."""
    data = gp.datasets.karate_club()
    pipe = _FailsAt(_FailsAt(gp.ItemSampler(gp.ItemSet(torch.arange(34), names="seeds"), 2), upstream_bad, role="other"), sampler_bad)
    first = f"{'sampler' if sampler_bad < upstream_bad else 'other'} fails at batch {min(sampler_bad, upstream_bad)}"
    for run in (pipe, gp.DataLoader(pipe.fetch_feature(data.features, ["feat"]))):
        got = []
        with pytest.raises(ValueError, match=first):
            for minibatch in run:
                got.append(minibatch.batch_index)
        assert got == list(range(yielded))


def test_a_pool_that_raised_stops_the_threads_upstream_while_the_error_is_kept():
    """Found in review: the traceback of a pooled stage's error kept its source's threads
    (an upstream pool, a prefetch thread) running after loader.close()."""
    data = gp.datasets.karate_club()
    inner = _FailsAt(gp.ItemSampler(gp.ItemSet(torch.arange(34), names="seeds"), 2), 100).transform(lambda mb: mb)
    loader = gp.DataLoader(_FailsAt(inner, 3).fetch_feature(data.features, ["feat"]))
    with pytest.raises(ValueError) as kept:
        for _ in loader:
            pass
    loader.close()
    deadline = time.monotonic() + 5
    while live_graphpipe_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_graphpipe_threads() == [] and kept.value is not None


def test_a_pool_over_a_plain_iterator_or_a_source_that_fails_at_once():
    """Found in review of the fix above: a source whose stream is a plain iterator has no
    close(), and a source failing when its stream starts must still stop the pool."""
    class Listed(gp.Pipe):
        def __iter__(self):
            return iter([gp.MiniBatch(seeds=torch.arange(3), batch_index=i) for i in range(4)])

    class Failing(gp.Pipe):
        def __iter__(self):
            raise RuntimeError("no items")

    assert [mb.batch_index for mb in ThreadPoolMap(Listed().transform(lambda mb: mb), 2)] == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="no items"):
        list(ThreadPoolMap(Failing().transform(lambda mb: mb), 3))
    deadline = time.monotonic() + 5
    while live_graphpipe_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_graphpipe_threads() == []
