"""CSCGraph.pin_memory_() / .to(): in-place pinning on CUDA, a warned no-op without."""

import warnings

import pytest
import torch

from graphpipe import CSCGraph
from graphpipe._internal import devices

has_cuda = torch.cuda.is_available()


def graph():
    return CSCGraph.from_coo(
        torch.tensor([1, 2, 0, 3]), torch.tensor([0, 0, 1, 2]), 4,
        edge_attributes={"w": torch.rand(4)}, node_attributes={"x": torch.rand(4, 2)},
    )


@pytest.mark.skipif(has_cuda, reason="the CPU-only fallback")
def test_pin_without_cuda_is_a_noop_that_warns_once(monkeypatch):
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    g = graph()
    ptr = g.indices.data_ptr()
    with pytest.warns(UserWarning, match="CUDA is not available; the graph stays unpinned"):
        assert g.pin_memory_() is g
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert g.pin_memory_() is g
    assert g.indices.data_ptr() == ptr


def test_to_same_device_returns_self_and_to_copies_arrays():
    g = graph()
    assert g.to("cpu") is g
    target = "cuda" if has_cuda else "cpu"
    moved = graph().to(target)
    assert moved.indices.device.type == target and moved.edge_attributes["w"].device.type == target
    assert moved.node_attributes["x"].device.type == target


@pytest.mark.cuda
def test_pin_registers_in_place_and_views_read_it():
    g = graph()
    ptrs = [g.indptr.data_ptr(), g.indices.data_ptr()]
    assert g.pin_memory_() is g
    assert [g.indptr.data_ptr(), g.indices.data_ptr()] == ptrs
    assert g.indices.is_pinned() and g.edge_attributes["w"].is_pinned() and g.node_attributes["x"].is_pinned()
    view = devices.zero_copy_view(g.indices)
    assert view.is_cuda and torch.equal(view.cpu(), g.indices)
    assert g.pin_memory_() is g  # twice is fine


@pytest.mark.cuda
def test_pin_in_place_unregisters_when_collected():
    t = torch.arange(1 << 16)
    devices.pin_in_place(t)
    assert t.is_pinned()
    del t  # the finaliser unregisters: a new registration of fresh memory must work
    u = devices.pin_in_place(torch.arange(1 << 16))
    assert u.is_pinned()


class FakeCudart:
    """Stands in for ``torch.cuda.cudart()``: records cudaHostRegister calls and answers
    with the given error codes, in turn."""

    def __init__(self, *answers):
        self.answers, self.calls, self.unregistered = list(answers), [], []

    def cudaHostRegister(self, ptr, nbytes, flags):
        self.calls.append((ptr, nbytes, flags))
        return self.answers.pop(0)

    def cudaHostUnregister(self, ptr):
        self.unregistered.append(ptr)
        return 0

    def cudaGetErrorString(self, err):
        return f"error {err}"


@pytest.mark.skipif(has_cuda, reason="fakes the CUDA runtime")
@pytest.mark.parametrize(
    "answers,flags,outcome",
    [
        ([0], [11], "registered"),  # portable | mapped | read-only: a memory-mapped file may be pinned
        ([801, 0], [11, 3], "registered"),  # read-only not supported by the device: plain registration
        ([1, 0], [11, 3], "registered"),  # whatever the first error: plain registration
        ([712], [11], "left alone"),  # part of the range is registered already
        ([801, 712], [11, 3], "left alone"),
        ([801, 1], [11, 3], "error"),
    ],
)
def test_pin_in_place_registers_read_only_and_clears_the_error_it_leaves(monkeypatch, answers, flags, outcome):
    fake, cleared = FakeCudart(*answers), []
    monkeypatch.setattr(torch.cuda, "cudart", lambda: fake)
    monkeypatch.setattr(devices, "_clear_last_cuda_error", lambda: cleared.append(True))
    tensor = torch.arange(6, dtype=torch.float32)
    if outcome == "error":
        with pytest.raises(RuntimeError, match=r"cudaHostRegister of 24 bytes failed: read-only registration with "
                                               r"CUDA error 801 \(error 801\), plain registration with 1 \(error 1\)"):
            devices.pin_in_place(tensor)
    else:
        assert devices.pin_in_place(tensor) is tensor
    assert fake.calls == [(tensor.data_ptr(), 24, f) for f in flags]
    assert len(cleared) == sum(1 for a in answers if a != 0)  # every failed call's error is cleared
    ptr = tensor.data_ptr()
    del tensor
    assert fake.unregistered == ([ptr] if outcome == "registered" else [])


@pytest.mark.skipif(has_cuda, reason="fakes the CUDA runtime")
def test_resolve_device_fills_in_the_current_cuda_index(monkeypatch):
    assert devices.resolve_device("cpu") == torch.device("cpu")
    assert devices.resolve_device("cuda") == torch.device("cuda")  # no CUDA: left as it is
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert devices.resolve_device(None) == torch.device("cuda:1")
    assert devices.resolve_device("cuda") == torch.device("cuda:1")
    assert devices.resolve_device("cuda:0") == torch.device("cuda:0")


@pytest.mark.cuda
def test_devices_without_an_index_compare_equal_to_the_tensors_made_on_them():
    """torch.device("cuda") != torch.device("cuda:0"): what is built for "cuda" resolves it."""
    g = graph().to("cuda")
    assert g.to("cuda") is g and g.to(torch.device("cuda")) is g
    from graphpipe import Feature, GPUCachedFeature

    cache = GPUCachedFeature(Feature(torch.rand(10, 4)), 5 * 16, "clock", device="cuda")
    out = torch.empty(3, 4, device="cuda")
    assert cache.read(torch.tensor([1, 2, 1], device="cuda"), out) is out


@pytest.mark.skipif(has_cuda, reason="fakes the CUDA runtime")
def test_a_memory_map_the_device_cannot_pin_stays_unpinned_with_a_warning(monkeypatch, tmp_path):
    import numpy as np

    from graphpipe import Feature

    np.save(tmp_path / "x.npy", np.arange(12, dtype=np.float32).reshape(6, 2))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(devices, "_clear_last_cuda_error", lambda: None)
    fake = FakeCudart(801, 1)  # no read-only registration; the plain one refused (a read-only map)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: fake)
    feature = Feature(str(tmp_path / "x.npy"))
    with pytest.warns(UserWarning, match=r"a memory-mapped table stays unpinned .* read-only registration with "
                                         r"CUDA error 801"):
        assert feature.pin_memory_() is feature
    assert isinstance(feature.data, np.memmap) and len(fake.calls) == 2
    assert feature.read(torch.tensor([4])).tolist() == [[8.0, 9.0]]
    fake.answers = [1, 1]
    with pytest.raises(RuntimeError, match="plain registration with 1"):  # memory that is not a map: an error
        Feature(torch.zeros(3, 2)).pin_memory_()
