"""HeteroItemSet with ItemSampler and DistributedItemSampler: every item once per epoch,
split by type, item_ids type-local, shuffles reproducible, ranks disjoint."""

import pytest
import torch

from graphpipe import DistributedItemSampler, HeteroItemSet, ItemSampler, ItemSet, ItemSetDict

SIZES = {"paper": 23, "author": 11, "venue": 4}


def item_set(offset=100):
    """Per type: seeds ``offset * k + i`` (k the type's rank in SIZES) and labels ``-seeds``."""
    sets = {}
    for k, (t, n) in enumerate(SIZES.items()):
        seeds = torch.arange(n) + offset * k
        sets[t] = ItemSet((seeds, -seeds), names=("seeds", "labels"))
    return HeteroItemSet(sets)


def collect(batches):
    """node type -> list of (item_id, seed, label) over the batches."""
    out = {t: [] for t in SIZES}
    for minibatch in batches:
        assert set(minibatch.seeds) == set(minibatch.labels) == set(minibatch.item_ids)
        for t, ids in minibatch.item_ids.items():
            assert ids.numel() > 0  # only the types the batch holds
            out[t] += list(zip(ids.tolist(), minibatch.seeds[t].tolist(), minibatch.labels[t].tolist()))
    return out


def check_items(items):
    for k, (t, n) in enumerate(SIZES.items()):
        assert sorted(i for i, _, _ in items[t]) == list(range(n)), t  # every item once
        for i, seed, label in items[t]:
            assert seed == 100 * k + i and label == -seed  # fields of that item of that type


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batch_size", [1, 5, 38, 100])
def test_every_item_once_per_epoch_with_its_type(shuffle, batch_size):
    sampler = ItemSampler(item_set(), batch_size=batch_size, shuffle=shuffle, seed=3)
    assert len(item_set()) == sum(SIZES.values())
    batches = list(sampler)
    assert len(batches) == len(sampler) == -(-38 // batch_size)
    for minibatch in batches[:-1]:
        assert sum(ids.numel() for ids in minibatch.item_ids.values()) == batch_size
    check_items(collect(batches))
    if not shuffle:  # types in the dict's order, items in order
        flat = [(t, i) for mb in batches for t, ids in mb.item_ids.items() for i in ids.tolist()]
        assert flat == [(t, i) for t, n in SIZES.items() for i in range(n)]


def test_drop_last():
    batches = list(ItemSampler(item_set(), batch_size=5, drop_last=True))
    assert len(batches) == 7
    assert sum(ids.numel() for mb in batches for ids in mb.item_ids.values()) == 35


def test_shuffles_are_reproducible_under_the_seed_and_change_per_epoch():
    def order(seed, epoch):
        sampler = ItemSampler(item_set(), batch_size=7, shuffle=True, seed=seed)
        batches = list(sampler.stream(epoch))
        return [(t, ids.tolist()) for mb in batches for t, ids in mb.item_ids.items()]

    assert order(1, 0) == order(1, 0)
    assert order(1, 0) != order(1, 1)
    assert order(1, 0) != order(2, 0)
    # a shuffled batch mixes types
    assert any(len(mb.item_ids) > 1 for mb in ItemSampler(item_set(), batch_size=7, shuffle=True, seed=1))


def test_batch_keeps_the_order_of_rows_within_a_type():
    rows = torch.tensor([30, 2, 24, 0, 37, 25])
    fields = item_set().batch(rows)
    # offsets: paper 0..22, author 23..33, venue 34..37
    assert fields["item_ids"]["paper"].tolist() == [2, 0]
    assert fields["item_ids"]["author"].tolist() == [7, 1, 2]
    assert fields["item_ids"]["venue"].tolist() == [3]
    assert fields["seeds"]["author"].tolist() == [107, 101, 102]
    assert fields["labels"]["venue"].tolist() == [-203]


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_item_sampler_splits_the_items(world_size, shuffle):
    per_rank = []
    for rank in range(world_size):
        sampler = DistributedItemSampler(item_set(), batch_size=4, shuffle=shuffle, seed=5, rank=rank, world_size=world_size)
        per_rank.append(collect(list(sampler)))
    merged = {t: [x for items in per_rank for x in items[t]] for t in SIZES}
    check_items(merged)  # every item once over all ranks
    for a in range(world_size):
        for b in range(a + 1, world_size):
            for t in SIZES:
                assert not {i for i, _, _ in per_rank[a][t]} & {i for i, _, _ in per_rank[b][t]}


def test_plain_tensors_are_seed_sets_and_the_alias():
    items = ItemSetDict({"a": torch.tensor([5, 6]), "b": torch.tensor([1])})
    assert isinstance(items, HeteroItemSet) and items.names == ("seeds",)
    minibatch = next(iter(ItemSampler(items, batch_size=3)))
    assert {t: s.tolist() for t, s in minibatch.seeds.items()} == {"a": [5, 6], "b": [1]}
    assert minibatch.labels is None


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="every ItemSet needs the same field names.*'a': \\('seeds', 'labels'\\).*'b': \\('seeds',\\)"):
        HeteroItemSet({"a": ItemSet((torch.arange(2), torch.arange(2)), names=("seeds", "labels")), "b": ItemSet(torch.arange(2))})
    # unnamed sets (GraphBolt takes them as tuples) were "needs the same field names, got {'a': None, 'b': None}"
    with pytest.raises(ValueError, match=r"every ItemSet must name its fields \(e\.g\. ItemSet\(\(seeds, labels\), names=.*got unnamed ones for \['a', 'b'\]"):
        HeteroItemSet({"a": ItemSet((torch.arange(2), torch.arange(2))), "b": ItemSet((torch.arange(2), torch.arange(2)))})
    with pytest.raises(ValueError, match="`item_sets` must be a non-empty dict of node type -> ItemSet"):
        HeteroItemSet({})
    with pytest.raises(ValueError, match="`item_sets` must be a non-empty dict"):
        HeteroItemSet([ItemSet(3)])
    with pytest.raises(TypeError, match="keys must be node or edge type names"):
        HeteroItemSet({0: ItemSet(3)})
    with pytest.raises(TypeError, match="the `seeds` field of 'b' must hold integer node ids"):
        ItemSampler(HeteroItemSet({"a": torch.arange(2), "b": torch.rand(2)}), batch_size=1)
    with pytest.raises(ValueError, match="needs a field named 'seeds'"):
        ItemSampler(HeteroItemSet({"a": ItemSet(torch.arange(2), names="labels")}), batch_size=1)


