"""OwnedRowsFeature: a part's rows read by global id, its file mapped for random access."""

import os
import sys

import numpy as np
import pytest
import torch

from graphpipe.features.part import OwnedRowsFeature, file_checksum


def vm_flags(path: str) -> list:
    """The ``VmFlags`` of this process's memory maps of ``path`` (Linux's ``/proc/self/smaps``)."""
    flags, inside = [], False
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                inside = len(fields) >= 6 and fields[5] == os.path.realpath(path)
            elif inside and fields[0] == "VmFlags:":
                flags.append(fields[1:])
    return flags


@pytest.fixture
def part_file(tmp_path):
    """``(path, ids, table)``: rows of ids 3, 10, 11, 40 of a 50-row table, in a .npy file."""
    ids = torch.tensor([3, 10, 11, 40])
    table = np.arange(50 * 3, dtype=np.float32).reshape(50, 3)
    path = str(tmp_path / "node-feat-0.npy")
    np.save(path, table[ids.numpy()])
    return path, ids, table


def test_reads_owned_rows_by_global_id_and_refuses_others(part_file):
    path, ids, table = part_file
    feature = OwnedRowsFeature(path, ids, 50, (os.path.getsize(path), file_checksum(path)))
    assert feature.num_rows == 50 and feature.row_shape == (3,)
    assert torch.equal(feature.read(torch.tensor([40, 3, 11])), torch.from_numpy(table[[40, 3, 11]]))
    with pytest.raises(ValueError, match="id 12 is not held by this part"):
        feature.read(torch.tensor([10, 12]))


def test_a_corrupted_file_is_named(part_file):
    path, ids, _ = part_file
    feature = OwnedRowsFeature(path, ids, 50, (os.path.getsize(path), file_checksum(path) ^ 1))
    with pytest.raises(ValueError, match="node-feat-0.npy' does not match its checksum"):
        feature.read(torch.tensor([3]))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_the_file_is_mapped_for_random_access(part_file):
    """MADV_RANDOM ("rr" in the mapping's VmFlags): no readahead of rows no batch asked for."""
    path, ids, _ = part_file
    feature = OwnedRowsFeature(path, ids, 50)
    assert vm_flags(path) == []  # mapped on first use
    feature.read(torch.tensor([10]))
    flags = vm_flags(path)
    assert len(flags) == 1 and "rr" in flags[0]
    plain = np.load(path, mmap_mode="r")  # the same file mapped without the advice: no "rr"
    assert sorted("rr" in f for f in vm_flags(path)) == [False, True]
    del plain
