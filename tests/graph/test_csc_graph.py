import dataclasses
import math
import warnings

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe import CSCGraph
from graphpipe._internal import devices
from graphpipe.graph.edge_types import parse_edge_type
from hetero_graphs import EDGE_TYPES, NUM_NODES, hetero_graph


def test_from_edge_index_groups_by_target():
    # edges: 0->1, 1->2, 2->0, 2->1
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    g = CSCGraph.from_edge_index(edge_index)
    assert g.total_num_nodes == 3 and g.total_num_edges == 4
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
    assert g.total_num_nodes == 60
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
    assert h.total_num_edges == 3


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


@pytest.mark.parametrize("sorted_input", [True, False])
def test_map_edge_ids_refuses_positions_outside_the_graph_with_or_without_a_permutation(sorted_input):
    src, dst = torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 2, 3] if sorted_input else [3, 2, 1, 0])
    g = CSCGraph.from_coo(src, dst)
    assert (g.original_edge_ids is None) == sorted_input
    with pytest.raises(ValueError, match=r"outside \[0, 4\)"):
        g.map_edge_ids(torch.tensor([1000, -5]))  # was: returned as is without original_edge_ids
    with pytest.raises(TypeError, match="`positions` must be an integer tensor"):
        g.map_edge_ids(torch.tensor([1.7, 2.9]))  # was: truncated to [1, 2]
    assert g.map_edge_ids(torch.tensor([[0, 3]])).shape == (1, 2)


def test_original_edge_ids_give_each_csc_edge_its_coo_position():
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 50, (300,), generator=gen)
    dst = torch.randint(0, 50, (300,), generator=gen)
    w = torch.rand(300, generator=gen)
    g = CSCGraph.from_coo(src, dst, num_nodes=60, edge_attributes={"w": w})
    positions = torch.arange(g.total_num_edges)
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


# ---------------------------------------------------------------- typed graphs
@pytest.fixture(scope="module")
def typed():
    return hetero_graph(seed=0)


def test_node_and_edge_types_get_ids_in_sorted_name_order(typed):
    graph, _ = typed
    assert graph.is_heterogeneous
    assert dict(graph.node_type_to_id) == {"author": 0, "paper": 1, "venue": 2}
    assert graph.edge_types == sorted(EDGE_TYPES)
    assert graph.node_type_offset.dtype == torch.int64
    assert graph.node_type_offset.tolist() == [0, 30, 70, 75]
    assert graph.num_nodes_per_type == NUM_NODES
    assert graph.type_per_edge.dtype == torch.uint8


def test_layout_every_csc_position_is_the_input_edge_it_names(typed):
    """Nodes of a type contiguous, in-edges grouped by edge type ascending and within a
    type in input order, original_edge_ids a permutation per type, attributes along."""
    graph, edges = typed
    offsets = graph.node_type_offset.tolist()
    tid = graph.node_type_to_id
    src, dst = graph.edge_index()
    per_edge = graph.type_per_edge.to(torch.int64)
    local = graph.original_edge_ids.to(torch.int64)
    assert torch.equal(graph.map_edge_ids(torch.arange(graph.total_num_edges)), local)
    total = 0
    for t, etype in enumerate(graph.edge_types):
        s, _, d = parse_edge_type(etype)
        mask = per_edge == t
        ids = local[mask]
        count = edges[etype][0].numel()
        total += count
        assert torch.equal(ids.sort().values, torch.arange(count)), etype  # a permutation within the type
        assert torch.equal(edges[etype][0][ids] + offsets[tid[s]], src[mask]), etype
        assert torch.equal(edges[etype][1][ids] + offsets[tid[d]], dst[mask]), etype
        assert torch.equal(graph.edge_attributes["eid"][mask], ids)
        # within one destination, the edges of a type keep their input order
        key = dst[mask] * (count + 1) + ids
        assert bool((key[1:] > key[:-1]).all()), etype
    assert total == graph.total_num_edges
    for v in range(graph.total_num_nodes):
        types = per_edge[graph.indptr[v] : graph.indptr[v + 1]]
        assert bool((types[1:] >= types[:-1]).all()), v


