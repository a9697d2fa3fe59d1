"""When a loader's threads stop: the garbage collector, a dropped loader, interpreter exit.

Worker processes in the garbage collector: tests/loading/test_workers.py."""

import gc
import json
import os
import subprocess
import sys
import textwrap
import threading

import torch

import graphpipe as gp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _chain(fn=None):
    """ItemSampler (karate's 34 nodes x 2, batches of 4) -> [transform(fn)] -> fetch_feature."""
    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(68) % 34, names="seeds"), 4, shuffle=True, seed=3)
    if fn is not None:
        pipe = pipe.transform(fn)
    return pipe.fetch_feature(data.features, ["feat"])


def _threads():
    gc.collect()
    return [t for t in threading.enumerate() if t.name.startswith("graphpipe") and t.name != "graphpipe-compile"]


_COLLECTOR_FINALIZES = textwrap.dedent(
    """
    import gc, json, threading, time
    import torch
    import graphpipe as gp

    release = threading.Event()

    def stuck_from_batch_1(minibatch):
        if minibatch.batch_index >= 1:
            release.wait(30)
        return minibatch

    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(68) % 34, names="seeds"), 4, shuffle=True, seed=3)
    loader = gp.DataLoader(pipe.transform(stuck_from_batch_1).fetch_feature(data.features, ["feat"]))
    iterator = iter(loader)
    assert next(iterator).batch_index == 0
    time.sleep(0.2)  # the background thread is in batch 1
    loader.cycle = (loader, iterator)  # as a failed loader's traceback makes
    del loader, iterator
    start = time.monotonic(); gc.collect(); collecting = time.monotonic() - start
    threads = [t for t in threading.enumerate() if t.name.startswith("graphpipe-prefetch")]
    release.set()
    for thread in threads:
        thread.join(10)
    alive = [t.name for t in threading.enumerate() if t.name.startswith("graphpipe") and t.name != "graphpipe-compile"]
    print(json.dumps({"collecting": collecting, "stopped": len(threads), "alive": alive}))
    """
)


