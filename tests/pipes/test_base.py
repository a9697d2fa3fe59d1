import pytest
from torch.utils.data import IterDataPipe

from graphpipe.pipes.base import Pipe, functional_pipe, upstream


class _Numbers(Pipe):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


@functional_pipe("_test_double")
class _Double(Pipe):
    def __init__(self, source, factor=2):
        self.source = source
        self.factor = factor

    def __iter__(self):
        for x in self.source:
            yield x * self.factor


def test_functional_name_chains_and_walks_source_links():
    pipe = _Numbers(3)._test_double(factor=3)
    assert isinstance(pipe, _Double) and list(pipe) == [0, 3, 6]
    assert upstream(pipe) == [pipe, pipe.source]
    assert "_test_double" in dir(pipe)


def test_a_pipe_is_an_iterable_dataset_with_any_number_of_live_iterators():
    from torch.utils.data import IterableDataset

    pipe = _Numbers(4)._test_double()
    assert isinstance(pipe, IterableDataset) and not isinstance(pipe, IterDataPipe)
    first, second = iter(pipe), iter(pipe)
    assert next(first) == 0 and next(second) == 0 and next(first) == 2
    third = iter(pipe)  # starting another iterator does not invalidate the live ones
    assert list(first) == [4, 6] and list(second) == [2, 4, 6] and list(third) == [0, 2, 4, 6]


def test_names_stay_out_of_torch_global_registry():
    # GraphBolt / torchdata register the same names in IterDataPipe.functions
    assert "_test_double" not in IterDataPipe.functions
    assert "sample_neighbor" not in IterDataPipe.functions


def test_taken_name_and_unknown_attribute():
    with pytest.raises(ValueError, match="'_test_double' is already taken"):

        @functional_pipe("_test_double")
        class _Other(Pipe):
            pass

    with pytest.raises(AttributeError):
        _Numbers(1).no_such_stage


def test_stage_length_is_its_source_length():
    class Sized(_Numbers):
        def __len__(self):
            return self.n

    assert len(Sized(3)._test_double()) == 3
    with pytest.raises(TypeError, match="_Numbers has no source and no length"):
        len(_Numbers(3)._test_double())


def test_sampler_chain_has_the_item_sampler_length():
    import torch

    import graphpipe as gp

    graph = gp.CSCGraph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]))
    pipe = gp.ItemSampler(gp.ItemSet(3), batch_size=2).sample_neighbor(graph, [2]).copy_to("cpu")
    assert len(pipe) == 2 and len(gp.DataLoader(pipe)) == 2
