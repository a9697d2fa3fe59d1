"""gp.datasets.OnDiskDataset reads GraphBolt's on-disk layout unchanged; the heterogeneous one
(``type`` fields) is written here as literal YAML so it does not come from graphpipe's reader."""

import os

import numpy as np
import pytest
import torch

pytest.importorskip("yaml")

import graphpipe as gp  # noqa: E402
from graphbolt_layout import write_graphbolt_dataset  # noqa: E402


@pytest.mark.parametrize("edge_format", ["csv", "numpy"])
@pytest.mark.parametrize("seed_name", ["seeds", "seed_nodes"])
def test_reads_everything_as_written(tmp_path, edge_format, seed_name):
    d = write_graphbolt_dataset(tmp_path, edge_format, seed_name)
    ds = gp.datasets.OnDiskDataset(tmp_path).load()
    assert ds.dataset_name == "graphbolt_test"
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.src), torch.from_numpy(d.dst), d.num_nodes)
    g = ds.graph
    assert torch.equal(g.indptr, expected.indptr) and torch.equal(g.indices, expected.indices)
    assert torch.equal(g.original_edge_ids, expected.original_edge_ids)
    assert g.source_path == str(tmp_path.with_name(tmp_path.name + ".graphpipe") / "graph.pt")  # mapped lazily from the cache
    # graph.feature_data become attributes in CSC order: position e holds the edge file's row original_edge_ids[e]
    assert torch.equal(g.edge_attributes["weight"], torch.from_numpy(d.weight)[g.original_edge_ids.long()])
    feat = ds.feature["feat"]
    assert feat.path == str(tmp_path / "node_data" / "feat.npy")  # in_memory: false -> stays on disk
    ids = torch.tensor([5, 0, 299, 5])
    assert torch.equal(feat.read(ids), torch.from_numpy(d.feat)[ids])
    assert torch.equal(ds.feature["year"].read(ids), d.year[ids].unsqueeze(1))  # [n] read as [n, 1], as GraphBolt
    edge_ids = torch.tensor([0, 1999, 7])
    assert torch.equal(ds.feature["edge", "feat"].read(edge_ids), torch.from_numpy(d.edge_feat)[edge_ids])
    (task,) = ds.tasks
    assert task.metadata["name"] == "node_classification" and task.num_classes == d.num_classes
    for name in ("train", "validation", "test"):
        item_set = getattr(task, f"{name}_set")
        assert item_set.names == ("seeds", "labels")
        seeds = torch.from_numpy(d.splits[name])
        assert torch.equal(item_set.field("seeds"), seeds)
        assert torch.equal(item_set.field("labels"), torch.from_numpy(d.labels)[seeds])
    assert len(ds.all_nodes_set) == d.num_nodes


def test_trains_through_a_pipe(tmp_path):
    d = write_graphbolt_dataset(tmp_path, "numpy")
    ds = gp.datasets.OnDiskDataset(tmp_path)
    task = ds.tasks[0]
    pipe = (
        gp.ItemSampler(task.train_set, batch_size=16, shuffle=True, seed=0)
        .sample_neighbor(ds.graph, [4, 4], seed=0)
        .fetch_feature(ds.feature, node_feature_keys=["feat"])
    )
    seen = 0
    for mb in gp.DataLoader(pipe):
        assert torch.equal(mb.labels, torch.from_numpy(d.labels)[mb.seeds])
        assert torch.equal(mb.node_features["feat"], torch.from_numpy(d.feat)[mb.input_nodes])
        seen += mb.seeds.numel()
    assert seen == len(d.splits["train"])


def test_graph_cache_is_reused_and_rebuilt_when_the_edges_change(tmp_path, monkeypatch):
    d = write_graphbolt_dataset(tmp_path, "numpy")
    gp.datasets.OnDiskDataset(tmp_path)
    builds = []
    original = gp.CSCGraph.from_coo_files.__func__
    monkeypatch.setattr(gp.CSCGraph, "from_coo_files", classmethod(lambda cls, *a, **k: builds.append(1) or original(cls, *a, **k)))
    gp.datasets.OnDiskDataset(tmp_path)
    assert builds == []
    np.save(tmp_path / "edge_data" / "edges.npy", np.stack([d.dst, d.src]))  # reversed edges
    ds = gp.datasets.OnDiskDataset(tmp_path)
    assert builds == [1]
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.dst), torch.from_numpy(d.src), d.num_nodes)
    assert torch.equal(ds.graph.indices, expected.indices)
    gp.datasets.OnDiskDataset(tmp_path, force_preprocess=True)
    assert builds == [1, 1]


