import pytest
import torch

from graphpipe import ItemSampler, ItemSet
from graphpipe.pipes import Transform


def test_applies_fn_to_every_item():
    pipe = ItemSampler(ItemSet(10), batch_size=4).transform(lambda mb: mb.seeds.sum().item())
    assert isinstance(pipe, Transform) and len(pipe) == 3
    assert list(pipe) == [6, 22, 17]
    assert Transform([], lambda x: x * 2).apply(torch.tensor(5)) == 10


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match=r"`fn` must be callable, got int"):
        Transform([], 3)


def test_a_subclass_overriding_apply_is_what_runs():
    class Doubled(Transform):
        def apply(self, item):
            return 2 * super().apply(item)

    pipe = Doubled(ItemSampler(ItemSet(torch.arange(4)), batch_size=2), lambda mb: mb.seeds)
    assert [b.tolist() for b in pipe] == [[0, 2], [4, 6]]
