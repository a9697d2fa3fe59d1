import copy
import dataclasses
import pickle
import warnings

import pytest
import torch

from graphpipe import CSCGraph
from graphpipe._internal import devices


def test_from_edge_index_groups_by_target():
    # edges: 0->1, 1->2, 2->0, 2->1
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    g = CSCGraph.from_edge_index(edge_index)
    assert g.num_nodes == 3 and g.num_edges == 4
    assert g.indptr.tolist() == [0, 1, 3, 4]
    # in-neighbours of node 1 are 0 and 2, in COO order (stable sort)
    assert g.indices[1:3].tolist() == [0, 2]
    assert g.in_degrees().tolist() == [1, 2, 1]
    assert g.indices.dtype == torch.int32 and g.indptr.dtype == torch.int32


def test_edge_index_roundtrip_and_attribute_permutation():
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 50, (300,), generator=gen)
    dst = torch.randint(0, 50, (300,), generator=gen)
    w = torch.rand(300, generator=gen)
    g = CSCGraph.from_coo(src, dst, num_nodes=60, edge_attributes={"w": w})
    assert g.num_nodes == 60
    ei = g.edge_index()
    # each CSC edge is a COO edge carrying its own attribute
    coo = {(int(s), int(d), float(x)) for s, d, x in zip(src, dst, w)}
    csc = {(int(s), int(d), float(x)) for s, d, x in zip(ei[0], ei[1], g.edge_attributes["w"])}
    assert coo == csc
    assert bool((ei[1][1:] >= ei[1][:-1]).all())


def test_int64_when_ids_do_not_fit():
    from graphpipe.graph.csc_graph import smallest_index_dtype

    assert smallest_index_dtype(2**31 - 1) == torch.int32
    assert smallest_index_dtype(2**31) == torch.int64


def test_save_load(tmp_path):
    g = CSCGraph.from_edge_index(
        torch.tensor([[0, 1, 2], [1, 2, 0]]), edge_attributes={"w": torch.tensor([1.0, 2.0, 3.0])}
    )
    g.save(tmp_path / "g.pt")
    h = CSCGraph.load(tmp_path / "g.pt")
    assert torch.equal(g.indptr, h.indptr) and torch.equal(g.indices, h.indices)
    assert torch.equal(g.edge_attributes["w"], h.edge_attributes["w"])
    assert h.num_edges == 3


@pytest.mark.parametrize(
    "indptr, indices, match",
    [
        (torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1, 2]), "non-decreasing"),
        (torch.tensor([0, 1, 3]), torch.tensor([0, 1]), "length mismatch"),
        (torch.tensor([1, 2, 3]), torch.tensor([0, 1]), r"indptr\[0\]"),
        (torch.tensor([0, 1, 2]), torch.tensor([0, 5]), "node id 5, out of range"),
        (torch.tensor([0, 1, 2]), torch.tensor([0, -1]), "node id -1"),
        (torch.tensor([0.0, 1.0]), torch.tensor([0]), "`indptr` must be a 1-D int32 or int64"),
    ],
)
def test_validation_errors(indptr, indices, match):
    with pytest.raises(ValueError, match=match):
        CSCGraph(indptr, indices)


def test_attribute_length_errors():
    with pytest.raises(ValueError, match="edge attribute 'w'"):
        CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), edge_attributes={"w": torch.ones(3)})
    with pytest.raises(ValueError, match="node attribute 'x'"):
        CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), node_attributes={"x": torch.ones(3)})


def test_from_coo_errors():
    with pytest.raises(ValueError, match="same length"):
        CSCGraph.from_coo(torch.tensor([0, 1]), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"node id 4 out of range for num_nodes=3"):
        CSCGraph.from_coo(torch.tensor([0, 4]), torch.tensor([1, 2]), num_nodes=3)
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        CSCGraph.from_edge_index(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="integer tensor"):
        CSCGraph.from_coo(torch.tensor([0.0]), torch.tensor([1.0]))


