"""GPU feature cache: exact values under random access, policies, hit rates, hotness."""

import warnings

import numpy as np
import pytest
import torch
from cuda_syncs import host_syncs

from graphpipe import CSCGraph, MiniBatch
from graphpipe.features.store import Feature, FeatureStore
from graphpipe.pipes import FeatureFetcher
from graphpipe.features.gpu_cache import GPUCachedFeature, gpu_cached_feature, hotness_from_degree
from graphpipe.pipes.presampling import hotness_from_presampling

has_cuda = torch.cuda.is_available()
device = "cuda" if has_cuda else "cpu"


def table(num_rows=200, dim=6, seed=0):
    return torch.randn(num_rows, dim, generator=torch.Generator().manual_seed(seed))


def row_bytes(dim=6):
    return dim * 4


CONFIGS = [
    ("static", None, 0),
    ("static", None, 30),
    ("static", "hot", 30),
    ("clock", None, 1),
    ("clock", None, 30),
    ("clock", "hot", 30),
    ("clock", None, 200),
]


@pytest.mark.parametrize("policy,hot,rows", CONFIGS)
def test_returns_exactly_the_uncached_values_under_random_access(policy, hot, rows):
    data = table()
    hotness = torch.arange(200, 0, -1) if hot else None
    cache = GPUCachedFeature(Feature(data), rows * row_bytes(), policy, hotness, device=device)
    assert cache.capacity == rows
    gen = torch.Generator().manual_seed(1)
    for step in range(25):
        n = int(torch.randint(0, 80, (), generator=gen))
        skewed = (torch.rand(n, generator=gen) ** 3 * 200).long()  # hot rows first, repeats
        ids = skewed if step % 2 else torch.randint(0, 200, (n,), generator=gen)
        got = cache.read(ids.to(device))
        assert got.device.type == device and torch.equal(got.cpu(), data[ids])
    # Invariants of the slot map: slots and rows point at each other, cached rows are right.
    cached = cache.row_of_slot[:rows]
    valid = cached < 200
    assert torch.equal(cache.slot_of_row[cached[valid]].long().cpu(), torch.arange(rows)[valid.cpu()])
    assert int((cache.slot_of_row[:200] >= 0).sum()) == int(valid.sum())
    assert torch.equal(cache.cache[valid].cpu(), data[cached[valid].cpu()])


def test_static_with_hotness_holds_the_hottest_rows_and_never_changes():
    data = table()
    hotness = torch.zeros(200)
    hotness[[5, 17, 99, 150]] = torch.tensor([4.0, 3.0, 2.0, 1.0])
    cache = GPUCachedFeature(Feature(data), 3 * row_bytes(), "static", hotness, device=device)
    assert sorted(cache.row_of_slot[:3].tolist()) == [5, 17, 99]
    cache.read(torch.tensor([1, 2, 3, 150], device=device))
    assert sorted(cache.row_of_slot[:3].tolist()) == [5, 17, 99]
    cache.reset_stats()
    cache.read(torch.tensor([5, 17, 99, 5, 0], device=device))
    assert cache.hit_rate == pytest.approx(4 / 5)


def test_static_without_hotness_keeps_first_misses_until_full():
    cache = GPUCachedFeature(Feature(table()), 4 * row_bytes(), "static", device=device)
    cache.read(torch.tensor([9, 3, 9], device=device))
    cache.read(torch.tensor([3, 7, 8, 1], device=device))  # room for two more: 7 and 1 (ascending distinct misses)
    assert sorted(cache.row_of_slot[:4].tolist()) == [1, 3, 7, 9]
    cache.reset_stats()
    cache.read(torch.tensor([1, 3, 7, 9, 8, 8], device=device))
    assert cache.hit_rate == pytest.approx(4 / 6)


