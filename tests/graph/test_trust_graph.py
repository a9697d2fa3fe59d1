"""Issue 29 for CSCGraph: scratch and output files never written through planted
symlinks and never left behind, linear-cost out-of-core builds, clear errors for bad
edge files, int32 node type offsets, ':' in type names, memory-mapped graphs pickled
as their files, and a pointer to the right constructor for a foreign `graph`."""

import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from graphpipe import CSCGraph
from graphpipe.ops import csc_build


def save_edges(folder, src, dst):
    np.save(folder / "src.npy", src)
    np.save(folder / "dst.npy", dst)
    return folder / "src.npy", folder / "dst.npy"


def random_edges(num_nodes=50, num_edges=300, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges)


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---------------------------------------------------------------- item 1: scratch files
def test_build_does_not_write_through_a_symlink_at_the_old_scratch_names(tmp_path):
    src, dst = random_edges()
    files = save_edges(tmp_path, src, dst)
    victims = []
    for name in ("indices", "edge_ids"):
        victim = tmp_path / f"victim_{name}"
        victim.write_bytes(b"precious")
        os.symlink(victim, tmp_path / f"g.pt.{os.getpid()}.{name}.tmp.npy")
        victims.append(victim)
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", *files, num_nodes=50)
    assert all(v.read_bytes() == b"precious" for v in victims)
    expected = CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst), 50)
    assert torch.equal(graph.indices, expected.indices)


def test_save_does_not_write_through_a_symlink_at_the_old_temporary_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, tmp_path / f"g.pt.{os.getpid()}.tmp")
    graph = CSCGraph.from_coo(torch.tensor([0, 1]), torch.tensor([1, 0]))
    graph.save(tmp_path / "g.pt")
    assert victim.read_bytes() == b"precious"
    assert torch.equal(CSCGraph.load(tmp_path / "g.pt").indices, graph.indices)


@pytest.mark.parametrize("how", ["save", "from_coo_files"])
def test_a_symlink_at_the_destination_is_replaced_not_written_through(tmp_path, how):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, tmp_path / "g.pt")
    src, dst = random_edges()
    if how == "save":
        CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst), 50).save(tmp_path / "g.pt")
    else:
        CSCGraph.from_coo_files(tmp_path / "g.pt", *save_edges(tmp_path, src, dst), num_nodes=50)
    assert victim.read_bytes() == b"precious"
    assert not os.path.islink(tmp_path / "g.pt") and CSCGraph.load(tmp_path / "g.pt").num_edges == 300


def test_a_killed_builds_scratch_directory_is_removed_by_the_next_build(tmp_path):
    stale = tmp_path / f".graphpipe-tmp-{dead_pid()}-abc123"
    stale.mkdir()
    (stale / "indices.npy").write_bytes(b"\0" * 4096)
    src, dst = random_edges()
    CSCGraph.from_coo_files(tmp_path / "g.pt", *save_edges(tmp_path, src, dst))
    assert sorted(os.listdir(tmp_path)) == ["dst.npy", "g.pt", "src.npy"]


