"""DistributedItemSampler splitting (explicit rank/world_size, no process group) and
the errors of the distributed stages when used without a process group."""

import pytest
import torch

import graphpipe as gp
from dist_harness import run_ranks, values
from graphpipe.distributed import (
    CooperativeSampledSubgraph,
    ExchangePlan,
    Partition,
    load_partition,
    partition,
)
from graphpipe.graph.sampled_subgraph import CSCFormat


def rank_batches(num_items, batch_size, world_size, epochs=1, **kwargs):
    """Per rank, the list of (batch_index, seeds) over ``epochs`` epochs."""
    out = []
    for rank in range(world_size):
        sampler = gp.DistributedItemSampler(
            num_items, batch_size, shuffle=True, seed=11, rank=rank, world_size=world_size, **kwargs
        )
        batches = [(mb.batch_index, mb.seeds) for _ in range(epochs) for mb in sampler]
        assert len(batches) == epochs * len(sampler)
        out.append(batches)
    return out


@pytest.mark.parametrize("num_items", [48, 49, 50, 7])
@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("drop_uneven_inputs", [False, True])
def test_global_batches_are_the_single_process_batches(num_items, world_size, drop_uneven_inputs):
    batch_size = 4
    per_rank = rank_batches(num_items, batch_size, world_size, epochs=2, drop_uneven_inputs=drop_uneven_inputs)
    single = gp.ItemSampler(num_items, batch_size * world_size, shuffle=True, seed=11)
    expected = {mb.batch_index: mb.seeds for _ in range(2) for mb in single}
    got = {}
    for batches in per_rank:
        for index, seeds in batches:
            assert 1 <= seeds.numel() <= batch_size
            got.setdefault(index, []).append(seeds)
    rest = num_items % (batch_size * world_size)
    dropped = drop_uneven_inputs and 0 < rest < world_size
    expected_indices = [i for i, seeds in expected.items() if not (dropped and seeds.numel() == rest)]
    assert sorted(got) == sorted(expected_indices)
    for index, shares in got.items():
        union = torch.cat(shares)
        assert sorted(union.tolist()) == sorted(expected[index].tolist())
        sizes = [s.numel() for s in shares]
        assert max(sizes) - min(sizes) <= 1
    lengths = {len(batches) for batches in per_rank}
    if drop_uneven_inputs:
        assert len(lengths) == 1
    else:
        assert len(lengths) == (2 if 0 < rest < world_size else 1)


def test_epochs_reshuffle_and_drop_last():
    batches = rank_batches(40, 4, 2, epochs=2)[0]
    assert [index for index, _ in batches] == list(range(10))
    first, second = batches[:5], batches[5:]
    assert not all(torch.equal(a, b) for (_, a), (_, b) in zip(first, second))
    per_rank = rank_batches(42, 4, 2, drop_last=True)
    assert [len(b) for b in per_rank] == [5, 5]
    assert all(seeds.numel() == 4 for batches in per_rank for _, seeds in batches)


def test_labels_follow_seeds():
    seeds = torch.arange(30) * 3
    item_set = gp.ItemSet((seeds, seeds + 1), names=("seeds", "labels"))
    batches = list(gp.DistributedItemSampler(item_set, 4, shuffle=True, seed=0, rank=1, world_size=2))
    assert sum(mb.seeds.numel() for mb in batches) == 15  # the rank's half of the items
    for mb in batches:
        assert torch.equal(mb.labels, mb.seeds + 1)


def test_errors():
    with pytest.raises(RuntimeError, match="init_process_group"):
        gp.DistributedItemSampler(10, 2)
    with pytest.raises(ValueError, match="both `rank` and `world_size`"):
        gp.DistributedItemSampler(10, 2, rank=0)
    with pytest.raises(ValueError, match=r"`rank` must be an int in \[0, 2\)"):
        gp.DistributedItemSampler(10, 2, rank=2, world_size=2)
    with pytest.raises(ValueError, match="partition has 3 parts for world_size=2"):
        gp.DistributedItemSampler(10, 2, rank=0, world_size=2, partition=Partition(3))
    with pytest.raises(ValueError, match="must be an int >= 1"):
        gp.DistributedItemSampler(10, 0, rank=0, world_size=2)


