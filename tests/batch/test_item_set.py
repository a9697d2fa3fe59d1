import numpy as np
import pytest
import torch

from graphpipe import ItemSet


def test_int_is_arange():
    s = ItemSet(5)
    assert len(s) == 5 and s.names == ("seeds",)
    assert s.items[0].tolist() == [0, 1, 2, 3, 4]


def test_tuple_fields_and_indexing():
    seeds, labels = torch.tensor([4, 2, 9]), torch.tensor([1, 0, 1])
    s = ItemSet((seeds, labels), names=("seeds", "labels"))
    assert len(s) == 3
    got_seeds, got_labels = s[torch.tensor([2, 0])]
    assert got_seeds.tolist() == [9, 4] and got_labels.tolist() == [1, 1]
    assert torch.equal(s.field("labels"), labels) and s.field("other") is None


@pytest.mark.parametrize(
    "items, names, error, match",
    [
        (-1, None, ValueError, r"`items` as an int is a number of items, >= 0, got -1"),
        ((torch.arange(3), torch.arange(4)), ("seeds", "labels"), ValueError, "same length"),
        ((torch.arange(3), torch.arange(3)), ("seeds",), ValueError, "one name per tensor"),
        ("abc", None, TypeError, "must be an int, a tensor, a list/range/array \\(one field\\) or a tuple"),
        (True, None, TypeError, "got bool"),
        (1.5, None, TypeError, "got float"),
        (torch.tensor(2.0), None, ValueError, "0-d tensor"),
        ((), None, ValueError, "empty tuple"),
    ],
)
def test_bad_input(items, names, error, match):
    with pytest.raises(error, match=match):
        ItemSet(items, names=names)


@pytest.mark.parametrize("items", [[0, 1, 2, 3], range(4), np.arange(4), torch.arange(4)])
def test_a_list_range_array_or_tensor_is_one_field(items):
    s = ItemSet(items)
    assert len(s) == 4 and s.names == ("seeds",) and len(s.items) == 1
    assert s.items[0].tolist() == [0, 1, 2, 3]


def test_a_tuple_is_one_field_per_entry_in_any_form():
    s = ItemSet(([4, 2, 9], np.array([1, 0, 1])), names=("seeds", "labels"))
    assert len(s) == 3 and len(s.items) == 2
    assert s.field("seeds").tolist() == [4, 2, 9] and s.field("labels").tolist() == [1, 0, 1]


@pytest.mark.parametrize("count", [np.int64(3), torch.tensor(3)])
def test_an_integer_count_in_any_form_is_arange(count):
    assert ItemSet(count).items[0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("items", [0, torch.tensor([], dtype=torch.int64), (torch.zeros(0, 2, dtype=torch.int64), torch.zeros(0))])
def test_an_item_set_may_be_empty(items):
    s = ItemSet(items, names="seeds" if not isinstance(items, tuple) else ("seeds", "labels"))
    assert len(s) == 0
    assert [t.shape[0] for t in s.items] == [0] * len(s.items)
