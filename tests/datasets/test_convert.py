"""from_pyg: the dataset equals the PyG Data or HeteroData it came from (typed: a typed graph,
typed features and HeteroItemSets, sampled and fetched; from_dgl: tests/interop)."""

import pytest
import torch

import graphpipe as gp

pyg_data = pytest.importorskip("torch_geometric.data")

from graphpipe.batch.item_set import HeteroItemSet  # noqa: E402
from hetero_graphs import typed_edges  # noqa: E402


def make_data(num_nodes=50, num_edges=300, seed=0):
    gen = torch.Generator().manual_seed(seed)
    masks = torch.randint(0, 4, (num_nodes,), generator=gen)
    return pyg_data.Data(
        x=torch.randn(num_nodes, 5, generator=gen),
        y=torch.randint(0, 3, (num_nodes,), generator=gen),
        edge_index=torch.randint(0, num_nodes, (2, num_edges), generator=gen),
        edge_attr=torch.randn(num_edges, 2, generator=gen),
        year=torch.randint(2000, 2020, (num_nodes,), generator=gen),
        train_mask=masks == 0, val_mask=masks == 1, test_mask=masks == 2,
    )  # fmt: skip


def test_from_pyg_matches_the_data():
    data = make_data()
    ds = gp.datasets.from_pyg(data)
    g = ds.graph
    # Edge at CSC position e is column original_edge_ids[e] of edge_index.
    columns = g.map_edge_ids(torch.arange(g.total_num_edges))
    assert torch.equal(g.edge_index(), data.edge_index[:, columns])
    assert sorted(columns.tolist()) == list(range(data.num_edges))
    ids = torch.arange(data.num_nodes)
    assert torch.equal(ds.features["feat"].read(ids), data.x)
    assert torch.equal(ds.features["year"].read(ids), data.year)
    assert torch.equal(ds.features["edge", "edge_attr"].read(columns), data.edge_attr[columns])
    assert set(ds.features.node_keys) == {"feat", "year", "y", "train_mask", "val_mask", "test_mask"} and ds.features.edge_keys == ["edge_attr"]
    assert torch.equal(ds.features["y"].read(ids), data.y)  # NeighborLoader's y: every node's label
    assert torch.equal(ds.labels, data.y) and ds.num_classes == int(data.y.max()) + 1
    for item_set, mask in ((ds.train_set, data.train_mask), (ds.validation_set, data.val_mask), (ds.test_set, data.test_mask)):
        seeds = torch.nonzero(mask).view(-1)
        assert torch.equal(item_set.field("seeds"), seeds)
        assert torch.equal(item_set.field("labels"), data.y[seeds])


def test_from_pyg_labels_of_every_batch_node_as_neighborloader_y():
    pytest.importorskip("torch_geometric")
    data = make_data()
    ds = gp.datasets.from_pyg(data)
    pipe = gp.ItemSampler(ds.train_set, 4).sample_neighbor(ds.graph, [2, 2], layout="pyg").fetch_feature(ds.features, ["feat", "y"])
    batch = next(iter(pipe)).to_pyg()
    assert batch.y.shape[0] == batch.num_nodes > batch.batch_size
    assert torch.equal(batch.y, data.y[batch.n_id]) and torch.equal(batch.x, data.x[batch.n_id])


def test_from_pyg_trains_through_a_pipe():
    data = make_data()
    ds = gp.datasets.from_pyg(data)
    pipe = gp.ItemSampler(ds.train_set, batch_size=8).sample_neighbor(ds.graph, [3, 3]).fetch_feature(ds.features, ["feat"])
    for mb in pipe:
        assert torch.equal(mb.node_features["feat"], data.x[mb.input_nodes])
        assert torch.equal(mb.labels, data.y[mb.seeds])


def test_from_pyg_without_labels_or_masks():
    data = pyg_data.Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=4)
    with pytest.warns(UserWarning, match=r"no `train_mask`, `val_mask`, `test_mask` \(or an empty one\): the dataset's "
                                         r"train_set, validation_set, test_set are None"):  # fmt: skip
        ds = gp.datasets.from_pyg(data)
    assert ds.graph.total_num_nodes == 4 and ds.labels is None and ds.train_set is None and ds.num_classes is None
    assert "train=None" in repr(ds)


def test_from_pyg_errors():
    with pytest.raises(TypeError, match="torch_geometric.data.Data"):
        gp.datasets.from_pyg({"edge_index": torch.zeros(2, 0)})
    data = make_data()
    data.train_mask = torch.stack([data.train_mask, data.train_mask], 1)
    with pytest.raises(ValueError, match="train_mask"):
        gp.datasets.from_pyg(data)
    with pytest.raises(ValueError, match="the HeteroData has no edge types"):
        gp.datasets.from_pyg(pyg_data.HeteroData())


