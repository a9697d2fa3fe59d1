"""gpu_cached_feature / GPUCachedFeature without CUDA warn once per process, as the other
CUDA paths do (copy_to('cuda'), pin_memory_), and cache in host memory."""

import sys
import threading
import warnings

import pytest
import torch

import graphpipe as gp
from graphpipe._internal import devices


def test_a_gpu_cache_without_cuda_warns_once_and_reads_the_feature_itself(monkeypatch):
    """Found in review: without CUDA the cache kept a host copy of up to ``max_bytes`` of
    rows the table already holds in host memory (the README's 8 GiB cache on a laptop)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    table = torch.randn(50, 4)
    store = gp.FeatureStore({"feat": table})
    with pytest.warns(UserWarning, match=r"GPUCachedFeature: CUDA is not available; reads go to the feature itself"):
        cached = gp.gpu_cached_feature(store, "feat", max_bytes=10 * 16)
    assert cached["feat"].device == torch.device("cpu") and cached["feat"].capacity == 0 and cached["feat"].cache.numel() == 0
    cached["feat"].update(torch.ones(50, 4))  # a whole-table update rebuilds the cache: still nothing held
    assert cached["feat"].capacity == 0 and torch.equal(cached["feat"].read(ids := torch.tensor([3, 49, 3])), torch.ones(3, 4))
    assert torch.equal(store["feat"].read(ids), torch.ones(3, 4))  # update writes through to the feature
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process; device="cpu" asks for the host quietly
        gp.gpu_cached_feature(store, "feat", max_bytes=10 * 16, device="cuda")
        gp.GPUCachedFeature(store["feat"], 10 * 16)
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        on_host = gp.gpu_cached_feature(store, "feat", max_bytes=10 * 16, device="cpu")["feat"]
    assert on_host.device.type == "cpu" and on_host.capacity == 10


@pytest.mark.parametrize("policy", ["clock", "static"])
def test_a_gpu_cache_read_from_two_threads_gives_the_table_rows_and_keeps_its_maps_consistent(policy):
    """Two loaders over one pipe (or two pipes sharing a store) read one cache from two
    threads: every row must be the table's, and the slot maps must stay each other's
    inverse (they were left inconsistent, and later single-threaded reads wrong)."""
    num_rows = 3000
    table = torch.randn(num_rows, 16, generator=torch.Generator().manual_seed(0))
    cache = gp.GPUCachedFeature(gp.Feature(table), 300 * 64, policy=policy, device="cpu")
    wrong = []

    def reader(seed):
        generator = torch.Generator().manual_seed(seed)
        for _ in range(400):
            ids = torch.randint(0, num_rows, (int(torch.randint(1, 800, (), generator=generator)),), generator=generator)
            if not torch.equal(cache.read(ids), table[ids]):
                wrong.append(seed)

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in (1, 2)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads interleave often, even between torch ops
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert not wrong
    slot = cache.slot_of_row[:num_rows].to(torch.int64)
    held = (slot >= 0).nonzero().view(-1)
    assert torch.equal(cache.row_of_slot[slot[held]], held)  # row_of_slot[slot_of_row[r]] == r
    assert held.numel() == (cache.row_of_slot[: cache.capacity] < num_rows).sum()
    ids = torch.randint(0, num_rows, (2000,))
    assert torch.equal(cache.read(ids), table[ids])


def test_gpu_cached_feature_takes_graphbolts_form_a_feature_or_a_dict_and_bytes():
    """GraphBolt's ``gpu_cached_feature(fallback_features, max_cache_size_in_bytes)``: a
    Feature gives its cached feature, a dict of Features a dict of cached features (the
    bytes split in proportion to their sizes); graphpipe's store form is unchanged."""
    table, other = torch.randn(30, 4), torch.randn(10, 4)  # 16-byte rows
    cached = gp.gpu_cached_feature(gp.Feature(table), 10 * 16, device="cpu")
    assert isinstance(cached, gp.GPUCachedFeature) and cached.capacity == 10 and cached.policy == "clock"
    ids = torch.tensor([3, 29, 3, 0])
    assert torch.equal(cached.read(ids), table[ids])
    keys = [("node", "paper", "feat"), ("node", "author", "feat")]
    both = gp.gpu_cached_feature({keys[0]: gp.Feature(table), keys[1]: gp.Feature(other)}, 20 * 16, device="cpu")
    assert list(both) == keys and [both[key].capacity for key in keys] == [15, 5]
    assert torch.equal(both[keys[1]].read(ids % 10), other[ids % 10])
    assert gp.gpu_cached_feature({}, 100) == {}
    by_keyword = gp.gpu_cached_feature(fallback_features=gp.Feature(table), max_cache_size_in_bytes=10 * 16, device="cpu")
    assert by_keyword.capacity == 10  # GraphBolt's keywords (found in review of the change)
    store = gp.FeatureStore({"feat": table})
    assert gp.gpu_cached_feature(store, "feat", 10 * 16, device="cpu")["feat"].policy == "static"
    with pytest.raises(TypeError, match=r"missing a required argument: 'max_bytes'; this form is gpu_cached_feature\(store, key"):
        gp.gpu_cached_feature(store, 10 * 16)
    with pytest.raises(TypeError, match=r"'max_cache_size_in_bytes'; this form is gpu_cached_feature\(feature or \{key: feature\}"):
        gp.gpu_cached_feature(gp.Feature(table), max_bytes=10 * 16)
    with pytest.raises(TypeError, match=r"`features` must be a FeatureStore .* or a Feature or dict of Features"):
        gp.gpu_cached_feature(table, 10 * 16)
    with pytest.raises(TypeError, match=r"`fallback_features\['x'\]` must be a graphpipe Feature"):
        gp.gpu_cached_feature({"x": table}, 10 * 16)
