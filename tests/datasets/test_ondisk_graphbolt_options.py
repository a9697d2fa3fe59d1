"""GraphBolt's OnDiskDataset arguments and layout a GraphBolt script uses:
``include_original_edge_id``, ``auto_cast_to_optimal_dtype`` and typed node attributes
under ``graph.feature_data`` (issue 29)."""

import numpy as np
import pytest
import torch

pytest.importorskip("yaml")

import graphpipe as gp  # noqa: E402
from graphbolt_layout import write_graphbolt_dataset  # noqa: E402
from graphpipe.datasets.ondisk import ORIGINAL_EDGE_ID  # noqa: E402
from test_ondisk import write_typed  # noqa: E402


def test_graphbolts_call_works(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    ds = gp.datasets.OnDiskDataset(str(tmp_path), include_original_edge_id=True, force_preprocess=None,
                                   auto_cast_to_optimal_dtype=True).load(tasks="node_classification")  # fmt: skip
    assert ORIGINAL_EDGE_ID == "_ORIGINAL_EDGE_ID" and ORIGINAL_EDGE_ID in ds.graph.edge_attributes


@pytest.mark.parametrize("typed", [False, True])
def test_include_original_edge_id_stores_the_edge_file_positions(tmp_path, typed):
    if typed:
        write_typed(tmp_path)
    else:
        write_graphbolt_dataset(tmp_path, "csv")
    plain = gp.datasets.OnDiskDataset(tmp_path).graph
    assert ORIGINAL_EDGE_ID not in plain.edge_attributes
    g = gp.datasets.OnDiskDataset(tmp_path, include_original_edge_id=True).graph  # another option: rebuilt
    ids = g.edge_attributes[ORIGINAL_EDGE_ID]
    assert torch.equal(ids, g.original_edge_ids) and ids.dtype == torch.int32
    assert torch.equal(g.indices, plain.indices)
    assert ORIGINAL_EDGE_ID not in gp.datasets.OnDiskDataset(tmp_path).graph.edge_attributes


def test_include_original_edge_id_when_the_file_is_in_csc_order(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    src, dst = np.load(tmp_path / "edge_data" / "edges.npy")
    order = np.argsort(dst, kind="stable")
    np.save(tmp_path / "edge_data" / "edges.npy", np.stack([src[order], dst[order]]))
    g = gp.datasets.OnDiskDataset(tmp_path, include_original_edge_id=True).graph
    assert g.original_edge_ids is None  # positions are the ids
    assert torch.equal(g.edge_attributes[ORIGINAL_EDGE_ID], torch.arange(g.total_num_edges, dtype=torch.int32))


@pytest.mark.parametrize("typed", [False, True])
def test_auto_cast_to_optimal_dtype(tmp_path, typed):
    if typed:
        write_typed(tmp_path)
    else:
        write_graphbolt_dataset(tmp_path, "numpy")
    small = gp.datasets.OnDiskDataset(tmp_path).graph
    wide = gp.datasets.OnDiskDataset(tmp_path, auto_cast_to_optimal_dtype=False, include_original_edge_id=True).graph
    for name in ("indptr", "indices", "original_edge_ids"):
        assert getattr(small, name).dtype == torch.int32 and getattr(wide, name).dtype == torch.int64, name
        assert torch.equal(getattr(small, name).long(), getattr(wide, name)), name
    assert wide.edge_attributes[ORIGINAL_EDGE_ID].dtype == torch.int64
    with pytest.raises(TypeError, match="`auto_cast_to_optimal_dtype` must be True or False, got 'no'"):
        gp.datasets.OnDiskDataset(tmp_path, auto_cast_to_optimal_dtype="no")


TYPED_NODE_ATTRIBUTES = """\
    - domain: node
      type: paper
      name: year
      format: numpy
      path: data/paper_year.npy
    - domain: node
      type: author
      name: year
      format: torch
      path: data/author_year.pt
"""


def test_typed_node_attributes_in_graph_feature_data(tmp_path):
    write_typed(tmp_path)
    paper_year, author_year = np.arange(2000, 2040), torch.arange(1900, 1930)
    np.save(tmp_path / "data" / "paper_year.npy", paper_year)
    torch.save(author_year, tmp_path / "data" / "author_year.pt")
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace("feature_data:\n    - domain: edge", "feature_data:\n" + TYPED_NODE_ATTRIBUTES + "    - domain: edge", 1))
    g = gp.datasets.OnDiskDataset(tmp_path).graph
    # GraphBolt's layout: one table over all nodes, each type's rows at its offset
    assert g.node_types == ["author", "paper"]
    assert torch.equal(g.node_attributes["year"], torch.cat([author_year, torch.from_numpy(paper_year)]))
    offsets = g.node_type_offset.tolist()
    assert torch.equal(g.node_attributes["year"][offsets[1] : offsets[2]], torch.from_numpy(paper_year))
    assert "weight" in g.edge_attributes  # the typed edge attributes are still read


def test_typed_node_attributes_must_cover_every_node_type(tmp_path):
    write_typed(tmp_path)
    np.save(tmp_path / "data" / "paper_year.npy", np.arange(40))
    text = (tmp_path / "metadata.yaml").read_text()
    only_paper = TYPED_NODE_ATTRIBUTES.split("    - domain: node\n      type: author")[0]
    (tmp_path / "metadata.yaml").write_text(text.replace("feature_data:\n    - domain: edge", "feature_data:\n" + only_paper + "    - domain: edge", 1))
    with pytest.raises(ValueError, match=r"node attribute 'year' must list one file per node type .*missing type\(s\) \['author'\]"):
        gp.datasets.OnDiskDataset(tmp_path)
    np.save(tmp_path / "data" / "paper_year.npy", np.arange(41))
    (tmp_path / "metadata.yaml").write_text(text.replace("feature_data:\n    - domain: edge", "feature_data:\n" + TYPED_NODE_ATTRIBUTES + "    - domain: edge", 1))
    torch.save(torch.arange(30), tmp_path / "data" / "author_year.pt")
    with pytest.raises(ValueError, match=r"node attribute 'year' of node type 'paper' has dtype torch.int64 shape \(41,\), expected \[40\]"):
        gp.datasets.OnDiskDataset(tmp_path)
