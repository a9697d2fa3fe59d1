"""A graph mapped by CSCGraph.load(mmap=True) pickles as its path: worker processes map
the same file instead of receiving a copy in shared memory."""

import copy
import dataclasses
import io
import multiprocessing
import pickle
import sys
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)

import graphpipe as gp
from graphpipe import CSCGraph

from test_csc_graph_storage import assert_same_graph, either_graph, graph, mapped_from

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps"),
    pytest.mark.usefixtures("kernels_for_child_processes"),  # the children load them from the cache
]


def forking_dumps(obj) -> bytes:
    buffer = io.BytesIO()
    ForkingPickler(buffer).dump(obj)
    return buffer.getvalue()


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("mmap", [False, True])
def test_pickling_keeps_every_array(tmp_path, mmap, typed):
    g = either_graph(typed)
    if mmap:
        g.save(tmp_path / "g.pt")
        g = CSCGraph.load(tmp_path / "g.pt", mmap=True)
    again = pickle.loads(pickle.dumps(g))
    assert_same_graph(g, again)
    assert again.source_path == g.source_path and again.to("cpu") is again
    assert torch.equal(copy.deepcopy(g).map_edge_ids(torch.tensor([0, 5])), g.map_edge_ids(torch.tensor([0, 5])))


def test_a_mapped_graph_pickles_as_its_path(tmp_path):
    path = tmp_path / "g.pt"
    graph(num_nodes=1000, num_edges=50_000).save(path)
    g = CSCGraph.load(path, mmap=True)
    pointer = g.indices.data_ptr()
    assert len(pickle.dumps(g)) < 1000
    assert len(forking_dumps(g)) < 1000
    # torch's reductions would have moved the arrays into shared memory
    assert g.indices.data_ptr() == pointer and not g.indices.is_shared() and mapped_from(g.indices, path)
    h = pickle.loads(forking_dumps(g))
    assert h.source_path == str(path) and mapped_from(h.indices, path) and mapped_from(h.edge_attributes["w"], path)
    assert torch.equal(h.indices, g.indices) and torch.equal(h.original_edge_ids, g.original_edge_ids)
    assert torch.equal(h.node_attributes["x"], g.node_attributes["x"])


def test_graphs_derived_from_a_mapped_one_do_not_carry_its_path(tmp_path):
    path = tmp_path / "g.pt"
    graph().save(path)
    g = CSCGraph.load(path, mmap=True)
    assert g.to("cpu") is g
    derived = dataclasses.replace(g, edge_attributes={})
    assert derived.source_path is None and g.source_path == str(path)
    # its arrays are still mappings of the file: pickled as where they lie in it
    assert len(pickle.dumps(derived)) < 2000
    clone = pickle.loads(pickle.dumps(derived))
    assert mapped_from(clone.indices, path) and torch.equal(clone.indices, g.indices) and clone.source_path is None
    in_memory = dataclasses.replace(g, indices=g.indices.clone(), edge_attributes={})
    assert len(pickle.dumps(in_memory)) > in_memory.indices.nbytes  # pickled with the array
    with pytest.raises(ValueError, match="init=False"):
        dataclasses.replace(g, source_path="elsewhere.pt")


def test_unpickling_fails_clearly_if_the_file_changed(tmp_path):
    path = tmp_path / "g.pt"
    graph().save(path)
    data = pickle.dumps(CSCGraph.load(path, mmap=True))
    graph(num_edges=4000).save(path)
    with pytest.raises(ValueError, match=r"g.pt' changed after it was loaded: it now holds 1000 nodes and 4000 edges"):
        pickle.loads(data)


class FirstNeighbours:
    """A numba-free sampling step: each seed's in-neighbour at an offset keyed by the batch,
    its user edge id, and whether this process maps the graph from its file."""

    def __init__(self, graph):
        self.graph = graph

    def __call__(self, minibatch):
        g = self.graph
        indptr = g.indptr.long()
        start, degree = indptr[minibatch.seeds], g.in_degrees()[minibatch.seeds]
        positions = start + (minibatch.seeds * 31 + minibatch.batch_index) % degree.clamp(min=1)
        mapped = g.source_path is not None and mapped_from(g.indices, g.source_path)
        return dataclasses.replace(
            minibatch,
            input_nodes=torch.cat([minibatch.seeds, g.indices[positions].long()]),
            node_features={"edge_ids": g.map_edge_ids(positions), "mapped": torch.tensor([mapped])},
        )


def test_workers_map_the_graph_file_and_give_the_in_process_batches(tmp_path):
    path = tmp_path / "karate.pt"
    data = gp.datasets.karate_club()
    data.graph.save(path)
    graph = CSCGraph.load(path, mmap=True)

    def pipe():
        items = gp.ItemSet((torch.arange(34), data.labels), names=("seeds", "labels"))
        return gp.ItemSampler(items, 4, shuffle=True, seed=7).transform(FirstNeighbours(graph))

    expected = list(pipe())
    loader = gp.DataLoader(pipe(), num_workers=2)
    got = list(loader)
    loader.close()
    assert [mb.batch_index for mb in got] == list(range(9))
    for a, b in zip(expected, got):
        assert torch.equal(a.seeds, b.seeds) and torch.equal(a.input_nodes, b.input_nodes)
        assert torch.equal(a.node_features["edge_ids"], b.node_features["edge_ids"])
        assert bool(b.node_features["mapped"])  # the worker mapped the file itself
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
def test_a_weighted_sampler_over_a_mapped_graph_pickles_without_the_weights(tmp_path, sampler):
    path = tmp_path / "g.pt"
    g = graph()
    weighted = dataclasses.replace(g, edge_attributes={"w": torch.rand(g.total_num_edges, dtype=torch.float64) + 0.1})
    weighted.save(path)
    mapped = CSCGraph.load(path, mmap=True)
    pipe = getattr(gp.ItemSampler(gp.ItemSet(torch.arange(50)), 10), sampler)(mapped, [3, 2], weights="w", seed=0)
    assert mapped_from(pipe.probs, str(path))
    data = forking_dumps(pipe)
    # torch's reductions would have moved the weights into shared memory (a copy of the
    # file's array per pickled pipe): they must still be read from the file.
    assert mapped_from(pipe.probs, str(path)) and not pipe.probs.is_shared()
    clone = pickle.loads(data)
    assert torch.equal(clone.probs, pipe.probs) and clone.graph.source_path == str(path)
    want, got = list(pipe), list(clone)
    assert len(got) == len(want) == 5
    for a, b in zip(got, want):
        for sa, sb in zip(a.sampled_subgraphs, b.sampled_subgraphs):
            assert torch.equal(sa.original_edge_ids, sb.original_edge_ids)