def test_edge_attributes_are_permuted_with_the_edges():
    edges = {"a:r:b": torch.tensor([[0, 1, 1], [1, 0, 1]]), "b:s:a": ([1, 0], [0, 0])}
    weights = {"a:r:b": torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]]), ("b", "s", "a"): torch.tensor([[4.0, 40.0], [5.0, 50.0]])}
    graph = CSCGraph.from_hetero_edges(edges, {"a": 2, "b": 2}, edge_attributes={"w": weights})
    # global ids: a0=0 a1=1 b0=2 b1=3. In-edges of a0: b1, b0 (type b:s:a, edges 0, 1); of
    # a1: none; of b0: a1 (a:r:b, edge 1); of b1: a0 (edge 0), a1 (edge 2).
    assert graph.indptr.tolist() == [0, 2, 2, 3, 5]
    assert graph.indices.tolist() == [3, 2, 1, 0, 1]
    assert graph.type_per_edge.tolist() == [1, 1, 0, 0, 0]
    assert graph.original_edge_ids.tolist() == [0, 1, 1, 0, 2]
    assert graph.edge_attributes["w"].tolist() == [[4.0, 40.0], [5.0, 50.0], [2.0, 20.0], [1.0, 10.0], [3.0, 30.0]]


def test_a_destination_with_in_edges_of_several_types_groups_them():
    edges = {"u:z:v": ([0, 1], [0, 0]), "u:a:v": ([1], [0]), "v:m:v": ([0], [0])}
    graph = CSCGraph.from_hetero_edges(edges, {"u": 2, "v": 1})
    assert graph.edge_types == ["u:a:v", "u:z:v", "v:m:v"]
    assert graph.indptr.tolist() == [0, 0, 0, 4]
    assert graph.type_per_edge.tolist() == [0, 1, 1, 2]
    assert graph.indices.tolist() == [1, 0, 1, 2]
    assert graph.original_edge_ids.tolist() == [0, 0, 1, 0]


def test_empty_edge_types_and_node_types():
    graph = CSCGraph.from_hetero_edges(
        {"a:r:b": torch.empty(2, 0, dtype=torch.int64), "b:s:b": ([0], [1])}, {"a": 0, "b": 2, "c": 3}
    )
    assert graph.num_nodes_per_type == {"a": 0, "b": 2, "c": 3}
    assert graph.node_type_offset.tolist() == [0, 0, 2, 5]
    assert graph.total_num_edges == 1 and graph.type_per_edge.tolist() == [1]


def test_tuple_edge_types_and_pairs_build_the_same_graph(typed):
    graph, edges = typed
    as_tuples = {tuple(t.split(":")): torch.stack(pair) for t, pair in edges.items()}
    again = CSCGraph.from_hetero_edges(as_tuples, NUM_NODES)
    for name in ("indptr", "indices", "original_edge_ids", "type_per_edge", "node_type_offset"):
        assert torch.equal(getattr(again, name), getattr(graph, name)), name
    assert again.edge_type_to_id == graph.edge_type_to_id


def test_an_edge_attribute_left_out_for_an_edge_type_is_filled_as_node_attributes():
    """As node attributes (and pyg-lib's edge times on some edge types only): int64 times
    UNTIMED (those edges are drawn without a time constraint), floats NaN, bools False."""
    edges = {"a:r:b": ([0, 1], [0, 0]), "b:s:b": ([1, 2], [0, 0])}
    attributes = {"t": {"a:r:b": torch.tensor([4, 9])}, "w": {"b:s:b": torch.tensor([0.5, 2.0])}, "m": {"a:r:b": torch.tensor([True, True])}}
    graph = CSCGraph.from_hetero_edges(edges, {"a": 2, "b": 3}, edge_attributes=attributes)
    by_type = {}
    for name in ("t", "w", "m"):
        values = graph.edge_attributes[name]
        by_type[name] = {et: values[graph.type_per_edge == i].tolist() for i, et in enumerate(graph.edge_types)}
    assert by_type["t"] == {"a:r:b": [4, 9], "b:s:b": [torch.iinfo(torch.int64).min] * 2}
    assert all(math.isnan(w) for w in by_type["w"]["a:r:b"]) and sorted(by_type["w"]["b:s:b"]) == [0.5, 2.0]
    assert by_type["m"] == {"a:r:b": [True, True], "b:s:b": [False, False]}
    items = gp.HeteroItemSet({"b": gp.ItemSet(torch.tensor([0]), names="seeds")})
    with pytest.raises(ValueError, match=r"must be finite .* \(an edge type left out of a typed attribute is NaN"):
        gp.ItemSampler(items, 1).sample_neighbor(graph, [2], weights="w")