# ---------------------------------------------------------------- original edge ids


def test_sampled_positions_map_to_the_users_edge_ids():
    # edges 0->2 (user edge 0), 1->0 (user edge 1), 2->1 (user edge 2): grouped by target,
    # the edge 1->0 comes first
    g = CSCGraph.from_edge_index(torch.tensor([[0, 1, 2], [2, 0, 1]]))
    assert g.indices.tolist() == [1, 2, 0]
    assert g.map_edge_ids(torch.tensor([0, 1, 2])).tolist() == [1, 2, 0]
    assert g.original_edge_ids.dtype == torch.int32


def test_original_edge_ids_give_each_csc_edge_its_coo_position():
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 50, (300,), generator=gen)
    dst = torch.randint(0, 50, (300,), generator=gen)
    w = torch.rand(300, generator=gen)
    g = CSCGraph.from_coo(src, dst, num_nodes=60, edge_attributes={"w": w})
    positions = torch.arange(g.num_edges)
    ids = g.map_edge_ids(positions)
    assert ids.dtype == torch.int64 and sorted(ids.tolist()) == list(range(300))
    src_csc, dst_csc = g.edge_index()  # CSC order
    assert torch.equal(src[ids], src_csc) and torch.equal(dst[ids], dst_csc)
    assert torch.equal(w[ids], g.edge_attributes["w"])  # attributes are indexed by CSC position
    assert torch.equal(g.map_edge_ids(positions.to(torch.int32)), ids)
    assert torch.equal(g.map_edge_ids(torch.tensor([[5, 7], [9, 11]])), ids[[5, 7, 9, 11]].view(2, 2))


def test_already_sorted_input_keeps_no_original_edge_ids_and_shares_no_memory():
    src = torch.tensor([1, 2, 0, 3])
    dst = torch.tensor([0, 0, 1, 2])
    g = CSCGraph.from_coo(src, dst, 4, edge_attributes={"w": torch.rand(4)})
    assert g.original_edge_ids is None
    positions = torch.tensor([3, 0])
    assert g.map_edge_ids(positions).tolist() == [3, 0]
    src[0] = 3
    assert g.indices[0] == 1


@pytest.mark.parametrize(
    "edge_ids, match",
    [
        (torch.tensor([0, 1]), "`original_edge_ids` must have num_edges=3 entries"),
        (torch.tensor([0, 1, 3]), "edge id 3, out of range"),
        (torch.tensor([0, -1, 2]), "edge id -1, out of range"),
        (torch.tensor([0, 2, 2]), "must be a permutation of 0..2, but edge id 1 is missing"),
        (torch.tensor([0.0, 1.0, 2.0]), "`original_edge_ids` must be a 1-D int32 or int64"),
        (torch.tensor([[0, 1, 2]]), "`original_edge_ids` must be a 1-D int32 or int64"),
    ],
)
def test_original_edge_ids_are_validated(edge_ids, match):
    with pytest.raises(ValueError, match=match):
        CSCGraph(torch.tensor([0, 1, 3]), torch.tensor([0, 1, 0]), original_edge_ids=edge_ids)


def test_repr_shows_original_edge_ids():
    g = CSCGraph.from_edge_index(torch.tensor([[0, 1, 2], [2, 0, 1]]))
    assert "original_edge_ids=torch.int32" in repr(g)
    assert "original_edge_ids=None" in repr(CSCGraph(torch.tensor([0, 1]), torch.tensor([0])))


# ---------------------------------------------------------------- read-only graphs


@pytest.mark.parametrize("name", ["indptr", "indices", "edge_attributes", "node_attributes", "original_edge_ids"])
def test_fields_cannot_be_assigned_past_validation(name):
    g = CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]))
    with pytest.raises(AttributeError, match=rf"cannot assign `{name}`.*dataclasses.replace\(graph, {name}="):
        setattr(g, name, torch.tensor([5, 7]))
    with pytest.raises(AttributeError, match="read-only"):
        delattr(g, name)
    assert g.indices.tolist() == [0, 1]


