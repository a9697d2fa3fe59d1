"""numba's cache saves, under graphpipe's lock, keep every kernel when several processes
save kernels of one function at the same moment (graphpipe._internal.numba_cache)."""

import os
import subprocess
import sys
import textwrap
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULE = textwrap.dedent(  # a result that tells the compiled signature apart
    """
    import numba

    @numba.njit(cache=True)
    def width(x):
        return x.itemsize * 1000 + x[0] * 10
    """
)

# The lock as ``import graphpipe`` applies it to its kernels, loaded alone: a child importing
# the whole package (and torch) would spend seconds of the suite's two cores before compiling.
CHILD = textwrap.dedent(
    """
    import importlib.util, os, sys, time
    import numpy as np
    path = os.path.join(sys.argv[3], "graphpipe", "_internal", "numba_cache.py")
    spec = importlib.util.spec_from_file_location("lock", path)
    lock = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock)
    sys.path.insert(0, sys.argv[1])
    import kernel
    lock.lock_saves([kernel])
    dtype = np.dtype(sys.argv[2])
    open(os.path.join(sys.argv[1], "ready-" + sys.argv[2]), "w").close()
    while not os.path.exists(os.path.join(sys.argv[1], "go")):  # all start compiling together
        time.sleep(0.001)
    print(kernel.width(np.full(3, 1.5, dtype)))
    """
)

DTYPES = ["int8", "int16", "int32", "int64", "float32", "float64"]


def test_kernels_saved_at_once_by_several_processes_all_load_right(tmp_path):
    (tmp_path / "kernel.py").write_text(MODULE)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), dtype, ROOT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for dtype in DTYPES
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{dtype}").exists() for dtype in DTYPES):  # imports done
        assert time.monotonic() < deadline and all(child.poll() is None for child in children), [
            child.communicate() for child in children if child.poll() is not None
        ]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0] * len(DTYPES), [err for _, err in outputs]
    compiled = [out.split() for out, _ in outputs]
    # 1.5 is 1 in an integer array: each kernel's result names its signature
    want = [np.dtype(d).itemsize * 1000 + float(np.full(1, 1.5, d)[0]) * 10 for d in DTYPES]
    assert [float(out[-1]) for out in compiled] == want
    # A new process loads every signature from the cache, each with its own code.
    check = "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import kernel\n" + "".join(
        f"print(kernel.width(np.full(3, 1.5, np.{d})))\n" for d in DTYPES
    ) + "print(len(kernel.width.stats.cache_hits), len(kernel.width.stats.cache_misses))"
    done = subprocess.run([sys.executable, "-c", check, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert [float(line) for line in lines[:-2]] == want
    assert lines[-2:] == [str(len(DTYPES)), "0"]  # all loaded, none compiled again


IMPORT_ONLY = textwrap.dedent(
    """
    import atexit, gc, importlib, pkgutil
    import numba, torch
    from numba.core import caching, event
    from numba.core.registry import CPUDispatcher

    def listeners():
        return {kind: list(found) for kind, found in event._registered.items() if found}

    save, callbacks, exits, registered = caching.IndexDataCacheFile.save, list(gc.callbacks), atexit._ncallbacks(), listeners()
    import graphpipe
    print(caching.IndexDataCacheFile.save is save, gc.callbacks == callbacks, atexit._ncallbacks() == exits, listeners() == registered)
    kernels = unlocked = 0
    TRITON_MODULES = ("graphpipe.ops.triton_sampling", "graphpipe.ops.cache_lookup")  # need triton; no numba kernels
    for module in pkgutil.walk_packages(graphpipe.__path__, "graphpipe."):
        if not module.name.startswith(("graphpipe.distributed", "graphpipe.loading.compile_helper", *TRITON_MODULES)):
            for value in vars(importlib.import_module(module.name)).values():
                if isinstance(value, CPUDispatcher) and value._cache is not None:
                    kernels += 1
                    unlocked += value._cache._cache_file.save.__func__ is save
    print(kernels > 50, unlocked)
    """
)


def test_import_changes_nothing_process_wide_and_locks_graphpipes_own_kernels():
    """``import graphpipe`` leaves numba's classes, the garbage collector's callbacks, the
    exit hooks and numba's event listeners as they were; every cached kernel of graphpipe
    (whatever module defines it) saves under the lock."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", IMPORT_ONLY], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True", "True", "0"]
