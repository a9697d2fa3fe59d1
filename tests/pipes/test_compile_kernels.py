"""compile_kernels(pipe) compiles what a pipe's batches run, in the background, and says so
when it takes long."""

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from functools import partial
from pathlib import Path

import numba
import pytest
import torch

import graphpipe as gp
from graphpipe.loading.compile import CompileJob, compile_kernels

ROOT = Path(__file__).resolve().parents[2]


def _pipe(graph_builder, sampler, negatives=None, **options):
    """Node seeds, or with ``negatives`` (the negative sampler's options) node pairs."""
    graph = graph_builder(400, 60, seed=7, index_dtype=torch.int32, weights=True)
    features = gp.FeatureStore({"feat": torch.randn(400, 5).to(torch.bfloat16)}, edge_features={"w": torch.rand(graph.total_num_edges)})
    if negatives is None:
        pipe = gp.ItemSampler(gp.ItemSet(torch.arange(400)), 64, seed=0)
    else:
        pairs = torch.stack([torch.arange(400), torch.arange(400) * 7 % 400], 1)
        pipe = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 64, seed=0).sample_uniform_negative(graph, 2, seed=0, **negatives)
    pipe = getattr(pipe, sampler)(graph, [80, 4], seed=0, **options)
    return pipe.fetch_feature(features, ["feat"], ["w"])


CASES = {
    "neighbor": ("sample_neighbor", {}),
    "neighbor-replace-weighted": ("sample_neighbor", {"replace": True, "weights": "weight"}),
    "labor-dependent": ("sample_layer_neighbor", {"batch_dependency": 3}),
    "labor-importance": ("sample_layer_neighbor", {"importance_sampling": -1}),
    "labor-weighted": ("sample_layer_neighbor", {"weights": "weight"}),
    "link-negatives": ("sample_neighbor", {"negatives": {}}),
    "link-negatives-excluding-edges": ("sample_layer_neighbor", {"negatives": {"exclude_existing_edges": True}}),
}