def test_a_build_killed_midway_leaves_nothing_the_next_build_keeps(tmp_path):
    src, dst = random_edges(num_nodes=1000, num_edges=200_000)
    files = save_edges(tmp_path, src, dst)
    script = (
        "import os, sys, numpy as np\n"
        "from graphpipe import CSCGraph\n"
        "from graphpipe.ops import csc_build\n"
        "fill = csc_build._fill_kernel\n"
        "def die(*args):  # in the fill pass by position, after the scratch files were written\n"
        "    if args[4] and args[3].size:\n"
        "        os.kill(os.getpid(), 9)\n"
        "    return fill(*args)\n"
        "csc_build._fill_kernel = die\n"
        f"CSCGraph.from_coo_files({str(tmp_path / 'g.pt')!r}, {str(files[0])!r}, {str(files[1])!r}, block_edges=50_000)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert child.returncode == -9
    left = [name for name in os.listdir(tmp_path) if name.startswith(".graphpipe-tmp-")]
    assert len(left) == 1 and len(os.listdir(tmp_path / left[0])) >= 2  # what a kill leaves
    CSCGraph.from_coo_files(tmp_path / "g.pt", *files, chunk_edges=1 << 16)
    assert sorted(os.listdir(tmp_path)) == ["dst.npy", "g.pt", "src.npy"]


# ---------------------------------------------------------------- item 2: linear cost
def count_launches(monkeypatch):
    """Launches over edges (not the compile calls on empty inputs), as a growing list."""
    launches = []
    edges = {  # the argument that holds a launch's edges
        "_count_kernel": lambda args: args[0],
        "_distribute_kernel": lambda args: args[0],
        "_fill_kernel": lambda args: args[3] if args[4] else args[1],  # positions, or the chunk's dst
    }
    for name, edges_of in edges.items():
        kernel = getattr(csc_build, name)

        def counted(*args, kernel=kernel, edges_of=edges_of):
            if edges_of(args).size:
                launches.append(1)
            return kernel(*args)

        monkeypatch.setattr(csc_build, name, counted)
    return launches


@pytest.mark.parametrize("chunk_edges, block_edges", [(1, 1), (3, 2), (7, 1), (1, 1 << 28)])
def test_the_build_costs_linear_kernel_launches_for_any_chunk_and_block(tmp_path, monkeypatch, chunk_edges, block_edges):
    monkeypatch.setattr(csc_build, "MIN_CHUNK_EDGES", 1)  # the algorithm itself, at sizes a test affords
    monkeypatch.setattr(csc_build, "MIN_BLOCK_EDGES", 1)
    num_nodes, num_edges = 100, 600
    src, dst = random_edges(num_nodes, num_edges, seed=3)
    launches = count_launches(monkeypatch)
    graph = CSCGraph.from_coo_files(
        tmp_path / "g.pt", *save_edges(tmp_path, src, dst), num_nodes=num_nodes,
        chunk_edges=chunk_edges, block_edges=block_edges,
    )
    # count + distribute + fill passes over the edges, plus at most one launch per block
    # (a block holds at least one node): linear, not num_blocks * num_edges / chunk_edges
    chunks = -(-num_edges // chunk_edges)
    assert len(launches) <= 3 * chunks + num_nodes
    expected = CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst), num_nodes)
    assert torch.equal(graph.indptr, expected.indptr) and torch.equal(graph.indices, expected.indices)
    assert torch.equal(graph.original_edge_ids, expected.original_edge_ids)


def test_tiny_chunks_and_blocks_are_raised_to_the_minimum(tmp_path, monkeypatch):
    src, dst = random_edges(1000, 5000, seed=4)
    launches = count_launches(monkeypatch)
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", *save_edges(tmp_path, src, dst), chunk_edges=1, block_edges=1)
    assert len(launches) == 2  # one chunk: count, then fill the one block
    assert torch.equal(graph.indices, CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst)).indices)


@pytest.mark.parametrize("block_edges", [1, 5, 64, 1 << 28])
@pytest.mark.parametrize("sorted_input", [False, True])
@pytest.mark.parametrize("scratch", [False, True])
def test_every_block_size_gives_from_coos_graph(monkeypatch, block_edges, sorted_input, scratch):
    monkeypatch.setattr(csc_build, "MIN_CHUNK_EDGES", 1)
    monkeypatch.setattr(csc_build, "MIN_BLOCK_EDGES", 1)
    src, _ = random_edges(200, 3000, seed=block_edges)
    dst = (np.random.default_rng(1).zipf(1.5, 3000) % 200).astype(np.int64)  # hubs span blocks
    if sorted_input:
        dst = np.sort(dst)
    indices = np.empty(3000, np.int32)
    edge_ids = np.full(3000, -1, np.int64)
    positions = np.empty(3000, np.int32) if scratch else None
    indptr, already_sorted = csc_build.coo_to_csc_chunked(src, dst, 230, indices, edge_ids, 97, block_edges, positions)
    expected = CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst), 230)
    assert already_sorted == sorted_input
    assert np.array_equal(indptr, expected.indptr.numpy()) and np.array_equal(indices, expected.indices.numpy())
    if not sorted_input:
        assert np.array_equal(edge_ids, expected.original_edge_ids.numpy())


