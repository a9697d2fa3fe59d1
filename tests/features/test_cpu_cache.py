"""CPUCachedFeature (S3-FIFO): exact rows, hit rates against LRU on a Zipf workload,
scan resistance, statistics."""

import threading
from collections import OrderedDict

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.features.cpu_cache import CPUCachedFeature
from graphpipe.features.disk import DiskBasedFeature


def lru_hit_rate(batches, capacity):
    """An LRU cache of ``capacity`` rows under the same batch protocol (a batch's misses
    are admitted after the batch)."""
    cache, hits, total = OrderedDict(), 0, 0
    for batch in batches:
        missed = []
        for row in batch.tolist():
            total += 1
            if row in cache:
                hits += 1
                cache.move_to_end(row)
            else:
                missed.append(row)
        for row in sorted(set(missed)):
            cache[row] = True
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits / total


def zipf_batches(num_rows, alpha, num_batches=200, batch_size=256, seed=0):
    rng = np.random.default_rng(seed)
    p = np.arange(1, num_rows + 1, dtype=np.float64) ** -alpha
    hot_to_id = rng.permutation(num_rows)  # hot rows scattered over the id range
    return [torch.from_numpy(hot_to_id[rng.choice(num_rows, batch_size, p=p / p.sum())]) for _ in range(num_batches)]


POLICIES = ["s3-fifo", "sieve"]


@pytest.mark.parametrize("policy", POLICIES)
def test_rows_are_exact_with_repeats_and_evictions(policy):
    table = torch.randn(1000, 3, 2)
    feature = CPUCachedFeature(gp.Feature(table), max_cache_size_in_bytes=100 * 24, policy=policy)
    assert feature.capacity == 100
    for batch in zipf_batches(1000, 0.8, num_batches=50):
        assert torch.equal(feature.read(batch), table[batch])
    assert feature.read(torch.zeros(0, dtype=torch.int64)).shape == (0, 3, 2)
    stats = feature.cache_stats()
    assert stats["hits"] + stats["misses"] == 50 * 256 and stats["cached_rows"] == 100


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("alpha", [0.7, 0.9, 1.1])
def test_beats_lru_on_zipf(alpha, policy):
    num_rows, capacity = 20000, 1000
    table = torch.randn(num_rows, 4)
    feature = CPUCachedFeature(gp.Feature(table), capacity * 16, policy=policy)
    batches = zipf_batches(num_rows, alpha)
    for batch in batches:
        feature.read(batch)
    ours, lru = feature.cache_stats()["hit_rate"], lru_hit_rate(batches, capacity)
    # Measured with these seeds (alpha 0.7, 0.9, 1.1): S3-FIFO 0.32, 0.55, 0.77; SIEVE 0.30,
    # 0.54, 0.77; LRU 0.23, 0.47, 0.73.
    assert ours > lru + 0.03, (ours, lru)


def test_a_scan_does_not_flush_the_hot_rows():
    num_rows, capacity = 50000, 1000
    table = torch.randn(num_rows, 2)
    feature = CPUCachedFeature(gp.Feature(table), capacity * 8)
    hot = torch.randperm(num_rows, generator=torch.Generator().manual_seed(0))[:500]
    for _ in range(5):
        feature.read(hot)
    scan = torch.tensor(sorted(set(range(num_rows)) - set(hot.tolist())))[:20 * capacity]
    batches = [hot] * 5 + list(scan.split(256))
    for batch in scan.split(256):  # one pass over 20x the cache in cold rows
        feature.read(batch)
    feature.reset_stats()
    assert torch.equal(feature.read(hot), table[hot])
    assert feature.cache_stats()["hit_rate"] == feature.hit_rate == 1.0
    # LRU loses every hot row to the same scan.
    assert lru_hit_rate(batches + [hot], capacity) == pytest.approx(4 * 500 / (5 * 500 + len(scan) + 500))


