"""gpu_cached_feature / GPUCachedFeature without CUDA warn once per process, as the other
CUDA paths do (copy_to('cuda'), pin_memory_), and cache in host memory."""

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