def test_cooperative_stages_need_the_distributed_setup(small_graph):
    with pytest.raises(ValueError, match="needs a graphpipe.DistributedItemSampler upstream"):
        next(iter(gp.ItemSampler(10, 2).sample_neighbor(small_graph, [2], cooperative=True)))
    source = gp.DistributedItemSampler(10, 2, rank=0, world_size=2)
    with pytest.raises(RuntimeError, match="not initialised in this process"):
        next(iter(source.sample_neighbor(small_graph, [2], cooperative=True)))
    mb = next(iter(gp.ItemSampler(10, 2).sample_neighbor(small_graph, [2])))
    with pytest.raises(ValueError, match="was not sampled cooperatively"):
        gp.cooperative_exchange(mb, 0, torch.zeros(3, 2))
    store = gp.FeatureStore({"feat": torch.zeros(small_graph.num_nodes, 2)})
    pipe = source.sample_neighbor(small_graph, [2]).fetch_feature(store, ["feat"], cooperative=True)
    with pytest.raises(ValueError, match="was not sampled cooperatively"):
        next(iter(pipe))


def test_cooperative_exchange_checks_its_arguments():
    empty = torch.empty(0, dtype=torch.int64)
    plan = ExchangePlan(torch.arange(3), empty, [0, 0], [0, 0], empty)
    subgraph = CooperativeSampledSubgraph(CSCFormat(torch.zeros(1, dtype=torch.int64), empty), empty, empty, empty, exchange=plan)
    mb = gp.MiniBatch(sampled_subgraphs=[subgraph])
    with pytest.raises(ValueError, match=r"`layer` must be in \[0, 1\], got 2"):
        gp.cooperative_exchange(mb, 2, torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"`layer` 1 \(num_layers\) exchanges the outputs of link batches"):
        gp.cooperative_exchange(mb, 1, torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"the batch is untyped, so `h` must be a tensor, got a dict"):
        gp.cooperative_exchange(mb, 0, {"_N": torch.zeros(3, 2)})
    with pytest.raises(ValueError, match=r"`h` must be a tensor \[3, \.\.\.\].*got \(2, 4\)"):
        gp.cooperative_exchange(mb, 0, torch.zeros(2, 4))