def _clock_reference(capacity, batches):
    """A plain-Python batched CLOCK with the documented rule: returns the row of each slot."""
    rows = [None] * capacity
    ref = [0] * capacity
    hand = 0
    for batch in batches:
        for r in batch:
            if r in rows:
                ref[rows.index(r)] = 1
        misses = sorted({r for r in batch if r not in rows})[:capacity]
        if not misses:
            continue
        m = len(misses)
        order = [(hand + i) % capacity for i in range(capacity)]
        clear = [s for s in order if ref[s] == 0]
        if len(clear) >= m:
            victims = clear[:m]
            last = order.index(victims[-1])
            for s in order[: last + 1]:
                ref[s] = 0
        else:
            second = [s for s in order if ref[s] == 1][: m - len(clear)]
            victims = clear + second
            last = order.index(second[-1])
            ref = [0] * capacity
        hand = (hand + last + 1) % capacity
        for s, r in zip(sorted(victims, key=order.index), misses):
            rows[s] = r
            ref[s] = 1
    return rows


def test_clock_matches_a_sequential_reference():
    gen = torch.Generator().manual_seed(3)
    batches = [torch.randint(0, 40, (int(torch.randint(1, 12, (), generator=gen)),), generator=gen) for _ in range(60)]
    cache = GPUCachedFeature(Feature(table(40)), 10 * row_bytes(), "clock", device=device)
    for batch in batches:
        cache.read(batch.to(device))
    want = _clock_reference(10, [b.tolist() for b in batches])
    got = [r if r < 40 else None for r in cache.row_of_slot[:10].tolist()]
    assert got == want


def test_clock_keeps_a_working_set_that_fits_and_adapts_when_it_moves():
    cache = GPUCachedFeature(Feature(table()), 20 * row_bytes(), "clock", device=device)
    first, second = torch.arange(0, 15), torch.arange(100, 115)
    for _ in range(3):
        cache.read(first.to(device))
    cache.reset_stats()
    cache.read(first.to(device))
    assert cache.hit_rate == 1.0
    for _ in range(3):
        cache.read(second.to(device))
    cache.reset_stats()
    cache.read(second.to(device))
    assert cache.hit_rate == 1.0


def test_hit_rate_counts_repeats_and_resets():
    cache = GPUCachedFeature(Feature(table()), 50 * row_bytes(), "clock", device=device)
    assert cache.hit_rate == 0.0
    cache.read(torch.tensor([1, 1, 2], device=device))  # all three miss (cached after the read)
    cache.read(torch.tensor([1, 2, 3], device=device))  # two hits
    assert cache.hit_rate == pytest.approx(2 / 6)
    cache.reset_stats()
    assert cache.hit_rate == 0.0


def test_out_buffer_int32_ids_and_cpu_ids():
    data = table()
    cache = GPUCachedFeature(Feature(data), 10 * row_bytes(), "clock", device=device)
    out = torch.empty(3, 6, device=device)
    assert cache.read(torch.tensor([4, 0, 4], dtype=torch.int32), out) is out
    assert torch.equal(out.cpu(), data[[4, 0, 4]])
    assert cache.read(torch.tensor([], dtype=torch.int64)).shape == (0, 6)


def test_bad_arguments():
    feature = Feature(table())
    with pytest.raises(ValueError, match="`policy` must be one of"):
        GPUCachedFeature(feature, 100, "lru", device=device)
    with pytest.raises(ValueError, match="`max_bytes` must be an int >= 0"):
        GPUCachedFeature(feature, -1, device=device)
    with pytest.raises(TypeError, match="`feature` must be a graphpipe Feature"):
        GPUCachedFeature(table(), 100, device=device)
    with pytest.raises(ValueError, match=r"`hotness` must be a 1-D tensor with one score per row \(200\)"):
        GPUCachedFeature(feature, 100, hotness=torch.ones(3), device=device)
    cache = GPUCachedFeature(feature, 100, device=device)
    with pytest.raises(ValueError, match="`out` must be a contiguous torch.float32 tensor of shape"):
        cache.read(torch.tensor([0]), torch.empty(2, 6, device=device))


WRITES = ("author", "writes", "paper")
# The same store untyped and typed: (node features, edge features, the cached node key, the cached edge key).
STORES = {
    "untyped": ({"feat": table(), "label": torch.arange(200)}, {"w": torch.ones(50, 1)}, "feat", ("edge", "w")),
    "typed": (
        {("paper", "feat"): table(), ("paper", "label"): torch.arange(200), ("author", "feat"): table(30)},
        {(WRITES, "w"): torch.ones(50, 1)},
        ("node", "paper", "feat"),
        ("edge", WRITES, "w"),
    ),
}


