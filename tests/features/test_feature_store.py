import pickle
import warnings

import numpy as np
import pytest
import torch

from graphpipe._internal import devices
from graphpipe.ops.uva_gather import uva_gather
from graphpipe.features.store import Feature, FeatureStore


def _ids(*values):
    return torch.tensor(values, dtype=torch.int64)


def test_tensor_numpy_and_memmap_features_read_rows(tmp_path):
    table = np.random.default_rng(0).standard_normal((20, 3)).astype(np.float32)
    memmap = np.lib.format.open_memmap(tmp_path / "m.npy", mode="w+", dtype=np.float32, shape=(20, 3))
    memmap[:] = table
    ids = _ids(19, 0, 4, 4)
    for data in (torch.from_numpy(table), table, memmap):
        feature = Feature(data)
        assert (feature.num_rows, feature.row_shape, feature.dtype) == (20, (3,), torch.float32)
        assert feature.nbytes == table.nbytes
        got = feature.read(ids)
        assert np.array_equal(got.numpy(), table[ids.numpy()])
        out = torch.empty(4, 3)
        assert feature.read(ids, out=out) is out and torch.equal(out, got)


def test_npy_path_is_opened_lazily_and_pickles_as_path(tmp_path):
    path = tmp_path / "feat.npy"
    np.save(path, np.zeros((1000, 4), dtype=np.int64))
    feature = Feature(str(path))
    assert "not opened yet" in repr(feature)
    # The file is not read at construction: what is there at the first read counts.
    np.save(path, np.arange(4000, dtype=np.int64).reshape(1000, 4))
    assert feature.read(_ids(2)).tolist() == [[8, 9, 10, 11]]
    assert feature.dtype == torch.int64 and feature.row_shape == (4,)
    assert isinstance(feature.data, np.memmap) and not feature.data.flags.writeable
    blob = pickle.dumps(feature)
    assert len(blob) < feature.nbytes // 10
    assert pickle.loads(blob).read(_ids(999)).tolist() == [[3996, 3997, 3998, 3999]]


def test_store_keys_lookup_and_repr():
    store = FeatureStore(
        {"feat": torch.randn(5, 2), "label": np.arange(5)},
        {"weight": torch.rand(7)},
    )
    assert store.node_keys == ["feat", "label"] and store.edge_keys == ["weight"]
    assert store["feat"] is store["node", "feat"]
    assert store["edge", "weight"].num_rows == 7
    assert "feat" in store and ("edge", "weight") in store
    assert "weight" not in store and ("edge", "feat") not in store
    text = repr(store)
    assert "node 'feat'" in text and "edge 'weight'" in text and "num_rows=7" in text
    assert FeatureStore({}).edge_keys == []


def test_store_accepts_feature_objects(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((3, 2), dtype=np.float16))
    feature = Feature(tmp_path / "x.npy")
    store = FeatureStore({"x": feature})
    assert store["x"] is feature
    assert store["x"].read(_ids(1)).dtype == torch.float16


def test_unknown_and_malformed_keys():
    store = FeatureStore({"feat": torch.zeros(2, 1)}, {"w": torch.zeros(3)})
    with pytest.raises(KeyError, match=r"unknown node feature 'feet'; known node features: \['feat'\]"):
        store["feet"]
    with pytest.raises(KeyError, match=r"unknown edge feature 'feat'; known edge features: \['w'\]"):
        store["edge", "feat"]
    with pytest.raises(KeyError, match=r"a key is 'name' or \('node' \| 'edge', 'name'\), got \('graph', 'w'\)"):
        store["graph", "w"]


def test_bad_tables_are_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"`node_features\['x'\]`: .*rows C-contiguously"):
        FeatureStore({"x": torch.zeros(3, 2).t()})
    with pytest.raises(TypeError, match=r"`edge_features\['w'\]`: .*got list"):
        FeatureStore({}, {"w": [1, 2]})
    with pytest.raises(FileNotFoundError, match=r"`node_features\['x'\]`: .*no such .npy file"):
        FeatureStore({"x": str(tmp_path / "missing.npy")})
    with pytest.raises(ValueError, match=r"a path must name a .npy file"):
        Feature(str(tmp_path / "x.bin"))
    with pytest.raises(TypeError, match=r"numpy dtype object, which torch cannot hold"):
        Feature(np.array([None, 1], dtype=object))
    with pytest.raises(TypeError, match=r"`node_features` must be a dict"):
        FeatureStore([torch.zeros(2)])


def test_read_checks_ids():
    feature = Feature(torch.zeros(4, 2))
    with pytest.raises(ValueError, match=r"holds node id 4, out of range: valid ids are 0\.\.3"):
        feature.read(_ids(0, 4))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA behaviour")
def test_pin_without_cuda_warns_once_and_is_a_no_op(monkeypatch):
    monkeypatch.setattr(devices, "_warned_without_cuda", set())
    table = torch.randn(4, 2)
    store = FeatureStore({"a": table, "b": np.zeros(3)})
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert store.pin_memory_() is store
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.pin_memory_() is store  # once per process
    assert torch.equal(store["a"].read(_ids(1)), table[1:2])


@pytest.mark.cuda
def test_pin_memory_registers_in_place(tmp_path):
    table = torch.randn(100, 8)
    ptr = table.data_ptr()
    feature = Feature(table).pin_memory_()
    assert feature.data.data_ptr() == ptr and table.is_pinned()
    assert torch.equal(feature.read(_ids(3, 5)), table[[3, 5]])
    np.save(tmp_path / "x.npy", table.numpy())
    # Memory-mapped files: writable, copy-on-write and read-only (a path) are registered
    # read-only for the device and read in place through a zero-copy view; a device
    # without read-only registration pins the writable ones plainly (a shared writable
    # map may be refused by the kernel) and leaves the read-only one unpinned, with a
    # warning; its reads still come back right. A private (copy-on-write) map pins either way.
    for mode in ("c", "r+", "r"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            feature = Feature(np.load(tmp_path / "x.npy", mmap_mode=mode)).pin_memory_()
        if caught:
            assert mode != "c" and "a memory-mapped table stays unpinned" in str(caught[0].message), caught[0]
            assert isinstance(feature.data, np.memmap)
            assert torch.equal(feature.read(_ids(7, 99, 7).cuda()).cpu(), table[[7, 99, 7]])
            continue
        assert feature.data.is_pinned(), mode
        assert torch.equal(feature.read(_ids(7, 99, 7).cuda()).cpu(), table[[7, 99, 7]])
        view = devices.zero_copy_view(feature.data)
        assert view.is_cuda and view.data_ptr() == feature.data.data_ptr()
        assert torch.equal(view[torch.tensor([3, 0], device="cuda")].cpu(), table[[3, 0]])
        assert torch.equal(uva_gather(feature.data, _ids(98, 1).cuda()).cpu(), table[[98, 1]])
    torch.cuda.synchronize()  # no CUDA error left behind by the registrations
