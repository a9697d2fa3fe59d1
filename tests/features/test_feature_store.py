import os
import pickle
import warnings

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe import MiniBatch
from graphpipe._internal import devices
from graphpipe.features import CPUCachedFeature, DiskBasedFeature, GPUCachedFeature
from graphpipe.ops.uva_gather import uva_gather
from graphpipe.features.store import Feature, FeatureStore
from graphpipe.pipes import FeatureFetcher


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



@pytest.mark.parametrize("pickled", [True, False])
@pytest.mark.parametrize("new", ["fewer rows", "another dtype"])
def test_a_npy_path_changed_before_it_is_mapped_is_refused(tmp_path, pickled, new):
    """A worker process mapped the file again, unchecked: fewer rows were read past the
    end of the table by read_valid (garbage or a crash), another dtype read as it."""
    path = tmp_path / "feat.npy"
    np.save(path, np.ones((10, 4), dtype=np.float32))
    feature = Feature(str(path))
    blob = pickle.dumps(feature)
    np.save(path, np.ones((2, 4), np.float32) if new == "fewer rows" else np.ones((10, 4), np.float64))
    if pickled:
        feature = pickle.loads(blob)
    held = r"\(2, 4\) float32" if new == "fewer rows" else r"\(10, 4\) float64"
    with pytest.raises(ValueError, match=rf"Feature: '{path}' changed after the feature was made .* now holds {held}, it held \(10, 4\) float32"):
        feature.read_valid(_ids(5))  # within the file's last page: no crash on the old code

