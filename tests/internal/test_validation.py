"""The argument forms GraphBolt users pass: integers as Python ints, numpy integers and
one-element integer tensors, accepted by every integer argument; non-integers rejected."""

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe._internal.checks import as_int, check_fanout, check_fanouts, check_importance_sampling, check_int


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, 3),
        (np.int64(3), 3),
        (np.int32(-1), -1),
        (np.uint8(7), 7),
        (torch.tensor(5), 5),
        (torch.LongTensor([15]), 15),
        (torch.tensor([2], dtype=torch.int32), 2),
        (np.array(4), 4),
        (np.array([6]), 6),
    ],
)
def test_integers_in_every_form_are_accepted(value, expected):
    number = as_int(value)
    assert number == expected and type(number) is int


@pytest.mark.parametrize(
    "value",
    [True, np.bool_(True), 1.7, 1.0, np.float64(2.0), torch.tensor(2.0), torch.tensor([1, 2]), torch.tensor(True),
     np.array([1.5]), "3", None],
)
def test_non_integers_are_rejected(value):
    assert as_int(value) is None
    with pytest.raises(ValueError, match=r"where: `arg` must be an int, got"):
        check_int(value, "arg", "where")


def test_check_int_bounds_name_the_argument():
    assert check_int(np.int64(4), "batch_size", "ItemSampler", minimum=1) == 4
    with pytest.raises(ValueError, match=r"ItemSampler: `batch_size` must be an int >= 1, got 0"):
        check_int(0, "batch_size", "ItemSampler", minimum=1)
    with pytest.raises(ValueError, match=r"X: `k` must be an int in \[0, 3\], got 4"):
        check_int(4, "k", "X", minimum=0, maximum=3)


def test_fanouts_as_graphbolt_passes_them():
    assert check_fanouts([torch.LongTensor([15]), torch.LongTensor([10])], "S") == [15, 10]
    assert check_fanouts([np.int64(5), -1], "S") == [5, -1]
    assert check_fanouts(torch.tensor([5, 3]), "S") == [5, 3]
    assert check_fanouts(np.array([4, 2]), "S") == [4, 2]
    assert check_fanouts((2,), "S") == [2]
    # one rule for a list entry and for one layer's fanout
    for value in (np.int64(3), torch.LongTensor([3])):
        assert check_fanout(value, "S") == check_fanouts([value], "S")[0] == 3


@pytest.mark.parametrize("bad", [1.7, True, -2, torch.tensor([1, 2]), "3"])
def test_bad_fanouts_are_named(bad):
    with pytest.raises(ValueError, match=r"S: `fanouts\[1\]` must be an int >= 0 or -1"):
        check_fanouts([2, bad], "S")
    with pytest.raises(ValueError, match=r"S: `fanout` must be an int >= 0 or -1"):
        check_fanout(bad, "S")


def test_importance_sampling_accepts_numpy_and_is_capped():
    assert check_importance_sampling(np.int64(2), "L") == 2
    assert check_importance_sampling(-1, "L") == -1 and check_importance_sampling(100, "L") == 100
    for bad in (101, 10**6):
        with pytest.raises(ValueError, match=r"L: `importance_sampling`=\d+ .* use importance_sampling=-1"):
            check_importance_sampling(bad, "L")
    for bad in (-2, 1.5, True):
        with pytest.raises(ValueError, match=r"`importance_sampling` must be an int >= -1"):
            check_importance_sampling(bad, "L")


def test_samplers_accept_graphbolt_fanouts_and_labor_caps_its_iterations():
    data = gp.datasets.karate_club()
    items = gp.ItemSampler(gp.ItemSet(torch.arange(8)), np.int64(4))
    tensors = items.sample_neighbor(data.graph, [torch.LongTensor([3]), torch.LongTensor([2])], seed=1)
    ints = gp.ItemSampler(gp.ItemSet(torch.arange(8)), 4).sample_neighbor(data.graph, [3, 2], seed=1)
    assert tensors.fanouts == [3, 2]
    for a, b in zip(tensors, ints):
        assert torch.equal(a.input_nodes, b.input_nodes)
    labor = items.sample_layer_neighbor(data.graph, [np.int64(3), np.int64(2)], importance_sampling=np.int64(2))
    assert labor.fanouts == [3, 2] and len(list(labor)) == 2
    with pytest.raises(ValueError, match=r"use importance_sampling=-1"):
        items.sample_layer_neighbor(data.graph, [3, 2], importance_sampling=10**6)
