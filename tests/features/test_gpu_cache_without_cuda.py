"""gpu_cached_feature / GPUCachedFeature without CUDA warn once per process, as the other
CUDA paths do (copy_to('cuda'), pin_memory_), and cache in host memory."""

import sys
import threading
import warnings

import pytest
import torch

import graphpipe as gp
from graphpipe._internal import devices


def test_a_gpu_cache_without_cuda_warns_once_and_caches_on_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    table = torch.randn(50, 4)
    store = gp.FeatureStore({"feat": table})
    with pytest.warns(UserWarning, match=r"GPUCachedFeature: CUDA is not available; the cache lives in host memory"):
        cached = gp.gpu_cached_feature(store, "feat", max_bytes=10 * 16)
    assert cached["feat"].device == torch.device("cpu")
    ids = torch.tensor([3, 49, 3])
    assert torch.equal(cached["feat"].read(ids), table[ids])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process; device="cpu" asks for the host quietly
        gp.gpu_cached_feature(store, "feat", max_bytes=10 * 16, device="cuda")
        gp.GPUCachedFeature(store["feat"], 10 * 16)
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gp.gpu_cached_feature(store, "feat", max_bytes=10 * 16, device="cpu")["feat"].device.type == "cpu"


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
