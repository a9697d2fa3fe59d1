import pytest
import torch

from graphpipe import FeatureStore, ItemSampler, ItemSet, MiniBatch
from graphpipe.pipes import CopyTo


class _Recorder:
    def __init__(self, value):
        self.value = value
        self.calls = []

    def to(self, device, non_blocking=False):
        self.calls.append((device, non_blocking))
        return (self.value, device)


def test_calls_to_with_device_and_non_blocking():
    items = [_Recorder(1), _Recorder(2)]
    pipe = CopyTo(items, "cpu", non_blocking=True)
    assert list(pipe) == [(1, torch.device("cpu")), (2, torch.device("cpu"))]
    assert [item.calls for item in items] == [[(torch.device("cpu"), True)], [(torch.device("cpu"), True)]]
    assert len(pipe) == 2


def test_minibatches_arrive_on_the_device():
    store = FeatureStore({"x": torch.randn(10, 2)})
    pipe = ItemSampler(ItemSet(10), batch_size=4).fetch_feature(store, ["x"]).copy_to("meta")
    assert isinstance(pipe, CopyTo)
    batches = list(pipe)
    assert len(batches) == 3
    for mb in batches:
        assert isinstance(mb, MiniBatch)
        assert mb.seeds.device.type == "meta" and mb.node_features["x"].device.type == "meta"


def test_bad_device():
    with pytest.raises(ValueError, match=r"`device` must be a torch device or a name like 'cuda:0', got 'gpu0'"):
        CopyTo([], "gpu0")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_copy_pinned_batch_to_cuda():
    mb = MiniBatch(seeds=torch.arange(4)).pin_memory()
    (out,) = list(CopyTo([mb], "cuda", non_blocking=True))
    assert out.seeds.is_cuda and torch.equal(out.seeds.cpu(), torch.arange(4))
