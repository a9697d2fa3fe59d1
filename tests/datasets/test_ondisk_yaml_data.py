"""GraphBolt's two-step idiom: ``ds.yaml_data`` edited before ``ds.load()`` decides what
load() reads (GraphBolt 2.1 reads features and sets in load()), with the same checks; and a
feature entry's extra fields as its ``metadata()``, as GraphBolt 2.1's ``extra_fields``."""

import datetime
import os
import pickle
import threading
import time

import numpy as np
import pytest

pytest.importorskip("yaml")

import graphpipe as gp  # noqa: E402
from graphpipe.datasets import _files, ondisk  # noqa: E402
from graphbolt_layout import write_graphbolt_dataset  # noqa: E402

# The fields GraphBolt 2.1's OnDiskFeatureData reads; its metadata() is every other field.
GRAPHBOLT_21_FEATURE_FIELDS = {"domain", "type", "name", "format", "path", "in_memory"}


def _in_memory_feat(root):
    """The layout's dataset with node feature ``feat`` read into memory (no in_memory)."""
    d = write_graphbolt_dataset(root, "numpy")
    text = (root / "metadata.yaml").read_text()
    (root / "metadata.yaml").write_text(text.replace("    in_memory: false\n    path: node_data/feat.npy", "    path: node_data/feat.npy"))
    return d


def _with_entry_fields(root, fields: str):
    """Add ``fields`` (YAML lines) to the ``feat`` node feature entry."""
    text = (root / "metadata.yaml").read_text()
    (root / "metadata.yaml").write_text(text.replace("    path: node_data/feat.npy\n", "    path: node_data/feat.npy\n" + fields, 1))


def test_in_memory_false_set_in_yaml_data_maps_the_table_and_never_reads_it(tmp_path, monkeypatch):
    d = _in_memory_feat(tmp_path)
    reads, load = [], np.load
    monkeypatch.setattr(_files.np, "load", lambda path, mmap_mode=None, **kw: reads.append((str(path), mmap_mode)) or load(path, mmap_mode=mmap_mode, **kw))
    ds = gp.datasets.BuiltinDataset(tmp_path.name, root=tmp_path.parent)
    for feature in ds.yaml_data["feature_data"]:
        if feature["format"] == "numpy":
            feature["in_memory"] = False
    ds = ds.load()
    feat = ds.feature["node", None, "feat"]
    assert feat.path == str(tmp_path / "node_data" / "feat.npy") and isinstance(feat.data, np.memmap)
    assert np.array_equal(feat.read().numpy(), d.feat)
    assert (str(tmp_path / "node_data" / "feat.npy"), None) not in reads  # checked mapped, never read whole
    # Untouched, the same entry is read into memory, as before.
    plain = gp.datasets.OnDiskDataset(tmp_path).load().feature["node", None, "feat"]
    assert plain.path is None and not isinstance(plain.data, np.memmap) and np.array_equal(plain.data, d.feat)