# ---------------------------------------------------------------------------- errors
def test_from_hetero_edges_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"edge type 'a:r:x' names node type 'x', which `num_nodes` lacks"):
        CSCGraph.from_hetero_edges({"a:r:x": ([0], [0])}, {"a": 1})
    with pytest.raises(ValueError, match=r"`edges\['a:r:b'\]` targets hold b id 3, out of range for num_nodes\['b'\]=3"):
        CSCGraph.from_hetero_edges({"a:r:b": ([0], [3])}, {"a": 1, "b": 3})
    with pytest.raises(ValueError, match=r"`edges\['a:r:b'\]` sources hold a id -1"):
        CSCGraph.from_hetero_edges({"a:r:b": ([-1], [0])}, {"a": 1, "b": 3})
    with pytest.raises(ValueError, match=r"`edge_attributes\['w'\]` must be a non-empty dict of edge type -> tensor"):
        CSCGraph.from_hetero_edges({"a:r:b": ([0], [0])}, {"a": 1, "b": 1}, edge_attributes={"w": {}})
    with pytest.raises(ValueError, match=r"edge attribute 'w\['a:r:b'\]' must be a torch.Tensor with num_edges=1 rows"):
        CSCGraph.from_hetero_edges({"a:r:b": ([0], [0])}, {"a": 1, "b": 1}, edge_attributes={"w": {"a:r:b": torch.ones(2)}})
    with pytest.raises(ValueError, match="an edge type must be 'src_type:relation:dst_type'"):
        CSCGraph.from_hetero_edges({"a-b": ([0], [0])}, {"a": 1})
    with pytest.raises(ValueError, match="edge type 'a:r:a' is given twice"):
        CSCGraph.from_hetero_edges({"a:r:a": ([0], [0]), ("a", "r", "a"): ([0], [0])}, {"a": 1})
    with pytest.raises(ValueError, match=r"`num_nodes\['a'\]`"):
        CSCGraph.from_hetero_edges({"a:r:a": ([0], [0])}, {"a": -1})
    with pytest.raises(ValueError, match="`edges` must be a non-empty dict"):
        CSCGraph.from_hetero_edges({}, {"a": 1})


def test_typed_edge_attributes_agree_and_name_only_the_graphs_types():
    edges, counts = {"a:r:b": ([0, 0], [0, 0]), "b:s:a": ([0, 0], [0, 0])}, {"a": 1, "b": 1}
    times = {"a:r:b": torch.tensor([1_700_000_001, 1_700_000_003]), "b:s:a": torch.tensor([0.5, 0.25])}
    with pytest.raises(ValueError, match=r"`edge_attributes\['t'\]\['b:s:a'\]` is torch.float32 .* unlike 'a:r:b' \(torch.int64"):
        CSCGraph.from_hetero_edges(edges, counts, edge_attributes={"t": times})  # was: int64 times rounded to float32
    rows = {"a:r:b": torch.ones(2), "b:s:a": torch.ones(2, 3)}
    with pytest.raises(ValueError, match=r"\['b:s:a'\]` is torch.float32 with \[3\] per edge"):
        CSCGraph.from_hetero_edges(edges, counts, edge_attributes={"w": rows})
    typo = {"a:r:b": torch.ones(2), "b:s:a": torch.ones(2), "a:typo:b": torch.ones(5)}
    with pytest.raises(ValueError, match=r"names edge types \['a:typo:b'\] the graph lacks"):
        CSCGraph.from_hetero_edges(edges, counts, edge_attributes={"w": typo})
    same = CSCGraph.from_hetero_edges(edges, counts, edge_attributes={"t": {k: v.to(torch.int64) for k, v in times.items()}})
    assert same.edge_attributes["t"].dtype == torch.int64


