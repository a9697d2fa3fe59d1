"""Out-of-core CSC construction: CSCGraph.from_coo_files and ops.csc_build."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from graphpipe import CSCGraph


def save_edges(tmp_path, src, dst, stacked=False):
    if stacked:
        np.save(tmp_path / "edges.npy", np.stack([src, dst]))
        return [tmp_path / "edges.npy"]
    np.save(tmp_path / "src.npy", src)
    np.save(tmp_path / "dst.npy", dst)
    return [tmp_path / "src.npy", tmp_path / "dst.npy"]


def assert_equals_from_coo(graph, src, dst, num_nodes):
    expected = CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst), num_nodes)
    assert torch.equal(graph.indptr, expected.indptr) and graph.indptr.dtype == expected.indptr.dtype
    assert torch.equal(graph.indices, expected.indices) and graph.indices.dtype == expected.indices.dtype
    if expected.original_edge_ids is None:
        assert graph.original_edge_ids is None
    else:
        assert torch.equal(graph.original_edge_ids, expected.original_edge_ids)
        assert graph.original_edge_ids.dtype == expected.original_edge_ids.dtype


@pytest.mark.parametrize("stacked", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("chunk_edges, block_edges", [(1 << 24, 1 << 28), (777, 3000), (5, 40)])
def test_equals_from_coo(tmp_path, stacked, dtype, chunk_edges, block_edges):
    rng = np.random.default_rng(0)
    num_edges = 5000 if chunk_edges > 5 else 400
    src = rng.integers(0, 500, num_edges).astype(dtype)
    dst = (rng.zipf(1.5, num_edges) % 500).astype(dtype)  # skewed: hubs span several blocks
    files = save_edges(tmp_path, src, dst, stacked)
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", *files, num_nodes=600, chunk_edges=chunk_edges, block_edges=block_edges)
    assert_equals_from_coo(graph, src, dst, 600)
    assert graph.source_path == str(tmp_path / "g.pt")  # mapped lazily
    assert sorted(os.listdir(tmp_path)) == sorted([f.name for f in files] + ["g.pt"])  # scratch files removed


def test_sorted_input_has_no_edge_ids_and_num_nodes_defaults_to_max_id(tmp_path):
    rng = np.random.default_rng(1)
    src = rng.integers(0, 100, 1000)
    dst = np.sort(rng.integers(0, 100, 1000))
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", *save_edges(tmp_path, src, dst), chunk_edges=64)
    assert graph.original_edge_ids is None and graph.total_num_nodes == max(src.max(), dst.max()) + 1
    assert_equals_from_coo(graph, src, dst, graph.total_num_nodes)


def test_empty_edge_list(tmp_path):
    empty = np.zeros(0, np.int64)
    graph = CSCGraph.from_coo_files(tmp_path / "g.pt", *save_edges(tmp_path, empty, empty), num_nodes=3)
    assert graph.total_num_nodes == 3 and graph.total_num_edges == 0 and graph.indptr.tolist() == [0, 0, 0, 0]


def test_errors_name_the_file(tmp_path):
    src = np.array([0, 1, 2])
    files = save_edges(tmp_path, src, src)
    with pytest.raises(FileNotFoundError, match="nope.npy"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", tmp_path / "nope.npy", files[1])
    with pytest.raises(ValueError, match="num_nodes=2"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", *files, num_nodes=2)
    np.save(tmp_path / "float.npy", src.astype(np.float32))
    with pytest.raises(ValueError, match="float.npy.*must hold integers"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", tmp_path / "float.npy", files[1])
    with pytest.raises(ValueError, match=r"src.npy.*\[2, num_edges\]"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", files[0])
    np.save(tmp_path / "short.npy", src[:2])
    with pytest.raises(ValueError, match="same length"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", files[0], tmp_path / "short.npy")
    np.save(tmp_path / "neg.npy", -src)
    with pytest.raises(ValueError, match=">= 0"):
        CSCGraph.from_coo_files(tmp_path / "g.pt", files[0], tmp_path / "neg.npy")
    assert not os.path.exists(tmp_path / "g.pt")


# The child builds a graph whose edge list (16 MiB) and CSC (16 MiB) are each larger than
# the memory it may still allocate (RLIMIT_DATA: what it uses now + 8 MiB), then checks the
# limit bites: loading the edge list into memory fails under it. torch.load(mmap=True)
# maps the finished file copy-on-write, which RLIMIT_DATA counts although no page is
# copied, so the limit is lifted just before that final load.
_CHILD = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    from graphpipe import CSCGraph
    folder = sys.argv[1]
    CSCGraph.from_coo_files(folder + "/warm.pt", folder + "/warm.npy")  # compile, start threads
    def vm_data():
        for line in open("/proc/self/status"):
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    limit = vm_data() + (8 << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.RLIM_INFINITY))
    load = CSCGraph.load.__func__
    def lift_then_load(cls, *args, **kwargs):
        resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        return load(cls, *args, **kwargs)
    CSCGraph.load = classmethod(lift_then_load)
    CSCGraph.from_coo_files(folder + "/g.pt", folder + "/edges.npy", chunk_edges=1 << 18, block_edges=1 << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.RLIM_INFINITY))
    try:
        np.load(folder + "/edges.npy")
    except MemoryError:
        print("in-memory load refused")
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and /proc are Linux's")
def test_build_stays_within_a_memory_limit_smaller_than_the_graph(tmp_path):
    rng = np.random.default_rng(0)
    num_nodes, num_edges = 1 << 16, 2 << 20
    edges = rng.integers(0, num_nodes, (2, num_edges)).astype(np.int32)
    np.save(tmp_path / "edges.npy", edges)
    np.save(tmp_path / "warm.npy", np.array([[0, 1], [1, 0]], np.int32))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True, text=True, timeout=300, env=env
    )
    assert child.returncode == 0, child.stderr
    assert "in-memory load refused" in child.stdout  # the limit is real
    graph = CSCGraph.load(tmp_path / "g.pt", mmap=True)
    assert graph.total_num_edges == num_edges
    assert_equals_from_coo(graph, edges[0], edges[1], num_nodes)
