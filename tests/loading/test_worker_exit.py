"""How worker processes end when the program does: a batch in progress at exit, a Ctrl-C
while the fork server starts. Each case runs fresh scripts (the fork server and exit
hooks are per program); the kernels they use are in numba's cache first."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.usefixtures("kernels_for_child_processes")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

_BUSY_WORKERS_AT_THE_END = textwrap.dedent(
    """
    import sys, time
    import torch
    import graphpipe as gp

    def slow_from_batch_2(minibatch):  # longer than stopping waits for a worker (2 s)
        if minibatch.batch_index >= 2:
            time.sleep(2.5)
            open(f"{sys.argv[2]}{minibatch.batch_index}", "w").close()
        return minibatch

    if __name__ == "__main__":
        data = gp.datasets.karate_club()
        pipe = gp.ItemSampler(gp.ItemSet(torch.arange(34), names="seeds"), 4)
        pipe = pipe.sample_neighbor(data.graph, [5, 5]).transform(slow_from_batch_2)
        loader = gp.DataLoader(pipe.fetch_feature(data.features, ["feat"]), num_workers=2)
        for minibatch in loader:
            break  # worker 0 is in batch 2, worker 1 in batch 3
        if sys.argv[1] == "close":
            loader.close()  # waits 2 s, then leaves the workers to finish their batch
    """
)


def test_workers_busy_when_the_program_ends_finish_their_batch_and_exit_on_their_own(tmp_path):
    """A worker still in a batch 2 s after being told to stop (at exit, or by close()) was
    terminated: numba's lock in a worker is a named semaphore that only the worker's own
    exit unregisters, so the resource tracker warned "There appear to be 2 leaked
    semaphore objects" (1 run in 45 of a short script left early; here every run, the
    batches being longer than stopping waits). Exit now waits for them."""
    script = tmp_path / "busy.py"
    script.write_text(_BUSY_WORKERS_AT_THE_END)
    runs = {
        how: subprocess.Popen(
            [sys.executable, str(script), how, str(tmp_path / f"{how}-batch")], env=ENV, stderr=subprocess.PIPE, text=True
        )
        for how in ("exit", "close")
    }
    for how, run in runs.items():
        stderr = run.communicate(timeout=120)[1]
        assert run.returncode == 0 and "leaked" not in stderr, (how, stderr[-3000:])
        assert (tmp_path / f"{how}-batch2").exists() and (tmp_path / f"{how}-batch3").exists(), how


_INTERRUPTED = textwrap.dedent(
    """
    import torch
    import graphpipe as gp

    if __name__ == "__main__":
        data = gp.datasets.karate_club()
        pipe = gp.ItemSampler(gp.ItemSet(torch.arange(34), names="seeds"), 4)
        loader = gp.DataLoader(pipe.sample_neighbor(data.graph, [5, 5]).fetch_feature(data.features, ["feat"]), num_workers=2)
        print("built", flush=True)
        while True:  # the first epoch starts the fork server (1-2 s) and the workers
            for minibatch in loader:
                pass
    """
)


def _group_alive(group: int):
    """The pids of the processes of process group ``group`` that are not zombies."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(int(pid))
    return alive


def test_ctrl_c_while_workers_start_prints_one_traceback_and_leaves_no_process(tmp_path):
    """A Ctrl-C (SIGINT to the terminal's process group) in the first seconds of the first
    epoch reached the fork server while it imported graphpipe, before CPython's fork server
    ignores SIGINT, and printed its KeyboardInterrupt traceback after the program's."""
    script = tmp_path / "interrupted.py"
    script.write_text(_INTERRUPTED)
    # Python ignores SIGINT when started with it ignored (a background job of a shell): the
    # script is started with SIGINT's default, as from a terminal.
    default_sigint = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(*sys.argv[1:2], sys.argv[1:])"
    runs = {}
    for delay in (0.2, 1.0, 2.0):
        run = subprocess.Popen(
            [sys.executable, "-c", default_sigint, sys.executable, str(script)], env=ENV, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        runs[delay] = run
    try:
        built = {delay: time.monotonic() for delay, run in runs.items() if run.stdout.readline().strip() == "built"}
        assert built.keys() == runs.keys()
        for delay, run in sorted(runs.items()):
            time.sleep(max(0.0, built[delay] + delay - time.monotonic()))
            os.killpg(run.pid, signal.SIGINT)
        for delay, run in runs.items():
            stderr = run.communicate(timeout=60)[1]
            # 1: the same script without workers exits so when interrupted in its first batch
            assert run.returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), (delay, run.returncode, stderr[-3000:])
            assert stderr.count("Traceback") == 1 and stderr.rstrip().endswith("KeyboardInterrupt"), (delay, stderr[-3000:])
            assert "leaked" not in stderr, (delay, stderr[-3000:])
        deadline = time.monotonic() + 10
        while any(_group_alive(run.pid) for run in runs.values()) and time.monotonic() < deadline:
            time.sleep(0.1)  # orphaned workers see their consumer gone within 50 ms
        assert {delay: _group_alive(run.pid) for delay, run in runs.items()} == {delay: [] for delay in runs}
    finally:
        for run in runs.values():
            for pid in _group_alive(run.pid):
                os.kill(pid, signal.SIGKILL)