def test_from_pyg_x_with_fewer_rows_is_refused_and_more_rows_kept():
    data = pyg_data.Data(x=torch.randn(50, 5), edge_index=torch.tensor([[0, 1], [1, 59]]), num_nodes=60)
    assert not data.is_node_attr("x")  # PyG no longer calls it node-level: it was dropped unseen
    with pytest.raises(ValueError, match=r"from_pyg: node feature `x` has shape \(50, 5\), expected one row per node \(60 nodes"):
        gp.datasets.from_pyg(data)
    data = make_data()
    data.num_nodes = 40  # x has 50 rows: padding
    data.y, data.year = data.y[:40], data.year[:40]
    data.train_mask, data.val_mask, data.test_mask = data.train_mask[:40], data.val_mask[:40], data.test_mask[:40]
    data.edge_index = data.edge_index % 40
    ds = gp.datasets.from_pyg(data)
    assert ds.features["feat"].num_rows == 50 and torch.equal(ds.features["feat"].read(torch.arange(50)), data.x)
    assert ds.graph.total_num_nodes == 40


@pytest.mark.parametrize("typed", [False, True])
def test_from_pyg_tensors_it_cannot_place_are_named_not_dropped_or_overwritten(typed):
    """A tensor PyG counts neither node- nor edge-level was dropped unseen, and a `feat`
    beside `x` silently replaced it (x is stored as 'feat')."""
    flat = make_data()
    if typed:
        data = pyg_data.HeteroData()
        data["paper"].x, data["paper", "cites", "paper"].edge_index = flat.x, flat.edge_index
        node, edge = data["paper"], data["paper", "cites", "paper"]
    else:
        data = node = edge = flat
    node.time, edge.edge_attr = torch.arange(51), torch.randn(299, 2)  # one row too many, one too few
    with pytest.warns(UserWarning, match=r"skipped .*`time` \(51 rows\).*PyG reads a tensor as node- or edge-level by its rows"):
        gp.datasets.from_pyg(data)
    with pytest.warns(UserWarning, match=r"skipped .*`edge_attr` \(299 rows\)"):
        gp.datasets.from_pyg(data)
    del node.time, edge.edge_attr
    node.feat = torch.randn(50, 2)
    with pytest.raises(ValueError, match=r"has both `x` and `feat`; `x` is stored as node feature 'feat': rename `feat`"):
        gp.datasets.from_pyg(data)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("columns", [300, 50])  # as many as the edges, or as the nodes
def test_from_pyg_skips_column_wise_index_tensors(typed, columns):
    """Found in review: ``edge_label_index`` ([2, L], a column per pair: PyG's cat dim -1)
    was stored as a 2-row edge feature when L was the edge count (reading edges 0 and 1 gave
    its rows) and refused the whole Data when L was the node count."""
    flat = make_data()
    if typed:
        data = pyg_data.HeteroData()
        data["paper"].x, data["paper", "cites", "paper"].edge_index = flat.x, flat.edge_index
        edge = data["paper", "cites", "paper"]
    else:
        data = edge = flat
    edge.edge_label_index = torch.randint(0, 50, (2, columns))
    with pytest.warns(UserWarning, match=r"skipped `edge_label_index`: PyG lays index tensors out a column per item"):
        ds = gp.datasets.from_pyg(data)
    assert not [key for key in ds.features.keys() if "edge_label_index" in key]


def test_from_pyg_refuses_edge_tensors_that_adj_t_no_longer_matches():
    """T.ToSparseTensor() merges parallel edges but keeps their edge_attr rows: rows
    were read for the wrong edges."""
    T = pytest.importorskip("torch_geometric.transforms")
    data = pyg_data.Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 0, 1, 2], [1, 1, 2, 0]]),
                         edge_attr=torch.tensor([[10.0], [11.0], [12.0], [13.0]]))  # fmt: skip
    with pytest.raises(ValueError, match=r"`edge_attr` has 4 rows for the 3 edges of `adj_t` \(T.ToSparseTensor\(\) merged"):
        gp.datasets.from_pyg(T.ToSparseTensor()(data.clone()))
    data.edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    data.edge_attr = data.edge_attr[:3]
    sparse = gp.datasets.from_pyg(T.ToSparseTensor()(data.clone()))  # no parallel edges: rows match edges
    src, dst = sparse.graph.edge_index()
    edge_ids = sparse.graph.original_edge_ids
    rows = sparse.features.read("edge", None, "edge_attr", torch.arange(3) if edge_ids is None else edge_ids.long())
    assert sorted(zip(src.tolist(), dst.tolist(), rows.view(-1).tolist())) == [(0, 1, 10.0), (1, 2, 11.0), (2, 0, 12.0)]