@pytest.mark.parametrize("form", ["int64 tensor", "float tensor", "ItemSet(0)"])
def test_a_type_with_no_items_is_accepted_and_never_batched(form):
    empty = {"int64 tensor": lambda: torch.tensor([], dtype=torch.int64), "float tensor": lambda: torch.tensor([]), "ItemSet(0)": lambda: ItemSet(0)}[form]()
    items = HeteroItemSet({"paper": torch.arange(5), "author": empty, "venue": torch.arange(3) + 10})
    assert len(items) == 8
    batches = list(ItemSampler(items, batch_size=3, shuffle=True, seed=1))
    assert all("author" not in mb.seeds for mb in batches)
    seen = sorted((t, s) for mb in batches for t, ids in mb.seeds.items() for s in ids.tolist())
    assert seen == [("paper", i) for i in range(5)] + [("venue", 10 + i) for i in range(3)]


def test_typed_splits_with_an_empty_type_keep_their_fields():
    split = {
        "paper": ItemSet((torch.arange(4), torch.arange(4) % 2), names=("seeds", "labels")),
        "author": ItemSet((torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)), names=("seeds", "labels")),
    }
    minibatch = next(iter(ItemSampler(HeteroItemSet(split), batch_size=10)))
    assert set(minibatch.seeds) == set(minibatch.labels) == {"paper"}
    with pytest.raises(ValueError, match=r"ItemSampler: `item_set` has no items"):
        ItemSampler(HeteroItemSet({"paper": ItemSet(0), "author": torch.zeros(0, dtype=torch.int64)}), batch_size=2)


def test_node_pairs_are_keyed_by_edge_type_and_batched_per_edge_type():
    pairs = {"user:like:item": torch.tensor([[0, 1], [2, 3], [1, 1]]), "user:follow:user": torch.tensor([[4, 0]])}
    items = HeteroItemSet({t: ItemSet((p, torch.arange(len(p))), names=("seeds", "labels")) for t, p in pairs.items()})
    minibatch = next(iter(ItemSampler(items, batch_size=4)))
    assert {t: s.tolist() for t, s in minibatch.seeds.items()} == {t: p.tolist() for t, p in pairs.items()}
    assert minibatch.is_link_batch and minibatch.item_ids["user:like:item"].tolist() == [0, 1, 2]


def test_keys_say_what_the_seeds_are():
    with pytest.raises(ValueError, match=r"every one node pairs \(keyed by edge type 'src:relation:dst'\); got pairs for \['a:r:b'\] and node ids for \['b'\]"):
        HeteroItemSet({"a:r:b": torch.zeros(2, 2, dtype=torch.int64), "b": torch.arange(2)})
    with pytest.raises(ValueError, match="an edge type must be 'src_type:relation:dst_type'"):
        HeteroItemSet({"user": torch.zeros(2, 2, dtype=torch.int64)})
    with pytest.raises(ValueError, match="'a:r:b' holds node ids, so it must be a node type"):
        HeteroItemSet({"a:r:b": torch.arange(2)})
    hyperlinks = HeteroItemSet({"a:r:b": torch.zeros(2, 3, dtype=torch.int64)})
    with pytest.raises(NotImplementedError, match=r"graph=typed, task=hyperlink is not supported: hyperlinks \(\[N, k > 2\] seeds\)"):
        ItemSampler(hyperlinks, batch_size=1)


def test_graphbolt_temporal_examples_in_place_cast_of_its_pairs():
    """GraphBolt's ``temporal_link_prediction.py`` casts a type's pairs through the private
    ``_itemsets`` / ``_items`` before sampling; the sampler then yields the cast rows."""
    train_set = HeteroItemSet({"q:click:p": ItemSet((torch.tensor([[0, 1], [2, 3]]), torch.tensor([5, 6])), names=("seeds", "timestamp"))})
    train_set._itemsets["q:click:p"]._items = tuple(
        item.to(torch.int32 if i == 0 else None) for i, item in enumerate(train_set._itemsets["q:click:p"]._items)
    )
    minibatch = next(iter(ItemSampler(train_set, batch_size=2)))
    assert minibatch.seeds["q:click:p"].dtype == torch.int32 and minibatch.seeds["q:click:p"].tolist() == [[0, 1], [2, 3]]
    assert minibatch.timestamp["q:click:p"].tolist() == [5, 6]