# ---------------------------------------------------------------- item 3: clear errors
def test_one_huge_id_without_num_nodes_names_num_nodes(tmp_path):
    files = save_edges(tmp_path, np.array([0, 1, 2**45]), np.array([1, 2, 0]))
    with pytest.raises(ValueError, match=r"`num_nodes` was not given.*35184372088833.*pass `num_nodes`"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", *files)
    with pytest.raises(ValueError, match=r"node id 35184372088832 out of range for num_nodes=3"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", *files, num_nodes=3)
    with pytest.raises(ValueError, match=r"`num_nodes`=35184372088833 needs .* GiB"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", *files, num_nodes=2**45 + 1)
    assert sorted(os.listdir(tmp_path)) == ["dst.npy", "src.npy"]


def test_ids_at_uint64_max(tmp_path):
    top = np.iinfo(np.uint64).max
    files = save_edges(tmp_path, np.array([0, 1, top], np.uint64), np.array([1, 2, 0], np.uint64))
    with pytest.raises(ValueError, match=f"`num_nodes` was not given.*{top + 1}.*An id of {top}"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", *files)
    with pytest.raises(ValueError, match=f"node id {top} out of range for num_nodes=3"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", *files, num_nodes=3)
    small = save_edges(tmp_path, np.array([0, 1, 2], np.uint64), np.array([2, 0, 1], np.uint64))
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", *small)
    assert graph.indices.tolist() == [1, 2, 0] and graph.original_edge_ids.tolist() == [1, 2, 0]


def test_a_missing_output_directory_names_path(tmp_path):
    files = save_edges(tmp_path, np.array([0, 1]), np.array([1, 0]))
    with pytest.raises(FileNotFoundError, match=r"from_coo_files: `path` '.*nodir/g.pt': its directory .* does not exist"):
        CSCGraph.from_coo_files(tmp_path / "nodir" / "g.pt", *files)
    graph = CSCGraph.from_coo(torch.tensor([0]), torch.tensor([0]))
    with pytest.raises(FileNotFoundError, match=r"save: `path` '.*nodir/g.pt': its directory"):
        graph.save(tmp_path / "nodir" / "g.pt")
    with pytest.raises(IsADirectoryError, match=r"save: `path` .* is a directory"):
        graph.save(tmp_path)


@pytest.mark.parametrize("dtype", [">i8", "timedelta64[s]", "bool", "float32"])
def test_an_unsupported_edge_dtype_names_the_argument_and_the_form(tmp_path, dtype):
    np.save(tmp_path / "src.npy", np.array([0, 1, 2]).astype(dtype))
    np.save(tmp_path / "dst.npy", np.array([1, 2, 0]))
    with pytest.raises(ValueError, match=r"`src`: '.*src.npy' must hold integers \(int32 or int64"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", tmp_path / "src.npy", tmp_path / "dst.npy")


def test_an_edge_file_is_read_by_its_content_whatever_its_name(tmp_path):
    """A .npy file not named '*.npy' was refused by its name; a file that is not one is
    refused by its content, naming the argument."""
    with open(tmp_path / "edges.bin", "wb") as f:
        np.save(f, np.array([[0, 1, 2], [1, 2, 0]]))
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", tmp_path / "edges.bin")
    expected = CSCGraph.from_coo(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))
    assert torch.equal(graph.indptr, expected.indptr) and torch.equal(graph.indices, expected.indices)
    (tmp_path / "dst.npy").write_bytes(b"1,2,0\n")
    with pytest.raises(ValueError, match=r"`dst` must be the path of a .npy file \(numpy.save's format\), got '.*dst.npy'"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", tmp_path / "edges.bin", tmp_path / "dst.npy")


# ---------------------------------------------------------------- item 7: int32 node_type_offset
def typed_arrays():
    graph = CSCGraph.from_hetero_edges(
        {"user:follows:user": torch.tensor([[0, 1], [1, 2]]), "user:buys:item": torch.tensor([[0, 2], [1, 0]])},
        {"user": 3, "item": 2},
    )
    return graph, dict(
        indptr=graph.indptr, indices=graph.indices, original_edge_ids=graph.original_edge_ids,
        node_type_offset=graph.node_type_offset, type_per_edge=graph.type_per_edge,
        node_type_to_id=dict(graph.node_type_to_id), edge_type_to_id=dict(graph.edge_type_to_id),
    )


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8])
def test_int32_node_type_offsets_are_accepted_as_graphbolt_gives_them(dtype):
    graph, arrays = typed_arrays()
    arrays["node_type_offset"] = arrays["node_type_offset"].to(dtype)
    built = CSCGraph(**arrays)
    assert built.node_type_offset.dtype == torch.int64
    assert torch.equal(built.node_type_offset, graph.node_type_offset)
    assert built.num_nodes_per_type == graph.num_nodes_per_type


def test_a_float_node_type_offset_is_still_refused():
    _, arrays = typed_arrays()
    arrays["node_type_offset"] = arrays["node_type_offset"].to(torch.float32)
    with pytest.raises(ValueError, match="`node_type_offset` must be a .* integer tensor"):
        CSCGraph(**arrays)


# ---------------------------------------------------------------- item 8: ':' in type names
def test_a_node_type_name_with_a_colon_is_refused():
    with pytest.raises(ValueError, match=r"node type 'us:er'.*':'"):
        CSCGraph.from_hetero_edges({("us:er", "buys", "item"): torch.tensor([[0], [0]])}, {"us:er": 1, "item": 1})
    with pytest.raises(ValueError, match=r"node type 'a:b'.*':'"):
        CSCGraph.from_hetero_edges({"item:rel:item": torch.tensor([[0], [0]])}, {"item": 1, "a:b": 1})
    with pytest.raises(ValueError, match=r"relation 'bu:ys'.*':'"):
        CSCGraph.from_hetero_edges({("user", "bu:ys", "item"): torch.tensor([[0], [0]])}, {"user": 1, "item": 1})
    _, arrays = typed_arrays()
    arrays["node_type_to_id"] = {"it:em": 0, "user": 1}
    with pytest.raises(ValueError, match=r"`node_type_to_id`.*'it:em'.*':'"):
        CSCGraph(**arrays)


# ---------------------------------------------------------------- item 9: memmap graphs pickle as their files
def mapped_graph(tmp_path, mode):
    rng = np.random.default_rng(0)
    num_nodes, num_edges = 20_000, 400_000
    dst = np.sort(rng.integers(0, num_nodes, num_edges))
    indptr = np.searchsorted(dst, np.arange(num_nodes + 1)).astype(np.int64)
    np.save(tmp_path / "indptr.npy", indptr)
    np.save(tmp_path / "indices.npy", rng.integers(0, num_nodes, num_edges).astype(np.int32))
    np.save(tmp_path / "weight.npy", rng.random(num_edges).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that a read-only array is not writable
        arrays = {name: torch.from_numpy(np.load(tmp_path / f"{name}.npy", mmap_mode=mode)) for name in ("indptr", "indices", "weight")}
    return CSCGraph(arrays["indptr"], arrays["indices"], {"weight": arrays["weight"]})


@pytest.mark.parametrize("mode", ["r", "r+", "c"])
def test_a_graph_of_memory_maps_pickles_as_its_files(tmp_path, mode):
    from graphpipe.graph.storage import _FileMappings

    file_backing = _FileMappings().backing

    graph = mapped_graph(tmp_path, mode)
    data = pickle.dumps(graph)
    assert len(data) < 4096 < graph.indices.nbytes
    copy = pickle.loads(data)
    for name, original, mapped in [
        ("indptr", graph.indptr, copy.indptr), ("indices", graph.indices, copy.indices),
        ("weight", graph.edge_attributes["weight"], copy.edge_attributes["weight"]),
    ]:
        assert torch.equal(original, mapped) and original.dtype == mapped.dtype
        backing = file_backing(mapped)
        assert backing is not None and backing[0] == str(tmp_path / f"{name}.npy")
        assert backing[:2] == file_backing(original)[:2]
    assert pickle.loads(pickle.dumps(copy)).num_edges == graph.total_num_edges  # and again from a worker


def test_a_graph_of_memory_maps_goes_to_workers_without_shared_memory(tmp_path):
    import io
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)

    graph = mapped_graph(tmp_path, "r")
    buffer = io.BytesIO()
    ForkingPickler(buffer).dump(graph)  # what DataLoader(num_workers>0) sends
    assert len(buffer.getvalue()) < 4096
    assert not graph.indices.is_shared() and not graph.edge_attributes["weight"].is_shared()
    assert torch.equal(pickle.loads(buffer.getvalue()).indices, graph.indices)


def test_a_written_private_map_is_pickled_by_value(tmp_path):
    graph = mapped_graph(tmp_path, "c")
    graph.edge_attributes["weight"][0] = 7.0  # copy-on-write: the file still holds the old value
    copy = pickle.loads(pickle.dumps(graph))
    assert float(copy.edge_attributes["weight"][0]) == 7.0
    assert len(pickle.dumps(graph)) > graph.edge_attributes["weight"].nbytes


def test_a_mapped_file_replaced_after_pickling_is_reported(tmp_path):
    graph = mapped_graph(tmp_path, "r")
    data = pickle.dumps(graph)
    os.replace(tmp_path / "indptr.npy", tmp_path / "old.npy")
    np.save(tmp_path / "indptr.npy", np.zeros(5, np.int64))
    with pytest.raises(ValueError, match=r"indptr.npy' changed after the graph was pickled"):
        pickle.loads(data)
