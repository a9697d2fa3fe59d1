"""ogb_node_dataset reads OGB's node-property-prediction folders (written here, tiny)."""

import gzip
import json
import os

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.datasets import _files


def write_csv_gz(path, rows, fmt):
    with gzip.open(path, "wt") as f:
        for row in np.atleast_2d(rows.T).T if rows.ndim == 1 else rows:
            f.write(",".join(fmt % v for v in np.atleast_1d(row)) + "\n")


def write_ogb_folder(root, binary=False, num_nodes=40, num_edges=150, seed=0, split="sales_ranking", edge_feat=False,
                     num_tasks=1):
    """OGB's raw layout: returns the arrays written (labels ``[num_nodes]``, or with
    ``num_tasks > 1`` ogbn-proteins' ``[num_nodes, num_tasks]`` binary labels)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, (num_edges, 2))
    feat = rng.standard_normal((num_nodes, 3)).astype(np.float32)
    labels = rng.integers(0, 5, num_nodes).astype(np.float64)
    labels[::7] = np.nan  # unlabelled, as in papers100M
    efeat = rng.standard_normal((num_edges, 2)).astype(np.float32) if edge_feat else None
    order = rng.permutation(np.flatnonzero(~np.isnan(labels)))
    splits = {"train": order[:10], "valid": order[10:15], "test": order[15:22]}
    if num_tasks > 1:  # one column per task
        labels = rng.integers(0, 2, (num_nodes, num_tasks)).astype(np.float64)
        labels[3, 1] = np.nan
    os.makedirs(root / "raw")
    if binary:  # papers100M's binary layout
        arrays = dict(edge_index=edges.T.copy(), node_feat=feat, num_nodes_list=np.array([num_nodes]),
                      num_edges_list=np.array([num_edges]))  # fmt: skip
        if edge_feat:
            arrays["edge_feat"] = efeat
        np.savez_compressed(root / "raw" / "data.npz", **arrays)
        np.savez_compressed(root / "raw" / "node-label.npz", node_label=labels.reshape(num_nodes, -1))
    else:
        write_csv_gz(root / "raw" / "edge.csv.gz", edges, "%d")
        write_csv_gz(root / "raw" / "node-feat.csv.gz", feat, "%.9g")
        write_csv_gz(root / "raw" / "node-label.csv.gz", labels.reshape(num_nodes, -1), "%g")
        write_csv_gz(root / "raw" / "num-node-list.csv.gz", np.array([[num_nodes]]), "%d")
        write_csv_gz(root / "raw" / "num-edge-list.csv.gz", np.array([[num_edges]]), "%d")
        if edge_feat:
            write_csv_gz(root / "raw" / "edge-feat.csv.gz", efeat, "%.9g")
    os.makedirs(root / "split" / split)
    for name, ids in splits.items():
        write_csv_gz(root / "split" / split / f"{name}.csv.gz", ids[:, None], "%d")
    return edges, feat, labels, efeat, splits


def ogb_edge_index(edges, add_inverse_edge):
    """What OGB's read_graph_raw builds: edge i -> columns 2i (u, v) and 2i + 1 (v, u)."""
    edge_index = edges.T
    if add_inverse_edge:
        both = np.repeat(edge_index, 2, axis=1)
        both[0, 1::2], both[1, 1::2] = edge_index[1], edge_index[0]
        edge_index = both
    return torch.from_numpy(edge_index)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("folder, inverse", [("ogbn_products", True), ("ogbn_arxiv", False)])
def test_matches_the_files(tmp_path, binary, folder, inverse):
    root = tmp_path / folder
    edges, feat, labels, efeat, splits = write_ogb_folder(root, binary, edge_feat=True)
    ds = gp.datasets.ogb_node_dataset(root)
    g = ds.graph
    edge_index = ogb_edge_index(edges, inverse)
    eids = g.map_edge_ids(torch.arange(g.total_num_edges))
    assert torch.equal(g.edge_index(), edge_index[:, eids])
    assert g.total_num_edges == edge_index.shape[1] and g.indices.dtype == torch.int32 and g.source_path is not None
    assert torch.equal(ds.features["feat"].read(torch.arange(40)), torch.from_numpy(feat))
    expected_efeat = np.repeat(efeat, 2, axis=0) if inverse else efeat
    assert torch.equal(ds.features["edge", "feat"].read(eids), torch.from_numpy(expected_efeat)[eids])
    expected_labels = torch.from_numpy(np.where(np.isnan(labels), -1, labels).astype(np.int64))
    assert torch.equal(ds.labels, expected_labels) and ds.num_classes == int(np.nanmax(labels)) + 1
    for item_set, name in ((ds.train_set, "train"), (ds.validation_set, "valid"), (ds.test_set, "test")):
        assert torch.equal(item_set.field("seeds"), torch.from_numpy(splits[name]))
        assert torch.equal(item_set.field("labels"), expected_labels[splits[name]])
    assert sorted(os.listdir(root / "graphpipe")) == sorted(
        ["graph.pt", "labels.npy", "node_feat.npy", "edge_feat.npy", "ogb.json", "train.npy", "valid.npy", "test.npy"]
    )


