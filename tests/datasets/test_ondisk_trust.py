"""A dataset directory is untrusted: OnDiskDataset reads only inside it (unless the caller
names trusted directories), never writes through a symlink planted in it, cleans up after a
killed build, and rebuilds its cache whenever an input changed (issue 29)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

pytest.importorskip("yaml")

import graphpipe as gp  # noqa: E402
from graphbolt_layout import write_graphbolt_dataset  # noqa: E402
from graphpipe._internal import safe_files  # noqa: E402
from graphpipe.datasets import _files  # noqa: E402


def edit_metadata(root, old, new):
    text = (root / "metadata.yaml").read_text()
    assert old in text
    (root / "metadata.yaml").write_text(text.replace(old, new))


@pytest.fixture
def dataset(tmp_path):
    """A dataset directory ``tmp_path/ds`` and a directory ``tmp_path/other`` beside it
    holding a 'secret' feature table and edge list."""
    root, other = tmp_path / "ds", tmp_path / "other"
    root.mkdir()
    other.mkdir()
    d = write_graphbolt_dataset(root, "numpy")
    d.secret = np.full((300, 8), 7.0, np.float32)
    np.save(other / "secret.npy", d.secret)
    np.save(other / "edges.npy", np.stack([d.dst, d.src]))
    return root, other, d


OUTSIDE = {
    # name: (old text, new text (may use {other}), the entry the error names)
    "relative feature": ("path: node_data/feat.npy", "path: ../other/secret.npy", r"feature_data\[0\] \(node feature 'feat'\)"),
    "absolute feature": ("path: node_data/feat.npy", "path: {other}/secret.npy", r"feature_data\[0\] \(node feature 'feat'\)"),
    "edges": ("path: edge_data/edges.npy", "path: ../other/edges.npy", r"graph.edges\[0\]"),
    "set data": ("path: set/train_seeds.npy", "path: ../other/secret.npy", r"tasks\[0\].train_set\[0\].data\[0\] \(field 'seeds'\)"),
}


@pytest.mark.parametrize("case", sorted(OUTSIDE))
def test_paths_outside_the_directory_are_refused_unless_trusted(dataset, case):
    root, other, d = dataset
    old, new, entry = OUTSIDE[case]
    edit_metadata(root, old, new.format(other=other))
    with pytest.raises(ValueError, match=entry + r" `path`: .*outside the directory .*trusted_directories"):
        gp.datasets.OnDiskDataset(root)
    if case == "set data":
        return  # a [300, 8] float table is no seed list; the opt-in is shown by the others
    ds = gp.datasets.OnDiskDataset(root, trusted_directories=[other])
    if case == "edges":
        expected = gp.CSCGraph.from_coo(torch.from_numpy(d.dst), torch.from_numpy(d.src), d.num_nodes)
        assert torch.equal(ds.graph.indices, expected.indices)
    else:
        assert torch.equal(ds.feature["feat"].read(torch.arange(3)), torch.from_numpy(d.secret[:3]))


def test_a_symlink_inside_pointing_out_is_refused(dataset):
    root, other, d = dataset
    os.remove(root / "node_data" / "feat.npy")
    os.symlink(other / "secret.npy", root / "node_data" / "feat.npy")
    with pytest.raises(ValueError, match=r"feature_data\[0\] \(node feature 'feat'\) `path`: 'node_data/feat.npy' resolves to "):
        gp.datasets.OnDiskDataset(root)
    os.symlink(other, root / "shared")  # a directory link: its whole tree is outside
    edit_metadata(root, "path: node_data/feat.npy", "path: shared/secret.npy")
    with pytest.raises(ValueError, match="outside the directory"):
        gp.datasets.OnDiskDataset(root)
    ds = gp.datasets.OnDiskDataset(root, trusted_directories=[str(other)])
    assert ds.feature["feat"].path == str(other / "secret.npy")  # opened by its resolved path
    # A symlink that stays inside is fine.
    edit_metadata(root, "path: shared/secret.npy", "path: node_data/inner.npy")
    np.save(root / "node_data" / "real.npy", d.feat)
    os.symlink("real.npy", root / "node_data" / "inner.npy")
    assert torch.equal(gp.datasets.OnDiskDataset(root).feature["feat"].read(torch.tensor([4])), torch.from_numpy(d.feat[[4]]))


def test_trusted_directories_must_be_a_list_of_directories(dataset):
    root, other, _ = dataset
    with pytest.raises(TypeError, match=r"`trusted_directories` must be a list of directories"):
        gp.datasets.OnDiskDataset(root, trusted_directories=str(other))
    with pytest.raises(FileNotFoundError, match="`trusted_directories` entry '.*missing' is not a directory"):
        gp.datasets.OnDiskDataset(root, trusted_directories=[other / "missing"])


def test_a_symlinked_cache_directory_is_refused(dataset, tmp_path):
    root, _, _ = dataset
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root.with_name(root.name + ".graphpipe"))
    with pytest.raises(ValueError, match=r"cache directory .*ds.graphpipe' is a symlink"):
        gp.datasets.OnDiskDataset(root)
    assert os.listdir(elsewhere) == []
    ds = gp.datasets.OnDiskDataset(root, cache_dir=elsewhere)  # the remedy the message names
    assert ds.graph.source_path == str(elsewhere / "graph.pt")


def test_planted_cache_symlinks_are_replaced_not_followed(dataset, tmp_path):
    root, _, d = dataset
    victim, dangling = tmp_path / "victim.txt", tmp_path / "created-through-a-link.json"
    victim.write_text("precious")
    (root.with_name(root.name + ".graphpipe")).mkdir()
    os.symlink(victim, root.with_name(root.name + ".graphpipe") / "graph.pt")
    os.symlink(dangling, root.with_name(root.name + ".graphpipe") / "graph.json")
    ds = gp.datasets.OnDiskDataset(root)
    assert victim.read_text() == "precious" and not os.path.lexists(dangling)
    for name in ("graph.pt", "graph.json"):
        assert safe_files.regular_file(root.with_name(root.name + ".graphpipe") / name)
    assert sorted(os.listdir(root.with_name(root.name + ".graphpipe"))) == ["graph.json", "graph.pt"]
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.src), torch.from_numpy(d.dst), d.num_nodes)
    assert torch.equal(ds.graph.indices, expected.indices)


def test_a_cache_that_is_a_symlink_to_a_valid_cache_is_not_trusted(dataset, tmp_path, monkeypatch):
    root, _, _ = dataset
    gp.datasets.OnDiskDataset(root)
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in ("graph.pt", "graph.json"):
        os.replace(root.with_name(root.name + ".graphpipe") / name, kept / name)
        os.symlink(kept / name, root.with_name(root.name + ".graphpipe") / name)
    builds = []
    original = gp.CSCGraph.from_coo_files.__func__
    monkeypatch.setattr(gp.CSCGraph, "from_coo_files", classmethod(lambda cls, *a, **k: builds.append(1) or original(cls, *a, **k)))
    gp.datasets.OnDiskDataset(root)
    assert builds == [1]


def test_csv_conversion_does_not_write_through_planted_links(tmp_path):
    csv, out = tmp_path / "edges.csv", tmp_path / "edges.npy"
    csv.write_text("0,1\n2,3\n")
    victim = tmp_path / "victim.npy"
    np.save(victim, np.arange(5))
    before = victim.read_bytes()
    os.symlink(victim, f"{out}.{os.getpid()}.tmp.npy")  # the name the conversion used to write first
    os.symlink(victim, out)
    array = _files.csv_to_npy(str(csv), str(out), np.int64, transpose=True)
    assert np.array_equal(array, [[0, 2], [1, 3]])
    assert victim.read_bytes() == before
    assert safe_files.regular_file(out)


KILLED_BUILD = """
import os, sys, time
sys.path.insert(0, {tests!r})
import graphpipe as gp
from graphpipe.datasets import _files

