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


@pytest.mark.parametrize("variable", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"])
def test_user_tuning_is_left_alone(variable):
    assert retain_freed_memory(environ={variable: "1"}) is False
