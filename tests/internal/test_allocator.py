"""The allocator opt-in (graphpipe._internal.allocator). It changes malloc for the whole
process, so every test that applies it does so in a child process of its own."""

import ctypes
import os
import subprocess
import sys

import pytest

from graphpipe._internal.allocator import retain_freed_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child(code: str, *args: str) -> str:
    """The output of ``code`` run in a new process without the user's malloc tuning."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_applied_on_glibc_without_user_tuning():
    try:
        ctypes.CDLL("libc.so.6").gnu_get_libc_version
    except (OSError, AttributeError):
        pytest.skip("not glibc")
    code = "from graphpipe._internal.allocator import retain_freed_memory; print(retain_freed_memory(environ={}))"
    assert _child(code).strip() == "True"


@pytest.mark.parametrize("variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"])
def test_user_tuning_is_left_alone(variable):
    assert retain_freed_memory(environ={variable: "1"}) is False


_THREAD_PROBE = """
import resource, threading
import numpy as np
import graphpipe
from graphpipe._internal.allocator import retain_freed_memory
if not retain_freed_memory():  # the opt-in, first thing, before threads make arenas
    print("skip")
    raise SystemExit
faults = []
def allocate_twice():
    for _ in range(2):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        block = np.empty(96 << 20, np.uint8)
        block[::4096] = 1  # touch every page
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
        del block
thread = threading.Thread(target=allocate_twice)
thread.start()
thread.join()
print(faults[0], faults[1])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_a_thread_reuses_a_freed_block_above_64_mb():
    """A thread arena's heap holds at most 64 MB, so without ``M_ARENA_MAX=1`` a block
    this large is mapped fresh in a thread every time and faulted in again. In a fresh
    process that opts in first (arenas made before the opt-in stay)."""
    out = _child(_THREAD_PROBE)
    if out.strip() == "skip":
        pytest.skip("glibc tuning not applied here")
    first, second = map(int, out.split())
    assert second <= 8, f"the second 96 MB block took {second} page faults (first: {first})"


# Whether a 64 MB block is mapped on its own, after importing graphpipe, then again after
# the opt-in (a freed block above glibc's 32 MB cap leaves the dynamic threshold as it was).
_PROBE = """
import ctypes
import graphpipe
from graphpipe._internal.allocator import retain_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p

def mapped_alone():
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(64 << 20)
    mapped = libc.mallinfo2().hblkhd - before
    libc.free(ctypes.c_void_p(block))
    return int(mapped >= 64 << 20)

print(mapped_alone())
retain_freed_memory()
print(mapped_alone())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_importing_graphpipe_leaves_malloc_settings_unchanged():
    """glibc's default mmap threshold (at most 32 MB) maps a 64 MB block on its own;
    ``retain_freed_memory`` (an explicit opt-in) puts it on the heap instead. A fresh
    process that only imports graphpipe must still map it."""
    try:
        ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        pytest.skip("needs glibc >= 2.33 (mallinfo2)")
    # import only, then the opt-in (the probe sees its change), in one process
    assert _child(_PROBE).split() == ["1", "0"]
