"""PyG's NeighborLoader tests on ``HeteroData`` and of ``input_id``
(``test/loader/test_neighbor_loader.py``: hetero basic, karate, sampled info, weighted,
input id), run against graphpipe through ``hetero_neighbor_loader`` (``to_pyg()`` of typed
``layout="pyg"`` batches). Upstream's assertions are kept; upstream's check that every
edge type was given the same number of hops does not apply (graphpipe takes a fanout per
layer).
"""

import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData  # noqa: E402
from torch_geometric.nn import GraphConv, to_hetero  # noqa: E402

import graphpipe as gp  # noqa: E402
from neighbor_loader_like import hetero_neighbor_loader, is_subset  # noqa: E402
from test_neighbor_loader_contract import get_random_edge_index  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_hetero_neighbor_loader_basic(dtype):
    torch.manual_seed(12345)
    data = HeteroData()
    data["paper"].x = torch.arange(100)
    data["author"].x = torch.arange(100, 300)
    data["paper", "paper"].edge_index = get_random_edge_index(100, 100, 500, dtype)
    data["paper", "paper"].edge_attr = torch.arange(500)
    data["paper", "author"].edge_index = get_random_edge_index(100, 200, 1000, dtype)
    data["paper", "author"].edge_attr = torch.arange(500, 1500)
    data["author", "paper"].edge_index = get_random_edge_index(200, 100, 1000, dtype)
    data["author", "paper"].edge_attr = torch.arange(1500, 2500)

    batch_size = 20
    loader = hetero_neighbor_loader(data, num_neighbors=[10] * 2, batch_size=batch_size, input_nodes="paper")
    assert len(loader) == (100 + batch_size - 1) // batch_size

    # edge type -> (edge_attr range, x offset of the source type, of the destination type)
    ranges = {
        ("paper", "to", "paper"): (0, 500, 0, 0),
        ("paper", "to", "author"): (500, 1500, 0, 100),
        ("author", "to", "paper"): (1500, 2500, 100, 0),
    }
    for batch in loader:
        assert isinstance(batch, HeteroData)
        assert batch.input_type == "paper"
        assert set(batch.node_types) == {"paper", "author"}
        assert batch["paper"].n_id.size() == (batch["paper"].num_nodes,)
        assert batch["paper"].x.size(0) <= 100
        assert batch["paper"].input_id.numel() == batch_size
        assert batch["paper"].batch_size == batch_size
        assert batch["paper"].x.min() >= 0 and batch["paper"].x.max() < 100
        assert batch["author"].n_id.size() == (batch["author"].num_nodes,)
        assert batch["author"].x.size(0) <= 200
        assert batch["author"].x.min() >= 100 and batch["author"].x.max() < 300
        assert set(batch.edge_types) == set(ranges)
        for edge_type, (low, high, src_offset, dst_offset) in ranges.items():
            src, _, dst = edge_type
            row, col = batch[edge_type].edge_index
            assert row.min() >= 0 and row.max() < batch[src].num_nodes
            assert col.min() >= 0 and col.max() < batch[dst].num_nodes
            assert batch[edge_type].e_id.size() == (row.numel(),)
            value = batch[edge_type].edge_attr
            assert value.min() >= low and value.max() < high
            assert is_subset(
                batch[edge_type].edge_index.to(torch.int64),
                data[edge_type].edge_index.to(torch.int64),
                batch[src].x - src_offset,
                batch[dst].x - dst_offset,
            )
        assert not batch.has_isolated_nodes()


def test_hetero_neighbor_loader_on_karate():
    """Upstream uses PyG's KarateClub; graphpipe's built-in copy of the same graph here."""
    karate = gp.datasets.karate_club()
    data = Data(x=torch.eye(34), edge_index=karate.graph.edge_index())
    hetero = HeteroData()
    hetero["v"].x = data.x
    hetero["v", "v"].edge_index = data.edge_index

    split_idx = torch.arange(5, 8)
    loader = hetero_neighbor_loader(hetero, num_neighbors=[-1, -1], batch_size=split_idx.numel(), input_nodes=("v", split_idx))
    assert len(loader) == 1
    hetero_batch = next(iter(loader))
    batch_size = hetero_batch["v"].batch_size

    class GNN(torch.nn.Module):
        def __init__(self, in_channels, hidden_channels, out_channels):
            super().__init__()
            self.conv1 = GraphConv(in_channels, hidden_channels)
            self.conv2 = GraphConv(hidden_channels, out_channels)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    model = GNN(34, 16, 4)
    hetero_model = to_hetero(model, hetero.metadata())
    out1 = model(data.x, data.edge_index)[split_idx]
    out2 = hetero_model(hetero_batch.x_dict, hetero_batch.edge_index_dict)["v"][:batch_size]
    assert torch.allclose(out1, out2, atol=1e-6)


