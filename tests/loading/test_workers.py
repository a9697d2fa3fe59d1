"""Worker processes. Starting them costs about 0.5 s each with numba kernels to load, so
most tests use sampler-free chains."""

import functools
import gc
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

import graphpipe as gp
from graphpipe.loading.workers import _main_script_hidden

from toy_pipes import (
    assert_same_batches,
    assorted_tensors,
    die_on_batch_2,
    fail_on_batch_3,
    karate_chain,
    live_graphpipe_threads,
    python_chain,
    same_minibatch,
    three_seconds_from_batch_1,
    unpicklable_batch,
    with_fake_subgraphs,
)

pytestmark = pytest.mark.usefixtures("kernels_for_child_processes")  # the children load them from the cache


def _nothing_left_running():
    gc.collect()
    return multiprocessing.active_children() == [] and live_graphpipe_threads() == []


def test_workers_yield_the_plain_batches_in_order_for_two_epochs():
    plain = python_chain(with_fake_subgraphs, batch_size=3, shuffle=True)
    expected = list(plain) + list(plain)
    loader = gp.DataLoader(python_chain(with_fake_subgraphs, batch_size=3, shuffle=True), num_workers=3)
    got = list(loader)
    workers = sorted(process.pid for process in multiprocessing.active_children())
    got += list(loader)
    assert sorted(process.pid for process in multiprocessing.active_children()) == workers  # they persist
    assert len(workers) == 3
    loader.close()
    assert [mb.batch_index for mb in got] == list(range(24))
    for a, b in zip(expected, got):
        assert torch.equal(a.seeds, b.seeds) and torch.equal(a.input_nodes, b.input_nodes)
        assert torch.equal(a.node_features["feat"], b.node_features["feat"])
    assert _nothing_left_running()


def test_a_thread_started_in_the_workers_is_reported_in_them():
    """Found in review: a prefetch() the workers run was reported as "thread 1" beside the
    training process's "thread 2" (explain, draw, stats), though it ran in each worker."""
    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(data.train_set, 2).prefetch().sample_neighbor(data.graph, [2]).fetch_feature(data.features, ["feat"])
    loader = gp.DataLoader(pipe, num_workers=2)
    where = dict(re.findall(r"^ +\d+\. (\S+) +runs in: (.*)$", loader.explain().split("Pipe as run:")[1], re.M))
    assert where["ItemSampler"] == "2 worker processes, thread 1 in each" and where["NeighborSampler"] == "2 worker processes"
    assert where["FeatureFetcher"] == "thread 2"
    list(loader)
    assert loader.stats()["ItemSampler"]["where"] == "2 worker processes, thread 1 in each"
    loader.close()


def test_a_sampler_in_workers_gives_the_plain_batches():
    expected = list(karate_chain(batch_size=3))
    loader = gp.DataLoader(karate_chain(batch_size=3), num_workers=2)
    assert "2 worker processes" in loader.explain()
    assert_same_batches(expected, list(loader))
    stats = loader.stats()
    assert stats["WindowSampler"]["where"] == "2 worker processes" and stats["WindowSampler"]["batches"] == 12
    assert stats["WindowSampler"]["work_s"] > 0 and stats["ProcessWorkers(2)"]["batches"] == 12
    # every worker runs the ItemSampler over all batches and keeps its share: it counts each batch once
    assert stats["ItemSampler"]["batches"] == stats["Shard"]["batches"] == 12
    del loader
    assert _nothing_left_running()


def test_stats_inside_an_epoch_count_the_workers_batches_received_so_far():
    """Each batch brings its worker's stage timings: after leaving the loop at batch 5 of 12,
    the stages in the workers count what the consumer's side received (they had 0)."""
    loader = gp.DataLoader(karate_chain(batch_size=3), num_workers=2)
    for i, _ in enumerate(loader):
        if i == 4:
            break
    stats = loader.stats()
    received = stats["ProcessWorkers(2)"]["batches"]
    assert 5 <= received < 12 and stats["consumer"]["batches"] == 5
    assert stats["ItemSampler"]["batches"] == stats["WindowSampler"]["batches"] == received
    assert stats["WindowSampler"]["work_s"] > 0
    loader.close()