def test_from_pyg_labels_and_masks_of_the_wrong_length_are_refused():
    data = make_data()
    data.y = data.y[:45]  # PyG no longer calls it node-level: it was dropped, labels None
    with pytest.raises(ValueError, match=r"labels `y` must be \[num_nodes\] \(or \[num_nodes, 1\]\) or, multi-label, "
                                         r"\[num_nodes, k\] with num_nodes=50, got shape \(45,\)"):  # fmt: skip
        gp.datasets.from_pyg(data)
    data = make_data()
    data.y = torch.zeros(50, 2, 2)
    with pytest.raises(ValueError, match=r"labels `y` must be .*\[num_nodes, k\] with num_nodes=50, got shape \(50, 2, 2\)"):
        gp.datasets.from_pyg(data)
    data = make_data()
    data.val_mask = data.val_mask[:45]
    with pytest.raises(ValueError, match=r"`val_mask` must be a \[num_nodes\] bool tensor with num_nodes=50"):
        gp.datasets.from_pyg(data)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])  # PPI's float y, ogbn-proteins' int64 y
def test_from_pyg_multi_label_y_reaches_the_batch_labels(typed, dtype):
    data = make_hetero() if typed else make_data()
    store = data["paper"] if typed else data
    y = torch.randint(0, 2, (store.num_nodes, 5), generator=torch.Generator().manual_seed(1)).to(dtype)
    store.y = y
    ds = gp.datasets.from_pyg(data)
    assert torch.equal(ds.labels["paper"] if typed else ds.labels, y) and ds.num_classes == 5  # PyG's num_classes
    train_set = ds.train_set.item_sets["paper"] if typed else ds.train_set
    assert torch.equal(train_set.field("labels"), y[torch.nonzero(store.train_mask).view(-1)])
    seen = 0
    for mb in gp.ItemSampler(ds.train_set, 4).sample_neighbor(ds.graph, [2, 2], layout="pyg"):
        seeds, labels = (mb.seeds["paper"], mb.labels["paper"]) if typed else (mb.seeds, mb.labels)
        assert torch.equal(labels, y[seeds])
        batch = mb.to_pyg()
        assert torch.equal(batch["paper"].y if typed else batch.y, y[seeds])  # the seeds' rows, as to_pyg's y
        seen += seeds.numel()
    assert seen == int(store.train_mask.sum())