def test_a_feature_entry_removed_from_yaml_data_is_absent_after_load(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    ds = gp.datasets.OnDiskDataset(tmp_path)
    assert ("edge", None, "feat") in ds.feature.keys()  # read before load(), as before
    feature, tasks = ds.feature, ds.tasks
    assert ds.load().feature is feature and ds.tasks is tasks  # unedited: nothing read again
    ds.yaml_data["feature_data"] = [f for f in ds.yaml_data["feature_data"] if f["domain"] != "edge"]
    ds.yaml_data["tasks"][0]["num_classes"] = 9
    ds.yaml_data["dataset_name"] = "renamed"
    assert ds.load() is ds
    assert ds.feature.keys() == [("node", None, "feat"), ("node", None, "year")]
    assert ds.tasks[0].num_classes == 9 and ds.dataset_name == "renamed"
    assert gp.datasets.OnDiskDataset(tmp_path).load().tasks[0].num_classes == 4  # the file is unchanged


@pytest.mark.parametrize(
    "edit, error",
    [
        (lambda m: m["feature_data"][0].update(path="../../outside.npy"), r"feature_data\[0\] \(node feature 'feat'\) `path`"),
        (lambda m: m["feature_data"][0].update(in_memory="no"), r"`in_memory` must be true or false, got 'no'"),
        (lambda m: m["feature_data"][0].update(domain="graphs"), r"`domain` must be 'node', 'edge' or 'graph'"),
        (lambda m: m["feature_data"].append(dict(m["feature_data"][0])), r"feature_data\[3\] \(node feature 'feat'\) is listed twice"),
        (lambda m: m["tasks"][0]["train_set"][0]["data"][0].update(path="/etc/hostname"), r"tasks\[0\].train_set\[0\].data\[0\].*`path`"),
        (lambda m: m.update(dataset_name={"a": 1}), r"`dataset_name` must be a string"),
        (lambda m: m["graph"]["nodes"][0].update(num=5), r"`yaml_data\['graph'\]` was changed"),
    ],
)
def test_yaml_data_edits_are_checked_at_load(tmp_path, edit, error):
    write_graphbolt_dataset(tmp_path, "numpy")
    (tmp_path.parent / "outside.npy").write_bytes(b"")
    ds = gp.datasets.OnDiskDataset(tmp_path)
    edit(ds.yaml_data)
    with pytest.raises(ValueError, match=error):
        ds.load()


def test_extra_fields_of_a_feature_entry_are_its_metadata_as_graphbolt_21s(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    _with_entry_fields(tmp_path, "    num_categories: 12\n    labels: [a, 2, 3.5, true, null]\n    note: text\n")
    ds = gp.datasets.OnDiskDataset(tmp_path).load()
    entry = ds.yaml_data["feature_data"][0]
    graphbolt = {k: v for k, v in entry.items() if k not in GRAPHBOLT_21_FEATURE_FIELDS}  # no shape, no dtype
    assert ds.feature.metadata("node", None, "feat") == graphbolt == {
        "num_categories": 12, "labels": ["a", 2, 3.5, True, None], "note": "text"
    }
    assert ds.feature["node", None, "feat"].metadata() == graphbolt
    assert ds.feature.metadata("node", None, "year") == {} and ds.feature.metadata("edge", None, "feat") == {}
    # a cache keeps answering its fallback's
    cached = gp.cpu_cached_feature(ds.feature["node", None, "feat"], 1024)
    assert cached.metadata()["num_categories"] == 12
    # disk-based features too
    disk = gp.datasets.OnDiskDataset(tmp_path, disk_based_features=True).feature["node", None, "feat"]
    assert isinstance(disk, gp.DiskBasedFeature) and disk.metadata() == graphbolt


def test_extra_fields_keep_only_plain_values_and_name_the_others(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    _with_entry_fields(
        tmp_path,
        "    num_categories: 3\n    mapping: {a: 1}\n    nested: [[1, 2]]\n    day: 2024-01-02\n"
        "    blob: !!binary aGVsbG8=\n    tags: !!set {x, y}\n",
    )
    with pytest.warns(UserWarning, match=r"feature_data\[0\] \(node feature 'feat'\): dropping field\(s\) \['mapping', 'nested', 'day', 'blob', 'tags'\]"):
        ds = gp.datasets.OnDiskDataset(tmp_path)
    assert ds.feature.metadata("node", None, "feat") == {"num_categories": 3}
    assert isinstance(ds.yaml_data["feature_data"][0]["day"], datetime.date)  # yaml_data itself is as parsed
    # An edited yaml_data is held to the same rule at load().
    ds.yaml_data["feature_data"][0]["num_categories"] = object()
    with pytest.warns(UserWarning, match=r"dropping field\(s\) \[.*'num_categories'"):
        ds.load()
    assert "num_categories" not in ds.feature.metadata("node", None, "feat")



def test_load_compares_a_deeply_nested_metadata_yaml_without_recursion(tmp_path):
    # A 400-deep list in an entry opens (PyYAML parses it); load() compared it recursively.
    write_graphbolt_dataset(tmp_path, "numpy")
    _with_entry_fields(tmp_path, "    deep: " + "[" * 400 + "]" * 400 + "\n")
    with pytest.warns(UserWarning, match=r"dropping field\(s\) \['deep'\]"):
        ds = gp.datasets.OnDiskDataset(tmp_path)
    store = ds.feature
    assert ds.load().feature is store  # unedited: nothing read again
    innermost = ds.yaml_data["feature_data"][0]["deep"]
    while innermost:
        innermost = innermost[0]
    innermost.append(1)  # an edit at the bottom is seen
    with pytest.warns(UserWarning, match=r"dropping field\(s\) \['deep'\]"):
        assert ds.load().feature is not store


def test_extra_fields_aliasing_one_list_keep_it_shared_and_unchangeable(tmp_path):
    # A small file can alias one long list from many fields: copying it per field multiplied memory.
    write_graphbolt_dataset(tmp_path, "numpy")
    _with_entry_fields(tmp_path, "    a0: &big [" + ",".join(["1"] * 1000) + "]\n" + "".join(f"    a{i}: *big\n" for i in range(1, 50)))
    ds = gp.datasets.OnDiskDataset(tmp_path).load()
    feature = ds.feature["node", None, "feat"]
    md = feature.metadata()
    assert len(md) == 50 and all(md[f"a{i}"] is md["a0"] for i in range(50)) and md["a0"] == [1] * 1000
    md["a0"].append(2)  # neither an answer nor yaml_data reaches the stored metadata
    ds.yaml_data["feature_data"][0]["a1"].append(3)
    assert feature.metadata()["a1"] == [1] * 1000
    assert ds.feature.metadata("node", None, "feat")["a49"] == [1] * 1000


def test_first_use_of_feature_from_two_threads_reads_each_table_once(tmp_path, monkeypatch):
    _in_memory_feat(tmp_path)
    ds = gp.datasets.OnDiskDataset(tmp_path)
    made, make = [], ondisk._feature

    def slow(data, path, *args):
        made.append(path)
        time.sleep(0.2)  # both threads ask while the first is reading
        return make(data, path, *args)

    monkeypatch.setattr(ondisk, "_feature", slow)
    barrier, got = threading.Barrier(2), {}

    def use(i):
        barrier.wait()
        got[i] = ds.feature

    threads = [threading.Thread(target=use, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert got[0] is got[1] and made.count(str(tmp_path / "node_data" / "feat.npy")) == 1
    # The dataset still pickles (its lock is made again where needed).
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.feature.keys() == ds.feature.keys() and copy.load() is copy


class _Wrapped(gp.datasets.OnDiskDataset):
    """A subclass that sets ``self.feature`` in ``__init__`` (it wraps a feature in a cache)."""

    def __init__(self, path):
        super().__init__(path)
        self.feature = self.feature.with_feature(("node", None, "feat"), gp.cpu_cached_feature(self.feature["node", None, "feat"], 1 << 10))


def test_feature_and_metadata_can_be_assigned_as_before(tmp_path):
    _in_memory_feat(tmp_path)
    ds = gp.datasets.OnDiskDataset(tmp_path)
    store = gp.FeatureStore({"x": np.zeros((300, 1), np.float32)})
    ds.feature = store
    assert ds.feature is store and ds.load().feature is store and "node_features=['x']" in repr(ds)
    ds.features = None
    assert ds.feature is None and ds.features is None
    parsed = ds.metadata
    assert parsed is ds.yaml_data
    ds.metadata = {}
    assert ds.metadata == {} and ds.yaml_data is parsed and ds.load() is ds  # yaml_data is what load() reads

    wrapped = _Wrapped(tmp_path).load()
    assert isinstance(wrapped.feature["node", None, "feat"], gp.CPUCachedFeature)
    assert isinstance(pickle.loads(pickle.dumps(wrapped)).feature["node", None, "feat"], gp.CPUCachedFeature)


@pytest.mark.parametrize("swap", ["symlink", "rename"])
def test_a_table_replaced_after_opening_is_refused_not_read(tmp_path, swap):
    d = _in_memory_feat(tmp_path / "data")
    outside = tmp_path / "outside.npy"
    np.save(outside, np.full(d.feat.shape, 7, d.feat.dtype))
    ds = gp.datasets.OnDiskDataset(tmp_path / "data")
    feat = tmp_path / "data" / "node_data" / "feat.npy"
    if swap == "symlink":  # a path refused at open, planted after the check
        feat.unlink()
        feat.symlink_to(outside)
    else:
        os.replace(outside, feat)
    with pytest.raises(ValueError, match=r"feature_data\[0\].*feat.npy'\) was replaced or changed after the dataset was opened; open the dataset again"):
        ds.load()
    assert d.feat is not None


@pytest.mark.parametrize(
    "table",
    [
        np.asfortranarray(np.arange(300 * 3, dtype=np.float64).reshape(300, 3)),
        np.arange(300, dtype=np.int32),
        np.arange(300 * 4).reshape(300, 2, 2) % 3 == 0,
        np.arange(301 * 2, dtype=np.float16).reshape(301, 2),
    ],
    ids=["fortran", "1-d", "bool-3d", "float16-extra-row"],
)
def test_a_deferred_table_is_the_feature_read_array_gives(tmp_path, table):
    _in_memory_feat(tmp_path)
    np.save(tmp_path / "node_data" / "feat.npy", table)
    feature = gp.datasets.OnDiskDataset(tmp_path).feature["node", None, "feat"]
    expected = ondisk._feature(_files.read_array(str(tmp_path / "node_data" / "feat.npy"), "numpy", True), "", False, "", {})
    for got in (feature, pickle.loads(pickle.dumps(feature))):
        assert type(got.data) is np.ndarray and got.data.flags.c_contiguous and got.data.flags.writeable
        assert got.data.dtype == expected.data.dtype and got.data.shape == expected.data.shape
        assert np.array_equal(got.data, expected.data) and got.row_shape == expected.row_shape and got.path is None


def test_a_table_truncated_after_opening_is_refused_not_read(tmp_path):
    _in_memory_feat(tmp_path)
    ds = gp.datasets.OnDiskDataset(tmp_path)
    os.truncate(tmp_path / "node_data" / "feat.npy", 200)
    with pytest.raises(ValueError, match=r"feature_data\[0\] \(node feature 'feat'\).*feat.npy"):
        ds.load()


def test_a_dataset_pickled_before_its_tables_are_read_carries_them(tmp_path):
    d = _in_memory_feat(tmp_path / "data")
    ds = gp.datasets.OnDiskDataset(tmp_path / "data")
    data = pickle.dumps(ds)
    os.replace(tmp_path / "data" / "node_data" / "year.pt", tmp_path / "year.pt")  # only numpy tables wait
    (tmp_path / "data" / "node_data" / "feat.npy").unlink()
    copy = pickle.loads(data)
    assert np.array_equal(copy.feature.read("node", None, "feat").numpy(), d.feat)
    assert np.array_equal(ds.feature.read("node", None, "feat").numpy(), d.feat)


def test_a_metadata_yaml_too_deep_for_pyyaml_is_a_value_error(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    _with_entry_fields(tmp_path, "    deep: " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(ValueError, match=r"metadata.yaml' nests too deeply for PyYAML to read"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_a_dataset_of_many_tables_holds_no_file_open_before_load(tmp_path):
    """Each deferred table held its memory map (a file descriptor) until the store was
    built: a dataset of more tables than the open-file limit could not be opened."""
    d = _in_memory_feat(tmp_path)
    extra = "".join(
        f"  - domain: node\n    name: f{i}\n    format: numpy\n    path: node_data/f{i}.npy\n" for i in range(40)
    )
    for i in range(40):
        np.save(tmp_path / "node_data" / f"f{i}.npy", d.feat)
    metadata = (tmp_path / "metadata.yaml").read_text().replace("\nfeature_data:\n", "\nfeature_data:\n" + extra, 1)
    (tmp_path / "metadata.yaml").write_text(metadata)
    before = len(os.listdir("/proc/self/fd"))
    ds = gp.datasets.OnDiskDataset(tmp_path)
    assert len(os.listdir("/proc/self/fd")) - before < 5
    assert np.array_equal(ds.load().feature.read("node", None, "f39").numpy(), d.feat)
