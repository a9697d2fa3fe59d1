"""Typed CSCGraph: from_hetero_edges' layout, validation of the typed fields, save/load
(plain and mapped), pickling, and homogeneous files of format version 1."""

import dataclasses
import pickle

import pytest
import torch

from graphpipe import CSCGraph
from graphpipe.graph.storage import _checksum
from graphpipe.graph.edge_types import parse_edge_type
from hetero_graphs import EDGE_TYPES, NUM_NODES, hetero_graph


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
    assert torch.equal(graph.map_edge_ids(torch.arange(graph.num_edges)), local)
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
    assert total == graph.num_edges
    for v in range(graph.num_nodes):
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
    assert graph.num_edges == 1 and graph.type_per_edge.tolist() == [1]


def test_tuple_edge_types_and_pairs_build_the_same_graph(typed):
    graph, edges = typed
    as_tuples = {tuple(t.split(":")): torch.stack(pair) for t, pair in edges.items()}
    again = CSCGraph.from_hetero_edges(as_tuples, NUM_NODES)
    for name in ("indptr", "indices", "original_edge_ids", "type_per_edge", "node_type_offset"):
        assert torch.equal(getattr(again, name), getattr(graph, name)), name
    assert again.edge_type_to_id == graph.edge_type_to_id


# ---------------------------------------------------------------------------- errors
def test_from_hetero_edges_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"edge type 'a:r:x' names node type 'x', which `num_nodes` lacks"):
        CSCGraph.from_hetero_edges({"a:r:x": ([0], [0])}, {"a": 1})
    with pytest.raises(ValueError, match=r"`edges\['a:r:b'\]` targets hold b id 3, out of range for num_nodes\['b'\]=3"):
        CSCGraph.from_hetero_edges({"a:r:b": ([0], [3])}, {"a": 1, "b": 3})
    with pytest.raises(ValueError, match=r"`edges\['a:r:b'\]` sources hold a id -1"):
        CSCGraph.from_hetero_edges({"a:r:b": ([-1], [0])}, {"a": 1, "b": 3})
    with pytest.raises(ValueError, match=r"`edge_attributes\['w'\]` lacks edge type\(s\) \['b:s:a'\]"):
        CSCGraph.from_hetero_edges(
            {"a:r:b": ([0], [0]), "b:s:a": ([0], [0])}, {"a": 1, "b": 1}, edge_attributes={"w": {"a:r:b": torch.ones(1)}}
        )
    with pytest.raises(ValueError, match=r"edge attribute 'w\['a:r:b'\]' must be a tensor with num_edges=1 rows"):
        CSCGraph.from_hetero_edges({"a:r:b": ([0], [0])}, {"a": 1, "b": 1}, edge_attributes={"w": {"a:r:b": torch.ones(2)}})
    with pytest.raises(ValueError, match="an edge type must be 'src_type:relation:dst_type'"):
        CSCGraph.from_hetero_edges({"a-b": ([0], [0])}, {"a": 1})
    with pytest.raises(ValueError, match="edge type 'a:r:a' is given twice"):
        CSCGraph.from_hetero_edges({"a:r:a": ([0], [0]), ("a", "r", "a"): ([0], [0])}, {"a": 1})
    with pytest.raises(ValueError, match=r"`num_nodes\['a'\]`"):
        CSCGraph.from_hetero_edges({"a:r:a": ([0], [0])}, {"a": -1})
    with pytest.raises(ValueError, match="`edges` must be a non-empty dict"):
        CSCGraph.from_hetero_edges({}, {"a": 1})


def replaced(graph, **fields):
    return dataclasses.replace(graph, **fields)


def first_mixed_destination(graph):
    """A destination with in-edges of two types, and its CSC range."""
    per_edge = graph.type_per_edge.to(torch.int64)
    for v in range(graph.num_nodes):
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


# ---------------------------------------------------------------------------- storage
def assert_same_typed_graph(a, b):
    for name in ("indptr", "indices", "original_edge_ids", "node_type_offset", "type_per_edge"):
        x, y = getattr(a, name), getattr(b, name)
        assert torch.equal(x, y) and x.dtype == y.dtype, name
    assert dict(a.node_type_to_id) == dict(b.node_type_to_id)
    assert dict(a.edge_type_to_id) == dict(b.edge_type_to_id)
    assert a.node_types == b.node_types and a.edge_types == b.edge_types
    assert list(a.edge_attributes) == list(b.edge_attributes)
    for key in a.edge_attributes:
        assert torch.equal(a.edge_attributes[key], b.edge_attributes[key])


