"""DiskBasedFeature: exact rows from disk, large offsets, thread shutdown, file errors."""

import gc
import os
import pickle
import threading

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.features.disk import DiskBasedFeature


def io_threads():
    return [t for t in threading.enumerate() if t.name.startswith("graphpipe-disk-io") and t.is_alive()]


@pytest.mark.parametrize("direct_io", [None, False])
@pytest.mark.parametrize("dtype, row_shape", [(np.float32, (7,)), (np.int64, ()), (np.float16, (3, 2)), (np.uint8, (5000,))])
def test_rows_read_back_exactly(tmp_path, direct_io, dtype, row_shape):
    rng = np.random.default_rng(0)
    table = (rng.standard_normal((500, *row_shape)) * 100).astype(dtype)
    np.save(tmp_path / "f.npy", table)
    with DiskBasedFeature(tmp_path / "f.npy", num_threads=3, direct_io=direct_io) as feature:
        assert (feature.num_rows, feature.row_shape, feature.nbytes) == (500, row_shape, table.nbytes)
        assert feature.dtype == torch.from_numpy(table).dtype
        ids = torch.from_numpy(rng.integers(0, 500, 2000))  # repeats, any order
        assert torch.equal(feature.read(ids), torch.from_numpy(table)[ids])
        assert torch.equal(feature.read(ids.to(torch.int32)[:1]), torch.from_numpy(table)[ids[:1]])
        assert feature.read(torch.zeros(0, dtype=torch.int64)).shape == (0, *row_shape)
        out = torch.empty((5, *row_shape), dtype=feature.dtype)
        assert feature.read(ids[:5], out=out) is out and torch.equal(out, torch.from_numpy(table)[ids[:5]])
        future = feature.read_async(ids[100:300])  # overlaps with the caller's work
        assert torch.equal(future.result(), torch.from_numpy(table)[ids[100:300]])
        if direct_io is None and hasattr(os, "O_DIRECT"):
            assert feature.uses_direct_io in (True, False)  # tmpfs refuses O_DIRECT: falls back


def test_rows_past_4_gib_in_a_sparse_file(tmp_path):
    num_rows, dim = (1 << 29) + 3, 4  # 8 GiB of float32 rows, almost all of it holes
    path = tmp_path / "sparse.npy"
    header = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(1, dim))
    offset = header.offset
    del header
    with open(path, "r+b") as f:  # rewrite the header for the large shape, keeping its length
        f.seek(0)
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (num_rows, dim)})
        assert f.tell() == offset
        f.truncate(offset + num_rows * dim * 4)
    written = {0: 1.5, (1 << 28) + 7: 2.5, num_rows - 1: -3.25}
    fd = os.open(path, os.O_WRONLY)
    for row, value in written.items():
        os.pwrite(fd, np.full(dim, value, np.float32).tobytes(), offset + row * dim * 4)
    os.close(fd)
    assert os.stat(path).st_blocks * 512 < 1 << 20  # the test stays small on disk
    ids = torch.tensor([num_rows - 1, 5, (1 << 28) + 7, 0])
    for direct_io in (None, False):
        with DiskBasedFeature(path, direct_io=direct_io) as feature:
            rows = feature.read(ids)
        assert rows[:, 0].tolist() == [-3.25, 0.0, 2.5, 1.5] and bool((rows == rows[:, :1]).all())
        assert int(ids[0]) * dim * 4 > 1 << 32


def test_threads_stop_on_close_and_collection(tmp_path):
    np.save(tmp_path / "f.npy", np.arange(100, dtype=np.float32).reshape(50, 2))
    before = len(io_threads())
    feature = DiskBasedFeature(tmp_path / "f.npy", num_threads=2)
    feature.read(torch.arange(50))
    assert len(io_threads()) > before
    feature.close()
    assert len(io_threads()) == before
    assert torch.equal(feature.read(torch.tensor([3]))[0], torch.tensor([6.0, 7.0]))  # reopens
    del feature
    gc.collect()
    assert len(io_threads()) == before


def test_pickles_as_its_path(tmp_path):
    np.save(tmp_path / "f.npy", np.arange(10, dtype=np.int32))
    feature = DiskBasedFeature(tmp_path / "f.npy", num_threads=2)
    feature.read(torch.arange(3))
    copy = pickle.loads(pickle.dumps(feature))
    assert copy.path == feature.path and copy.num_threads == 2
    assert torch.equal(copy.read(torch.tensor([9, 1])), torch.tensor([9, 1], dtype=torch.int32))
    copy.close()
    feature.close()



