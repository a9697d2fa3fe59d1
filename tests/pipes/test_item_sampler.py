import warnings

import numpy as np
import pytest
import torch

from graphpipe import ItemSampler, ItemSet


def _epoch(sampler):
    return [mb for mb in sampler]


def test_batches_cover_items_once_and_carry_labels():
    seeds = torch.arange(100, 110)
    labels = seeds * 2
    sampler = ItemSampler(ItemSet((seeds, labels), names=("seeds", "labels")), batch_size=4, shuffle=True, seed=3)
    batches = _epoch(sampler)
    assert len(sampler) == 3 and len(batches) == 3
    assert [mb.seeds.numel() for mb in batches] == [4, 4, 2]
    got = torch.cat([mb.seeds for mb in batches])
    assert sorted(got.tolist()) == seeds.tolist()
    for mb in batches:
        assert torch.equal(mb.labels, mb.seeds * 2)
    assert [mb.batch_index for mb in batches] == [0, 1, 2]


def test_new_permutation_each_epoch_reproducible_under_seed():
    a = ItemSampler(ItemSet(1000), batch_size=1000, shuffle=True, seed=7)
    b = ItemSampler(ItemSet(1000), batch_size=1000, shuffle=True, seed=7)
    a0, a1 = _epoch(a)[0].seeds, _epoch(a)[0].seeds
    b0, b1 = _epoch(b)[0].seeds, _epoch(b)[0].seeds
    assert torch.equal(a0, b0) and torch.equal(a1, b1)
    assert not torch.equal(a0, a1)
    c0 = _epoch(ItemSampler(ItemSet(1000), batch_size=1000, shuffle=True, seed=8))[0].seeds
    assert not torch.equal(a0, c0)


def test_batch_index_counts_across_epochs():
    sampler = ItemSampler(ItemSet(10), batch_size=3, drop_last=True)
    assert len(sampler) == 3
    assert [mb.batch_index for mb in _epoch(sampler)] == [0, 1, 2]
    assert [mb.batch_index for mb in _epoch(sampler)] == [3, 4, 5]


def test_no_shuffle_keeps_order_and_drop_last():
    sampler = ItemSampler(torch.tensor([5, 6, 7, 8, 9]), batch_size=2, drop_last=True)
    assert [mb.seeds.tolist() for mb in _epoch(sampler)] == [[5, 6], [7, 8]]


def test_seed_none_follows_torch_manual_seed():
    torch.manual_seed(0)
    a = _epoch(ItemSampler(ItemSet(50), batch_size=50, shuffle=True))[0].seeds
    torch.manual_seed(0)
    b = _epoch(ItemSampler(ItemSet(50), batch_size=50, shuffle=True))[0].seeds
    assert torch.equal(a, b)


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match="`batch_size` must be an int >= 1"):
        ItemSampler(ItemSet(4), batch_size=batch_size)


@pytest.mark.parametrize("option", ["shuffle", "drop_last"])
@pytest.mark.parametrize("value", ["False", 0, None])
def test_shuffle_and_drop_last_must_be_bools(option, value):
    # was: drop_last="False" dropped the last batch (items lost), shuffle="False" shuffled
    with pytest.raises(TypeError, match=rf"ItemSampler: `{option}` must be a bool, got {value!r}"):
        ItemSampler(ItemSet(5), batch_size=2, **{option: value})


def test_item_set_field_errors():
    with pytest.raises(ValueError, match="needs a field named 'seeds'"):
        ItemSampler(ItemSet((torch.arange(3), torch.arange(3)), names=("a", "labels")), 2)
    with pytest.raises(ValueError, match=r"\['weights'\] are not supported"):
        ItemSampler(ItemSet((torch.arange(3), torch.arange(3)), names=("seeds", "weights")), 2)


def test_an_input_id_field_rides_beside_the_positions():
    """An ItemSet's own ``input_id`` (PyG's of a mask: node ids) reaches the batch as int64
    in every batch's order; ``item_ids`` stay the positions; it goes with node seeds only."""
    seeds = torch.tensor([9, 4, 7, 1, 3])
    items = ItemSet((seeds, seeds.to(torch.int32) * 10), names=("seeds", "input_id"))
    batches = _epoch(ItemSampler(items, batch_size=2, shuffle=True, seed=5))
    for mb in batches:
        assert mb.input_id.dtype == torch.int64 and torch.equal(mb.input_id, mb.seeds * 10)
        assert torch.equal(mb.seeds, seeds[mb.item_ids])
    assert sorted(torch.cat([mb.seeds for mb in batches]).tolist()) == sorted(seeds.tolist())
    with pytest.raises(TypeError, match=r"the `input_id` field must be \[N\] integer ids beside node seeds"):
        ItemSampler(ItemSet((seeds, seeds.float()), names=("seeds", "input_id")), 2)
    with pytest.raises(TypeError, match=r"the `input_id` field must be \[N\] integer ids beside node seeds"):
        ItemSampler(ItemSet((torch.zeros(5, 2, dtype=torch.int64), seeds), names=("seeds", "input_id")), 2)


