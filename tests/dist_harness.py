"""Run a function on P gloo ranks in processes of a fork server, with timeouts, collecting results.

Unlike ``torch.multiprocessing.spawn``, a failing rank does not make the harness kill
the others: each rank's own exit (or hang, reported as such after ``timeout``) is
observed, which is what the failure-propagation test checks.
"""

import os
import pickle
import sys
import time
import traceback
from datetime import timedelta

import torch.multiprocessing as mp

# How long a collective may wait for a peer before gloo raises (the backstop against hangs).
COLLECTIVE_TIMEOUT_S = 20


def _entry(rank, world_size, workdir, fn, args, collective_timeout=COLLECTIVE_TIMEOUT_S, backend="gloo"):
    import numba
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    result_path = os.path.join(workdir, f"rank{rank}.pkl")
    try:
        dist.init_process_group(
            backend,
            init_method=f"file://{os.path.join(workdir, 'init')}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=collective_timeout),
        )
        value = fn(rank, world_size, *args)
        outcome = ("ok", value)
    except BaseException:
        outcome = ("error", traceback.format_exc())
    with open(result_path, "wb") as f:
        pickle.dump(outcome, f)
    sys.stdout.flush()
    # Leave without tearing the process group down: a peer may already be gone.
    os._exit(0 if outcome[0] == "ok" else 1)


def run_ranks(
    fn, world_size, workdir, args=(), timeout=120, collective_timeout=COLLECTIVE_TIMEOUT_S, start="forkserver", backend="gloo"
):
    """``[(status, value_or_traceback)]`` per rank; status is "ok", "error" or "hung".
    ``collective_timeout``: the process group's timeout (seconds). ``start``: "forkserver"
    (a fork server that has imported torch, numba and graphpipe starts each rank in a few
    ms, where spawning one re-imports them: 2-3 s of CPU a rank, half the distributed
    tests' time; nothing of theirs runs before a rank forks, as graphpipe starts no thread
    and changes nothing at import), or "spawn" (a new interpreter, which reads the
    environment afresh: the server's glibc read ``MALLOC_ARENA_MAX`` when it started).
    ``backend``: the default process group's (``"cuda:gloo"``, no CPU backend, stands in
    for NCCL on a machine without GPUs)."""
    context = mp.get_context(start)
    if start == "forkserver":
        context.set_forkserver_preload(["torch", "torch.distributed", "numba", "graphpipe"])
    workdir = str(workdir)
    processes = [
        context.Process(target=_entry, args=(rank, world_size, workdir, fn, args, collective_timeout, backend))
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()

    deadline = time.monotonic() + timeout
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    outcomes = []
    for rank, process in enumerate(processes):
        if process.is_alive():
            process.kill()
            process.join()
            outcomes.append(("hung", None))
            continue
        path = os.path.join(workdir, f"rank{rank}.pkl")
        if not os.path.exists(path):
            outcomes.append(("error", f"rank {rank} died with exit code {process.exitcode}"))
            continue
        with open(path, "rb") as f:
            outcomes.append(pickle.load(f))
    return outcomes


def values(outcomes):
    """The ranks' return values; fails with every rank's traceback if one did not finish."""
    bad = [(rank, o) for rank, o in enumerate(outcomes) if o[0] != "ok"]
    if bad:
        raise AssertionError("\n".join(f"rank {rank}: {status}\n{value}" for rank, (status, value) in bad))
    return [value for _, value in outcomes]
