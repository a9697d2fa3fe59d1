import ctypes
import sys

import pytest

from graphpipe.allocator import retain_freed_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_applied_on_glibc_without_user_tuning():
    try:
        ctypes.CDLL("libc.so.6").gnu_get_libc_version
    except (OSError, AttributeError):
        pytest.skip("not glibc")
    assert retain_freed_memory(environ={}) is True


@pytest.mark.parametrize("variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"])
def test_user_tuning_is_left_alone(variable):
    assert retain_freed_memory(environ={variable: "1"}) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_a_thread_reuses_a_freed_block_above_64_mb():
    """A thread arena's heap holds at most 64 MB, so without ``M_ARENA_MAX=1`` a block
    this large is mapped fresh in a thread every time and faulted in again."""
    import resource
    import threading

    import numpy as np

    if not retain_freed_memory():  # already applied at import; False: not glibc or user tuning
        pytest.skip("glibc tuning not applied here")
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
    assert faults[1] <= 8, f"the second 96 MB block took {faults[1]} page faults (first: {faults[0]})"