WRITES = "author:writes:paper"
# One store per case: the same features untyped (type None) and typed (PyG's tuple edge type
# given, stored as its "src:rel:dst" string). Each case lists the lookup forms that name one
# feature, and the form node_keys / edge_keys list it in.
CASES = {
    "untyped": dict(
        node={"feat": torch.randn(5, 2), "label": np.arange(5)},
        edge={"w": torch.rand(7)},
        feat_forms=["feat", ("node", "feat"), ("node", None, "feat")],
        w_forms=[("edge", "w"), ("edge", None, "w")],
        listed=(["feat", "label"], ["w"]),
    ),
    "typed": dict(
        node={("paper", "feat"): torch.randn(5, 2), ("paper", "label"): np.arange(5)},
        edge={(("author", "writes", "paper"), "w"): torch.rand(7)},
        feat_forms=[("node", "paper", "feat"), ("node", ("paper", "feat"))],
        w_forms=[("edge", WRITES, "w"), ("edge", ("author", "writes", "paper"), "w"), ("edge", (WRITES, "w"))],
        listed=([("paper", "feat"), ("paper", "label")], [(WRITES, "w")]),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_every_key_form_names_one_feature(case):
    c = CASES[case]
    store = FeatureStore(c["node"], c["edge"])
    assert (store.node_keys, store.edge_keys) == c["listed"]
    for forms, rows in ((c["feat_forms"], 5), (c["w_forms"], 7)):
        assert len({id(store[form]) for form in forms}) == 1 and store[forms[0]].num_rows == rows
        assert all(form in store for form in forms)
    for kind, keys in (("node", store.node_keys), ("edge", store.edge_keys)):
        for key in keys:  # a listed key, and (kind, type or None, name), name one feature
            assert store[kind, key] is store[(kind,) + (key if isinstance(key, tuple) else (None, key))]
    assert ("edge", "feat") not in store and ("node", "paper", "w") not in store and "w" not in store
    text = repr(store)
    of_type = "" if case == "untyped" else " of type 'paper'"
    assert f"node 'feat'{of_type}: Feature(num_rows=5" in text and "num_rows=7" in text
    copy = pickle.loads(pickle.dumps(store))
    assert (copy.node_keys, copy.edge_keys) == c["listed"]
    assert torch.equal(copy[c["feat_forms"][0]].read(_ids(4, 0)), store[c["feat_forms"][0]].read(_ids(4, 0)))
    assert FeatureStore({}).edge_keys == []


def test_typed_and_untyped_features_share_a_store():
    store = FeatureStore({("paper", "feat"): torch.zeros(5, 3), "x": torch.arange(9)}, {(WRITES, "w"): torch.rand(6)})
    assert store.node_keys == [("paper", "feat"), "x"]
    assert store["x"] is store["node", None, "x"] and store["node", "paper", "feat"].num_rows == 5
    assert ("node", "feat") not in store  # only a typed table is called "feat"


def test_store_accepts_feature_objects(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((3, 2), dtype=np.float16))
    feature = Feature(tmp_path / "x.npy")
    store = FeatureStore({"x": feature})
    assert store["x"] is feature
    assert store["x"].read(_ids(1)).dtype == torch.float16


@pytest.mark.parametrize(
    "key, match",
    [
        ("feet", r"unknown node feature 'feet'; known node features: \[\('paper', 'feat'\), 'feat'\]"),
        (("edge", "feat"), r"unknown edge feature 'feat'; known edge features: \[\('author:writes:paper', 'w'\), 'w'\]"),
        (("node", "venue", "feat"), r"unknown node feature 'feat' of type 'venue'"),
        (("edge", ("paper", "cites", "paper"), "w"), r"unknown edge feature 'w' of type 'paper:cites:paper'"),
        (("edge", "writes", "w"), r"an edge type must be 'src_type:relation:dst_type'.*got 'writes'"),
        (("venue", "feat"), r"unknown node feature 'feat' of type 'venue'"),  # (node type, name)
        (("graph", 3), r"a key is 'name', \(node_type, 'name'\), \('node' \| 'edge', 'name'\) or \('node' \| 'edge', type, 'name'\)"),
        (("graph", "paper", "feat"), r"got \('graph', 'paper', 'feat'\)"),
        (("node", 3, "feat"), r"a node type must be a str, got 3"),
    ],
)
def test_unknown_and_malformed_keys_name_the_known_keys(key, match):
    store = FeatureStore({("paper", "feat"): torch.zeros(2, 1), "feat": torch.zeros(2, 1)},
                         {(WRITES, "w"): torch.zeros(3), "w": torch.zeros(3)})
    with pytest.raises(KeyError, match=match):
        store[key]


def test_bad_tables_and_keys_are_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"`node_features\['x'\]`: .*rows C-contiguously"):
        FeatureStore({"x": torch.zeros(3, 2).t()})
    with pytest.raises(ValueError, match=r"`node_features\[\('paper', 'feat'\)\]`: .*C-contiguously"):
        FeatureStore({("paper", "feat"): torch.zeros(3, 2).t()})
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.zeros((3, 2), np.float32)))
    with pytest.raises(ValueError, match=r"fortran.npy'.*C-contiguously; save it in C order"):  # not "pass a copy"
        Feature(str(tmp_path / "fortran.npy")).read(torch.tensor([0]))  # opened on first use
    with pytest.raises(TypeError, match=r"`edge_features\['w'\]`: .*got list"):
        FeatureStore({}, {"w": [1, 2]})
    with pytest.raises(FileNotFoundError, match=r"`node_features\['x'\]`: .*no such .npy file"):
        FeatureStore({"x": str(tmp_path / "missing.npy")})
    with pytest.raises(ValueError, match=r"a path must name a .npy file"):
        Feature(str(tmp_path / "x.bin"))
    with pytest.raises(TypeError, match=r"numpy dtype object has no torch equivalent"):
        Feature(np.array([None, 1], dtype=object))
    with pytest.raises(TypeError, match=r"`node_features` must be a dict"):
        FeatureStore([torch.zeros(2)])
    with pytest.raises(ValueError, match=r"gives edge feature 'w' of type 'author:writes:paper' twice"):
        FeatureStore({}, {(WRITES, "w"): torch.zeros(2), (("author", "writes", "paper"), "w"): torch.zeros(2)})
    with pytest.raises(TypeError, match=r"`edge_features` has key \('writes', 'w'\): .*an edge type must be"):
        FeatureStore({}, {("writes", "w"): torch.zeros(2)})
    with pytest.raises(TypeError, match=r"`node_features` keys must be 'name' or \(node_type, 'name'\), got 3"):
        FeatureStore({3: torch.zeros(2)})


@pytest.mark.parametrize("key", ["feat", ("node", "paper", "feat"), ("edge", ("author", "writes", "paper"), "w")])
def test_with_feature_replaces_one_key_in_a_new_store(key):
    store = FeatureStore({"feat": torch.zeros(3), ("paper", "feat"): torch.zeros(4)}, {(WRITES, "w"): torch.zeros(5)})
    new = Feature(torch.ones(9))
    replaced = store.with_feature(key, new)
    assert replaced[key] is new and store[key] is not new
    assert replaced.node_keys == store.node_keys and replaced.edge_keys == store.edge_keys
    others = [(kind, k) for kind, keys in (("node", store.node_keys), ("edge", store.edge_keys)) for k in keys]
    assert sum(replaced[k] is not store[k] for k in others) == 1
    with pytest.raises(KeyError, match="unknown node feature 'feat' of type 'venue'"):
        store.with_feature(("node", "venue", "feat"), new)


TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)
# Every kind of feature, over the same 10 rows (caches of 3 rows, so reads both hit and miss).
KINDS = {
    "Feature": lambda path: Feature(torch.from_numpy(TABLE.copy())),
    "Feature(.npy)": lambda path: Feature(str(path)),
    "DiskBasedFeature": lambda path: DiskBasedFeature(path, direct_io=False),
    "CPUCachedFeature": lambda path: CPUCachedFeature(Feature(str(path)), 3 * 16),
    "GPUCachedFeature": lambda path: GPUCachedFeature(
        Feature(str(path)), 3 * 16, "clock", device="cuda" if torch.cuda.is_available() else "cpu"
    ),
}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_reads_the_same_rows_and_refuses_the_same_mistake_with_the_same_error(kind, tmp_path):
    np.save(tmp_path / "t.npy", TABLE)
    feature = KINDS[kind](tmp_path / "t.npy")
    for ids in (_ids(9, 0, 3, 9), _ids(5, 9).to(torch.int32), _ids()):
        want = torch.from_numpy(TABLE)[ids.long()]
        assert torch.equal(feature.read(ids).cpu(), want) and torch.equal(feature.read_valid(ids).cpu(), want)
    name = type(feature).__name__
    for bad, shown in ((_ids(0, 10), 10), (_ids(3, -1), -1)):
        with pytest.raises(ValueError, match=rf"{name}\.read: `ids` holds row id {shown}, out of range: valid ids "
                           r"are 0\.\.9 \(num_rows=10\)"):
            feature.read(bad)
        # A fetcher reading a user's batch (no sampler upstream) names the feature and the field.
        fetcher = FeatureFetcher([], FeatureStore({"x": feature}), ["x"])
        with pytest.raises(ValueError, match=rf"node feature 'x' \(10 rows\): `seeds` holds node id {shown}"):
            fetcher.fetch(MiniBatch(seeds=bad))
    with pytest.raises(TypeError, match=rf"{name}\.read: `ids` must be an integer tensor"):
        feature.read(torch.tensor([0.0]))
    with pytest.raises(ValueError, match=rf"{name}\.read: `ids` must be 1-D"):
        feature.read(torch.zeros(2, 2, dtype=torch.int64))


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


@pytest.mark.parametrize("typed", [False, True])
def test_graphbolt_store_methods(typed):
    """GraphBolt's ``read`` / ``size`` / ``count`` / ``update`` / ``keys`` / ``to`` by
    ``(domain, type_name, feature_name)``, type None when untyped; the store's own key
    forms still name the same features."""
    ntype = "paper" if typed else None
    table = torch.arange(12, dtype=torch.float32).reshape(6, 2)
    store = FeatureStore({(ntype, "feat") if typed else "feat": table.clone()}, edge_features={"w": torch.rand(4)})
    assert store.keys() == [("node", ntype, "feat"), ("edge", None, "w")]
    assert store.size("node", ntype, "feat") == torch.Size([2]) and store.count("node", ntype, "feat") == 6
    assert torch.equal(store.read("node", ntype, "feat"), table)
    assert torch.equal(store.read("node", ntype, "feat", _ids(5, 1)), table[[5, 1]])
    pipe_feature = store["node", (ntype, "feat") if typed else "feat"]
    if typed:  # the constructor's form of the key names it too
        assert store["paper", "feat"] is pipe_feature and ("paper", "feat") in store
    store.update("node", ntype, "feat", torch.ones(2, 2), _ids(0, 3))
    assert pipe_feature.read(_ids(0, 3, 1)).tolist() == [[1, 1], [1, 1], [2, 3]]
    hidden = torch.randn(6, 5, dtype=torch.float64)
    store.update("node", ntype, "feat", hidden)  # layer-wise inference: a new row shape, in place
    assert torch.equal(pipe_feature.read(_ids(4)), hidden[[4]]) and store.size("node", ntype, "feat") == (5,)
    moved = store.to("cpu")
    assert moved.keys() == store.keys() and moved["edge", "w"] is store["edge", "w"]
    with pytest.raises(ValueError, match=r"Feature.update: `value` must have the table's 6 rows"):
        store.update("node", ntype, "feat", torch.ones(5, 2))
    with pytest.raises(ValueError, match=r"`value` must be \[len\(ids\), \*row_shape\] = \[1, 5\]"):
        store.update("node", ntype, "feat", torch.ones(1, 2), _ids(0))
    with pytest.raises(ValueError, match="out of range"):
        store.read("node", ntype, "feat", _ids(6))
    with pytest.raises(TypeError, match=r"`value` must have the table's dtype torch.float64, got torch.int64"):
        store.update("node", ntype, "feat", torch.ones(1, 5, dtype=torch.int64), _ids(0))  # no silent cast


