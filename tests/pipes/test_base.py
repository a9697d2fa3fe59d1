import pytest
from torch.utils.data import IterDataPipe

from graphpipe.pipes.base import Pipe, functional_pipe, traverse


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


def test_functional_name_chains_and_traverses():
    pipe = _Numbers(3)._test_double(factor=3)
    assert isinstance(pipe, _Double) and list(pipe) == [0, 3, 6]
    graph = traverse(pipe)
    (root, sources), = graph.values()
    assert root is pipe
    assert [p for p, _ in sources.values()] == [pipe.source]
    assert "_test_double" in dir(pipe)


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