@pytest.mark.parametrize("case", STORES)
def test_gpu_cached_feature_replaces_one_key_in_a_new_store(case):
    node, edge, node_key, edge_key = STORES[case]
    store = FeatureStore(node, edge)
    keys = [("node", k) for k in store.node_keys] + [("edge", k) for k in store.edge_keys]
    for key in (node_key, edge_key):
        cached = gpu_cached_feature(store, key, max_bytes=10 * row_bytes(), policy="clock", device=device)
        assert isinstance(cached[key], GPUCachedFeature) and cached[key].fallback is store[key]
        assert not isinstance(store[key], GPUCachedFeature)
        assert sum(cached[k] is not store[k] for k in keys) == 1  # the others are shared
    cached = gpu_cached_feature(store, node_key, max_bytes=10 * row_bytes(), policy="clock", device=device)
    ids = torch.tensor([3, 3, 199])
    assert torch.equal(cached[node_key].read(ids).cpu(), store[node_key].read(ids))
    # A fetcher reads through the cache under the batch's usual keys.
    keys = ["feat"] if case == "untyped" else {"paper": ["feat"], "author": ["feat"]}
    seeds = ids if case == "untyped" else {"paper": ids, "author": torch.tensor([29, 0])}
    out = FeatureFetcher([], cached, keys).fetch(MiniBatch(seeds=seeds))
    if case == "untyped":
        assert torch.equal(out.node_features["feat"].cpu(), store["feat"].read(ids))
    else:
        assert torch.equal(out.node_features["paper", "feat"].cpu(), store[node_key].read(ids))
        assert torch.equal(out.node_features["author", "feat"], table(30)[[29, 0]])
    with pytest.raises(KeyError, match="unknown node feature 'nope'"):
        gpu_cached_feature(store, "nope", 100, device=device)


def test_cache_works_over_memmap_and_pin_is_a_fallback_without_cuda(tmp_path):
    data = table().numpy()
    np.save(tmp_path / "f.npy", data)
    cache = GPUCachedFeature(Feature(str(tmp_path / "f.npy")), 10 * row_bytes(), "static", device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cache.pin_memory_() is cache
    ids = torch.tensor([7, 150, 7])
    assert torch.equal(cache.read(ids).cpu(), torch.from_numpy(data[[7, 150, 7]]))


def test_hotness_from_degree_counts_neighbourhood_memberships():
    graph = CSCGraph.from_coo(torch.tensor([0, 0, 1, 2, 0]), torch.tensor([1, 2, 2, 0, 3]), 4)
    assert hotness_from_degree(graph).tolist() == [3, 1, 1, 0]


def test_hotness_from_presampling_counts_input_nodes():
    batches = [MiniBatch(input_nodes=torch.tensor([0, 2])), MiniBatch(input_nodes=torch.tensor([2, 3])),
               MiniBatch(input_nodes=torch.tensor([1]))]
    assert hotness_from_presampling(batches, 5, num_batches=2).tolist() == [1, 0, 2, 1, 0]
    with pytest.raises(ValueError, match="no `input_nodes`"):
        hotness_from_presampling([MiniBatch()], 5)


def test_hotness_from_presampling_counts_one_node_type_of_typed_batches():
    batches = [MiniBatch(input_nodes={"paper": torch.tensor([0, 2]), "author": torch.tensor([1])}),
               MiniBatch(input_nodes={"paper": torch.tensor([2]), "author": torch.tensor([0, 1])})]
    assert hotness_from_presampling(batches, 3, node_type="paper").tolist() == [1, 0, 2]
    assert hotness_from_presampling(batches, 2, node_type="author").tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"`node_type` must name one of their node types \['author', 'paper'\]"):
        hotness_from_presampling(batches, 3)


