"""CSCGraph.save / CSCGraph.load: round trips, corruption and foreign files, lazy mapping."""

import os
import sys

import pytest
import torch

from graphpipe import CSCGraph
from graphpipe.graph.storage import _checksum
from hetero_graphs import hetero_graph


def graph(num_nodes=1000, num_edges=5000, seed=0):
    """A random graph with original edge ids, an edge and a node attribute; indices < 1000."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    return CSCGraph.from_coo(
        src, dst, num_nodes,
        edge_attributes={"w": torch.rand(num_edges, generator=gen)},
        node_attributes={"x": torch.rand(num_nodes, 3, generator=gen)},
    )


def assert_same_graph(a, b):
    for name in ("indptr", "indices", "original_edge_ids", "node_type_offset", "type_per_edge"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None and y is None) or (torch.equal(x, y) and x.dtype == y.dtype), name
    assert a.node_type_to_id == b.node_type_to_id and a.edge_type_to_id == b.edge_type_to_id
    assert list(a.edge_attributes) == list(b.edge_attributes) and list(a.node_attributes) == list(b.node_attributes)
    for key in a.edge_attributes:
        assert torch.equal(a.edge_attributes[key], b.edge_attributes[key])
    for key in a.node_attributes:
        assert torch.equal(a.node_attributes[key], b.node_attributes[key])


def either_graph(typed: bool):
    """:func:`graph`, or the typed graph of ``hetero_graphs``."""
    return hetero_graph(seed=0)[0] if typed else graph()


def mapped_from(tensor, path):
    """True if the memory of ``tensor`` is a mapping of the file ``path`` (Linux)."""
    address = tensor.data_ptr()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start <= address < end:
                return len(parts) == 6 and parts[5].strip() == os.path.realpath(path)
    return False


def rewrite(path, edit):
    """Load the raw state of a saved graph, ``edit(state)`` it, and save it again."""
    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("mmap", [False, True])
def test_round_trip_keeps_every_array(tmp_path, mmap, typed):
    g = either_graph(typed)
    g.save(tmp_path / "g.pt")
    h = CSCGraph.load(tmp_path / "g.pt", mmap=mmap)
    assert_same_graph(g, h)
    assert (h.source_path is not None) == mmap
    assert h.map_edge_ids(torch.tensor([0, 1, 2])).tolist() == g.map_edge_ids(torch.tensor([0, 1, 2])).tolist()
    assert repr(h).startswith(repr(g)[:-1])
    assert os.listdir(tmp_path) == ["g.pt"]  # no temporary file left behind
    h.validate()
    assert_same_graph(g, CSCGraph.load(tmp_path / "g.pt", mmap=mmap, validate=True))


def test_a_graph_saved_from_a_view_writes_only_its_own_bytes(tmp_path):
    big = torch.arange(1_000_000, dtype=torch.int64)
    CSCGraph(torch.tensor([0, 1, 2]), big[:2]).save(tmp_path / "g.pt")
    assert os.path.getsize(tmp_path / "g.pt") < 100_000


def test_ten_changed_bytes_in_indices_are_detected(tmp_path):
    path = tmp_path / "g.pt"
    g = graph()
    g.save(path)
    data = bytearray(path.read_bytes())
    start = bytes(data).find(g.indices.numpy().tobytes())
    assert start > 0
    for k in range(10):  # flip the lowest bit of 10 node ids: still valid ids (< 1000)
        data[start + 4 * (37 * k + 5)] ^= 1
    path.write_bytes(bytes(data))
    message = rf"CSCGraph.load\('{tmp_path}/g.pt'\): checksum mismatch in `indices`.*write it again with CSCGraph.save"
    with pytest.raises(ValueError, match=message):
        CSCGraph.load(path)
    with pytest.raises(ValueError, match=message):
        CSCGraph.load(path, mmap=True, validate=True)
    CSCGraph.load(path, mmap=True)  # lazy: indices are not read


def test_a_corrupted_indptr_is_detected_even_when_mapped(tmp_path):
    path = tmp_path / "g.pt"
    g = graph()
    g.save(path)
    data = bytearray(path.read_bytes())
    start = bytes(data).find(g.indptr.numpy().tobytes())
    data[start + 4 * 500] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"checksum mismatch in `indptr`"):
        CSCGraph.load(path, mmap=True)
    assert CSCGraph.load(path, mmap=True, validate=False).num_edges == 5000


def bad_indices_with_a_valid_checksum(state):
    """Edge 123's source becomes node 10**6 (outside the graph); the checksum still matches."""
    state["indices"][123] = 10**6
    state["checksums"]["indices"] = _checksum(state["indices"])


def test_mapped_load_is_lazy_in_indices_and_validate_true_is_not(tmp_path):
    path = tmp_path / "g.pt"
    graph().save(path)
    rewrite(path, bad_indices_with_a_valid_checksum)
    h = CSCGraph.load(path, mmap=True)
    assert int(h.indices[123]) == 10**6
    with pytest.raises(ValueError, match=rf"'{path}'.*`indices` holds node id 1000000, out of range"):
        CSCGraph.load(path, mmap=True, validate=True)
    with pytest.raises(ValueError, match="`indices` holds node id 1000000"):
        CSCGraph.load(path)