@pytest.mark.parametrize("policy", POLICIES)
def test_hot_rows_read_during_a_scan_stay(policy):
    num_rows, capacity = 50000, 1000
    table = torch.randn(num_rows, 2)
    feature = CPUCachedFeature(gp.Feature(table), capacity * 8, policy=policy)
    hot = torch.arange(0, 600, 2)  # 30% of the cache, read again every 512 scanned rows
    for i, batch in enumerate(torch.arange(1000, 1000 + 20 * capacity).split(256)):
        if i % 2 == 0:
            feature.read(hot)
        feature.read(batch)
    feature.reset_stats()
    feature.read(hot)
    assert feature.hit_rate == 1.0


def test_in_front_of_a_disk_feature(tmp_path):
    table = np.random.default_rng(0).standard_normal((2000, 8)).astype(np.float32)
    np.save(tmp_path / "f.npy", table)
    with DiskBasedFeature(tmp_path / "f.npy") as disk:
        feature = CPUCachedFeature(disk, 200 * 32)
        for batch in zipf_batches(2000, 1.0, num_batches=30):
            assert torch.equal(feature.read(batch), torch.from_numpy(table)[batch])
        assert 0.0 < feature.cache_stats()["hit_rate"] < 1.0
        assert (feature.num_rows, feature.row_shape, feature.dtype) == (2000, (8,), torch.float32)


@pytest.mark.parametrize("policy", POLICIES)
def test_concurrent_readers_get_exact_rows(policy):
    table = torch.randn(5000, 4)
    feature = CPUCachedFeature(gp.Feature(table), 300 * 16, policy=policy)
    errors = []

    def reader(seed):
        for batch in zipf_batches(5000, 0.9, num_batches=40, seed=seed):
            if not torch.equal(feature.read(batch), table[batch]):
                errors.append(seed)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    cached = torch.nonzero(feature.cached(torch.arange(5000))).view(-1)
    assert cached.numel() == feature.cache_stats()["cached_rows"] == 300


def test_a_cache_over_a_feature_of_one_reader_declares_one_reader():
    """Found in review: the cache reads its fallback outside its lock but declared concurrent
    reads for any fallback, so a pool read a GPU cache under it from several threads (wrong rows)."""
    table = torch.randn(50, 4)
    over_gpu_cache = CPUCachedFeature(gp.GPUCachedFeature(gp.Feature(table), max_bytes=160, device="cpu"), 160)
    assert not over_gpu_cache.concurrent_reads and CPUCachedFeature(gp.Feature(table), 160).concurrent_reads
    fetch = gp.ItemSampler(gp.ItemSet(50), 10).fetch_feature(gp.FeatureStore({"feat": over_gpu_cache}), ["feat"])
    assert not fetch.thread_safe


@pytest.mark.parametrize("whole_table", [False, True])
@pytest.mark.parametrize("policy", POLICIES)
def test_an_update_during_a_read_is_not_undone_by_its_admission(policy, whole_table):
    """A read takes the rows it missed from the fallback outside the lock: an update
    landing then must not be overwritten in the cache by the old rows it admits."""
    fallback = gp.Feature(torch.zeros(10, 2))
    feature = CPUCachedFeature(fallback, 10 * 8, policy=policy)
    fallback_read = fallback.read_valid

    def read_then_update(ids, out=None):
        rows = fallback_read(ids, out)
        fallback.read_valid = fallback_read  # once
        if whole_table:
            feature.update(torch.ones(10, 2))
        else:
            feature.update(torch.ones(1, 2), torch.tensor([3]))
        return rows

    fallback.read_valid = read_then_update
    assert feature.read(torch.tensor([3])).tolist() == [[0.0, 0.0]]  # read before the update
    assert feature.read(torch.tensor([3])).tolist() == [[1.0, 1.0]]
    assert feature.read(torch.tensor([3])).tolist() == [[1.0, 1.0]]  # and so it stays, cached


