"""Every cached numba kernel of graphpipe has its own identity: numba names a kernel's
cache files and object-code symbols after its qualified name, so two kernels sharing one
(variants built by one factory) load each other's code in a later process."""

import importlib
import os
import pkgutil
import subprocess
import sys

from numba.core.registry import CPUDispatcher

import graphpipe

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SAMPLE = """
import sys, torch
from graphpipe.ops import sample_neighbors
indptr = torch.tensor([0, 200] + [200] * 199)
for fanout in sys.argv[1:]:
    sample = sample_neighbors(indptr, torch.arange(200), torch.tensor([0]), int(fanout), key=1)
    print(sample.indices.numel())
"""


# Triton kernels' modules import triton (CUDA builds of torch only) and hold no numba kernels.
TRITON_MODULES = ("graphpipe.ops.triton_sampling", "graphpipe.ops.cache_lookup")


def test_cached_kernels_have_distinct_qualified_names():
    names = {}
    for module in pkgutil.walk_packages(graphpipe.__path__, "graphpipe."):
        if module.name.startswith(("graphpipe.distributed", "graphpipe.loading.compile_helper", *TRITON_MODULES)):
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, CPUDispatcher) and value._cache is not None and value.py_func.__module__ == module.name:
                name = f"{module.name}.{value.py_func.__qualname__}"
                assert "<locals>" not in name
                names.setdefault(name, set()).add(id(value))
    assert "graphpipe.ops.neighbor_sampling._sample_uniform_large" in names
    assert {name: ids for name, ids in names.items() if len(ids) > 1} == {}


def test_small_then_large_fanout_kernels_load_from_the_cache_in_later_processes(tmp_path):
    # A first process caches the small-fanout kernel, a second loads it and compiles the
    # large-fanout one; the third loads both (it failed with "'descr' is NULL" when the
    # two had one qualified name) and gets each one's own sample size.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    for fanouts, want in [(["10"], "10"), (["10", "100"], "10 100"), (["10", "100"], "10 100")]:
        done = subprocess.run(
            [sys.executable, "-c", SAMPLE, *fanouts], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == want.split()