def test_mapped_load_still_checks_indptr_and_validate_false_does_not(tmp_path):
    path = tmp_path / "g.pt"
    graph().save(path)

    def decreasing_indptr_with_a_valid_checksum(state):
        state["indptr"][10] = state["indptr"][12] + 1
        state["checksums"]["indptr"] = _checksum(state["indptr"])

    rewrite(path, decreasing_indptr_with_a_valid_checksum)
    with pytest.raises(ValueError, match="`indptr` must be non-decreasing"):
        CSCGraph.load(path, mmap=True)
    CSCGraph.load(path, mmap=True, validate=False)

    rewrite(path, lambda state: state["indptr"].__setitem__(-1, 4999))
    with pytest.raises(ValueError, match=r"length mismatch: `indptr\[-1\]` is 4999"):
        CSCGraph.load(path, mmap=True, validate=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_mapped_arrays_are_backed_by_the_file(tmp_path):
    path = tmp_path / "g.pt"
    graph().save(path)
    h = CSCGraph.load(path, mmap=True)
    assert h.source_path == str(path)
    for t in (h.indptr, h.indices, h.original_edge_ids, h.edge_attributes["w"]):
        assert mapped_from(t, path)
    assert "source_path=" in repr(h)
    assert CSCGraph.load(path).source_path is None
    assert not mapped_from(CSCGraph.load(path).indices, path)


def test_bad_files_get_clear_errors(tmp_path):
    good = tmp_path / "good.pt"
    graph().save(good)
    content = good.read_bytes()
    cases = {
        "empty.pt": (b"", "the file is empty"),
        "half.pt": (content[: len(content) // 2], "truncated, corrupted or of another kind"),
        "tail-cut.pt": (content[:-10], "truncated, corrupted or of another kind"),
        "random.pt": (torch.randint(0, 256, (5000,), generator=torch.Generator().manual_seed(0))
                      .to(torch.uint8).numpy().tobytes(), "truncated, corrupted or of another kind"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"CSCGraph.load\('{tmp_path}/{name}'\): .*{message}"):
            CSCGraph.load(tmp_path / name)
        with pytest.raises(ValueError, match=message):
            CSCGraph.load(tmp_path / name, mmap=True)
    with pytest.raises(FileNotFoundError, match=rf"'{tmp_path}/missing.pt'\): no such file"):
        CSCGraph.load(tmp_path / "missing.pt")


@pytest.mark.parametrize(
    "state, message",
    [
        ([torch.arange(3)], "holds a list, not a graph written by CSCGraph.save"),
        ({"weight": torch.arange(3)}, r"not a graph written by CSCGraph.save \(its keys are \['weight'\]"),
        ({"format": "graphpipe.CSCGraph", "version": 7}, "graph file format version 7, but this graphpipe reads version 3 and older; upgrade graphpipe"),
        ({"format": "graphpipe.CSCGraph", "version": 1, "indptr": torch.tensor([0])},
         r"wrong keys for a version 1 graph file: missing \['checksum_chunk_bytes', 'checksums', 'edge_attributes'"),
    ],
)
def test_foreign_files_get_clear_errors(tmp_path, state, message):
    torch.save(state, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=rf"'{tmp_path}/other.pt'\): {message}"):
        CSCGraph.load(tmp_path / "other.pt")


def test_a_file_of_arrays_without_format_tag_is_refused(tmp_path):
    g = graph()
    torch.save({"indptr": g.indptr, "indices": g.indices, "edge_attributes": {}, "node_attributes": {}}, tmp_path / "old.pt")
    with pytest.raises(ValueError, match=r"not a graph written by CSCGraph.save .*format tag None"):
        CSCGraph.load(tmp_path / "old.pt")


def test_a_corrupted_type_per_edge_is_caught_by_its_checksum(tmp_path):
    graph = either_graph(typed=True)
    graph.save(tmp_path / "g.pt")
    state = torch.load(tmp_path / "g.pt", weights_only=True)
    state["type_per_edge"][0] ^= 1
    torch.save(state, tmp_path / "g.pt")
    with pytest.raises(ValueError, match="checksum mismatch in `type_per_edge`"):
        CSCGraph.load(tmp_path / "g.pt")


def test_a_loaded_file_with_bad_types_is_refused(tmp_path):
    graph = either_graph(typed=True)
    graph.save(tmp_path / "g.pt")
    state = torch.load(tmp_path / "g.pt", weights_only=True)
    state["node_type_offset"] = torch.tensor([0, 30, 70, 80])
    state["checksums"]["node_type_offset"] = _checksum(state["node_type_offset"])
    torch.save(state, tmp_path / "g.pt")
    with pytest.raises(ValueError, match=r"g.pt'\): CSCGraph: `node_type_offset` must rise from 0 to num_nodes=75"):
        CSCGraph.load(tmp_path / "g.pt")


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


@pytest.mark.parametrize("sampler, options", [
    ("sample_neighbor", {}), ("sample_neighbor", {"deduplicate": False}), ("sample_layer_neighbor", {}),
])  # fmt: skip
def test_a_mapped_graphs_out_of_range_source_is_refused_by_sampling_not_read(tmp_path, sampler, options):
    """A mapped graph's ``indices`` are not scanned when loaded, and the samplers do not
    re-check the ids they made: a sampled source outside the graph must be refused before
    the next layer reads its in-edges (with or without deduplication)."""
    import graphpipe as gp

    path = tmp_path / "g.pt"
    graph().save(path)
    rewrite(path, bad_indices_with_a_valid_checksum)
    h = CSCGraph.load(path, mmap=True)
    dst = int(torch.searchsorted(h.indptr, torch.tensor(123), right=True)) - 1  # the bad edge's destination
    pipe = getattr(gp.ItemSampler(gp.ItemSet(torch.tensor([dst]), names="seeds"), 1), sampler)(h, [-1, -1], **options)
    with pytest.raises(ValueError, match=r"node id 1000000"):
        next(iter(pipe))
