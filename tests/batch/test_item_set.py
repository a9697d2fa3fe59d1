import numpy as np
import pytest
import torch

import graphpipe as gp
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
        ((torch.arange(3), torch.arange(3)), ("labels", "labels"), ValueError, r"names a field twice; every tensor"),
        ((torch.arange(3), torch.arange(3)), ("seed_nodes", "seeds"), ValueError, r"twice \(seed_nodes and node_pairs"),
        ((torch.arange(6).view(3, 2), torch.arange(3)), ("node_pairs", "seeds"), ValueError, "names a field twice"),
    ],
)
def test_bad_input(items, names, error, match):
    """A name given twice (GraphBolt 2.1's seed_nodes / node_pairs are seeds) kept the
    last tensor: the seeds were the other field's values."""
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
    assert ItemSet(count).items[0].dtype == torch.int64


def test_a_count_tensor_gives_items_of_its_dtype():
    """GraphBolt's test_ItemSet_scalar_dtype (found in review: int32 gave int64 items)."""
    assert ItemSet(torch.tensor(5, dtype=torch.int32)).items[0].dtype == torch.int32


@pytest.mark.parametrize("items", [0, torch.tensor([], dtype=torch.int64), (torch.zeros(0, 2, dtype=torch.int64), torch.zeros(0))])
def test_an_item_set_may_be_empty(items):
    s = ItemSet(items, names="seeds" if not isinstance(items, tuple) else ("seeds", "labels"))
    assert len(s) == 0
    assert [t.shape[0] for t in s.items] == [0] * len(s.items)


@pytest.mark.parametrize("typed", [False, True])
def test_graphbolt_21_names_are_mapped_and_sample(typed):
    """GraphBolt 2.1's ``seed_nodes`` / ``node_pairs`` are ``seeds``; ``negative_dsts``
    make each batch's seeds (its pairs, then their negatives), float32 labels and
    batch-local indexes, as GraphBolt 2.2's ItemSampler does; the batches sample."""
    pairs = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]])
    negatives = torch.tensor([[8, 9], [10, 11], [12, 13], [14, 15]])
    node_set = ItemSet(torch.arange(4), names="seed_nodes")
    link_set = ItemSet((pairs, negatives), names=("node_pairs", "negative_dsts"))
    assert node_set.names == ("seeds",) and link_set.names == ("seeds", "negative_dsts")
    edge_index = torch.stack([torch.arange(16), (torch.arange(16) + 1) % 16])
    etype = "n:to:n"
    if typed:
        graph = gp.CSCGraph.from_hetero_edges({etype: edge_index}, {"n": 16})
        node_set, link_set = gp.HeteroItemSet({"n": node_set}), gp.HeteroItemSet({etype: link_set})
    else:
        graph = gp.CSCGraph.from_edge_index(edge_index, 16)
    (mb,) = gp.ItemSampler(link_set, 4).sample_neighbor(graph, [2])
    seeds, labels, indexes = (field[etype] if typed else field for field in (mb.seeds, mb.labels, mb.indexes))
    assert seeds.tolist() == pairs.tolist() + [[s, d] for (s, _), row in zip(pairs.tolist(), negatives.tolist()) for d in row]
    assert labels.dtype == torch.float32 and labels.tolist() == [1.0] * 4 + [0.0] * 8
    assert indexes.tolist() == [0, 1, 2, 3, 0, 0, 1, 1, 2, 2, 3, 3]
    (mb,) = gp.ItemSampler(node_set, 4).sample_neighbor(graph, [2])
    assert (mb.seeds["n"] if typed else mb.seeds).tolist() == [0, 1, 2, 3] and mb.sampled_subgraphs
    with pytest.raises(ValueError, match=r"make each batch's labels and indexes"):
        ItemSet((pairs, negatives, torch.ones(4)), names=("node_pairs", "negative_dsts", "labels"))
    with pytest.raises(ValueError, match=r"need node pairs"):
        ItemSet((torch.arange(4), negatives), names=("seed_nodes", "negative_dsts"))