# In a new process (no kernel loaded yet), for each case: every graphpipe kernel forgets its
# compiled signatures once the pipe is built, the job runs (NUMBA_NUM_THREADS=1: no helper
# process, whose kernels would only be on disk), and then the pipe's batches must add no
# signature to any kernel. A job that compiled nothing fails: the batches would compile the
# kernels, or load them from numba's disk cache, themselves (the "skipped" control).
CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = sys.argv[1:3]
    from conftest import random_graph  # tests/conftest.py
    from numba.core.registry import CPUDispatcher
    import graphpipe as gp
    from graphpipe.loading.compile import compile_kernels
    from test_compile_kernels import CASES, _pipe

    def kernels():
        return [value for name, module in list(sys.modules.items()) if name.startswith("graphpipe.")
                for value in vars(module).values() if isinstance(value, CPUDispatcher)]

    def added(pipe, compile):
        for kernel in kernels():
            kernel._reset_overloads()
        compile(pipe)
        before = {id(kernel): set(kernel.overloads) for kernel in kernels()}
        assert len(list(pipe)) == 7
        return sorted(f"{k.py_func.__qualname__}{sig}" for k in kernels() for sig in set(k.overloads) - before[id(k)])

    out = {name: added(_pipe(random_graph, sampler, **options), lambda pipe: compile_kernels(pipe, background=False))
           for name, (sampler, options) in CASES.items()}
    out["loader"] = added(_pipe(random_graph, "sample_layer_neighbor", importance_sampling=2),
                          lambda pipe: gp.DataLoader(pipe).compile_job.wait())
    out["skipped"] = added(_pipe(random_graph, "sample_neighbor"), lambda pipe: None)
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def added_by_batches():
    """``{case: kernel signatures its pipe's batches added after its compile job}``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    args = [str(ROOT / "tests"), str(ROOT / "tests" / "pipes")]
    done = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", [*CASES, "loader"])
def test_a_pipe_compiles_nothing_after_its_job(added_by_batches, case):
    assert added_by_batches[case] == []


def test_the_check_fails_without_a_job(added_by_batches):
    assert any("_sample" in signature for signature in added_by_batches["skipped"])


@pytest.mark.parametrize("case", CASES)
def test_the_job_has_each_stages_tasks_upstream_first(graph_builder, case):
    sampler, options = CASES[case]
    pipe = _pipe(graph_builder, sampler, **options)
    job = compile_kernels(pipe)
    negatives = ["UniformNegativeSampler"] if "negatives" in options else []
    assert [name for name, _ in job.tasks] == negatives + [type(pipe.source).__name__] * 2 + ["FeatureFetcher"] * 2
    assert job.wait(timeout=600)


def _compiles_for(seconds: float):
    """A task in which numba compiles a new function, then ``seconds`` pass."""

    def task():
        numba.njit(lambda x: x + 1)(1)
        time.sleep(seconds)

    return task


def test_a_long_job_says_what_it_compiles_and_when_it_is_ready(caplog):
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        job = CompileJob([("FastStage", lambda: None), ("SlowStage", _compiles_for(0.3))], notice_after=0.1)
        assert job.wait(timeout=10)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith("graphpipe: compiling numba kernels for SlowStage (a first run takes")
    assert "later runs load them from the cache in " in messages[0]
    assert messages[1].startswith("graphpipe: kernels ready after 0.")
    assert job.seconds >= 0.3


def test_a_quick_job_is_silent(caplog):
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        job = CompileJob([("Stage", _compiles_for(0))], notice_after=1.0)
        assert job.wait(timeout=10)
        time.sleep(1.1)
    assert caplog.records == []


def test_a_slow_job_that_compiles_nothing_is_silent(caplog):
    # Kernels loaded from numba's cache on a loaded machine: nothing compiles, however long it takes.
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        job = CompileJob([("Loads", partial(time.sleep, 0.3)), ("Then", lambda: None)], notice_after=0.05)
        assert job.wait(timeout=10)
    assert caplog.records == []


def test_a_job_that_starts_compiling_after_its_time_says_so_then(caplog):
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        job = CompileJob([("Loads", partial(time.sleep, 0.2)), ("Compiles", _compiles_for(0.1))], notice_after=0.05)
        assert job.wait(timeout=10)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and messages[0].startswith("graphpipe: compiling numba kernels for Compiles ("), messages


def test_jobs_running_together_give_one_notice(caplog):
    gate = threading.Event()
    with caplog.at_level(logging.WARNING, logger="graphpipe"):
        jobs = [CompileJob([(f"Stage{i}", lambda: (numba.njit(lambda x: x)(1), gate.wait(10)))], notice_after=0.05) for i in range(2)]
        time.sleep(0.3)
        gate.set()
        assert all(job.wait(timeout=10) for job in jobs)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and "compiling" in messages[0] and "ready" in messages[1], messages


def test_a_failing_task_is_raised_by_wait_and_the_next_tasks_do_not_run():
    ran = []

    def fail():
        raise ValueError("no kernel")

    job = CompileJob([("A", fail), ("B", lambda: ran.append("B"))], background=False)
    with pytest.raises(ValueError, match="no kernel"):
        job.wait()
    assert ran == [] and job.done()


def test_a_loader_starts_the_job_of_the_pipe_it_was_given(graph_builder):
    loader = gp.DataLoader(_pipe(graph_builder, "sample_layer_neighbor", importance_sampling=2))
    assert [name for name, _ in loader.compile_job.tasks] == ["LayerNeighborSampler"] * 2 + ["FeatureFetcher"] * 2
    assert loader.compile_job.wait(timeout=600)


def test_a_cached_feature_compiles_its_own_kernels(graph_builder):
    features = gp.FeatureStore({"feat": gp.CPUCachedFeature(gp.Feature(torch.randn(400, 5)), 400 * 20)})
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(400)), 64).fetch_feature(features, ["feat"])
    assert compile_kernels(pipe).tasks == []  # its table is not one array (it used to raise here)


def test_after_its_notice_a_job_hands_the_next_tasks_to_a_helper_process(tmp_path):
    made = tmp_path / "made"
    tasks = [("Slow", _compiles_for(0.5)), ("Later", partial(os.mkdir, made))]
    job = CompileJob(tasks, notice_after=0.05, helper_process=True)
    assert job.wait(timeout=120)  # os.mkdir ran once (twice would raise FileExistsError here)
    assert job.handed_off == 1 and made.is_dir()
    quick = CompileJob([("Quick", lambda: None), ("Next", lambda: None)], notice_after=5, helper_process=True)
    assert quick.wait(timeout=10) and quick.handed_off is None  # no notice: nothing handed off


def test_stages_in_worker_processes_are_left_to_them(graph_builder):
    loader = gp.DataLoader(_pipe(graph_builder, "sample_neighbor"), num_workers=2)
    try:
        assert [name for name, _ in loader.compile_job.tasks] == ["FeatureFetcher"] * 2  # the sampler runs in the workers
    finally:
        loader.close()