def stuck(*args, **kwargs):  # in the middle of the CSV conversion: its output file exists
    open({marker!r}, "w").close()
    time.sleep(120)

_files._fill_from_csv = stuck
gp.datasets.OnDiskDataset({root!r})
"""


def test_a_killed_csv_conversion_leaves_nothing_behind(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    d = write_graphbolt_dataset(root, "csv")
    marker = tmp_path / "converting"
    script = KILLED_BUILD.format(tests=os.path.dirname(__file__), marker=str(marker), root=str(root))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=os.getcwd())
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the child ended before converting"
            assert time.monotonic() < deadline, "the child never reached the conversion"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert os.listdir(root.with_name(root.name + ".graphpipe"))  # the killed conversion's scratch is still there
    ds = gp.datasets.OnDiskDataset(root)
    assert sorted(os.listdir(root.with_name(root.name + ".graphpipe"))) == ["graph.json", "graph.pt"]
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.src), torch.from_numpy(d.dst), d.num_nodes)
    assert torch.equal(ds.graph.indices, expected.indices)


def test_stale_scratch_of_dead_processes_is_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    host = safe_files._host()
    names = {
        f".graphpipe-tmp-{pid}-{host}-abc": False,  # this host, dead: removed
        f".graphpipe-tmp-{pid}-xyz": False,  # no host field (older name): removed
        f".graphpipe-tmp-{pid}-another.machine-abc": True,  # another host (a shared file system): kept
        f".graphpipe-tmp-{os.getppid()}-{host}-abc": True,  # alive: kept
    }
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "partial.npy").write_bytes(b"x" * 100)
    with safe_files.scratch_directory(tmp_path, "test") as scratch:
        assert os.path.basename(scratch).startswith(f".graphpipe-tmp-{os.getpid()}-{host}-")
    assert sorted(os.listdir(tmp_path)) == sorted(name for name, kept in names.items() if kept)


def test_stale_scratch_removed_meanwhile_by_another_process_is_skipped(tmp_path, monkeypatch):
    """Ranks opening one dataset after a killed build clean up the same scratch: the entry
    another one removed between listdir and lstat raised FileNotFoundError."""
    host = safe_files._host()
    for pid in (999990, 999991, 999992):
        (tmp_path / f".graphpipe-tmp-{pid}-{host}-abc").mkdir()
    asked = []

    def dead_and_removed_meanwhile(pid):
        asked.append(pid)
        (tmp_path / f".graphpipe-tmp-{pid}-{host}-abc").rmdir()
        return False

    monkeypatch.setattr(safe_files, "process_exists", dead_and_removed_meanwhile)
    safe_files.remove_stale_scratch(str(tmp_path))
    assert sorted(asked) == [999990, 999991, 999992] and os.listdir(tmp_path) == []


def _publish_one(cache, stamp, monkeypatch, after_rename=lambda: None):
    """Publish the file 'a.bin' into ``cache`` (removing a stale 'old.bin'), running
    ``after_rename`` as another process would, between its rename and the stamp's."""
    publish = _files.publish

    def publish_then_race(source, destination):
        publish(source, destination)
        if destination.endswith("a.bin"):
            after_rename()

    monkeypatch.setattr(_files, "publish", publish_then_race)
    with safe_files.scratch_directory(cache, "test") as scratch:
        with open(os.path.join(scratch, "a.bin"), "wb") as f:
            f.write(b"ours")
        _files.publish_cache(scratch, str(cache), "stamp.json", stamp, ["a.bin"], stale=["old.bin"])