def test_exception_in_a_worker_reaches_the_consumer_and_the_next_epoch_starts_clean():
    loader = gp.DataLoader(python_chain(fail_on_batch_3), num_workers=2)
    seen = []
    with pytest.raises(ValueError, match=r"(?s)graphpipe worker process 1.*toy failure in batch 3") as info:
        for minibatch in loader:
            seen.append(minibatch.batch_index)
    assert seen == [0, 1, 2]
    assert "fail_on_batch_3" in str(info.value)  # the worker's traceback is in the message
    # the same workers serve the next epoch; what the failed one left in the queues is dropped
    assert [minibatch.batch_index for minibatch in loader] == list(range(9, 18))
    loader.close()
    assert _nothing_left_running()


def _toy_items():
    return gp.ItemSet(torch.arange(34), names="seeds")


def test_a_batchs_tensors_arrive_equal_and_its_small_storages_in_one_buffer():
    """A worker sends the storages of a batch's small tensors in one shared buffer, which the
    consumer copies out storage by storage; larger and already shared ones go as torch sends
    them. Either way every tensor arrives equal, with its dtype, strides and type."""
    expected = list(gp.ItemSampler(_toy_items(), 4).transform(assorted_tensors))
    loader = gp.DataLoader(gp.ItemSampler(_toy_items(), 4).transform(assorted_tensors), num_workers=2)
    got = list(loader)
    loader.close()
    assert len(got) == len(expected) == 9
    for a, b in zip(expected, got):
        assert a.keys() == b.keys() and a["text"] == b["text"]
        assert [t.tolist() for t in b["nested"].unbind()] == [t.tolist() for t in a["nested"].unbind()]
        for key in a.keys() - {"text", "nested"}:
            assert type(b[key]) is type(a[key]) and b[key].dtype == a[key].dtype, key
            assert b[key].stride() == a[key].stride() and b[key].requires_grad == a[key].requires_grad, key
            assert torch.equal(b[key], a[key]), key
        b["slice"][0] = -1  # views of one storage still share it
        assert b["transposed"][2, 0] == -1
        for key in ("seeds", "slice", "bool", "bfloat16", "complex", "empty"):
            assert not b[key].is_shared(), key  # copied out of the buffer (torch's way: a shared file each)
            assert b[key].untyped_storage().nbytes() == a[key].untyped_storage().nbytes(), key
        assert b["large"].is_shared() and b["shared"].is_shared()
    assert _nothing_left_running()


def test_a_batch_that_cannot_be_pickled_is_reported_not_lost():
    loader = gp.DataLoader(gp.ItemSampler(_toy_items(), 4).transform(unpicklable_batch), num_workers=2)
    with pytest.raises(Exception, match=r"(?s)graphpipe worker process 0.*pickle"):
        list(loader)
    loader.close()
    assert _nothing_left_running()


def test_a_dying_worker_is_reported():
    loader = gp.DataLoader(python_chain(die_on_batch_2), num_workers=2)
    with pytest.raises(RuntimeError, match=r"DataLoader worker 0 \(pid \d+\) died: exited with code 3"):
        list(loader)
    loader.close()
    assert _nothing_left_running()


def test_a_worker_killed_mid_epoch_is_named_with_its_signal():
    loader = gp.DataLoader(python_chain(same_minibatch, batch_size=1), num_workers=2)
    seen = []
    with pytest.raises(RuntimeError) as info:
        for minibatch in loader:
            seen.append(minibatch.batch_index)
            if minibatch.batch_index == 1:  # worker 1 made this batch and is making the next of its own
                (victim,) = [p for p in multiprocessing.active_children() if p.name == "graphpipe-worker-1"]
                os.kill(victim.pid, signal.SIGKILL)
    assert str(info.value).startswith(
        f"DataLoader worker 1 (pid {victim.pid}) died: killed by signal SIGKILL (out of memory?"
    )
    assert seen[:2] == [0, 1] and len(seen) < 34
    # the next epoch starts fresh workers
    assert [minibatch.batch_index for minibatch in loader] == list(range(34, 68))
    loader.close()
    assert _nothing_left_running()


