"""from_pyg: the dataset equals the PyG Data it came from (from_dgl: tests/interop)."""

import pytest
import torch

import graphpipe as gp

pyg_data = pytest.importorskip("torch_geometric.data")


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
    columns = g.map_edge_ids(torch.arange(g.num_edges))
    assert torch.equal(g.edge_index(), data.edge_index[:, columns])
    assert sorted(columns.tolist()) == list(range(data.num_edges))
    ids = torch.arange(data.num_nodes)
    assert torch.equal(ds.features["feat"].read(ids), data.x)
    assert torch.equal(ds.features["year"].read(ids), data.year)
    assert torch.equal(ds.features["edge", "edge_attr"].read(columns), data.edge_attr[columns])
    assert set(ds.features.node_keys) == {"feat", "year"} and ds.features.edge_keys == ["edge_attr"]
    assert torch.equal(ds.labels, data.y) and ds.num_classes == int(data.y.max()) + 1
    for item_set, mask in ((ds.train_set, data.train_mask), (ds.validation_set, data.val_mask), (ds.test_set, data.test_mask)):
        seeds = torch.nonzero(mask).view(-1)
        assert torch.equal(item_set.field("seeds"), seeds)
        assert torch.equal(item_set.field("labels"), data.y[seeds])


def test_from_pyg_trains_through_a_pipe():
    data = make_data()
    ds = gp.datasets.from_pyg(data)
    pipe = gp.ItemSampler(ds.train_set, batch_size=8).sample_neighbor(ds.graph, [3, 3]).fetch_feature(ds.features, ["feat"])
    for mb in pipe:
        assert torch.equal(mb.node_features["feat"], data.x[mb.input_nodes])
        assert torch.equal(mb.labels, data.y[mb.seeds])


def test_from_pyg_without_labels_or_masks():
    data = pyg_data.Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=4)
    ds = gp.datasets.from_pyg(data)
    assert ds.graph.num_nodes == 4 and ds.labels is None and ds.train_set is None and ds.num_classes is None
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