def test_hotness_from_presampling_counts_a_typed_chain_by_global_id():
    """node_type=None over a chain on a typed graph: every type's input nodes, by global id
    (the scores HotReuse reads); a node_type's count must be that type's node count."""
    import itertools

    import graphpipe as gp
    from hetero_graphs import hetero_graph

    graph, _ = hetero_graph()
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(40), names="seeds"), "author": gp.ItemSet(torch.arange(30), names="seeds")})
    chain = gp.ItemSampler(items, 8, shuffle=True, seed=1).sample_neighbor(graph, [2, 2], seed=2)
    offsets = dict(zip(graph.node_types, graph.node_type_offset.tolist()))
    want = [0] * graph.total_num_nodes
    for mb in itertools.islice(chain.stream(0), 3):  # by hand
        for t, ids in mb.input_nodes.items():
            for i in ids.tolist():
                want[offsets[t] + i] += 1
    assert hotness_from_presampling(chain, graph.total_num_nodes, num_batches=3).tolist() == want
    bounds = graph.node_type_offset.tolist()
    assert sum(any(want[a:b]) for a, b in zip(bounds, bounds[1:])) >= 2  # several types counted
    papers = int(graph.node_type_offset.diff()[graph.node_types.index("paper")])
    with pytest.raises(ValueError, match=rf"`num_rows` must be {papers}, the number of 'paper' nodes .*got {graph.total_num_nodes}"):
        hotness_from_presampling(chain, graph.total_num_nodes, node_type="paper")
    with pytest.raises(ValueError, match=rf"`num_rows` must be {graph.total_num_nodes}, the graph's total_num_nodes"):
        hotness_from_presampling(chain, papers)
    local = hotness_from_presampling(chain, papers, num_batches=3, node_type="paper")
    assert local.tolist() == want[offsets["paper"]:offsets["paper"] + papers]


def test_hotter_rows_give_higher_hit_rate_than_cold_ones():
    gen = torch.Generator().manual_seed(5)
    ids = [(torch.rand(100, generator=gen) ** 4 * 200).long() for _ in range(20)]  # skewed to low ids
    hotness = torch.bincount(torch.cat(ids[:5]), minlength=200)
    hot = GPUCachedFeature(Feature(table()), 20 * row_bytes(), "static", hotness, device=device)
    cold = GPUCachedFeature(Feature(table()), 20 * row_bytes(), "static", -hotness.double(), device=device)
    for batch in ids[5:]:
        hot.read(batch.to(device))
        cold.read(batch.to(device))
    assert hot.hit_rate > 0.5 > cold.hit_rate


@pytest.mark.cuda
def test_cuda_cache_over_pinned_feature_matches_and_syncs_twice_per_read():
    """read_valid (a fetcher's read of a sampler's ids) syncs twice; read checks the ids first, once more."""
    data = table(5000, 100)
    feature = Feature(data.clone()).pin_memory_()
    cache = GPUCachedFeature(feature, 1000 * 400, "clock", device=device)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        ids = (torch.rand(3000, generator=gen) ** 2 * 5000).long().cuda()
        assert torch.equal(cache.read(ids).cpu(), data[ids.cpu()])
    torch.cuda.synchronize()
    for read, syncs in ((cache.read_valid, 2), (cache.read, 3)):
        sites = host_syncs(lambda: read(ids))
        assert len(sites) <= syncs, ", ".join(sites)


def test_clock_hit_rate_rises_with_labor_batch_dependency():
    import graphpipe as gp
    from graphpipe.datasets import rmat_edges

    src, dst = rmat_edges(20_000, 300_000, seed=0)
    graph = CSCGraph.from_coo(src, dst, 20_000)
    items = gp.ItemSet(torch.randperm(20_000, generator=torch.Generator().manual_seed(0))[:5000])
    rates = {}
    for kappa in (1, 16):
        pipe = gp.ItemSampler(items, 128, shuffle=True, seed=0).sample_layer_neighbor(
            graph, [10, 5], batch_dependency=kappa, seed=0
        )
        cache = GPUCachedFeature(Feature(torch.zeros(20_000, 1)), 2000 * 4, "clock", device=device)
        for i, mb in zip(range(36), pipe):
            if i == 16:
                cache.reset_stats()
            cache.read(mb.input_nodes.to(device))
        rates[kappa] = cache.hit_rate
    assert rates[16] > rates[1] + 0.05, rates
