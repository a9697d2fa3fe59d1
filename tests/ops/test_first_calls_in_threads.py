"""Kernels first called from several threads at once (a loader's pool) in a fresh process."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FIRST_CALLS = textwrap.dedent(
    """
    import sys, threading
    import torch
    import graphpipe as gp
    from graphpipe.ops import sample_neighbors

    print("numpy.ma" in sys.modules)  # numba types arrays through np.ma: imported by the importing thread
    graph = gp.CSCGraph.from_coo(torch.tensor([1, 2, 3, 0]), torch.tensor([0, 0, 1, 2]), num_nodes=4)
    barrier, errors = threading.Barrier(8), []

    def first_call():
        barrier.wait()
        try:
            sample_neighbors(graph.indptr, graph.indices, torch.tensor([0, 1, 2]), 2, key=7)
        except BaseException as error:
            errors.append(repr(error))

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(errors)
    """
)


def test_first_kernel_calls_in_threads_at_once():
    """numpy imports ``numpy.ma`` lazily and numba reads it to type every array argument: a
    gloo rank whose pool threads made their first calls together recursed until
    RecursionError in that import. ``import graphpipe`` imports it first."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", FIRST_CALLS], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["True", "[]"]