def test_the_collector_finalizing_a_loader_in_a_cycle_waits_for_nothing():
    """Inside the garbage collector, stopping tells the threads and returns (a join there
    can deadlock: see tests/loading/test_workers.py); the threads end on their own. In a
    fresh interpreter: other tests' garbage is not this test's to time."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-c", _COLLECTOR_FINALIZES], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.splitlines()[-1])
    # Stopping outside the collector waits 2 s for the stuck batch, then warns.
    assert result["collecting"] < 1.5
    assert result["stopped"] == 1  # the thread stuck in batch 1, told to stop: it ended after its batch
    assert result["alive"] == []


def test_dropping_loaders_stops_the_threads_of_their_referenced_iterators():
    """Twenty loaders dropped while an iterator of each is still referenced hold no thread;
    an iterator used again starts its threads again at its next batch."""
    iterators = []
    for i in range(20):
        loader = gp.DataLoader(_chain())
        iterators.append(iter(loader))
        assert next(iterators[-1]).batch_index == 0
    assert len(_threads()) == 1  # the last loader's fetcher thread
    del loader
    assert _threads() == []
    assert [next(iterators[0]).batch_index, len(_threads())] == [1, 1]
    want = [mb.batch_index for mb in _chain()][2:]
    assert [mb.batch_index for mb in iterators[0]] == want
    assert _threads() == []


def test_a_loop_over_a_loader_it_does_not_keep_runs_the_whole_epoch():
    assert [mb.batch_index for mb in gp.DataLoader(_chain())] == list(range(17))


_EXIT_RUNS = textwrap.dedent(
    """
    import gc, json, os, sys
    import torch
    import graphpipe as gp


    def torch_work(minibatch):
        # A few ms in torch's C++ (GIL released), as a transform of the training side has.
        a = torch.ones(256, 256)
        for _ in range(4):
            a = a @ a / 256
        return minibatch


    def pipe(run):
        data = gp.datasets.karate_club()
        items = gp.ItemSet(torch.arange(340) %% 34, names="seeds")
        chain = gp.ItemSampler(items, 4, shuffle=True, seed=run).sample_neighbor(data.graph, [3, 2])
        return chain.fetch_feature(data.features, ["feat"]).transform(torch_work)


    def run_and_end(run):
        it = iter(gp.DataLoader(pipe(run)))
        next(it)
        globals()["it"] = it  # referenced until the interpreter finalizes
        if run %% 2:
            raise RuntimeError(f"run {run} ends by an exception")


    if sys.argv[1] == "fork":
        # The kernels are compiled here (numba's workqueue layer: OpenMP's is not fork-safe
        # once it ran), and every run is a forked child that ends as a script does.
        next(iter(pipe(0)))
        gc.freeze()  # a child does not copy the parent's objects while it finalizes
        running, statuses, run = {}, {}, 0
        while run < %(runs)d or running:
            if run < %(runs)d and len(running) < %(at_once)d:
                pid = os.fork()
                if pid == 0:
                    run_and_end(run)
                    break  # then: atexit, finalization
                running[pid], run = run, run + 1
            else:
                pid, status = os.wait()
                statuses[running.pop(pid)] = os.waitstatus_to_exitcode(status)
        else:
            print(json.dumps(statuses), flush=True)
            os._exit(0)
    else:
        run_and_end(int(sys.argv[1]))
    """
)


def test_exit_with_an_unfinished_epoch_is_clean_every_time(tmp_path):
    """A script that ends, normally or by an exception, while an unfinished epoch's
    iterator is referenced: Python 3.11 killed a daemon thread still inside torch's C++ at
    finalization with pthread_exit, whose unwinding called std::terminate ("terminate
    called without an active exception", SIGABRT) in about a third of the runs here and
    most runs of a fresh script. 24 forked runs (all 24 clean by chance: (2/3)**24 < 1e-4),
    and two fresh scripts with the default threading layer."""
    runs = 24
    script = tmp_path / "runs.py"
    script.write_text(_EXIT_RUNS % {"runs": runs, "at_once": 4})
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    fresh = [
        subprocess.Popen([sys.executable, str(script), str(run)], env=env, stderr=subprocess.PIPE, text=True)
        for run in (0, 1)
    ]
    forked = subprocess.run(
        [sys.executable, str(script), "fork"], env=dict(env, NUMBA_THREADING_LAYER="workqueue"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    fresh_stderr = [process.communicate(timeout=300)[1] for process in fresh]
    assert [process.returncode for process in fresh] == [0, 1], fresh_stderr
    statuses = {int(run): status for run, status in json.loads(forked.stdout).items()}
    assert statuses == {run: run % 2 for run in range(runs)}, forked.stderr[-3000:]
    assert "terminate called" not in forked.stderr + "".join(fresh_stderr)


_EXIT_AFTER_A_LONG_BATCH = textwrap.dedent(
    """
    import sys, time, warnings
    import torch
    import graphpipe as gp

    def torch_for_3_s(minibatch):  # a batch longer than stopping waits (2 s), in torch's C++
        end = time.perf_counter() + 3
        while time.perf_counter() < end:
            torch.full((1 << 20,), 1.0).sum()
        if minibatch.batch_index == 1:
            open(sys.argv[1], "w").close()
        return minibatch

    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(34), names="seeds"), 4).transform(torch_for_3_s)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for minibatch in gp.DataLoader(pipe.fetch_feature(data.features, ["feat"])):
            break  # the background thread is in batch 1's 3 s, and stays in it after the loop stops
    print([str(w.message) for w in caught], flush=True)
    """
)


def test_exit_right_after_a_stop_that_left_a_long_batch_running_is_clean(tmp_path):
    """Leaving a loop stops its threads, waiting 2 s for a batch in progress, then leaves a
    thread still in a longer batch to finish it (with a warning). A script ending right
    then exited with SIGABRT ("terminate called without an active exception": Python 3.11
    ended the thread, inside torch's C++, with pthread_exit): at exit the batches left
    running are waited for."""
    script = tmp_path / "long.py"
    script.write_text(_EXIT_AFTER_A_LONG_BATCH)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "batch1")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-2000:]
    assert "still running a batch 2 s after being asked to stop" in done.stdout, done.stdout
    assert (tmp_path / "batch1").exists()  # the batch left running finished before the process ended
