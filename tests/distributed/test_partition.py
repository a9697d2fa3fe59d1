"""Partition: the hash assignment and user assignments."""

import pytest
import torch

from graphpipe.distributed import Partition


def test_hash_partition_is_fixed_and_balanced():
    nodes = torch.arange(60_000)
    for parts in (2, 3, 8):
        owner = Partition(parts).owner(nodes)
        assert owner.dtype == torch.int64
        assert torch.equal(owner, Partition(parts).owner(nodes))
        counts = torch.bincount(owner, minlength=parts)
        assert int(counts.min()) > 0.95 * nodes.numel() / parts
    # Not `v mod P`: consecutive ids spread over the parts in no fixed pattern.
    assert not torch.equal(Partition(2).owner(nodes[:64]), nodes[:64] % 2)
    assert torch.equal(Partition(1).owner(nodes[:5]), torch.zeros(5, dtype=torch.int64))


def test_user_assignment():
    assignment = torch.tensor([2, 0, 1, 1, 0], dtype=torch.int32)
    partition = Partition(3, assignment)
    assert torch.equal(partition.owner(torch.tensor([4, 0, 3])), torch.tensor([0, 2, 1]))
    with pytest.raises(ValueError, match="beyond the partition's 5 nodes"):
        partition.owner(torch.tensor([5]))


def test_bad_arguments():
    with pytest.raises(ValueError, match="`num_parts` must be an int >= 1"):
        Partition(0)
    with pytest.raises(ValueError, match=r"ranks must be in 0..1"):
        Partition(2, torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="1-D integer tensor"):
        Partition(2, torch.tensor([0.0, 1.0]))