def test_errors():
    with pytest.raises(TypeError, match=r"`fallback` must be a graphpipe Feature, got Tensor \(wrap a tensor, array or \.npy path as gp\.Feature\(data\)\)"):
        CPUCachedFeature(torch.zeros(3), 100)
    with pytest.raises(ValueError, match="holds no row"):
        CPUCachedFeature(gp.Feature(torch.zeros(10, 4)), 8)
    with pytest.raises(ValueError, match="policy"):
        CPUCachedFeature(gp.Feature(torch.zeros(10, 4)), 1000, policy="lru")
    one_row = CPUCachedFeature(gp.Feature(torch.arange(10.0)[:, None]), 4, policy="sieve")
    assert one_row.capacity == 1 and one_row.read(torch.tensor([3, 4, 3, 4]))[:, 0].tolist() == [3, 4, 3, 4]


def test_cached_checks_its_ids_as_read_does():
    feature = CPUCachedFeature(gp.Feature(torch.randn(10, 2)), 3 * 8)
    feature.read(torch.tensor([9]))
    assert feature.cached(torch.tensor([9, 0])).tolist() == [True, False]
    for bad, error, match in [
        (torch.tensor([-1]), ValueError, r"`ids` holds row id -1, out of range: valid ids are 0\.\.9"),
        (torch.tensor([10]), ValueError, r"`ids` holds row id 10, out of range: valid ids are 0\.\.9"),
        (torch.tensor([1.0]), TypeError, r"`ids` must be an integer tensor"),
    ]:
        for method in ("read", "cached"):
            with pytest.raises(error, match=rf"CPUCachedFeature\.{method}: " + match):
                getattr(feature, method)(bad)


def test_pickles_warm():
    import pickle

    table = torch.randn(100, 2)
    feature = CPUCachedFeature(gp.Feature(table), 10 * 8)
    feature.read(torch.arange(10))
    copy = pickle.loads(pickle.dumps(feature))
    assert bool(copy.cached(torch.arange(10)).all())
    assert torch.equal(copy.read(torch.tensor([5, 50])), table[[5, 50]])


@pytest.mark.parametrize("policy", ["s3-fifo", "sieve"])
def test_a_copy_sent_to_another_process_has_rows_of_its_own(policy):
    """torch's multiprocessing pickler sends the rows in shared memory (to workers,
    ``torch.multiprocessing.spawn``): the copy's admissions must not overwrite rows the
    original's slots still map (they did: most batches of both read wrong rows)."""
    import torch.multiprocessing  # noqa: F401  (registers the shared-memory reductions)
    from multiprocessing.reduction import ForkingPickler

    table = torch.arange(1000, dtype=torch.float32)[:, None]
    original = CPUCachedFeature(gp.Feature(table), 100 * 4, policy=policy)
    original.read(torch.arange(100))
    copy = ForkingPickler.loads(ForkingPickler.dumps(original))
    assert bool(copy.cached(torch.arange(100)).all())  # warm
    for start in range(100, 1000, 100):  # the copy evicts and admits every row
        assert torch.equal(copy.read(torch.arange(start, start + 100)), table[start : start + 100])
    assert bool(original.cached(torch.arange(100)).all())
    assert torch.equal(original.read(torch.arange(100)), table[:100])


@pytest.mark.parametrize("warm", [False, True])
def test_out_is_checked_as_every_feature_checks_it(warm):
    """A warm cache wrote float rows into an int32 ``out`` or one of another shape."""
    table = torch.randn(100, 4)
    ids = torch.tensor([3, 7, 9, 3])
    feature = CPUCachedFeature(gp.Feature(table), 50 * 16)
    if warm:
        feature.read(ids)
    for bad in (torch.zeros(4, 4, dtype=torch.int32), torch.zeros(2, 8), torch.zeros(4, 8)[:, ::2]):
        with pytest.raises(ValueError, match=r"CPUCachedFeature.read: `out` must be a contiguous torch.float32 tensor of shape \(4, 4\)"):
            feature.read(ids, out=bad)
    out = torch.empty(4, 4)
    assert feature.read(ids, out=out) is out and torch.equal(out, table[ids])