@pytest.mark.parametrize("dtype", [torch.uint64, torch.uint32, torch.uint16])
def test_unsigned_edge_ids_are_refused_by_both_builders(dtype):
    ids = torch.tensor([0, 1]).to(dtype)
    with pytest.raises(ValueError, match=rf"`edges\['a:r:a'\]` sources must be a 1-D integer tensor, got {dtype}"):
        CSCGraph.from_hetero_edges({"a:r:a": (ids, ids)}, {"a": 2})
    with pytest.raises(ValueError, match=rf"`src` must be a 1-D integer tensor, got shape \(2,\) and dtype {dtype}"):
        CSCGraph.from_coo(ids, ids)


@pytest.mark.parametrize("num_nodes", [5.0, "5", True, -3])
def test_from_coo_checks_num_nodes(num_nodes):
    with pytest.raises(ValueError, match=rf"from_coo: `num_nodes` must be an int >= 0, got {num_nodes!r}"):
        CSCGraph.from_coo(torch.tensor([0], dtype=torch.int64)[:0], torch.tensor([0])[:0], num_nodes=num_nodes)


def test_numpy_attributes_are_named_as_the_wrong_type():
    with pytest.raises(ValueError, match=r"node attribute 't' must be a torch.Tensor .* got a ndarray"):
        CSCGraph.from_coo(torch.tensor([0]), torch.tensor([1]), node_attributes={"t": np.ones(2)})


def replaced(graph, **fields):
    return dataclasses.replace(graph, **fields)


def first_mixed_destination(graph):
    """A destination with in-edges of two types, and its CSC range."""
    per_edge = graph.type_per_edge.to(torch.int64)
    for v in range(graph.total_num_nodes):
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        if hi - lo >= 2 and int(per_edge[lo]) != int(per_edge[hi - 1]):
            return v, lo, hi
    raise AssertionError("no destination with two edge types")


def test_type_per_edge_out_of_range(typed):
    graph, _ = typed
    bad = graph.type_per_edge.clone()
    bad[5] = 4
    with pytest.raises(ValueError, match=r"`type_per_edge` holds 4, not an edge type id \(0..3\)"):
        replaced(graph, type_per_edge=bad)


def test_type_per_edge_not_ascending_within_a_destination(typed):
    graph, _ = typed
    v, lo, hi = first_mixed_destination(graph)
    bad = graph.type_per_edge.clone()
    bad[lo:hi] = bad[lo:hi].flip(0)
    with pytest.raises(ValueError, match=r"`type_per_edge` must be ascending within each destination's in-edges"):
        replaced(graph, type_per_edge=bad)


def test_type_per_edge_may_fall_between_destinations():
    graph = CSCGraph(
        torch.tensor([0, 0, 1, 2]), torch.tensor([0, 0]),
        node_type_offset=torch.tensor([0, 1, 3]), type_per_edge=torch.tensor([1, 0], dtype=torch.uint8),
        node_type_to_id={"a": 0, "b": 1}, edge_type_to_id={"a:r:b": 0, "a:s:b": 1},
    )  # fmt: skip
    assert graph.type_per_edge.tolist() == [1, 0]


def test_endpoint_of_the_wrong_node_type(typed):
    graph, _ = typed
    per_edge = graph.type_per_edge.to(torch.int64)
    e = int(torch.nonzero(per_edge == graph.edge_type_to_id["author:writes:paper"])[0])
    bad = graph.indices.clone()
    bad[e] = 35  # a paper, but author:writes:paper starts at an author
    with pytest.raises(ValueError, match=rf"CSC position {e} \(35 -> .*'author:writes:paper'.*'paper' -> 'paper'"):
        replaced(graph, indices=bad)


def test_unknown_node_type_in_an_edge_type(typed):
    graph, _ = typed
    edge_type_to_id = dict(graph.edge_type_to_id)
    edge_type_to_id["journal:hosts:paper"] = edge_type_to_id.pop("venue:hosts:paper")
    with pytest.raises(ValueError, match=r"edge type 'journal:hosts:paper' names node type 'journal', not in `node_type_to_id`"):
        replaced(graph, edge_type_to_id=edge_type_to_id)