@pytest.mark.parametrize("mmap", [False, True])
def test_save_and_load_keep_the_types(typed, tmp_path, mmap):
    graph, _ = typed
    graph.save(tmp_path / "g.pt")
    loaded = CSCGraph.load(tmp_path / "g.pt", mmap=mmap)
    assert_same_typed_graph(graph, loaded)
    assert (loaded.source_path is not None) == mmap
    loaded.validate()
    checked = CSCGraph.load(tmp_path / "g.pt", mmap=mmap, validate=True)
    assert_same_typed_graph(graph, checked)


def test_a_corrupted_type_per_edge_is_caught_by_its_checksum(typed, tmp_path):
    graph, _ = typed
    graph.save(tmp_path / "g.pt")
    state = torch.load(tmp_path / "g.pt", weights_only=True)
    state["type_per_edge"][0] ^= 1
    torch.save(state, tmp_path / "g.pt")
    with pytest.raises(ValueError, match="checksum mismatch in `type_per_edge`"):
        CSCGraph.load(tmp_path / "g.pt")


def test_a_loaded_file_with_bad_types_is_refused(typed, tmp_path):
    graph, _ = typed
    graph.save(tmp_path / "g.pt")
    state = torch.load(tmp_path / "g.pt", weights_only=True)
    state["node_type_offset"] = torch.tensor([0, 30, 70, 80])
    state["checksums"]["node_type_offset"] = _checksum(state["node_type_offset"])
    torch.save(state, tmp_path / "g.pt")
    with pytest.raises(ValueError, match=r"g.pt'\): CSCGraph: `node_type_offset` must rise from 0 to num_nodes=75"):
        CSCGraph.load(tmp_path / "g.pt")


@pytest.mark.parametrize("mmap", [False, True])
def test_pickling_keeps_the_types(typed, tmp_path, mmap):
    graph, _ = typed
    if mmap:
        graph.save(tmp_path / "g.pt")
        graph = CSCGraph.load(tmp_path / "g.pt", mmap=True)
    again = pickle.loads(pickle.dumps(graph))
    assert_same_typed_graph(graph, again)
    assert again.source_path == graph.source_path
    assert again.to("cpu") is again


def test_homogeneous_files_of_format_version_1_still_load(tmp_path):
    """A version 1 file (before types) as CSCGraph.save wrote it: no typed keys."""
    graph = CSCGraph.from_coo(torch.tensor([2, 0, 1, 2]), torch.tensor([1, 2, 0, 0]), 3, edge_attributes={"w": torch.arange(4.0)})
    graph.save(tmp_path / "g.pt")
    state = torch.load(tmp_path / "g.pt", weights_only=True)
    state["version"] = 1
    for key in ("node_type_offset", "type_per_edge", "node_type_to_id", "edge_type_to_id"):
        del state[key]
        state["checksums"].pop(key, None)
    assert set(state) == {
        "format", "version", "indptr", "indices", "edge_attributes", "node_attributes",
        "original_edge_ids", "checksums", "checksum_chunk_bytes",
    }  # fmt: skip
    torch.save(state, tmp_path / "v1.pt")
    for mmap in (False, True):
        loaded = CSCGraph.load(tmp_path / "v1.pt", mmap=mmap)
        assert not loaded.is_heterogeneous and loaded.node_types == [] and loaded.type_per_edge is None
        assert torch.equal(loaded.indptr, graph.indptr) and torch.equal(loaded.indices, graph.indices)
        assert torch.equal(loaded.original_edge_ids, graph.original_edge_ids)
        assert torch.equal(loaded.edge_attributes["w"], graph.edge_attributes["w"])
    # a version 1 file with typed keys is not a version 1 file
    state["type_per_edge"] = None
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"wrong keys for a version 1 graph file: .*unexpected \['type_per_edge'\]"):
        CSCGraph.load(tmp_path / "bad.pt")
