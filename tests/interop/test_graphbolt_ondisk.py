"""GraphBolt itself and gp.datasets.OnDiskDataset read the same directory alike. Runs in
the DGL environment (see test_dgl.py); skipped in the main one."""

import os
import sys

import pytest
import torch

gb = pytest.importorskip("dgl.graphbolt")

import graphpipe as gp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "datasets"))
from graphbolt_layout import write_graphbolt_dataset  # noqa: E402


@pytest.mark.parametrize("edge_format", ["csv", "numpy"])
def test_same_graph_features_and_sets_as_graphbolt(tmp_path, edge_format):
    write_graphbolt_dataset(tmp_path, edge_format, seed_name="seed_nodes")  # DGL 2.1's field name
    theirs = gb.OnDiskDataset(str(tmp_path), include_original_edge_id=True).load()
    ours = gp.datasets.OnDiskDataset(tmp_path)
    g = theirs.graph
    assert torch.equal(ours.graph.indptr.long(), g.csc_indptr.long())
    # Same edges per destination, identified by their position in the edge file (the order
    # within a destination may differ: GraphBolt sorts by source there).
    their_ids = g.edge_attributes[gb.ORIGINAL_EDGE_ID].long()
    our_ids = ours.graph.original_edge_ids.long()
    for v in range(ours.graph.total_num_nodes):
        lo, hi = int(g.csc_indptr[v]), int(g.csc_indptr[v + 1])
        assert sorted(their_ids[lo:hi].tolist()) == sorted(our_ids[lo:hi].tolist())
    ids = torch.arange(ours.graph.total_num_nodes)
    for name in ("feat", "year"):
        assert torch.equal(ours.feature["node", name].read(ids), theirs.feature.read("node", None, name, ids))
    edge_ids = torch.tensor([0, 5, 1999])
    assert torch.equal(ours.feature["edge", "feat"].read(edge_ids), theirs.feature.read("edge", None, "feat", edge_ids))
    for name in ("train_set", "validation_set", "test_set"):
        mine, other = getattr(ours.tasks[0], name), getattr(theirs.tasks[0], name)
        assert len(mine) == len(other)
        for field, theirs_field in zip(mine.items, other._items):
            assert torch.equal(field.long(), torch.as_tensor(theirs_field).long())
    assert ours.tasks[0].metadata["num_classes"] == theirs.tasks[0].metadata["num_classes"]


def test_feature_metadata_and_the_yaml_data_idiom_as_graphbolt(tmp_path):
    """A feature entry's extra fields are its metadata() in both (GraphBolt 2.1: its
    ``extra_fields``, no shape); ``yaml_data`` edited before ``load()`` is read by both."""
    write_graphbolt_dataset(tmp_path, "numpy", seed_name="seed_nodes")
    text = (tmp_path / "metadata.yaml").read_text()
    extra = "    num_categories: 12\n    labels: [a, 2, 3.5, true, null]\n"
    (tmp_path / "metadata.yaml").write_text(text.replace("    path: node_data/feat.npy\n", "    path: node_data/feat.npy\n" + extra, 1))
    loaded = []
    for library in (gb, gp):
        ds = library.OnDiskDataset(str(tmp_path))
        ds.yaml_data["feature_data"] = [f for f in ds.yaml_data["feature_data"] if f["domain"] != "edge"]
        loaded.append(ds.load())
    theirs, ours = loaded
    assert sorted(ours.feature.keys()) == sorted(theirs.feature.keys()) == [("node", None, "feat"), ("node", None, "year")]
    for key in theirs.feature.keys():
        assert ours.feature.metadata(*key) == theirs.feature.metadata(*key)
    assert ours.feature.metadata("node", None, "feat") == {"num_categories": 12, "labels": ["a", 2, 3.5, True, None]}