@pytest.mark.parametrize(
    "offsets, message",
    [
        ([0, 30, 70, 74], r"`node_type_offset` must rise from 0 to num_nodes=75, got \[0, 30, 70, 74\]"),
        ([0, 40, 30, 75], r"`node_type_offset` must rise from 0 to num_nodes=75"),
        ([1, 30, 70, 75], r"`node_type_offset` must rise from 0"),
        ([0, 30, 75], r"`node_type_offset` must be a \[num_node_types \+ 1\] = \[4\] integer tensor"),
    ],
)
def test_node_type_offset_must_cover_the_nodes(typed, offsets, message):
    graph, _ = typed
    with pytest.raises(ValueError, match=message):
        replaced(graph, node_type_offset=torch.tensor(offsets))


def test_other_bad_typed_fields(typed):
    graph, _ = typed
    with pytest.raises(ValueError, match=r"`node_type_offset` must be a .* integer tensor .*, got torch.float32"):
        replaced(graph, node_type_offset=graph.node_type_offset.to(torch.float32))
    with pytest.raises(ValueError, match=r"`type_per_edge` must be a \[num_edges\] = \[448\] integer tensor"):
        replaced(graph, type_per_edge=graph.type_per_edge[:-1])
    with pytest.raises(ValueError, match=r"`type_per_edge` must be a .* integer tensor, got torch.float32"):
        replaced(graph, type_per_edge=graph.type_per_edge.float())
    with pytest.raises(ValueError, match=r"`node_type_to_id` must map type names to the ids 0..2"):
        replaced(graph, node_type_to_id={"author": 0, "paper": 1, "venue": 3})
    with pytest.raises(ValueError, match=r"`edge_type_to_id` must map type names to the ids 0..3"):
        replaced(graph, edge_type_to_id={t: 0 for t in graph.edge_types})
    with pytest.raises(ValueError, match=r"needs all of .*got only \['node_type_offset', 'node_type_to_id', 'edge_type_to_id'\]"):
        replaced(graph, type_per_edge=None)
    with pytest.raises(ValueError, match=r"`node_type_to_id` must be a mapping"):
        replaced(graph, node_type_to_id=["author", "paper", "venue"])


def test_original_edge_ids_must_be_type_local_permutations(typed):
    graph, _ = typed
    ids = graph.original_edge_ids.clone()
    per_edge = graph.type_per_edge.to(torch.int64)
    first_two = torch.nonzero(per_edge == 0).flatten()[:2]
    ids[first_two[1]] = ids[first_two[0]]  # one id twice within type 0
    with pytest.raises(ValueError, match=r"`original_edge_ids` of a typed graph must number each type's edges 0..E_t - 1"):
        replaced(graph, original_edge_ids=ids)
    too_big = graph.original_edge_ids.clone()
    too_big[int(torch.nonzero(per_edge == 3)[0])] = 100  # venue:hosts:paper has fewer edges
    with pytest.raises(ValueError, match=r"`original_edge_ids` of a typed graph must be edge ids within their type"):
        replaced(graph, original_edge_ids=too_big)


@pytest.mark.parametrize("typed", [False, True])
def test_graphbolt_counts(typed):
    """GraphBolt's counts: ``total_num_*`` are ints; ``num_nodes`` / ``num_edges`` are ints on
    an untyped graph and per-type dicts on a typed one, adding up to the totals."""
    if typed:
        graph, edges = hetero_graph()
        assert graph.num_nodes == NUM_NODES
        assert graph.num_edges == {etype: edges[etype][0].numel() for etype in EDGE_TYPES}
        assert sum(graph.num_edges.values()) == graph.total_num_edges == graph.indices.numel()
    else:
        graph = CSCGraph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=5)
        assert (graph.num_nodes, graph.num_edges) == (5, 4)
    assert isinstance(graph.total_num_nodes, int) and graph.total_num_nodes == graph.indptr.numel() - 1
    assert isinstance(graph.total_num_edges, int)


def test_etype_str_tuple_conversions():
    assert gp.etype_str_to_tuple("author:writes:paper") == ("author", "writes", "paper")
    assert gp.etype_str_to_tuple(("a", "r", "b")) == ("a", "r", "b")
    assert gp.etype_tuple_to_str(("author", "writes", "paper")) == "author:writes:paper"
    with pytest.raises(ValueError, match="etype_str_to_tuple: an edge type must be 'src_type:relation:dst_type'"):
        gp.etype_str_to_tuple("author:paper")


