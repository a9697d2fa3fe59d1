"""What a first run says while numba compiles: the loader's job, a kernel a batch compiles
on demand (a cold epoch's last, partial batch stalled silently), dataset generation."""

import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

import numba
import numpy as np

from graphpipe.loading import compile as pipes_compile
from graphpipe.loading.compile import CompileJob

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _kernel(module: str):
    """A new numba function of ``module`` (not compiled yet)."""

    def add_one(x):
        return x + 1

    add_one.__module__ = module
    return numba.njit(add_one)


def _in_a_thread(function):
    thread = threading.Thread(target=function)
    thread.start()
    thread.join(60)


def test_a_graphpipe_kernel_compiled_on_demand_says_a_batch_waits_for_it(caplog, monkeypatch):
    monkeypatch.setattr(pipes_compile, "NOTICE_AFTER_S", 0.001)  # any compilation takes longer
    CompileJob([], background=False)  # a loader's job: from then on, kernels compiled on demand are reported
    kernel = _kernel("graphpipe.ops.fake")
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        _in_a_thread(lambda: kernel(np.int64(1)))  # as a batch in a loader thread
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith(
        "graphpipe: a batch waits for numba to compile graphpipe.ops.fake._kernel.<locals>.add_one (its first use in "
        "this install, e.g. by a smaller last batch; later runs load it from the cache in "
    )
    assert re.fullmatch(r"graphpipe: kernel ready after \d+\.\d s", messages[1]), messages[1]


def test_kernels_outside_graphpipe_or_compiled_by_a_job_have_no_such_notice(caplog, monkeypatch):
    monkeypatch.setattr(pipes_compile, "NOTICE_AFTER_S", 0.001)
    outside, in_job = _kernel("someone_else"), _kernel("graphpipe.ops.fake")
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        _in_a_thread(lambda: outside(np.int64(1)))
        CompileJob([("Fake", lambda: in_job(np.int64(1)))], notice_after=60).wait(60)
    assert caplog.records == []


def test_the_loaders_notice_gives_the_measured_first_run(caplog):
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        CompileJob([("SlowStage", lambda: (_kernel("graphpipe.ops.fake")(np.int64(1)), time.sleep(0.3)))], notice_after=0.05).wait(10)
    assert caplog.records[0].getMessage().startswith(
        "graphpipe: compiling numba kernels for SlowStage (a first run takes 5-10 s on 2 cores; later runs load them "
        "from the cache in "
    )


_GENERATE = textwrap.dedent(
    """
    import logging, sys
    from numba.core import event
    import graphpipe as gp
    from graphpipe.datasets import synthetic, synthetic_hetero

    logging.basicConfig(format="%(message)s")
    compiled = []


    class Compiled(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass


    def listened(generate, tiny):
        def run(*args):
            if args[0] == tiny:  # the kernels' run on a tiny graph
                return generate(*args)
            with event.install_listener("numba:compile", Compiled()):
                return generate(*args)
        return run


    synthetic._generate = listened(synthetic._generate, 256)
    synthetic_hetero._generate = listened(synthetic_hetero._generate, 64)
    gp.datasets.synthetic_node_classification(num_nodes=2000, seed=0)
    gp.datasets.synthetic_mag(num_papers=1000, seed=0)
    print("compiled after the tiny runs:", compiled)
    """
)


def test_dataset_generation_says_it_compiles_and_compiles_only_on_a_tiny_graph(tmp_path):
    """With an empty numba cache, each generator says it compiles (it did so silently for
    8-18 s): its kernels are compiled on a tiny graph first, under the notice, and the
    generation itself compiles nothing."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _GENERATE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "compiled after the tiny runs: []", done.stdout
    notices = [line for line in done.stderr.splitlines() if line.startswith("graphpipe:")]
    assert len(notices) == 4, done.stderr
    for name, (compiling, ready) in zip(("synthetic_node_classification", "synthetic_mag"), zip(notices[::2], notices[1::2])):
        assert compiling.startswith(
            f"graphpipe: compiling numba kernels for {name} (a first run takes 5-10 s on 2 cores; later runs load "
            f"them from the cache in {tmp_path}"
        ), compiling
        assert ready.startswith("graphpipe: kernels ready after ")


_EXIT_DURING_A_JOB = textwrap.dedent(
    """
    import sys, time
    import torch
    from graphpipe.loading.compile import CompileJob

    def torch_task(marker):
        def task():
            end = time.perf_counter() + 1.5
            while time.perf_counter() < end:  # in torch's C++ (GIL released) nearly all the time
                torch.full((1 << 20,), 1.0).sum()
            open(marker, "w").close()
        return task

    CompileJob([("First", torch_task(sys.argv[1] + ".first")), ("Second", torch_task(sys.argv[1] + ".second"))], notice_after=60)
    time.sleep(0.3)  # the script ends while the job's first task runs
    """
)


def test_a_script_ending_during_a_compile_job_exits_cleanly_after_its_current_task(tmp_path):
    """The job's thread is a daemon: at finalization, one inside torch's C++ (a compile
    task runs the op on a tiny graph) was ended by ``pthread_exit``, whose unwinding called
    std::terminate (SIGABRT, "terminate called without an active exception"; 2 in 40 runs
    of the README's first snippet). At exit the job finishes its current task and starts
    no other. One run is enough: a thread ended at finalization never writes the first
    task's marker (the task runs 1.5 s, the script ends after 0.3 s), whether or not the
    process aborts."""
    script = tmp_path / "job.py"
    script.write_text(_EXIT_DURING_A_JOB)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], env=env, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr
    assert (tmp_path / "run.first").exists() and not (tmp_path / "run.second").exists()
