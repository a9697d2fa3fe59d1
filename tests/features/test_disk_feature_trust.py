"""Issue 29 for DiskBasedFeature: a lying .npy header is refused when the feature is
built, a fallback from O_DIRECT is not silent, and Ctrl-C, close() and interpreter exit
stop a long read within one kernel call."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
import torch

from graphpipe.features import disk as disk_feature
from graphpipe.features.disk import DiskBasedFeature


def npy_with_header(path, shape, descr="<f4", data_bytes=64):
    """A .npy file whose header claims ``shape``, followed by ``data_bytes`` bytes."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": shape})
        f.write(b"\0" * data_bytes)
    return path


# ---------------------------------------------------------------- item 4: lying headers
def test_a_negative_shape_is_refused_naming_the_file(tmp_path):
    path = npy_with_header(tmp_path / "neg.npy", (-5, 4))
    with pytest.raises(ValueError, match=r"neg.npy'\): the header's shape \(-5, 4\) has a negative dimension"):
        DiskBasedFeature(path)


def test_a_row_size_that_overflows_int64_is_refused_naming_the_file(tmp_path):
    path = npy_with_header(tmp_path / "huge.npy", (2, 2**32, 2**32))  # 2**66 bytes a row: 0 in int64
    with pytest.raises(ValueError, match=r"huge.npy'\): the file is \d+ bytes, shorter than the \d+ its header promises"):
        DiskBasedFeature(path)
    path = npy_with_header(tmp_path / "empty.npy", (0, 2**40, 2**40), data_bytes=0)
    with pytest.raises(ValueError, match=r"empty.npy'\): the header's row shape .* is too large"):
        DiskBasedFeature(path)


# ---------------------------------------------------------------- item 5: O_DIRECT fallback
def refuse_o_direct(monkeypatch):
    real_open = os.open

    def fake_open(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(disk_feature.os, "open", fake_open)
    monkeypatch.setattr(disk_feature.os, "O_DIRECT", getattr(os, "O_DIRECT", 0x4000), raising=False)


def test_a_file_replaced_by_a_link_after_its_header_was_checked_is_not_read(tmp_path):
    """Found in review: the file is opened at the first read, by its path; a symlink planted
    there since (to any file outside the dataset) was read as the table's rows."""
    np.save(tmp_path / "feat.npy", np.zeros((4, 2), np.float32))
    outside = tmp_path / "outside"
    outside.mkdir()
    np.save(outside / "secret.npy", np.full((4, 2), 7.0, np.float32))
    feature = DiskBasedFeature(tmp_path / "feat.npy", direct_io=False)
    os.replace(tmp_path / "feat.npy", tmp_path / "old.npy")
    os.symlink(outside / "secret.npy", tmp_path / "feat.npy")
    with pytest.raises(ValueError, match=r"feat.npy'\): the path names another file than when the feature was made"):
        feature.read(torch.arange(4))
    os.remove(tmp_path / "feat.npy")
    os.replace(tmp_path / "old.npy", tmp_path / "feat.npy")  # the checked file back: read as before
    assert feature.read(torch.arange(4)).eq(0).all()


def test_falling_back_from_o_direct_warns_once_naming_the_file(tmp_path, monkeypatch):
    np.save(tmp_path / "f.npy", np.arange(12, dtype=np.float32).reshape(6, 2))
    refuse_o_direct(monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"f.npy'\): the file system refuses O_DIRECT .*read through the page cache"):
        with DiskBasedFeature(tmp_path / "f.npy") as feature:
            assert feature.read(torch.tensor([5]))[0].tolist() == [10.0, 11.0]
            assert feature.uses_direct_io is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per file
        with DiskBasedFeature(tmp_path / "f.npy") as feature:
            feature.read(torch.tensor([1]))
        with DiskBasedFeature(tmp_path / "f.npy", direct_io=False) as feature:
            feature.read(torch.tensor([1]))


def test_direct_io_true_on_a_file_system_without_it_raises(tmp_path, monkeypatch):
    np.save(tmp_path / "f.npy", np.zeros((4, 2), np.float32))
    refuse_o_direct(monkeypatch)
    with pytest.raises(OSError, match=r"f.npy'\): cannot open with O_DIRECT .*pass direct_io=False"):
        DiskBasedFeature(tmp_path / "f.npy", direct_io=True).read(torch.tensor([0]))


# ---------------------------------------------------------------- item 6: stopping a long read
# A slow disk, simulated: before each kernel call, sleep 100 us per row in native code
# that does not return to Python (as a pread on a cold disk), so a signal is seen only
# when the call returns. `order` is the kernel's third argument.
_SLOW_DISK = textwrap.dedent(
    """
    import numba
    from graphpipe.features import disk as disk_feature

    _usleep = numba.types.ExternalFunction("usleep", numba.types.intc(numba.types.uint32))

    @numba.njit(nogil=True)
    def crawl(rows):
        for _ in range(rows):
            _usleep(100)

    crawl(1)
    _read_rows = disk_feature._pread_rows

    def slow_pread_rows(*args):
        crawl(args[2].size)
        return _read_rows(*args)

    disk_feature._pread_rows = slow_pread_rows
    """
)

_CHILD = _SLOW_DISK + textwrap.dedent(
    """
    import signal
    import sys
    import torch

    # Ctrl-C as in a shell: the test process may pass on an ignored SIGINT (an inherited
    # disposition seen under pytest-xdist), which would leave the child deaf to it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from graphpipe import DiskBasedFeature

    feature = DiskBasedFeature(sys.argv[1], num_threads=int(sys.argv[2]))
    feature.read(torch.arange(4))  # opened, threads started
    print("reading", flush=True)
    feature.read(torch.randint(0, 1000, (1_600_000,)))  # 160 s of rows at 100 us each (40 s on 4 threads)
    print("finished", flush=True)
    """
)


@pytest.mark.parametrize("num_threads", [1, 4])
def test_ctrl_c_stops_a_long_read_and_the_process_exits_promptly(tmp_path, num_threads):
    np.save(tmp_path / "f.npy", np.zeros((1000, 16), np.float32))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path / "f.npy"), str(num_threads)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert child.stdout.readline() == "reading\n", child.stderr.read()
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            out, err = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the process still runs 30 s after Ctrl-C")
        took = time.monotonic() - sent
    finally:
        child.kill()
    assert "KeyboardInterrupt" in err and "finished" not in out
    # The read alone would take 40 s or more: exiting within half of that means it was stopped (not a
    # speed check; a loaded machine took up to 4 s).
    assert took < 20.0, f"the process exited {took:.1f} s after Ctrl-C"


def test_close_from_another_thread_stops_a_long_read(tmp_path, monkeypatch):
    np.save(tmp_path / "f.npy", np.zeros((1000, 16), np.float32))
    namespace = {}
    exec(_SLOW_DISK, namespace)
    monkeypatch.setattr(disk_feature, "_pread_rows", namespace["slow_pread_rows"])
    feature = DiskBasedFeature(tmp_path / "f.npy", num_threads=2)
    future = feature.read_async(torch.randint(0, 1000, (400_000,)))  # 40 s of rows
    time.sleep(0.3)
    feature.close()
    with pytest.raises(RuntimeError, match=r"f.npy'\): the read was stopped"):
        future.result(timeout=10)  # the read alone: 20 s on 2 threads
    assert not [t for t in threading.enumerate() if t.name.startswith("graphpipe-disk-io") and t.is_alive()]
    monkeypatch.setattr(disk_feature, "_pread_rows", namespace["_read_rows"])
    assert feature.read(torch.tensor([3])).shape == (1, 16)  # reopens
    feature.close()