def test_review_cases_typed_checks_files_and_copies(tmp_path):
    """Found in review: a typed graph's node id past the last type raised IndexError while
    its error message was made (ValueError as untyped graphs'); a typed graph file without
    ``original_edge_ids`` loaded (its samples then gave CSC positions as edge ids); from_coo
    shared the caller's node attributes, which could change the built graph."""
    edges = {"a:r:a": (torch.tensor([0, 1, 2]), torch.tensor([3, 3, 3])), "a:s:a": (torch.tensor([1, 2]), torch.tensor([0, 3]))}
    graph = CSCGraph.from_hetero_edges(edges, {"a": 4})
    bad = graph.indices.clone()
    bad[0] = 9
    with pytest.raises(ValueError, match=r"`indices` holds node id 9, out of range for num_nodes=4"):
        replaced(graph, indices=bad)
    graph.save(tmp_path / "g.pt")
    state = torch.load(tmp_path / "g.pt", weights_only=True)
    state["original_edge_ids"] = state["checksums"]["original_edge_ids"] = None
    torch.save(state, tmp_path / "tampered.pt")
    for options in ({}, {"validate": True}, {"mmap": True}):
        with pytest.raises(ValueError, match=r"a typed graph needs `original_edge_ids` \(each edge's id within its type\)"):
            CSCGraph.load(tmp_path / "tampered.pt", **options)
    times = torch.zeros(4, dtype=torch.int64)
    graph = CSCGraph.from_coo(torch.tensor([0, 1]), torch.tensor([1, 2]), 4, node_attributes={"ts": times})
    times[0] = 99
    assert graph.node_attributes["ts"].tolist() == [0, 0, 0, 0]


def test_graphbolts_edge_id_attribute_gives_the_edge_ids():
    """Found in review: GraphBolt gives a graph its edge ids as the edge attribute
    ORIGINAL_EDGE_ID; graphpipe kept them as a plain attribute, so samples and edge
    features used CSC positions instead."""
    gen = torch.Generator().manual_seed(0)
    dst, src = torch.randint(0, 40, (200,), generator=gen).sort().values, torch.randint(0, 40, (200,), generator=gen)
    indptr = torch.searchsorted(dst, torch.arange(41))
    ids = torch.randperm(200, generator=gen)
    graph = CSCGraph(indptr, src, edge_attributes={gp.ORIGINAL_EDGE_ID: ids})
    assert torch.equal(graph.original_edge_ids, ids) and torch.equal(graph.edge_attributes[gp.ORIGINAL_EDGE_ID], ids)
    rows = torch.arange(200, dtype=torch.float32)[:, None]  # row i: edge id i
    pipe = (gp.ItemSampler(gp.ItemSet(torch.arange(40), names="seeds"), batch_size=40)
            .sample_neighbor(graph, [-1]).fetch_feature(gp.FeatureStore({}, edge_features={"f": rows}), edge_feature_keys=["f"]))
    mb = next(iter(pipe))
    positions = torch.cat([torch.arange(indptr[v], indptr[v + 1]) for v in mb.sampled_subgraphs[0].original_column_node_ids.tolist()])
    assert torch.equal(mb.sampled_subgraphs[0].original_edge_ids, ids[positions])
    assert torch.equal(mb.edge_features[0]["f"][:, 0], ids[positions].float())
    assert torch.equal(CSCGraph(indptr, src, {gp.ORIGINAL_EDGE_ID: ids}, original_edge_ids=ids.to(torch.int32)).original_edge_ids, ids.int())
    with pytest.raises(ValueError, match=r"`original_edge_ids` and edge_attributes\['_ORIGINAL_EDGE_ID'\] \(GraphBolt's edge ids\) differ"):
        CSCGraph(indptr, src, {gp.ORIGINAL_EDGE_ID: ids}, original_edge_ids=torch.arange(200))
    # Found in review of the change: every way to a graph reads the attribute alike.
    assert torch.equal(dataclasses.replace(graph, node_attributes={"x": torch.zeros(40)}).original_edge_ids, ids)
    assert dataclasses.replace(CSCGraph(indptr, src, {gp.ORIGINAL_EDGE_ID: torch.arange(200)}), node_attributes={}).original_edge_ids is None
    with pytest.raises(ValueError, match=r"CSCGraph.from_coo: edge_attributes\['_ORIGINAL_EDGE_ID'\] \(GraphBolt's edge ids\) is not taken here"):
        CSCGraph.from_edge_index(torch.stack([src, dst]), edge_attributes={gp.ORIGINAL_EDGE_ID: ids})
    with pytest.raises(ValueError, match=r"CSCGraph.from_hetero_edges: edge_attributes\['_ORIGINAL_EDGE_ID'\]"):
        CSCGraph.from_hetero_edges({"a:r:a": torch.stack([src, dst])}, {"a": 40}, edge_attributes={gp.ORIGINAL_EDGE_ID: {"a:r:a": ids}})
    with pytest.raises(ValueError, match=r"holds edge id 21[0-9], out of range .*\(the ids of edge_attributes\['_ORIGINAL_EDGE_ID'\], taken as `original_edge_ids`: a permutation"):
        CSCGraph(indptr, src, {gp.ORIGINAL_EDGE_ID: ids + 13})