def test_node_pairs_are_batched_by_pair_with_labels_indexes_and_item_ids():
    pairs = torch.arange(20).view(10, 2)
    labels = torch.arange(10) % 2 == 0
    indexes = torch.arange(10) // 3
    items = ItemSet((pairs, labels, indexes), names=("seeds", "labels", "indexes"))
    batches = _epoch(ItemSampler(items, batch_size=4, shuffle=True, seed=1))
    assert [tuple(mb.seeds.shape) for mb in batches] == [(4, 2), (4, 2), (2, 2)]
    assert [mb.batch_size for mb in batches] == [4, 4, 2]
    ids = torch.cat([mb.item_ids for mb in batches])
    assert sorted(ids.tolist()) == list(range(10)) and ids.tolist() != list(range(10))
    for mb in batches:
        assert torch.equal(mb.seeds, pairs[mb.item_ids])
        assert torch.equal(mb.labels, labels[mb.item_ids]) and torch.equal(mb.indexes, indexes[mb.item_ids])


def test_seeds_must_be_node_ids_pairs_or_hyperlinks():
    with pytest.raises(ValueError, match=r"node ids of shape \[N\], node pairs of shape \[N, 2\].*hyperlinks of shape \[N, k\].*\(4, 1\)"):
        ItemSampler(ItemSet(torch.zeros(4, 1, dtype=torch.int64), names="seeds"), 2)
    with pytest.raises(ValueError, match=r"got shape \(4, 2, 1\)"):
        ItemSampler(ItemSet(torch.zeros(4, 2, 1, dtype=torch.int64), names="seeds"), 2)
    with pytest.raises(TypeError, match="`seeds` field must hold integer node ids, got dtype torch.float32"):
        ItemSampler(ItemSet(torch.zeros(4, 2), names="seeds"), 2)
    with pytest.raises(ValueError, match="an `indexes` field groups node pairs"):
        ItemSampler(ItemSet((torch.arange(4), torch.arange(4)), names=("seeds", "indexes")), 2)


@pytest.mark.parametrize("batch_size", [np.int64(4), np.int32(4), torch.tensor(4), torch.LongTensor([4])])
def test_batch_size_and_seed_as_numpy_or_tensor_integers(batch_size):
    expected = [mb.seeds.tolist() for mb in ItemSampler(ItemSet(10), 4, shuffle=True, seed=5)]
    sampler = ItemSampler(ItemSet(10), batch_size, shuffle=True, seed=np.int64(5))
    assert sampler.batch_size == 4 and type(sampler.batch_size) is int and len(sampler) == 3
    assert [mb.seeds.tolist() for mb in sampler] == expected


@pytest.mark.parametrize("seed", [1.7, 1.0, "1", True])
def test_non_integer_seed_is_rejected(seed):
    with pytest.raises(ValueError, match=r"ItemSampler: `seed` must be an int, got"):
        ItemSampler(ItemSet(4), 2, shuffle=True, seed=seed)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_hyperlinks_are_batched_by_item(shuffle, batch_size):
    """GraphBolt's test_ItemSet_hyperlink: [N, 3] seeds, each row kept whole."""
    seeds = torch.arange(0, 3 * 103).reshape(-1, 3)
    batches = _epoch(ItemSampler(ItemSet(seeds, names="seeds"), batch_size, shuffle=shuffle, seed=2))
    assert len(batches) == -(-103 // batch_size)
    for mb in batches:
        assert mb.seeds.shape == (mb.item_ids.numel(), 3) and mb.is_link_batch
        assert torch.equal(mb.seeds, seeds[mb.item_ids])
    assert sorted(torch.cat([mb.item_ids for mb in batches]).tolist()) == list(range(103))


def test_none_or_an_empty_item_set_is_refused_naming_item_set():
    with pytest.raises(TypeError, match=r"ItemSampler: `item_set` is None; give an ItemSet of the seeds.*from_pyg gives train_set=None"):
        ItemSampler(None, 2)
    with pytest.raises(ValueError, match=r"ItemSampler: `item_set` has no items"):
        ItemSampler(ItemSet(torch.tensor([], dtype=torch.int64)), 2)
    with pytest.raises(TypeError, match=r"ItemSampler: `item_set`: ItemSet: `items` must be an int, a tensor"):
        ItemSampler("seeds", 2)


def test_a_mask_or_pygs_edge_label_index_as_seeds_gets_a_hint():
    """Found in review: PyG's habits. A [2, N] edge_label_index became 2 hyperlinks of N
    nodes without a word; a boolean mask's refusal did not say how to take its ids."""
    with pytest.raises(TypeError, match=r"got dtype torch.bool \(a boolean mask's ids: mask.nonzero\(\).view\(-1\)\)"):
        ItemSampler(ItemSet(torch.tensor([True, False, True]), names="seeds"), 2)
    with pytest.warns(UserWarning, match=r"is 2 hyperlinks of 20 nodes each; node pairs are \[N, 2\] .*edge_label_index.t\(\)") as caught:
        ItemSampler(ItemSet(torch.arange(40).view(2, 20), names="seeds"), 2)
    assert caught[0].filename == __file__  # the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ItemSampler(ItemSet(torch.tensor([[0, 3, 3], [4, 4, 4]]), names="seeds"), 2)  # GraphBolt's hyperlinks