def test_early_break_ends_the_epoch_and_close_or_del_stop_the_workers():
    loader = gp.DataLoader(python_chain(same_minibatch), num_workers=2)
    for minibatch in loader:
        if minibatch.batch_index == 1:
            break
    gc.collect()
    assert live_graphpipe_threads() == [] and len(multiprocessing.active_children()) == 2
    assert [minibatch.batch_index for minibatch in loader][:2] == [9, 10]  # no leftovers of the broken epoch
    loader.close()
    assert _nothing_left_running()
    iterator = iter(loader)
    assert next(iterator).batch_index == 18
    assert len(multiprocessing.active_children()) == 2
    del loader
    del iterator
    assert _nothing_left_running()


def test_the_collector_finalizing_a_worker_loader_waits_for_nothing_and_no_thread_walks_others(monkeypatch):
    """A loader in a reference cycle is finalized by the garbage collector, which can run
    while CPython holds its thread-list lock (it ran inside sys._current_frames(), called
    by the main-guard check from a loader thread): joining the workers there deadlocked
    every thread. The check walks the main thread's own frames when the epoch starts, and
    the finalizer only tells the (busy) worker to stop."""

    def walk_other_threads():
        raise AssertionError("sys._current_frames() called")

    gc.collect()  # earlier tests' garbage is not this test's
    monkeypatch.setattr(sys, "_current_frames", walk_other_threads)
    loader = gp.DataLoader(python_chain(three_seconds_from_batch_1), num_workers=1)
    iterator = iter(loader)
    assert next(iterator).batch_index == 0
    time.sleep(0.3)  # the worker is in batch 1's 3 s
    loader.cycle = (loader, iterator)
    del loader, iterator
    gc.collect()
    # A stop that waited would have waited 2 s, then terminated the worker, which is still in
    # its 3 s batch when the collection returns from only telling it to stop.
    worker_still_busy = len(multiprocessing.active_children()) == 1
    deadline = time.monotonic() + 10
    while not _nothing_left_running() and time.monotonic() < deadline:
        time.sleep(0.05)  # the worker exits after its batch, then the loader thread waiting for it
    assert _nothing_left_running()
    assert worker_still_busy


def test_unpicklable_worker_chains_get_a_clear_error():
    loader = gp.DataLoader(python_chain(lambda minibatch: minibatch), num_workers=2)
    with pytest.raises(RuntimeError, match=r"must be picklable \(no lambdas or local functions\)"):
        list(loader)
    assert _nothing_left_running()


_SCRIPT_SETUP = """
import graphpipe as gp

data = gp.datasets.karate_club()
pipe = gp.ItemSampler(data.train_set, 2).fetch_feature(data.features, ["feat"])
loader = gp.DataLoader(pipe, num_workers=2)  # at module level: its workers start here, skipping the script
"""


def _run_script(tmp_path, body):
    path = tmp_path / "train.py"
    path.write_text(_SCRIPT_SETUP + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)