def test_task_selection(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    with pytest.raises(ValueError, match="no task named \\['other'\\]"):
        gp.datasets.OnDiskDataset(tmp_path, tasks=["other"])
    # GraphBolt's load() keeps no task for a name it lacks; here a typo is refused as above
    dataset = gp.datasets.OnDiskDataset(tmp_path)
    names = [t.metadata["name"] for t in dataset.tasks]
    with pytest.raises(ValueError, match="OnDiskDataset.load: no task named \\['other'\\]"):
        dataset.load(tasks=["other", names[0]])
    with pytest.raises(TypeError, match="`tasks` must be a task name or a list of task names"):
        dataset.load(tasks=5)
    assert [t.metadata["name"] for t in dataset.load(tasks=names[0]).tasks] == names[:1]



def test_flags_are_bools_and_task_names_unique(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    for flag in ("force_preprocess", "disk_based_features"):  # was: "yes" accepted as true (None: GraphBolt's default)
        with pytest.raises(TypeError, match=rf"`{flag}` must be True or False, got 'yes'"):
            gp.datasets.OnDiskDataset(tmp_path, **{flag: "yes"})
    metadata = (tmp_path / "metadata.yaml").read_text()
    tasks = metadata[metadata.index("tasks:\n") + len("tasks:\n"):]
    (tmp_path / "metadata.yaml").write_text(metadata + tasks)  # every task twice
    with pytest.raises(ValueError, match=r"metadata.yaml tasks\[\d+\] is named '.*' like an earlier task"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="metadata.yaml"):
        gp.datasets.OnDiskDataset(tmp_path)
    write_graphbolt_dataset(tmp_path, "numpy")
    os.remove(tmp_path / "node_data" / "feat.npy")
    with pytest.raises(FileNotFoundError, match="feature 'feat'.*node_data/feat.npy"):
        gp.datasets.OnDiskDataset(tmp_path)
    np.save(tmp_path / "node_data" / "feat.npy", np.zeros((7, 2), np.float32))
    with pytest.raises(ValueError, match="has 7 rows, expected 300"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_a_set_field_without_a_name_beside_seeds_is_refused(tmp_path):
    """An unnamed field is seeds: beside `seed_nodes` the two were one field, the
    second file's values."""
    write_graphbolt_dataset(tmp_path, "numpy", seed_name="seed_nodes")
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace("          - name: labels\n            format: numpy\n            path: set/train_labels.npy",
                                                         "          - format: numpy\n            path: set/train_labels.npy"))
    with pytest.raises(ValueError, match=r"train_set\[0\]: ItemSet: `names` \('seed_nodes', 'seeds'\) names a field twice .*\(a field without `name` is seeds\)"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_bad_edges_and_heterogeneous_graphs(tmp_path):
    write_graphbolt_dataset(tmp_path, "csv", num_nodes=300)
    with open(tmp_path / "edge_data" / "edges.csv", "a") as f:
        f.write("1,oops\n")
    with pytest.raises(ValueError, match="edges.csv"):
        gp.datasets.OnDiskDataset(tmp_path)
    text = (tmp_path / "metadata.yaml").read_text().replace("    - num: 300", "    - type: paper\n      num: 300")
    (tmp_path / "metadata.yaml").write_text(text)
    with pytest.raises(ValueError, match=r"graph.edges\[0\] lacks a `type`, but the graph is a heterogeneous one"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_out_of_range_edges(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy", num_nodes=300)
    text = (tmp_path / "metadata.yaml").read_text().replace("- num: 300", "- num: 10")
    (tmp_path / "metadata.yaml").write_text(text)
    with pytest.raises(ValueError, match="edges.npy.*out of range for num_nodes=10"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_disk_based_features(tmp_path):
    d = write_graphbolt_dataset(tmp_path, "numpy")
    np.save(tmp_path / "node_data" / "year.npy", d.year.numpy())
    text = (tmp_path / "metadata.yaml").read_text()
    entry = "  - domain: node\n    name: year1d\n    format: numpy\n    in_memory: false\n    path: node_data/year.npy\n"
    (tmp_path / "metadata.yaml").write_text(text.replace("\nfeature_data:\n", "\nfeature_data:\n" + entry, 1))
    ds = gp.datasets.OnDiskDataset(tmp_path, disk_based_features=True)
    year = ds.feature["year1d"]  # 1-D: memory-mapped as [n, 1], as the docstring says
    assert type(year) is gp.Feature and year.row_shape == (1,) and isinstance(year.data, np.memmap)
    assert torch.equal(year.read(torch.tensor([5])), d.year[[5]].reshape(1, 1))
    feat = ds.feature["feat"]
    assert isinstance(feat, gp.DiskBasedFeature)
    ids = torch.tensor([299, 3, 3])
    assert torch.equal(feat.read(ids), torch.from_numpy(d.feat)[ids])
    assert not isinstance(ds.feature["year"], gp.DiskBasedFeature)  # in memory (and 1-D: [n, 1])
    feat.close()


def test_missing_edge_file_with_only_graphbolts_preprocessed_graph(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    os.remove(tmp_path / "edge_data" / "edges.npy")
    with pytest.raises(FileNotFoundError, match=r"edge_data/edges.npy'$"):
        gp.datasets.OnDiskDataset(tmp_path)
    os.makedirs(tmp_path / "preprocessed")
    (tmp_path / "preprocessed" / "fused_csc_sampling_graph.pt").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="edges.npy'; only GraphBolt's preprocessed graph.*DGL"):
        gp.datasets.OnDiskDataset(tmp_path)


@pytest.mark.parametrize("edge_format", ["csv", "numpy"])
def test_an_edge_path_that_is_a_directory_is_named_so(tmp_path, edge_format):
    """It was reported as "the edge file is missing"."""
    write_graphbolt_dataset(tmp_path, edge_format)
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace(f"path: edge_data/edges.{'csv' if edge_format == 'csv' else 'npy'}", "path: edge_data"))
    form = "lines 'src,dst'" if edge_format == "csv" else r"a .npy file of a \[2, num_edges\] integer array"
    with pytest.raises(ValueError, match=rf"graph.edges\[0\] `path` '.*edge_data' is a directory, not a file; expected the edge file \({form}\)"):
        gp.datasets.OnDiskDataset(tmp_path)


# ---------------------------------------------------------------- typed datasets
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


def write_typed(root):
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
    writes, cites, arrays = write_typed(tmp_path)
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
    write_typed(tmp_path)
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace("    type: author\n    name: feat", "    type: writer\n    name: feat"))
    with pytest.raises(ValueError, match=r"node feature 'feat' names unknown node type 'writer'"):
        gp.datasets.OnDiskDataset(tmp_path)
    (tmp_path / "metadata.yaml").write_text(text.replace("      num: 30", "      num: 3"))
    with pytest.raises(ValueError, match=r"writes:paper.*author id \d+, out of range for num_nodes\['author'\]=3"):
        gp.datasets.OnDiskDataset(tmp_path)


@pytest.mark.parametrize(
    "old, new, match",
    [
        ('    - type: "paper:cites:paper"\n      format: numpy\n      path: edges/cites.npy\n',
         '    - type: "paper:cites:paper"\n      format: numpy\n      path: edges/cites.npy\n'
         '    - type: "paper:cites:paper"\n      format: numpy\n      path: edges/cites.npy\n',
         r"graph.edges\[2\] \('paper:cites:paper', .*edge type 'paper:cites:paper' is listed twice"),
        ("  - domain: node\n    type: author\n", "  - domain: node\n    type: paper\n",
         r"feature_data\[1\] \(node feature 'feat'\) is listed twice"),
        ('      type: "paper:cites:paper"\n      name: weight\n', '      type: "author:writes:paper"\n      name: weight\n',
         r"graph.feature_data\[1\] \(edge attribute 'weight'\) is listed twice"),
    ],
)
def test_an_entry_listed_twice_is_refused(tmp_path, old, new, match):
    """The second edge file of a type, feature or attribute replaced the first without a word."""
    write_typed(tmp_path)
    text = (tmp_path / "metadata.yaml").read_text()
    assert old in text
    (tmp_path / "metadata.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=match):
        gp.datasets.OnDiskDataset(tmp_path)


def test_builtin_dataset_opens_root_name_and_downloads_nothing(tmp_path):
    """GraphBolt's BuiltinDataset(name, root="datasets"): the directory <root>/<name>."""
    d = write_graphbolt_dataset(tmp_path / "datasets" / "ogbn-tiny", "numpy")
    ds = gp.BuiltinDataset("ogbn-tiny", root=tmp_path / "datasets").load()
    assert isinstance(ds, gp.OnDiskDataset) and ds.graph.total_num_nodes == d.num_nodes
    with pytest.raises(FileNotFoundError, match=r"BuiltinDataset\('ogbn-products'\): no directory .*graphpipe downloads nothing"):
        gp.BuiltinDataset("ogbn-products", root=tmp_path / "datasets")
    for name in ("..", ".", "a/b", ""):
        with pytest.raises(ValueError, match=r"BuiltinDataset: `name` must be a dataset directory's name"):
            gp.BuiltinDataset(name, root=tmp_path / "datasets")


LINK_TASK_21 = """\
  - name: link_prediction
    train_set:
      - data:
          - name: node_pairs
            format: numpy
            path: set/pairs.npy
    test_set:
      - data:
          - name: node_pairs
            format: numpy
            path: set/pairs.npy
          - name: negative_dsts
            format: numpy
            path: set/negative_dsts.npy
"""


def test_graphbolt_21_link_sets_sample(tmp_path):
    """GraphBolt 2.1's ``node_pairs`` / ``negative_dsts`` sets in metadata.yaml give
    GraphBolt 2.2's batches: the pairs, then their negatives, float32 labels, indexes."""
    d = write_graphbolt_dataset(tmp_path, "numpy")
    pairs, negatives = np.stack([d.src[:6], d.dst[:6]], 1), np.arange(12).reshape(6, 2)
    np.save(tmp_path / "set" / "pairs.npy", pairs)
    np.save(tmp_path / "set" / "negative_dsts.npy", negatives)
    with open(tmp_path / "metadata.yaml", "a") as f:
        f.write(LINK_TASK_21)
    task = gp.OnDiskDataset(tmp_path).load(tasks="link_prediction").tasks[0]
    assert task.train_set.names == ("seeds",) and task.test_set.names == ("seeds", "negative_dsts")
    (mb,) = gp.ItemSampler(task.test_set, 6).sample_neighbor(gp.OnDiskDataset(tmp_path).graph, [2])
    assert mb.seeds[:6].tolist() == pairs.tolist() and mb.seeds[6:, 1].tolist() == negatives.reshape(-1).tolist()
    assert mb.labels.dtype == torch.float32 and mb.labels.sum() == 6 and mb.indexes[6:].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_opens_graphbolts_preprocessed_output_without_unpickling(tmp_path):
    """``OnDiskDataset(dir / "preprocessed")``: GraphBolt's paths are relative to ``dir``;
    the graph comes from ``dir/metadata.yaml``'s edges (the .pt is never read), cached
    beside ``dir`` as for ``dir`` itself."""
    root = tmp_path / "ds"
    d = write_graphbolt_dataset(root, "numpy")
    (root / "preprocessed").mkdir()
    (root / "preprocessed" / "fused_csc_sampling_graph.pt").write_bytes(b"not read: a pickle would run code")
    np.save(root / "preprocessed" / "feat.npy", d.feat * 2)
    (root / "preprocessed" / "metadata.yaml").write_text(
        "dataset_name: graphbolt_test\ngraph_topology:\n  type: FusedCSCSamplingGraph\n"
        "  path: preprocessed/fused_csc_sampling_graph.pt\nfeature_data:\n  - domain: node\n    name: feat\n"
        "    format: numpy\n    path: preprocessed/feat.npy\n"
    )
    ds = gp.OnDiskDataset(root / "preprocessed")
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.src), torch.from_numpy(d.dst), d.num_nodes)
    assert torch.equal(ds.graph.indices, expected.indices) and ds.cache_dir == str(tmp_path / "ds.graphpipe")
    assert torch.equal(ds.feature.read("node", None, "feat"), torch.from_numpy(d.feat * 2))
    assert sorted(os.listdir(tmp_path)) == ["ds", "ds.graphpipe"]
    os.rename(root / "metadata.yaml", root / "metadata.yaml.bak")
    with pytest.raises(FileNotFoundError, match=r"GraphBolt's preprocessed output.*no '.*ds/metadata.yaml'"):
        gp.OnDiskDataset(root / "preprocessed")


def test_graphbolt_output_stays_inside_its_preprocessed_folder(tmp_path):
    """GraphBolt-output metadata cannot widen the dataset to its parent: it opens only in a
    folder named ``preprocessed``, and the files it names stay inside that folder."""
    parent = tmp_path / "datasets"
    write_graphbolt_dataset(parent, "numpy")
    np.save(parent / "secret.npy", np.ones((4, 2), dtype=np.float32))
    planted = "graph_topology:\n  type: FusedCSCSamplingGraph\n  path: x.pt\nfeature_data:\n  - domain: node\n" \
              "    name: feat\n    format: numpy\n    path: {}\n"  # fmt: skip
    for folder, path, error in (("ds", "secret.npy", r"opens only in the `preprocessed` folder"),
                                ("preprocessed", "secret.npy", r"resolves to '.*secret.npy', outside the directory '.*preprocessed'")):  # fmt: skip
        (parent / folder).mkdir()
        (parent / folder / "metadata.yaml").write_text(planted.format(path))
        with pytest.raises(ValueError, match=error):
            gp.OnDiskDataset(parent / folder)


def test_a_default_cache_others_may_write_is_refused(tmp_path):
    """The default cache sits beside the dataset, maybe in a shared directory: one that
    others may write to (made by someone else first) is not trusted."""
    write_graphbolt_dataset(tmp_path / "ds", "numpy")
    (tmp_path / "ds.graphpipe").mkdir()
    os.chmod(tmp_path / "ds.graphpipe", 0o777)
    with pytest.raises(PermissionError, match=r"cache directory '.*ds.graphpipe' belongs to another user or others may write to it"):
        gp.OnDiskDataset(tmp_path / "ds")
    os.chmod(tmp_path / "ds.graphpipe", 0o755)
    assert gp.OnDiskDataset(tmp_path / "ds").cache_dir == str(tmp_path / "ds.graphpipe")
