"""gp.datasets.OnDiskDataset reads GraphBolt's heterogeneous on-disk layout (``type`` fields),
written here as literal YAML so the layout does not come from graphpipe's reader."""

import numpy as np
import pytest
import torch

pytest.importorskip("yaml")

import graphpipe as gp  # noqa: E402

METADATA = """\
dataset_name: hetero_test
graph:
  nodes:
    - type: paper
      num: 40
    - type: author
      num: 30
  edges:
    - type: "author:writes:paper"
      format: csv
      path: edges/writes.csv
    - type: "paper:cites:paper"
      format: numpy
      path: edges/cites.npy
  feature_data:
    - domain: edge
      type: "author:writes:paper"
      name: weight
      format: numpy
      path: edges/writes_weight.npy
    - domain: edge
      type: "paper:cites:paper"
      name: weight
      format: numpy
      path: edges/cites_weight.npy
feature_data:
  - domain: node
    type: paper
    name: feat
    format: numpy
    in_memory: false
    path: data/paper_feat.npy
  - domain: node
    type: author
    name: feat
    format: numpy
    path: data/author_feat.npy
  - domain: edge
    type: "paper:cites:paper"
    name: count
    format: numpy
    path: data/cites_count.npy
tasks:
  - name: node_classification
    num_classes: 3
    train_set:
      - type: paper
        data:
          - name: seeds
            format: numpy
            path: set/train_papers.npy
          - name: labels
            format: numpy
            path: set/train_labels.npy
      - type: author
        data:
          - name: seeds
            format: numpy
            path: set/train_authors.npy
          - name: labels
            format: numpy
            path: set/train_author_labels.npy
"""


def write(root):
    gen = np.random.default_rng(0)
    writes = np.stack([gen.integers(0, 30, 120), gen.integers(0, 40, 120)])
    cites = np.stack([gen.integers(0, 40, 90), gen.integers(0, 40, 90)])
    for folder in ("edges", "data", "set"):
        (root / folder).mkdir()
    (root / "metadata.yaml").write_text(METADATA)
    np.savetxt(root / "edges" / "writes.csv", writes.T, fmt="%d", delimiter=",")
    np.save(root / "edges" / "cites.npy", cites)
    arrays = {
        "edges/writes_weight.npy": gen.random(120),
        "edges/cites_weight.npy": gen.random(90),
        "data/paper_feat.npy": gen.random((40, 4), dtype=np.float32),
        "data/author_feat.npy": gen.random((30, 2), dtype=np.float32),
        "data/cites_count.npy": np.arange(90),
        "set/train_papers.npy": np.array([3, 1, 7]),
        "set/train_labels.npy": np.array([0, 1, 2]),
        "set/train_authors.npy": np.array([5, 9]),
        "set/train_author_labels.npy": np.array([1, 1]),
    }
    for path, array in arrays.items():
        np.save(root / path, array)
    return writes, cites, arrays


def test_reads_a_typed_dataset_and_samples_it(tmp_path):
    writes, cites, arrays = write(tmp_path)
    ds = gp.datasets.OnDiskDataset(tmp_path).load()
    g = ds.graph
    assert g.is_heterogeneous and g.num_nodes_per_type == {"author": 30, "paper": 40}
    assert g.edge_types == ["author:writes:paper", "paper:cites:paper"]
    expected = gp.CSCGraph.from_hetero_edges(
        {"author:writes:paper": torch.from_numpy(writes), "paper:cites:paper": torch.from_numpy(cites)},
        {"paper": 40, "author": 30},
    )
    for name in ("indptr", "indices", "type_per_edge", "original_edge_ids"):
        assert torch.equal(getattr(g, name), getattr(expected, name)), name
    # edge attributes per type, in CSC order: position e holds row original_edge_ids[e] of its type's file
    weight = g.edge_attributes["weight"]
    for t, name in enumerate(g.edge_types):
        at = g.type_per_edge == t
        source = torch.from_numpy(arrays["edges/writes_weight.npy" if t == 0 else "edges/cites_weight.npy"])
        assert torch.equal(weight[at], source[g.original_edge_ids[at].long()])
    ids = torch.tensor([39, 0, 5])
    assert torch.equal(ds.feature["node", "paper", "feat"].read(ids), torch.from_numpy(arrays["data/paper_feat.npy"])[ids])
    assert torch.equal(ds.feature["edge", "paper:cites:paper", "count"].read(ids), torch.tensor([[39], [0], [5]]))
    (task,) = ds.tasks
    assert isinstance(task.train_set, gp.HeteroItemSet) and len(task.train_set) == 5
    assert torch.equal(task.train_set.item_sets["author"].field("seeds"), torch.tensor([5, 9]))
    assert len(ds.all_nodes_set) == 70
    pipe = (
        gp.ItemSampler(task.train_set, batch_size=5, seed=0)
        .sample_neighbor(g, [2, 2], seed=0)
        .fetch_feature(ds.feature, node_feature_keys={"paper": ["feat"], "author": ["feat"]})
    )
    (mb,) = list(gp.DataLoader(pipe))
    assert set(mb.seeds) == {"paper", "author"}
    for t, table in (("paper", arrays["data/paper_feat.npy"]), ("author", arrays["data/author_feat.npy"])):
        assert torch.equal(mb.node_features[(t, "feat")], torch.from_numpy(table)[mb.input_nodes[t]])
    # cached: the second open maps the same file
    assert gp.datasets.OnDiskDataset(tmp_path).graph.source_path == g.source_path


def test_typed_errors_name_the_entry(tmp_path):
    write(tmp_path)
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace("    type: author\n    name: feat", "    type: writer\n    name: feat"))
    with pytest.raises(ValueError, match=r"node feature 'feat' names unknown node type 'writer'"):
        gp.datasets.OnDiskDataset(tmp_path)
    (tmp_path / "metadata.yaml").write_text(text.replace("      num: 30", "      num: 3"))
    with pytest.raises(ValueError, match=r"writes:paper.*author id \d+, out of range for num_nodes\['author'\]=3"):
        gp.datasets.OnDiskDataset(tmp_path)