@pytest.fixture
def small_graph():
    src = torch.tensor([1, 2, 3, 0, 4, 5, 6, 7, 8, 9])
    dst = torch.tensor([0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    return gp.CSCGraph.from_coo(src, dst, num_nodes=10)


@pytest.mark.parametrize("drop_uneven_inputs", [False, True])
@pytest.mark.parametrize("typed", [False, True])
def test_from_part_deals_the_global_batches_by_owner(typed, drop_uneven_inputs, tmp_path):
    """Without a process group (rank= and world_size=): the ranks' from_part batches of an
    epoch are the single-process global batches, each item on the rank owning it, with
    whole-split item ids, the last one too (every rank gets every batch, so
    drop_uneven_inputs drops nothing); bad arguments are named."""
    graph = gp.CSCGraph.from_coo(torch.arange(40), torch.arange(1, 41) % 40, num_nodes=40)
    seeds = torch.arange(0, 40, 2)
    item_set = gp.ItemSet((seeds, 10 * seeds), names=("seeds", "labels"))
    if typed:  # one node type, items under its name
        item_set = gp.HeteroItemSet({"_N": item_set})
    partition(graph, None, {"train": item_set}, 3, tmp_path)
    parts = [load_partition(tmp_path, r) for r in range(3)]
    samplers = [
        gp.DistributedItemSampler.from_part(p, "train", 2, shuffle=True, seed=3, rank=p.rank, world_size=3,
                                            drop_uneven_inputs=drop_uneven_inputs)
        for p in parts
    ]  # fmt: skip
    whole = gp.ItemSampler(item_set, 6, shuffle=True, seed=3)
    by_rank = [list(s) for s in samplers]
    assert [len(s) for s in samplers] == [len(whole)] * 3 == [len(b) for b in by_rank]
    for i, expected in enumerate(whole):
        got = [b[i].as_typed() for b in by_rank]
        ids = torch.cat([g.item_ids["_N"] for g in got if "_N" in g.item_ids])
        assert sorted(ids.tolist()) == sorted(expected.as_typed().item_ids["_N"].tolist())
        for r, g in enumerate(got):
            if "_N" in g.seeds:
                assert bool((parts[r].partition.owner(g.seeds["_N"]) == r).all())
                assert torch.equal(g.labels["_N"], 10 * seeds[g.item_ids["_N"]]) and torch.equal(g.seeds["_N"], seeds[g.item_ids["_N"]])
    with pytest.raises(TypeError, match="`part` must be a GraphPart"):
        gp.DistributedItemSampler.from_part(tmp_path, "train", 2, rank=0, world_size=3)
    with pytest.raises(ValueError, match=r"`split` must be one of \['train'\], got 'valid'"):
        gp.DistributedItemSampler.from_part(parts[0], "valid", 2, rank=0, world_size=3)
    with pytest.raises(ValueError, match="do not pass `partition`"):
        gp.DistributedItemSampler.from_part(parts[0], "train", 2, partition=None, rank=0, world_size=3)
    with pytest.raises(ValueError, match="`part` is part 0 of 3, but this is rank 1 of 3"):
        gp.DistributedItemSampler.from_part(parts[0], "train", 2, rank=1, world_size=3)
    partition(graph, None, {"train": gp.ItemSet(torch.tensor([0]), names="seeds")}, 2, tmp_path / "one")
    empty = next(p for p in (load_partition(tmp_path / "one", r) for r in range(2)) if len(p.item_sets["train"]) == 0)
    with pytest.raises(ValueError, match=f"part\\(s\\) \\[{empty.rank}\\] own no items of split 'train' \\(the split has 1 items in all\\); "
                                         r"give every rank the whole split instead"):
        gp.DistributedItemSampler.from_part(empty, "train", 2, rank=empty.rank, world_size=2)
    partition(graph, None, {"train": gp.ItemSet(torch.tensor([0]), names="seeds"), "val": gp.ItemSet(torch.tensor([], dtype=torch.int64), names="seeds")}, 2, tmp_path / "none")
    with pytest.raises(ValueError, match="split 'val' has no items on any part"):
        gp.DistributedItemSampler.from_part(load_partition(tmp_path / "none", 0), "val", 2, rank=0, world_size=2)


def _epoch_items(rank, world_size, seed, per_rank_seed):
    sampler = gp.DistributedItemSampler(20, 2, shuffle=True, seed=None if seed is None else seed + rank * per_rank_seed)
    return torch.cat([mb.seeds for mb in sampler]).tolist()


@pytest.mark.parametrize("backend", ["gloo", "cuda:gloo"])
@pytest.mark.parametrize("seed", [None, 5])
def test_ranks_share_one_permutation_also_when_the_default_group_has_no_cpu_backend(backend, seed, tmp_path):
    """Found in review: with seed=None rank 0's draw was broadcast on the default group, which
    under NCCL has no CPU backend ("cuda:gloo" stands in for it here): construction failed.
    Every item is on one rank in an epoch."""
    per_rank = values(run_ranks(_epoch_items, 2, tmp_path, args=(seed, 0), backend=backend))
    assert sorted(per_rank[0] + per_rank[1]) == list(range(20))


def test_seeds_differing_between_ranks_are_refused(tmp_path):
    """Found in review: ``seed=base + rank`` gave each rank its own permutation, silently
    losing and repeating items in every epoch."""
    outcomes = run_ranks(_epoch_items, 2, tmp_path, args=(100, 1))
    assert [status for status, _ in outcomes] == ["error", "error"]
    assert all("`seed` must be the same on every rank, got [100, 101]" in trace for _, trace in outcomes)


def test_from_part_keeps_an_input_id_field(tmp_path):
    """from_pyg's mask splits carry their node ids as ``input_id`` (PyG's): a part's sampler
    reports them beside the whole-split positions (``item_ids``)."""
    graph = gp.CSCGraph.from_edge_index(torch.randint(0, 40, (2, 200), generator=torch.Generator().manual_seed(0)), 40)
    seeds = torch.arange(1, 40, 3)
    partition(graph, None, {"train": gp.ItemSet((seeds, seeds), names=("seeds", "input_id"))}, 2, str(tmp_path))
    seen = []
    for rank in range(2):
        part = load_partition(str(tmp_path), rank)
        for mb in gp.DistributedItemSampler.from_part(part, "train", 3, rank=rank, world_size=2, shuffle=True, seed=1):
            assert torch.equal(mb.input_id, mb.seeds) and torch.equal(mb.seeds, seeds[mb.item_ids])
            seen += mb.input_id.tolist()
    assert sorted(seen) == seeds.tolist()


def _from_a_part(rank, world_size, out_dir):
    part = load_partition(out_dir, rank)
    try:
        gp.DistributedItemSampler.from_part(part, "train", 2)
    except ValueError as error:
        return str(error)
    return "built"


def test_a_part_without_items_is_refused_on_every_rank(tmp_path):
    """Found in review: the rank whose part held no items raised alone, and the others
    waited in the sampler's collective set-up until the process group timed out."""
    graph = gp.CSCGraph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), 4)
    partition(graph, None, {"train": gp.ItemSet(torch.tensor([0]), names="seeds")}, 2, str(tmp_path / "parts"), method=torch.tensor([0, 0, 1, 1]))
    messages = values(run_ranks(_from_a_part, 2, tmp_path, args=(str(tmp_path / "parts"),), timeout=60))
    assert all("part(s) [1] own no items of split 'train'" in message for message in messages), messages