@pytest.mark.parametrize(
    "body",
    [
        "for epoch in range(2):\n    print(len(list(loader)), 'batches')\n",
        "def main():\n    for epoch in range(2):\n        print(len(list(loader)), 'batches')\n\nmain()\n",
    ],
)
def test_a_script_without_a_main_guard_gets_workers_that_skip_it(tmp_path, body):
    """As with PyG's loader, a script without the guard runs: its workers do not run it
    again (the stages they run are graphpipe's), so it prints its lines once; at exit the
    workers stop on their own before multiprocessing would terminate them (no leak warning)."""
    result = _run_script(tmp_path, "print('script ran')\n" + body)
    assert result.returncode == 0, result.stderr
    assert "leaked semaphore" not in result.stderr
    num_batches = -(-len(gp.datasets.karate_club().train_set) // 2)
    assert result.stdout.split("\n")[:3] == ["script ran"] + [f"{num_batches} batches"] * 2


_SCRIPT_STAGE = """
import graphpipe as gp

class Tag(gp.Pipe):
    def __init__(self, source):
        super().__init__()
        self.source = source

    def process(self, minibatch):
        return minibatch

data = gp.datasets.karate_club()
loader = gp.DataLoader(Tag(gp.ItemSampler(data.train_set, 2)).fetch_feature(data.features, ["feat"]), num_workers=2)
"""


_SCRIPT_PARTIAL = """
import functools
import graphpipe as gp

def tag(minibatch, k):
    return minibatch

data = gp.datasets.karate_club()
pipe = gp.ItemSampler(data.train_set, 2).transform(functools.partial(tag, k=1))
loader = gp.DataLoader(pipe.fetch_feature(data.features, ["feat"]), num_workers=2)
"""


@pytest.mark.parametrize("script, name, line", [(_SCRIPT_STAGE, "Tag", 13), (_SCRIPT_PARTIAL, "tag", 10)])
def test_a_script_without_a_main_guard_whose_workers_need_it_is_told_to_add_one(tmp_path, script, name, line):
    """A class of the script, or its function inside a partial: named, not a dead worker."""
    path = tmp_path / "train.py"
    path.write_text(script + "for mb in loader:\n    pass\n")
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode != 0
    assert f'outside `if __name__ == "__main__":` (train.py, line {line}' in result.stderr
    assert f"the stages the workers run use {name}, defined in the script" in result.stderr
    assert "picklable" not in result.stderr and "died" not in result.stderr


def test_a_function_defined_under_the_main_guard_is_named_before_workers_start(tmp_path):
    """Workers re-run the script without its ``if __name__ == "__main__":`` block, so a
    stage's function defined there could not be unpickled in them (a dead worker): the
    loader names it instead, before any worker starts."""
    path = tmp_path / "train.py"
    path.write_text(
        "import graphpipe as gp\n"
        "data = gp.datasets.karate_club()\n"
        "if __name__ == '__main__':\n"
        "    def tag(minibatch):\n"
        "        return minibatch\n"
        "    pipe = gp.ItemSampler(data.train_set, 2).transform(tag).fetch_feature(data.features, ['feat'])\n"
        "    loader = gp.DataLoader(pipe, num_workers=2)\n"
        "    print(len(list(loader)))\n"
    )
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode != 0
    assert 'the stages the workers run use tag, which the script defines inside `if __name__ == "__main__":`' in result.stderr
    assert "died" not in result.stderr and "Can't get attribute" not in result.stderr


def test_interactive_sessions_and_scripts_read_from_stdin_are_told_before_workers_start(tmp_path):
    """Found in review: a function defined in a notebook (here ``python -c``, whose
    ``__main__`` has no file either) made every worker die ("worker 0 died: exited with
    code 1"), and a script read from stdin did so for any pipe: both are named at once."""
    tagged = (
        "import graphpipe as gp\n"
        "def tag(minibatch):\n"
        "    return minibatch\n"
        "data = gp.datasets.karate_club()\n"
        "pipe = gp.ItemSampler(data.train_set, 2).transform(tag).fetch_feature(data.features, ['feat'])\n"
        "print(len(list(gp.DataLoader(pipe, num_workers=1))))\n"
    )
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    result = run([sys.executable, "-c", tagged])
    assert result.returncode != 0 and "died" not in result.stderr
    assert "the stages the workers run use tag, defined in this notebook or interactive session" in result.stderr
    result = run([sys.executable, "-"], input=tagged.replace(".transform(tag)", ""))
    assert result.returncode != 0 and "died" not in result.stderr
    assert "the main script ('<stdin>') is not a file worker processes can run again" in result.stderr
    result = run([sys.executable, "-c", tagged.replace(".transform(tag)", "")])
    assert result.returncode == 0, result.stderr  # built-in stages only: workers need nothing of __main__


def test_the_same_script_under_a_main_guard_runs(tmp_path):
    result = _run_script(tmp_path, 'if __name__ == "__main__":\n    print(len(list(loader)), "batches")\n')
    assert result.returncode == 0, result.stderr
    num_items = len(gp.datasets.karate_club().train_set)
    assert result.stdout.strip() == f"{-(-num_items // 2)} batches"


def test_hiding_the_main_script_from_two_threads_restores_it(monkeypatch):
    """Two loaders (re)starting worker pools from two threads at once: each hides the main
    script in turn, and ``__main__``'s ``__spec__`` and ``__file__`` come back as they were."""
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "__spec__", object())  # as under `python -m script`
    monkeypatch.setitem(main.__dict__, "__file__", "/path/of/the/script.py")
    before = {name: main.__dict__.get(name, "absent") for name in ("__file__", "__spec__")}
    inside, barrier = [], threading.Barrier(2, timeout=5)

    def start_a_pool():
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        with _main_script_hidden():
            inside.append((main.__dict__.get("__file__", "absent"), main.__spec__))
            time.sleep(0.02 if len(inside) == 1 else 0.1)  # unlocked, the first would leave first

    threads = [threading.Thread(target=start_a_pool) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert inside == [("absent", None)] * 2
    assert {name: main.__dict__.get(name, "absent") for name in ("__file__", "__spec__")} == before


_SCRIPT_OPENMP = """
import os
import torch
import graphpipe as gp

def openmp_settings(batch):
    return [os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")]

if __name__ == "__main__":
    loader = gp.DataLoader(gp.ItemSampler(gp.ItemSet(torch.arange(4), names="seeds"), 2).transform(openmp_settings), num_workers=2)
    print([settings for settings in loader], os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""


@pytest.mark.parametrize(
    "given, workers",
    [({}, ["PASSIVE", "10000"]), ({"OMP_WAIT_POLICY": "ACTIVE"}, ["ACTIVE", None])],
)
def test_workers_sleep_when_idle_unless_the_environment_says_otherwise(tmp_path, given, workers):
    """Workers (several per core, as PyG's examples ask for) spinning idle in OpenMP starved
    each other: PyG's ``bipartite_sage_unsup.py`` with 16 workers on 2 cores took 0.8 s an
    epoch instead of 0.08 s. They start with the README's settings for few cores, the
    training process keeps its own environment, and a setting the user made is kept."""
    path = tmp_path / "train.py"
    path.write_text(_SCRIPT_OPENMP)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} | given
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    own = [given.get("OMP_WAIT_POLICY"), None]
    assert result.stdout.strip() == f"{[workers, workers]} {own[0]} {own[1]}"


def test_a_fetcher_placed_in_workers_reads_right_rows_and_reports_no_hit_rate_of_the_unused_copy():
    """Each worker reads through a cache of its own; the training process's copy never
    ran, so ``stats()`` reports no hit rate for it (it said 0.0)."""
    from graphpipe.transforms import Place, place

    data = gp.datasets.karate_club()
    table = data.features["node", "feat"].data
    cached = gp.CPUCachedFeature(gp.Feature(table), max_cache_size_in_bytes=5 * table[0].nbytes)
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(34).repeat(3), names="seeds"), 4).fetch_feature(gp.FeatureStore({"feat": cached}), ["feat"])
    loader = gp.DataLoader(pipe, transforms=[lambda p: place(p, (Place(), Place("workers", 2)))])
    batches = list(loader)
    assert len(batches) == 26 and all(torch.equal(mb.node_features["feat"], table[mb.seeds]) for mb in batches)
    row = loader.stats()["FeatureFetcher"]
    assert row["where"] == "2 worker processes" and row["batches"] == 26 and "cache_hit_rate" not in row
    loader.close()