def test_attribute_mappings_are_read_only_and_replace_validates():
    w = torch.ones(2)
    g = CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), edge_attributes={"w": w}, node_attributes={"x": w})
    with pytest.raises(TypeError):
        g.edge_attributes["w"] = torch.ones(5)
    with pytest.raises(TypeError):
        g.node_attributes["y"] = torch.ones(2)
    assert list(g.edge_attributes) == ["w"] and list(g.node_attributes) == ["x"]
    with pytest.raises(ValueError, match="node id 7, out of range"):
        dataclasses.replace(g, indices=torch.tensor([0, 7]))
    with pytest.raises(ValueError, match="edge attribute 'v'"):
        dataclasses.replace(g, edge_attributes={**g.edge_attributes, "v": torch.ones(5)})
    h = dataclasses.replace(g, edge_attributes={**g.edge_attributes, "v": torch.zeros(2)})
    assert sorted(h.edge_attributes) == ["v", "w"] and list(g.edge_attributes) == ["w"]


def test_strided_arrays_are_made_contiguous_once():
    both = torch.tensor([[0, 0], [1, 1], [2, 2]])
    g = CSCGraph(both[:, 0], torch.tensor([5, 0, 7, 1])[1::2], edge_attributes={"w": torch.rand(2, 4)[:, 1]})
    assert g.indptr.is_contiguous() and g.indices.is_contiguous() and g.edge_attributes["w"].is_contiguous()
    assert g.indptr.tolist() == [0, 1, 2] and g.indices.tolist() == [0, 1]


def test_a_graph_pickles_with_its_arrays():
    g = CSCGraph.from_edge_index(
        torch.tensor([[0, 1, 2], [2, 0, 1]]), edge_attributes={"w": torch.rand(3)}, node_attributes={"x": torch.rand(3)}
    )
    h = pickle.loads(pickle.dumps(g))
    assert torch.equal(h.indices, g.indices) and torch.equal(h.original_edge_ids, g.original_edge_ids)
    assert torch.equal(h.edge_attributes["w"], g.edge_attributes["w"]) and list(h.node_attributes) == ["x"]
    assert h.source_path is None
    assert copy.deepcopy(g).map_edge_ids(torch.tensor([0])).tolist() == [1]


# ---------------------------------------------------------------- devices


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only fallback")
def test_to_cuda_without_cuda_warns_once_and_stays_on_the_cpu(monkeypatch):
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    g = CSCGraph.from_edge_index(torch.tensor([[0, 1, 2], [2, 0, 1]]))
    with pytest.warns(UserWarning, match=r"CSCGraph.to\('cuda'\): CUDA is not available; the graph stays on the CPU"):
        assert g.to("cuda") is g
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert g.to(torch.device("cuda", 0)) is g
    assert g.indices.device.type == "cpu"


@pytest.mark.parametrize("typed", [False, True])
def test_builders_check_the_ids_once_and_the_graph_only_for_shapes(typed, monkeypatch):
    levels = []
    check = CSCGraph._check
    monkeypatch.setattr(CSCGraph, "_check", lambda graph, level: levels.append(level) or check(graph, level))
    if typed:
        graph = CSCGraph.from_hetero_edges({"a:r:b": torch.tensor([[0, 1], [1, 0]])}, {"a": 2, "b": 2})
    else:
        graph = CSCGraph.from_coo(torch.tensor([0, 1, 2]), torch.tensor([2, 0, 1]))
    assert levels == ["shapes"]
    graph.validate()  # and what they built is valid
    with pytest.raises(ValueError, match="out of range"):
        if typed:
            CSCGraph.from_hetero_edges({"a:r:b": torch.tensor([[0, 2], [1, 0]])}, {"a": 2, "b": 2})
        else:
            CSCGraph.from_coo(torch.tensor([0, 3]), torch.tensor([1, 0]), num_nodes=3)
