"""CSCGraph.pin_memory_() / .to(): in-place pinning on CUDA, a warned no-op without."""

import warnings

import pytest
import torch

from graphpipe import CSCGraph
from graphpipe.ops import uva_gather

has_cuda = torch.cuda.is_available()


def graph():
    return CSCGraph.from_coo(
        torch.tensor([1, 2, 0, 3]), torch.tensor([0, 0, 1, 2]), 4,
        edge_attributes={"w": torch.rand(4)}, node_attributes={"x": torch.rand(4, 2)},
    )


@pytest.mark.skipif(has_cuda, reason="the CPU-only fallback")
def test_pin_without_cuda_is_a_noop_that_warns_once(monkeypatch):
    monkeypatch.setattr(uva_gather, "_warned_without_cuda", set())
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
    view = uva_gather.zero_copy_view(g.indices)
    assert view.is_cuda and torch.equal(view.cpu(), g.indices)
    assert g.pin_memory_() is g  # twice is fine


@pytest.mark.cuda
def test_pin_in_place_unregisters_when_collected():
    t = torch.arange(1 << 16)
    uva_gather.pin_in_place(t)
    assert t.is_pinned()
    del t  # the finaliser unregisters: a new registration of fresh memory must work
    u = uva_gather.pin_in_place(torch.arange(1 << 16))
    assert u.is_pinned()