def test_a_read_of_hits_only_does_not_read_the_backing_store():
    table = torch.arange(40, dtype=torch.float32).view(20, 2)
    backing = gp.Feature(table)
    feature = CPUCachedFeature(backing, max_cache_size_in_bytes=20 * 8)
    ids = torch.tensor([3, 7, 3])
    assert torch.equal(feature.read(ids), table[ids])  # misses: read from the backing store, admitted
    reads = []
    backing.read_valid = lambda ids, out=None: reads.append(ids) or table[ids]
    assert torch.equal(feature.read(ids), table[ids]) and torch.equal(feature.read(ids[:0]), table[:0])
    assert reads == []


def test_cpu_cached_feature_is_graphbolts_function(tmp_path):
    """GraphBolt's ``cpu_cached_feature(fallback_features, max_cache_size_in_bytes,
    policy=None, pin_memory=False)``, as its disk-based example calls it: a Feature gives
    its cached feature, a dict a dict (the bytes split by the features' sizes); policy None
    is GraphBolt's default, sieve."""
    table = torch.arange(120, dtype=torch.float32).reshape(30, 4)  # 16-byte rows
    np.save(tmp_path / "f.npy", table.numpy())
    disk = DiskBasedFeature(str(tmp_path / "f.npy"), direct_io=False)
    cached = gp.cpu_cached_feature(disk, 10 * 16, None, True)
    assert isinstance(cached, CPUCachedFeature) and cached.fallback is disk
    assert cached.capacity == 10 and cached.policy == "sieve"
    ids = torch.tensor([3, 29, 3, 0])
    assert torch.equal(cached.read(ids), table[ids])
    both = gp.cpu_cached_feature({"a": gp.Feature(table), "b": gp.Feature(table[:10].clone())}, 20 * 16, "s3-fifo")
    assert list(both) == ["a", "b"] and [f.capacity for f in both.values()] == [15, 5]
    assert all(f.policy == "s3-fifo" for f in both.values())
    empty = gp.cpu_cached_feature({"a": gp.Feature(torch.zeros(0, 4)), "b": gp.Feature(table)}, 20 * 16)  # found in review
    assert empty["b"].capacity == 20 and torch.equal(empty["b"].read(ids), table[ids]) and empty["a"].read(ids[:0]).shape == (0, 4)
    with pytest.raises(ValueError, match=r"cpu_cached_feature: `policy` must be None \(sieve\) or one of \['s3-fifo', 'sieve'\]"):
        gp.cpu_cached_feature(disk, 10 * 16, "lru")
    with pytest.raises(TypeError, match=r"cpu_cached_feature: `pin_memory` must be a bool, got str"):
        gp.cpu_cached_feature(disk, 10 * 16, None, "yes")
    with pytest.raises(TypeError, match=r"cpu_cached_feature: `fallback_features` must be a Feature or a dict"):
        gp.cpu_cached_feature(table, 10 * 16)


@pytest.mark.parametrize(
    "cache",
    [lambda f: CPUCachedFeature(f, 4 * 16), lambda f: gp.GPUCachedFeature(f, 4 * 16, policy="clock", device="cpu")],
)
def test_miss_rate_is_graphbolts_misses_over_rows_read_since_creation_or_reset(cache):
    table = torch.arange(80, dtype=torch.float32).reshape(20, 4)
    cached = cache(gp.Feature(table))
    assert cached.miss_rate == 0.0  # nothing read yet
    cached.read(torch.tensor([1, 2, 1]))  # all three miss (the repeat too: rows are admitted after the read)
    cached.read(torch.tensor([1, 2, 5, 6, 7]))  # 1, 2 hit
    assert cached.miss_rate == pytest.approx(6 / 8) and cached.hit_rate == pytest.approx(2 / 8)
    cached.reset_stats()
    cached.read(torch.tensor([7, 7]))
    assert cached.miss_rate == 0.0 and cached.hit_rate == 1.0