def test_from_pyg_hetero_x_with_fewer_rows_names_the_type():
    data = pyg_data.HeteroData()
    data["paper"].x = torch.randn(5, 2)
    data["paper"].num_nodes = 8
    data["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1], [1, 7]])
    with pytest.raises(ValueError, match=r"node feature `x` of node type 'paper' has shape \(5, 2\), expected one row per node \(8 nodes"):
        gp.datasets.from_pyg(data)


def test_from_pyg_says_which_splits_are_missing():
    data = make_data()
    del data.test_mask
    with pytest.warns(UserWarning, match=r"from_pyg: no `test_mask` \(or an empty one\): the dataset's test_set is None\. "
                                         r"To train, make an item set"):  # fmt: skip
        ds = gp.datasets.from_pyg(data)
    assert ds.test_set is None and ds.train_set is not None


# ---------------------------------------------------------------- HeteroData
WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")


def make_hetero(seed=0):
    gen = torch.Generator().manual_seed(seed)
    data = pyg_data.HeteroData()
    data["paper"].x = torch.randn(30, 4, generator=gen)
    data["paper"].y = torch.randint(0, 3, (30,), generator=gen)
    data["paper"].year = torch.randint(2000, 2020, (30,), generator=gen)
    split = torch.randint(0, 4, (30,), generator=gen)
    data["paper"].train_mask, data["paper"].val_mask, data["paper"].test_mask = split == 0, split == 1, split == 2
    data["author"].x = torch.randn(20, 3, generator=gen)
    data["author"].train_mask = torch.ones(20, dtype=torch.bool)  # unlabelled: not a training type
    data[WRITES].edge_index = torch.stack(
        [torch.randint(0, 20, (50,), generator=gen), torch.randint(0, 30, (50,), generator=gen)]
    )
    data[WRITES].edge_attr = torch.randn(50, 2, generator=gen)
    data[CITES].edge_index = torch.randint(0, 30, (2, 70), generator=gen)
    return data


def test_from_pyg_hetero_keeps_the_typed_graph_features_and_splits():
    data = make_hetero()
    # an unlabelled type's masks make no item set: said (the split warning alone said "no mask")
    with pytest.warns(UserWarning, match=r"masks of node types without labels \('y'\) are not used: author \(train\); the item sets cover the labelled types \['paper'\]"):
        ds = gp.datasets.from_pyg(data)
    graph = ds.graph
    assert graph.is_heterogeneous and graph.num_nodes_per_type == {"author": 20, "paper": 30}
    assert graph.edge_types == ["author:writes:paper", "paper:cites:paper"]
    # Every CSC position of edge type t is the source's edge original_edge_ids[e] of that type.
    for etype, (src, dst, eids) in typed_edges(graph).items():
        edge_index = data[tuple(etype.split(":"))].edge_index
        assert sorted(eids.tolist()) == list(range(edge_index.size(1)))
        assert torch.equal(src, edge_index[0, eids])
        assert torch.equal(dst, edge_index[1, eids])
    store = ds.features
    assert torch.equal(store["node", "paper", "feat"].data, data["paper"].x)
    assert torch.equal(store["node", "author", "feat"].data, data["author"].x)
    assert torch.equal(store["node", "paper", "year"].data, data["paper"].year)
    assert torch.equal(store["edge", WRITES, "edge_attr"].data, data[WRITES].edge_attr)
    assert torch.equal(store["node", "paper", "y"].data, data["paper"].y)  # every node's label, as NeighborLoader's y
    assert torch.equal(store["node", "paper", "train_mask"].data, data["paper"].train_mask)  # kept, as PyG's
    assert set(ds.labels) == {"paper"} and torch.equal(ds.labels["paper"], data["paper"].y)
    assert ds.num_classes == int(data["paper"].y.max()) + 1
    for item_set, mask in ((ds.train_set, "train_mask"), (ds.validation_set, "val_mask"), (ds.test_set, "test_mask")):
        assert isinstance(item_set, HeteroItemSet) and list(item_set.item_sets) == ["paper"]
        seeds, labels, input_id = item_set.item_sets["paper"][torch.arange(len(item_set))]
        assert torch.equal(seeds, torch.nonzero(data["paper"][mask]).view(-1))
        assert torch.equal(labels, data["paper"].y[seeds])
        assert torch.equal(input_id, seeds)  # PyG's input_id of a mask: the node ids
    assert "feature_dim={'author': 3, 'paper': 4}" in repr(ds)


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_sampling_and_fetching_a_converted_hetero_dataset(layout):
    data = make_hetero()
    ds = gp.datasets.from_pyg(data)
    pipe = gp.ItemSampler(ds.train_set, batch_size=6, shuffle=True, seed=0)
    pipe = pipe.sample_neighbor(ds.graph, [3, 2], seed=1, layout=layout).fetch_feature(
        ds.features,
        node_feature_keys={"paper": ["feat"], "author": ["feat"]},
        edge_feature_keys={WRITES: ["edge_attr"]},
    )
    seen = 0
    for mb in pipe:
        assert torch.equal(mb.labels["paper"], data["paper"].y[mb.seeds["paper"]])
        for ntype in ("paper", "author"):
            assert torch.equal(mb.node_features[ntype, "feat"], data[ntype].x[mb.input_nodes[ntype]])
        for layer, subgraph in zip(mb.edge_features, mb.sampled_subgraphs):
            eids = subgraph.original_edge_ids["author:writes:paper"]
            assert torch.equal(layer["author:writes:paper", "edge_attr"], data[WRITES].edge_attr[eids])
            # The sampled edges are the source's edges: same endpoints.
            csc = subgraph.sampled_csc["author:writes:paper"]
            sources = subgraph.original_row_node_ids["author"][csc.indices]
            targets = subgraph.original_column_node_ids["paper"][
                torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
            ]
            assert torch.equal(data[WRITES].edge_index[0, eids], sources)
            assert torch.equal(data[WRITES].edge_index[1, eids], targets)
        seen += mb.seeds["paper"].numel()
    assert seen == len(ds.train_set)


def test_unlabelled_hetero_data_splits_over_the_masked_types():
    data = make_hetero()
    del data["paper"].y
    ds = gp.datasets.from_pyg(data)
    assert ds.labels is None and ds.num_classes is None
    assert list(ds.train_set.item_sets) == ["author", "paper"] and ds.train_set.names == ("seeds", "input_id")
    assert list(ds.validation_set.item_sets) == ["paper"]


def test_hetero_errors_name_the_node_type():
    data = make_hetero()
    data["paper"].y = torch.zeros(30, 2, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"labels `y` of node type 'paper' must be \[num_nodes\] \(or \[num_nodes, 1\]\) "
                       r"or, multi-label, \[num_nodes, k\] with num_nodes=30, got shape \(30, 2, 2\)"):
        gp.datasets.from_pyg(data)
    data = make_hetero()
    data["author"].val_mask = torch.zeros(20, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"`val_mask` of node type 'author' must be a \[num_nodes\] bool tensor"):
        gp.datasets.from_pyg(data)
    with pytest.raises(ValueError, match=r"the HeteroData has no edge types"):
        gp.datasets.from_pyg(pyg_data.HeteroData())