def test_a_cache_file_removed_meanwhile_by_another_publisher_is_skipped(tmp_path, monkeypatch):
    """Two ranks publishing one cache: the old stamp (or a stale file) the other removed
    between lexists and remove raised FileNotFoundError."""
    (tmp_path / "stamp.json").write_text("{}")
    (tmp_path / "old.bin").write_text("x")
    remove = os.remove
    monkeypatch.setattr(os, "remove", lambda path: remove(path) or remove(path))  # the other one was first
    _publish_one(tmp_path, {"v": 1}, monkeypatch)
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "stamp.json"]
    assert _files.cache_is_fresh(str(tmp_path), "stamp.json", {"v": 1}, "test") == ["a.bin"]


def test_a_stamp_vouches_only_for_files_its_own_publisher_built(tmp_path, monkeypatch):
    """Another process's file renamed over this one's before its stamp is written (built
    from other inputs, say) was listed in this one's stamp: now there is no stamp, and the
    next open rebuilds."""
    theirs = tmp_path / "theirs.bin"

    def another_publishes():
        theirs.write_bytes(b"theirs")
        os.replace(theirs, tmp_path / "a.bin")

    _publish_one(tmp_path, {"v": 1}, monkeypatch, another_publishes)
    assert sorted(os.listdir(tmp_path)) == ["a.bin"]
    assert _files.cache_is_fresh(str(tmp_path), "stamp.json", {"v": 1}, "test") is None


@pytest.mark.parametrize("how", ["rewritten in place", "replaced by a copy"])
def test_cache_is_rebuilt_when_an_input_changes_with_its_size_and_mtime_restored(dataset, tmp_path, how):
    root, _, d = dataset
    gp.datasets.OnDiskDataset(root)
    edges = root / "edge_data" / "edges.npy"
    before = os.stat(edges)
    reversed_edges = np.stack([d.dst, d.src])
    if how == "rewritten in place":
        with open(edges, "r+b") as f:  # same inode, same size
            np.lib.format.write_array(f, reversed_edges)
    else:  # cp -p / rsync -a: a new file with the old times
        np.save(tmp_path / "new.npy", reversed_edges)
        os.replace(tmp_path / "new.npy", edges)
    os.utime(edges, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(edges)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    ds = gp.datasets.OnDiskDataset(root)
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.dst), torch.from_numpy(d.src), d.num_nodes)
    assert torch.equal(ds.graph.indices, expected.indices)


def test_a_tasks_repr_stays_small_for_nested_yaml_aliases(tmp_path):
    """Found in review: 810 bytes of metadata.yaml whose aliases nest 8 levels made
    ``repr(task)`` build a 2.8 GB string (each level multiplies it by 9)."""
    write_graphbolt_dataset(tmp_path, "numpy")
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
               for i in range(1, 6)]  # fmt: skip; 6 levels: a 35 MB repr before
    metadata = (tmp_path / "metadata.yaml").read_text()
    bomb = "    extra:\n" + "".join(f"      {line}\n" for line in levels)
    (tmp_path / "metadata.yaml").write_text(metadata.replace("    num_classes:", bomb + "    num_classes:", 1))
    task = gp.datasets.OnDiskDataset(tmp_path).tasks[0]
    assert task.metadata["extra"]["a5"][0][0][0][0][0] == ["x"] * 9  # the full structure, shared
    assert len(repr(task)) < 5_000