@pytest.mark.parametrize("new", ["more rows", "another dtype"])
def test_unpickling_refuses_a_file_changed_since_pickling(tmp_path, new):
    """A worker process re-read the header and read the new file as if the pipe had been
    built for it: rows of another dtype, or ids past the rows the pipe was built for."""
    np.save(tmp_path / "f.npy", np.ones((10, 4), np.float32))
    blob = pickle.dumps(DiskBasedFeature(tmp_path / "f.npy", direct_io=False))
    np.save(tmp_path / "f.npy", np.ones((20, 4), np.float32) if new == "more rows" else np.ones((10, 4), np.float64))
    held = r"\(20, 4\) float32" if new == "more rows" else r"\(10, 4\) float64"
    with pytest.raises(ValueError, match=rf"f.npy'\): the file changed after the feature was pickled: it now holds {held}, it held \(10, 4\) float32"):
        pickle.loads(blob)

def test_sits_in_a_feature_store_and_a_pipe(tmp_path):
    table = np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32)
    np.save(tmp_path / "f.npy", table)
    graph = gp.CSCGraph.from_coo(torch.randint(0, 300, (2000,)), torch.randint(0, 300, (2000,)), 300)
    store = gp.FeatureStore({"feat": DiskBasedFeature(tmp_path / "f.npy")})
    pipe = gp.ItemSampler(gp.ItemSet(300), 64).sample_neighbor(graph, [3, 3]).fetch_feature(store, ["feat"])
    batches = list(gp.DataLoader(pipe))
    assert len(batches) == 5  # 300 seeds in batches of 64
    for mb in batches:
        assert torch.equal(mb.node_features["feat"], torch.from_numpy(table)[mb.input_nodes])
    store["feat"].close()


def test_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        DiskBasedFeature(tmp_path / "missing.npy")
    np.save(tmp_path / "f.npy", np.zeros((100, 8), np.float32))
    size = os.path.getsize(tmp_path / "f.npy")
    with open(tmp_path / "f.npy", "r+b") as f:
        f.truncate(size - 5)
    with pytest.raises(ValueError, match=r"f.npy.*truncated"):
        DiskBasedFeature(tmp_path / "f.npy")
    (tmp_path / "text.npy").write_text("not numpy")
    with pytest.raises(ValueError, match=r"text.npy.*not a readable .npy"):
        DiskBasedFeature(tmp_path / "text.npy")
    for direct_io in (1, "yes"):  # was: 1 accepted (1 == True)
        with pytest.raises(ValueError, match=rf"`direct_io` must be True, False or None, got {direct_io!r}"):
            DiskBasedFeature(tmp_path / "f.npy", direct_io=direct_io)
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.zeros((4, 3))))
    with pytest.raises(ValueError, match="Fortran"):
        DiskBasedFeature(tmp_path / "fortran.npy")
    big_endian = np.arange(12, dtype=">f4").reshape(4, 3)
    np.save(tmp_path / "big.npy", big_endian)
    says = r"numpy dtype >f4 is not in this machine's byte order, the only one torch reads; convert it with array.astype"
    with pytest.raises(TypeError, match=r"big.npy'\): " + says):
        DiskBasedFeature(tmp_path / "big.npy")
    with pytest.raises(TypeError, match=r"big.npy': " + says):
        gp.FeatureStore({"feat": str(tmp_path / "big.npy")})["feat"].read(torch.tensor([0]))
    with pytest.raises(TypeError, match=r"Feature: `data`: " + says):
        gp.Feature(big_endian)
    np.save(tmp_path / "ok.npy", np.zeros((4, 3)))
    with DiskBasedFeature(tmp_path / "ok.npy") as feature:
        with pytest.raises(ValueError, match=r"read_async: `ids` holds row id 4, out of range"):
            feature.read_async(torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="num_threads"):
        DiskBasedFeature(tmp_path / "ok.npy", num_threads=0)


def test_a_file_cut_short_after_opening_is_reported(tmp_path):
    np.save(tmp_path / "f.npy", np.ones((100, 8), np.float32))
    with DiskBasedFeature(tmp_path / "f.npy", direct_io=False) as feature:
        with open(tmp_path / "f.npy", "r+b") as f:
            f.truncate(1000)
        with pytest.raises(OSError, match=r"f.npy.*row 99"):
            feature.read(torch.tensor([0, 99]))
