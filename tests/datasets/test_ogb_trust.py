"""ogb_node_dataset treats the folder as untrusted (issue 29): ids are checked before
anything is built from them, the cache is never written through planted symlinks, and
files resolving outside the folder are refused unless trusted."""

import os

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe._internal import safe_files
from test_ogb import write_csv_gz, write_ogb_folder


@pytest.mark.parametrize("binary", [False, True])
def test_edge_ids_are_checked_before_the_inverse_edges_are_written(tmp_path, binary, monkeypatch):
    root = tmp_path / "ogbn_products"  # add_inverse_edge
    edges, *_ = write_ogb_folder(root, binary)
    edges[7] = [3, 40]  # 40 nodes: ids 0..39
    if binary:
        arrays = dict(np.load(root / "raw" / "data.npz"))
        arrays["edge_index"] = edges.T.copy()
        np.savez_compressed(root / "raw" / "data.npz", **arrays)
    else:
        write_csv_gz(root / "raw" / "edge.csv.gz", edges, "%d")
    calls = []
    monkeypatch.setattr("graphpipe.datasets.ogb._interleave_inverse_edges", lambda *a: calls.append(a))
    source = "data.npz' \\(member edge_index\\)" if binary else "edge.csv.gz'"
    with pytest.raises(ValueError, match=f"the edge list '.*{source} holds node id 40, outside 0..39"):
        gp.datasets.ogb_node_dataset(root)
    assert calls == []
    assert os.listdir(root / "graphpipe") == []  # no scratch left


def test_planted_cache_symlinks_are_replaced_not_followed(tmp_path):
    root = tmp_path / "ogbn_arxiv"
    edges, feat, *_ = write_ogb_folder(root)
    victim = tmp_path / "victim.npy"
    np.save(victim, np.arange(3))
    before = victim.read_bytes()
    (root / "graphpipe").mkdir()
    for name in ("labels.npy", "train.npy", "node_feat.npy", "graph.pt", "edge_feat.npy"):
        os.symlink(victim, root / "graphpipe" / name)
    os.symlink(tmp_path / "dangling.json", root / "graphpipe" / "ogb.json")
    ds = gp.datasets.ogb_node_dataset(root)
    assert victim.read_bytes() == before and not os.path.lexists(tmp_path / "dangling.json")
    names = sorted(os.listdir(root / "graphpipe"))
    assert names == sorted(["graph.pt", "labels.npy", "node_feat.npy", "ogb.json", "train.npy", "valid.npy", "test.npy"])
    assert all(safe_files.regular_file(root / "graphpipe" / n) for n in names)  # edge_feat.npy (none here) removed
    assert torch.equal(ds.features["feat"].read(torch.arange(40)), torch.from_numpy(feat))


def test_a_symlinked_cache_directory_is_refused(tmp_path):
    root = tmp_path / "ogbn_arxiv"
    write_ogb_folder(root)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "graphpipe")
    with pytest.raises(ValueError, match="cache directory.*graphpipe' is a symlink"):
        gp.datasets.ogb_node_dataset(root)
    assert os.listdir(tmp_path / "elsewhere") == []


def test_files_resolving_outside_the_folder_are_refused_unless_trusted(tmp_path):
    root, other = tmp_path / "ogbn_arxiv", tmp_path / "other"
    _, feat, *_ = write_ogb_folder(root)
    other.mkdir()
    os.replace(root / "raw" / "node-feat.csv.gz", other / "node-feat.csv.gz")
    os.symlink(other / "node-feat.csv.gz", root / "raw" / "node-feat.csv.gz")
    with pytest.raises(ValueError, match=r"'raw/node-feat.csv.gz': .*outside the directory .*ogb_node_dataset\(\.\.\., trusted_directories"):
        gp.datasets.ogb_node_dataset(root)
    ds = gp.datasets.ogb_node_dataset(root, trusted_directories=[other])
    assert torch.equal(ds.features["feat"].read(torch.arange(40)), torch.from_numpy(feat))