@pytest.mark.parametrize("binary", [False, True])
def test_multi_task_labels_keep_every_column(tmp_path, binary):
    """ogbn-proteins: one label column per task; OGB's y and evaluator take them all."""
    root = tmp_path / "ogbn_proteins"
    _, _, labels, _, splits = write_ogb_folder(root, binary, num_tasks=6)
    ds = gp.datasets.ogb_node_dataset(root)
    expected = torch.from_numpy(np.where(np.isnan(labels), -1, labels).astype(np.int64))
    assert ds.labels.shape == (40, 6) and torch.equal(ds.labels, expected) and ds.num_classes == 6
    for item_set, name in ((ds.train_set, "train"), (ds.validation_set, "valid"), (ds.test_set, "test")):
        assert torch.equal(item_set.field("labels"), expected[splits[name]])
    for mb in gp.ItemSampler(ds.train_set, 4).sample_neighbor(ds.graph, [2]):
        assert torch.equal(mb.labels, expected[mb.seeds])


def test_a_cache_of_an_earlier_version_is_converted_again(tmp_path, monkeypatch):
    """Version 2 caches hold column 0 of ogbn-proteins' labels: they are not reused."""
    root = tmp_path / "ogbn_proteins"
    write_ogb_folder(root, num_tasks=6)
    gp.datasets.ogb_node_dataset(root)
    stamp = json.loads((root / "graphpipe" / "ogb.json").read_text())
    assert stamp["version"] == 3
    stamp["version"] = 2
    (root / "graphpipe" / "ogb.json").write_text(json.dumps(stamp))
    calls = []
    original = _files.csv_to_npy
    monkeypatch.setattr("graphpipe.datasets.ogb.csv_to_npy", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    assert gp.datasets.ogb_node_dataset(root).labels.shape == (40, 6) and len(calls) == 2  # converted again


def test_cache_is_reused_and_follows_the_options(tmp_path, monkeypatch):
    root = tmp_path / "ogbn_products"
    edges, *_ = write_ogb_folder(root)
    gp.datasets.ogb_node_dataset(root)
    calls = []
    original = _files.csv_to_npy
    monkeypatch.setattr("graphpipe.datasets.ogb.csv_to_npy", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    assert gp.datasets.ogb_node_dataset(root).graph.total_num_edges == 300
    assert calls == []
    ds = gp.datasets.ogb_node_dataset(root, add_inverse_edge=False)  # another graph: converted again
    assert ds.graph.total_num_edges == 150 and len(calls) == 2


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="raw"):
        gp.datasets.ogb_node_dataset(tmp_path)
    root = tmp_path / "ogbn_arxiv"
    write_ogb_folder(root, split="time")
    os.makedirs(root / "split" / "other")
    with pytest.raises(ValueError, match=r"give `split`.*\['other', 'time'\]"):
        gp.datasets.ogb_node_dataset(root)
    assert gp.datasets.ogb_node_dataset(root, split="time").graph.total_num_edges == 150
    os.remove(root / "raw" / "node-label.csv.gz")
    with pytest.raises(FileNotFoundError, match="node-label.csv.gz"):
        gp.datasets.ogb_node_dataset(root, split="time")


@pytest.mark.parametrize("binary", [False, True])
def test_feature_tables_of_other_row_counts_are_refused_when_converted(tmp_path, binary):
    """Found in review: a node-feat of 30 rows for 40 nodes (or an edge-feat short of the
    file's edges) converted, and failed at the first read of a later node."""
    for kind, changed in [("node", {"node_feat": np.zeros((30, 3), np.float32)}), ("edge", {"edge_feat": np.zeros((10, 2), np.float32)})]:
        root = tmp_path / f"{kind}_{binary}" / "ogbn_arxiv"
        write_ogb_folder(root, binary=binary, edge_feat=True)
        if binary:
            with np.load(root / "raw" / "data.npz") as data:
                arrays = {**{k: data[k] for k in data.files}, **changed}
            np.savez_compressed(root / "raw" / "data.npz", **arrays)
        else:
            write_csv_gz(root / "raw" / f"{kind}-feat.csv.gz", next(iter(changed.values())), "%g")
        rows, count = (30, 40) if kind == "node" else (10, 150)
        with pytest.raises(ValueError, match=rf"the {kind} features have {rows} rows, the graph {count} {kind}s"):
            gp.datasets.ogb_node_dataset(root)


def test_an_ogb_folder_given_as_a_graphbolt_directory_is_named(tmp_path):
    write_ogb_folder(tmp_path / "ogbn_arxiv")
    with pytest.raises(FileNotFoundError, match=r"no metadata.yaml .*a folder of the ogb package: read it with graphpipe.datasets.ogb_node_dataset"):
        gp.datasets.OnDiskDataset(tmp_path / "ogbn_arxiv")


def test_a_pickled_label_member_is_refused_naming_the_file(tmp_path):
    root = tmp_path / "ogbn_papers100M"
    write_ogb_folder(root, binary=True)
    np.savez(root / "raw" / "node-label.npz", node_label=np.array([[1.0]] * 40, dtype=object))
    with pytest.raises(ValueError, match=r"node-label.npz' member node_label: Object arrays cannot be loaded"):
        gp.datasets.ogb_node_dataset(root)