def test_update_refuses_read_only_tables(tmp_path):
    path = tmp_path / "f.npy"
    np.save(path, np.zeros((4, 2), dtype=np.float32))
    store = FeatureStore({"feat": str(path)})
    with pytest.raises(ValueError, match="read-only"):
        store.update("node", None, "feat", torch.ones(1, 2), _ids(0))
    store.update("node", None, "feat", torch.ones(4, 2))  # replacing it whole is fine
    assert store.read("node", None, "feat").sum() == 8
    on_disk = FeatureStore({"feat": CPUCachedFeature(DiskBasedFeature(str(path)), 1 << 10)})
    with pytest.raises(TypeError, match="DiskBasedFeature.update: only in-memory features"):
        on_disk.update("node", None, "feat", torch.ones(4, 2))


@pytest.mark.parametrize(
    "cache",
    [
        lambda f: CPUCachedFeature(f, 4 * 8),
        lambda f: CPUCachedFeature(f, 4 * 8, policy="sieve"),
        lambda f: GPUCachedFeature(f, 4 * 8, device="cpu"),
        lambda f: GPUCachedFeature(f, 4 * 8, policy="clock", device="cpu"),
    ],
)
def test_a_cached_feature_updates_its_fallback_and_its_cached_rows(cache):
    """As GraphBolt's cached ``update``: updating through the cache, reads (a pipe's
    included) give the new rows, cached or not; they gave the old cached rows."""
    table = torch.zeros(10, 2)
    cached = cache(Feature(table))
    store = FeatureStore({"feat": cached})
    pipe = gp.ItemSampler(gp.ItemSet(_ids(1, 2, 7), names="seeds"), 3).fetch_feature(store, ["feat"])
    cached.read(_ids(1, 2, 3))  # rows 1, 2, 3 cached
    store.update("node", None, "feat", torch.tensor([[1.0, 1], [2, 2], [7, 7]]), _ids(1, 2, 7))
    assert cached.read(_ids(1, 2, 3, 7)).tolist() == [[1, 1], [2, 2], [0, 0], [7, 7]]
    assert next(iter(pipe)).node_features["feat"].tolist() == [[1, 1], [2, 2], [7, 7]]
    hidden = torch.arange(30, dtype=torch.float64).reshape(10, 3)
    cached.update(hidden)  # a new whole table, of another row shape and dtype
    assert torch.equal(cached.read(_ids(1, 2, 3, 1)), hidden[[1, 2, 3, 1]])
    with pytest.raises(ValueError, match=r"update: `ids` .*out of range"):
        cached.update(torch.ones(1, 3, dtype=torch.float64), _ids(10))
    if isinstance(cached, CPUCachedFeature):  # a row over the budget is refused before the table changes
        with pytest.raises(ValueError, match=r"CPUCachedFeature.update: `max_cache_size_in_bytes` \(32\) holds no row of 40 bytes"):
            cached.update(torch.ones(10, 5, dtype=torch.float64))
        assert torch.equal(cached.read(_ids(1, 2)), hidden[[1, 2]])


def test_reading_every_row_copies_nothing_and_leaves_caches_alone():
    """``read()`` with no ids is GraphBolt's whole table: an in-memory table itself, a
    cache's backing table without going through (or counting in) the cache."""
    table = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    assert Feature(table).read() is table
    cached = CPUCachedFeature(Feature(table), 1 << 10)
    assert cached.read() is table and cached.cache_stats()["hits"] + cached.cache_stats()["misses"] == 0
    assert torch.equal(cached.read(_ids(3)), table[[3]]) and cached.cache_stats()["misses"] == 1


def test_a_truncated_or_object_npy_path_fails_at_construction_naming_the_file(tmp_path):
    np.save(tmp_path / "cut.npy", np.zeros((100, 4), np.float32))
    os.truncate(tmp_path / "cut.npy", os.path.getsize(tmp_path / "cut.npy") - 16)
    with pytest.raises(ValueError, match=r"cut.npy': the file is \d+ bytes, shorter than .* it is truncated"):
        Feature(str(tmp_path / "cut.npy"))
    np.save(tmp_path / "obj.npy", np.array([None, 1], dtype=object), allow_pickle=True)
    with pytest.raises(TypeError, match=r"obj.npy': numpy dtype object has no torch equivalent"):
        FeatureStore({"x": str(tmp_path / "obj.npy")})
    (tmp_path / "text.npy").write_text("not an array")
    with pytest.raises(ValueError, match=r"text.npy': not a readable .npy file"):
        Feature(str(tmp_path / "text.npy"))