def test_graphbolts_edge_id_attribute_on_a_typed_graph_gives_ids_within_types():
    """On a typed graph every edge type numbers its edges from 0, so ids equal to the
    positions over all types are not the positions' per-type numbering."""
    typed, _ = hetero_graph()
    fields = dict(node_type_offset=typed.node_type_offset, type_per_edge=typed.type_per_edge,
                  node_type_to_id=typed.node_type_to_id, edge_type_to_id=typed.edge_type_to_id)
    within = typed.original_edge_ids.flip(0)  # not CSC order, within each type
    within = torch.cat([within[typed.type_per_edge.flip(0) == t] for t in range(len(typed.edge_types))])
    within = torch.empty_like(within).scatter_(0, torch.argsort(typed.type_per_edge, stable=True), within)
    graph = CSCGraph(typed.indptr, typed.indices, {gp.ORIGINAL_EDGE_ID: within}, **fields)
    assert torch.equal(graph.original_edge_ids, within) and not torch.equal(within, typed.original_edge_ids)
    with pytest.raises(ValueError, match=r"\(the ids of edge_attributes\['_ORIGINAL_EDGE_ID'\], taken as `original_edge_ids`"):
        CSCGraph(typed.indptr, typed.indices, {gp.ORIGINAL_EDGE_ID: torch.arange(typed.total_num_edges)}, **fields)


@pytest.mark.parametrize("typed", [False, True])
def test_graphbolts_constructor_and_csc_indptr(typed):
    """``gp.fused_csc_sampling_graph`` (GraphBolt's walkthrough builds graphs with it) gives
    the graph the constructor gives, with the same checks; ``csc_indptr`` is ``indptr``."""
    if typed:
        built, _ = hetero_graph()
        arguments = dict(node_type_offset=built.node_type_offset, type_per_edge=built.type_per_edge,
                         node_type_to_id=dict(built.node_type_to_id), edge_type_to_id=dict(built.edge_type_to_id))
    else:
        built = CSCGraph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=5)
        arguments = {}
    weight = torch.rand(built.total_num_edges)
    graph = gp.fused_csc_sampling_graph(built.indptr, built.indices, **arguments, edge_attributes={"w": weight},
                                        node_attributes={"x": torch.arange(built.total_num_nodes)})
    assert graph.csc_indptr is graph.indptr and torch.equal(graph.indptr, built.indptr) and torch.equal(graph.indices, built.indices)
    assert graph.edge_types == built.edge_types and graph.num_edges == built.num_edges and graph.edge_attributes["w"] is weight
    assert torch.equal(graph.node_attributes["x"], torch.arange(built.total_num_nodes))
    with pytest.raises(ValueError, match=r"indptr"):
        gp.fused_csc_sampling_graph(built.indptr, built.indices[:-1], **arguments)
    with pytest.raises(AttributeError):
        graph.csc_indptr = built.indptr  # read-only, as every field