def test_hetero_neighbor_loader_sampled_info():
    edge_index = torch.tensor([[2, 3, 4, 5, 7, 7, 10, 11, 12, 13], [0, 1, 2, 3, 2, 3, 7, 7, 7, 7]])
    data = HeteroData()
    data["paper"].num_nodes = data["author"].num_nodes = 14
    data["paper", "paper"].edge_index = edge_index
    data["paper", "author"].edge_index = edge_index
    data["author", "paper"].edge_index = edge_index

    loader = hetero_neighbor_loader(data, num_neighbors=[1, 2, 4], batch_size=2, input_nodes="paper", shuffle=False)
    batch = next(iter(loader))

    expected_nodes = {"paper": [2, 2, 3, 4], "author": [0, 2, 3, 4]}
    expected_edges = {
        ("paper", "to", "paper"): [2, 4, 4],
        ("paper", "to", "author"): [0, 4, 4],
        ("author", "to", "paper"): [2, 4, 4],
    }
    for node_type in batch.node_types:
        assert batch[node_type].num_sampled_nodes == expected_nodes[node_type]
    for edge_type in batch.edge_types:
        assert batch[edge_type].num_sampled_edges == expected_edges[edge_type]


def test_weighted_hetero_neighbor_loader():
    """Upstream's HeteroData with ``weight_attr``; here the typed graph's edge weights."""
    edge_index = torch.tensor([[1, 3, 0, 4], [2, 2, 1, 3]])
    edge_weight = torch.tensor([0.0, 1.0, 0.0, 1.0])
    graph = gp.CSCGraph.from_hetero_edges(
        {"paper:to:paper": edge_index}, {"paper": 5}, edge_attributes={"edge_weight": {"paper:to:paper": edge_weight}}
    )
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.tensor([2]), names="seeds")})
    batches = list(gp.ItemSampler(items, 1).sample_neighbor(graph, [1, 1], weights="edge_weight", layout="pyg"))
    assert len(batches) == 1
    batch = batches[0].to_pyg()

    assert batch["paper"].num_nodes == 3
    assert batch["paper"].n_id.tolist() == [2, 3, 4]
    assert batch["paper", "paper"].num_edges == 2
    global_edge_index = batch["paper"].n_id[batch["paper", "paper"].edge_index]
    assert global_edge_index.tolist() == [[3, 4], [2, 3]]


def test_neighbor_loader_input_id():
    """A boolean mask's ``input_id`` is the node id (PyG's ``get_input_nodes``)."""
    torch.manual_seed(0)
    data = HeteroData()
    data["a"].num_nodes = 10
    data["b"].num_nodes = 12
    row, col = torch.randint(0, 10, (40,)), torch.randint(0, 12, (40,))
    data["a", "b"].edge_index = torch.stack([row, col])
    data["b", "a"].edge_index = torch.stack([col, row])
    mask = torch.ones(10, dtype=torch.bool)
    mask[0] = False

    loader = hetero_neighbor_loader(data, input_nodes=("a", mask), batch_size=2, num_neighbors=[2, 2])
    for i, batch in enumerate(loader):
        if i < 4:
            assert batch["a"].input_id.tolist() == [2 * i + 1, 2 * i + 2]
        else:
            assert batch["a"].input_id.tolist() == [2 * i + 1]


def test_input_id_of_from_pyg_mask_splits_is_the_node_id():
    """The README's route (``from_pyg`` splits for ``input_nodes=train_mask``) gives PyG's
    ``input_id``; an ItemSet of ids gives positions, as PyG's for an index tensor."""
    torch.manual_seed(0)
    data = Data(x=torch.randn(10, 3), edge_index=torch.randint(0, 10, (2, 40)), y=torch.arange(10))
    data.train_mask = torch.arange(10) % 3 != 0
    data.val_mask = data.test_mask = torch.arange(10) % 3 == 0
    del data.y
    dataset = gp.datasets.from_pyg(data)
    for split, item_set in (("train", dataset.train_set), ("val", dataset.validation_set)):
        pipe = gp.ItemSampler(item_set, 2, shuffle=True, seed=1).sample_neighbor(dataset.graph, [2, 2], layout="pyg")
        seen = []
        for minibatch in pipe:
            batch = minibatch.to_pyg()
            assert batch.input_id.dtype == torch.int64
            assert torch.equal(batch.input_id, batch.n_id[: batch.batch_size])
            seen += batch.input_id.tolist()
        assert sorted(seen) == data[f"{split}_mask"].nonzero().flatten().tolist()
    positions = gp.ItemSampler(gp.ItemSet(torch.tensor([7, 3, 5]), names="seeds"), 3).sample_neighbor(dataset.graph, [2])
    assert next(iter(positions)).to_pyg().input_id.tolist() == [0, 1, 2]