def test_to_leaves_disk_based_and_cached_features_where_they_are(tmp_path):
    """``Feature.to`` / ``FeatureStore.to``: disk-based and cached features stay where
    they are (they have no single table to move; ``to`` raised AttributeError)."""
    path = str(tmp_path / "f.npy")
    np.save(path, np.arange(30, dtype=np.float32).reshape(10, 3))
    kinds = [
        DiskBasedFeature(path, direct_io=False),
        CPUCachedFeature(Feature(path), 24),
        CPUCachedFeature(DiskBasedFeature(path, direct_io=False), 24),
        GPUCachedFeature(DiskBasedFeature(path, direct_io=False), 24, device="cpu"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cuda without CUDA warns once
        for device in ("cpu", "cuda", "pinned"):
            for feature in kinds:
                assert feature.to(device) is feature
                assert FeatureStore({"x": feature}).to(device)["x"] is feature


@pytest.mark.parametrize("kind", ["read-only array", "npy path"])
def test_update_refuses_a_read_only_table_after_pin_memory(kind, tmp_path, monkeypatch):
    """Pinning wraps a read-only table (a .npy path's read-only map, a non-writable
    array) as a tensor; ``update(value, ids)`` must still refuse it (it wrote into the
    map: a segfault), and ``update(value)`` replaces it whole, writable. CUDA pinning is
    stubbed (the tensor counts as registered)."""
    from graphpipe.features import store as store_module

    table = np.arange(30, dtype=np.float32).reshape(10, 3)
    if kind == "npy path":
        np.save(tmp_path / "f.npy", table)
        feature = Feature(str(tmp_path / "f.npy"))
    else:
        array = table.copy()
        array.flags.writeable = False
        feature = Feature(array)
    monkeypatch.setattr(store_module, "cuda_or_warn_once", lambda message: True)
    monkeypatch.setattr(store_module, "pin_in_place", lambda tensor: tensor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        feature.pin_memory_()
    assert isinstance(feature.data, torch.Tensor)
    with pytest.raises(ValueError, match=r"Feature.update: the table is read-only .* update\(value\) replaces it whole"):
        feature.update(torch.ones(1, 3), _ids(2))
    assert torch.equal(feature.read(_ids(2)), torch.from_numpy(table[[2]]))
    if kind == "read-only array":  # a pickled copy of an array is writable (found in review of the change)
        copy = pickle.loads(pickle.dumps(Feature(array)))
        copy.update(torch.ones(1, 3), _ids(2))
        assert torch.equal(copy.read(_ids(2)), torch.ones(1, 3))
    feature.update(torch.zeros(10, 3))
    feature.update(torch.ones(1, 3), _ids(2))
    assert feature.read(_ids(2, 3)).tolist() == [[1, 1, 1], [0, 0, 0]]


def test_graphbolts_feature_and_store_constructors():
    """GraphBolt's walkthrough builds ``gb.BasicFeatureStore({(domain, type, name):
    gb.TorchBasedFeature(tensor)})``: the store graphpipe's constructor builds from the
    same tables, typed keys too; other keys are refused naming the form."""
    node, edge = torch.rand(5, 2), torch.rand(12, 5)
    store = gp.BasicFeatureStore({("node", None, "feat"): gp.TorchBasedFeature(node), ("edge", None, "feat"): gp.TorchBasedFeature(edge)})
    assert isinstance(store, gp.FeatureStore) and isinstance(store, gp.BasicFeatureStore) and gp.TorchBasedFeature is gp.Feature
    assert isinstance(type("Mine", (gp.BasicFeatureStore,), {})({}), gp.FeatureStore)  # GraphBolt's scripts subclass it
    assert torch.equal(store.read("node", None, "feat", torch.tensor([4, 0])), node[[4, 0]])
    assert torch.equal(store.read("edge", None, "feat"), edge) and store.node_keys == ["feat"]
    typed = gp.BasicFeatureStore({("node", "paper", "x"): gp.TorchBasedFeature(node, {"num_classes": 3})})
    assert typed.node_keys == [("paper", "x")] and typed.metadata("node", "paper", "x") == {"num_classes": 3}
    with pytest.raises(ValueError, match=r"BasicFeatureStore: `features` keys must be \(domain, type_name, feature_name\).*got \('graph', None, 'x'\)"):
        gp.BasicFeatureStore({("graph", None, "x"): gp.Feature(node)})
    with pytest.raises(TypeError, match=r"BasicFeatureStore: `features` must be a dict"):
        gp.BasicFeatureStore([gp.Feature(node)])
