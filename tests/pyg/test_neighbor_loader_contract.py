"""PyG's NeighborLoader tests (``test/loader/test_neighbor_loader.py``, homogeneous
cases, and ``test/utils/test_trim_to_layer.py``), run against graphpipe.

Each test builds what upstream builds and swaps ``NeighborLoader(...)`` for
``neighbor_loader(...)`` (graphpipe with the same arguments, see
``neighbor_loader_like``), once sampling in PyG's layout and once in GraphBolt's block
layout converted by ``to_pyg()``. Upstream's assertions are kept; where upstream cannot
check a property without pyg-lib (edge ids, per-hop counts) it is checked here too.
Ported elsewhere: heterogeneous cases and ``input_id``
(``test_hetero_neighbor_loader_upstream.py``), temporal ones (``test_temporal_loaders.py``).
Not ported: ``subgraph_type`` bidirectional/induced, custom feature/graph stores and
CPU-affinity cases (graphpipe has none of these).
"""

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data
from torch_geometric.nn import GraphConv
from torch_geometric.utils import k_hop_subgraph, to_undirected, trim_to_layer

import graphpipe as gp

from neighbor_loader_like import LAYOUTS, hop_ranges, is_subset, neighbor_loader


def get_random_edge_index(num_src_nodes, num_dst_nodes, num_edges, dtype=torch.int64):
    row = torch.randint(num_src_nodes, (num_edges,), dtype=dtype)
    col = torch.randint(num_dst_nodes, (num_edges,), dtype=dtype)
    return torch.stack([row, col], dim=0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_homo_neighbor_loader_basic(layout, dtype):
    torch.manual_seed(12345)
    data = Data()
    data.x = torch.arange(100)
    data.edge_index = get_random_edge_index(100, 100, 500, dtype)
    data.edge_attr = torch.arange(500)

    loader = neighbor_loader(data, num_neighbors=[5] * 2, batch_size=20, layout=layout)
    assert len(loader) == 5

    for epoch in range(2):  # a loader serves every epoch
        batches = list(loader)
        assert len(batches) == 5
        for i, batch in enumerate(batches):
            assert isinstance(batch, Data)
            assert batch.x.size(0) <= 100
            assert batch.n_id.size() == (batch.num_nodes,)
            assert batch.batch_size == 20
            assert batch.x.min() >= 0 and batch.x.max() < 100
            assert batch.edge_index.min() >= 0
            assert batch.edge_index.max() < batch.num_nodes
            assert batch.edge_attr.size(0) == batch.edge_index.size(1)
            # Input nodes are always sampled first:
            assert torch.equal(batch.x[: batch.batch_size], torch.arange(i * batch.batch_size, (i + 1) * batch.batch_size))
            assert batch.e_id.size() == (batch.num_edges,)
            assert batch.edge_attr.min() >= 0
            assert batch.edge_attr.max() < 500
            assert is_subset(batch.edge_index.to(torch.int64), data.edge_index.to(torch.int64), batch.x, batch.x)
            # Beyond upstream: edge_attr is the attribute of edge e_id, which is that very edge.
            assert torch.equal(batch.edge_attr, batch.e_id)
            assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id].to(torch.int64))
            assert len(batch.num_sampled_nodes) == 3 and sum(batch.num_sampled_nodes) == batch.num_nodes
            assert len(batch.num_sampled_edges) == 2 and sum(batch.num_sampled_edges) == batch.num_edges


@pytest.mark.parametrize("layout", LAYOUTS)
def test_homo_neighbor_loader_on_karate(layout):
    """Upstream uses PyG's KarateClub; graphpipe's built-in copy of the same graph is
    used here, with a random edge order and random edge weights."""
    karate = gp.datasets.karate_club()
    src, dst = karate.graph.edge_index()
    mask = src < dst
    edge_index = torch.stack([src[mask], dst[mask]])
    edge_weight = torch.rand(edge_index.size(1))
    edge_index, edge_weight = to_undirected(edge_index, edge_weight)
    perm = torch.randperm(edge_index.size(1))  # the user's order is not the CSC order
    data = Data(x=karate.features["feat"].data, edge_index=edge_index[:, perm], edge_attr=edge_weight[perm])

    split_idx = torch.arange(5, 8)
    loader = neighbor_loader(data, num_neighbors=[-1, -1], batch_size=split_idx.numel(), input_nodes=split_idx, layout=layout)
    assert len(loader) == 1
    batch = next(iter(loader))
    batch_size = batch.batch_size

    # Beyond upstream (its `directed` variant): the 2-hop in-neighbourhood and the in-edges
    # of the nodes within 1 hop.
    n_id, _, _, e_mask = k_hop_subgraph(split_idx, num_hops=2, edge_index=data.edge_index, num_nodes=data.num_nodes, directed=True)
    assert n_id.sort()[0].tolist() == batch.n_id.sort()[0].tolist()
    assert batch.e_id.sort()[0].tolist() == e_mask.nonzero().flatten().tolist()

    class GNN(torch.nn.Module):
        def __init__(self, in_channels, hidden_channels, out_channels):
            super().__init__()
            self.conv1 = GraphConv(in_channels, hidden_channels)
            self.conv2 = GraphConv(hidden_channels, out_channels)

        def forward(self, x, edge_index, edge_weight):
            x = self.conv1(x, edge_index, edge_weight).relu()
            x = self.conv2(x, edge_index, edge_weight)
            return x

    model = GNN(34, 16, 2)
    out1 = model(data.x, data.edge_index, data.edge_attr)[split_idx]
    out2 = model(batch.x, batch.edge_index, batch.edge_attr)[:batch_size]
    assert torch.allclose(out1, out2, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_homo_neighbor_loader_sampled_info(layout):
    edge_index = torch.tensor([
        [2, 3, 4, 5, 7, 7, 10, 11, 12, 13],
        [0, 1, 2, 3, 2, 3, 7, 7, 7, 7],
    ])  # fmt: skip
    data = Data(edge_index=edge_index, num_nodes=14)
    loader = neighbor_loader(data, num_neighbors=[1, 2, 4], batch_size=2, shuffle=False, layout=layout)
    batch = next(iter(loader))
    assert batch.num_sampled_nodes == [2, 2, 3, 4]
    assert batch.num_sampled_edges == [2, 4, 4]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_neighbor_loader_mapping(layout):
    edge_index = torch.tensor([
        [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 5],
        [1, 2, 3, 4, 5, 8, 6, 7, 9, 10, 6, 11],
    ])  # fmt: skip
    data = Data(edge_index=edge_index, num_nodes=12)
    loader = neighbor_loader(data, num_neighbors=[1], batch_size=2, shuffle=True, layout=layout)
    for batch in loader:
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_weighted_homo_neighbor_loader(layout):
    edge_index = torch.tensor([
        [1, 3, 0, 4],
        [2, 2, 1, 3],
    ])  # fmt: skip
    edge_weight = torch.tensor([0.0, 1.0, 0.0, 1.0])
    data = Data(num_nodes=5, edge_index=edge_index, edge_weight=edge_weight)
    loader = neighbor_loader(
        data, input_nodes=torch.tensor([2]), num_neighbors=[1] * 2, batch_size=1, weight_attr="edge_weight", layout=layout
    )
    assert len(loader) == 1
    batch = next(iter(loader))
    assert batch.num_nodes == 3
    assert batch.n_id.tolist() == [2, 3, 4]
    assert batch.num_edges == 2
    assert batch.n_id[batch.edge_index].tolist() == [[3, 4], [2, 3]]
    assert batch.e_id.tolist() == [1, 3]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_memmap_neighbor_loader(tmp_path, layout):
    path = str(tmp_path / "x.npy")
    x = np.memmap(path, dtype=np.float32, mode="w+", shape=(100, 32))
    x[:] = np.random.randn(100, 32)
    data = Data()
    data.x = np.memmap(path, dtype=np.float32, mode="r", shape=(100, 32))
    data.edge_index = get_random_edge_index(100, 100, 500)
    assert data.num_nodes == 100

    loader = neighbor_loader(data, num_neighbors=[5] * 2, batch_size=20, layout=layout)
    batch = next(iter(loader))
    assert batch.num_nodes <= 100
    assert isinstance(batch.x, torch.Tensor)
    assert batch.x.size() == (batch.num_nodes, 32)
    assert torch.equal(batch.x, torch.from_numpy(np.array(data.x))[batch.n_id])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_custom_neighbor_loader_node_labels(layout):
    """Upstream's test_custom_neighbor_loader: ``y`` is stored per node, so every batch
    carries one label per node (``y[:batch_size]`` the seeds')."""
    x = torch.arange(100, 300)
    y = torch.arange(100, 300)
    edge_index = get_random_edge_index(100, 100, 500)
    edge_index = edge_index[:, torch.randperm(edge_index.size(1))]
    data = Data(x=x, edge_index=edge_index, y=y, num_nodes=200)
    loader = neighbor_loader(data, batch_size=20, input_nodes=torch.arange(100), num_neighbors=[-1] * 2, layout=layout)
    assert len(loader) == 5
    for i, batch in enumerate(loader):
        assert batch.num_nodes == batch.x.size(0) == batch.y.size(0)
        assert torch.equal(batch.x, x[batch.n_id]) and torch.equal(batch.y, y[batch.n_id])
        assert torch.equal(batch.y[: batch.batch_size], torch.arange(100 + 20 * i, 120 + 20 * i))


class TrimmedGNN(torch.nn.Module):
    """PyG's test_trim_to_layer GNN: GraphConv layers, trimmed per layer when given the counts."""

    def __init__(self, num_layers):
        super().__init__()
        self.convs = torch.nn.ModuleList([GraphConv(16, 16) for _ in range(num_layers)])

    def forward(self, x, edge_index, edge_weight, num_sampled_nodes=None, num_sampled_edges=None):
        for i, conv in enumerate(self.convs):
            if num_sampled_nodes is not None:
                x, edge_index, edge_weight = trim_to_layer(i, num_sampled_nodes, num_sampled_edges, x, edge_index, edge_weight)
            x = conv(x, edge_index, edge_weight)
        return x


@pytest.mark.parametrize("layout", LAYOUTS)
def test_trim_to_layer_with_neighbor_loader(layout):
    x = torch.randn(14, 16)
    edge_index = torch.tensor([
        [2, 3, 4, 5, 7, 7, 10, 11, 12, 13],
        [0, 1, 2, 3, 2, 3, 7, 7, 7, 7],
    ])  # fmt: skip
    edge_weight = torch.rand(edge_index.size(1))
    data = Data(x=x, edge_index=edge_index, edge_weight=edge_weight)
    loader = neighbor_loader(data, num_neighbors=[1, 2, 4], batch_size=2, shuffle=False, layout=layout)
    batch = next(iter(loader))

    model = TrimmedGNN(num_layers=3)
    out1 = model(batch.x, batch.edge_index, batch.edge_weight)[:2]
    assert out1.size() == (2, 16)
    out2 = model(batch.x, batch.edge_index, batch.edge_weight, batch.num_sampled_nodes, batch.num_sampled_edges)[:2]
    assert out2.size() == (2, 16)
    assert torch.allclose(out1, out2, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_trim_to_layer_on_a_random_graph(layout):
    """Trimmed and untrimmed forward passes agree on larger sampled batches, and the
    full-neighbourhood batch reproduces the full-graph output of its seeds."""
    torch.manual_seed(3)
    data = Data(x=torch.randn(400, 16), edge_index=get_random_edge_index(400, 400, 3000), edge_weight=torch.rand(3000))
    model = TrimmedGNN(num_layers=3)
    for num_neighbors in ([4, 3, 2], [-1, -1, -1]):
        for batch in neighbor_loader(data, num_neighbors=num_neighbors, batch_size=32, shuffle=True, layout=layout):
            out1 = model(batch.x, batch.edge_index, batch.edge_weight)[: batch.batch_size]
            out2 = model(batch.x, batch.edge_index, batch.edge_weight, batch.num_sampled_nodes, batch.num_sampled_edges)
            assert torch.allclose(out1, out2[: batch.batch_size], atol=1e-5)
            if num_neighbors[0] == -1:
                full = model(data.x, data.edge_index, data.edge_weight)[batch.n_id[: batch.batch_size]]
                assert torch.allclose(out1, full, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_directed_subgraph_holds_only_sampled_edges(layout):
    """NeighborLoader's default (directional) subgraph: the edges sampled into each node
    at its first hop; neither every edge among the batch's nodes (induced) nor the
    in-edges a block layout re-samples for nodes reached earlier."""
    # e0: 1 -> 0, e1: 2 -> 1, e2: 2 -> 0, e3: 3 -> 1, e4: 3 -> 2, e5: 2 -> 3
    edge_index = torch.tensor([[1, 2, 2, 3, 3, 2], [0, 1, 0, 1, 2, 3]])
    data = Data(edge_index=edge_index, num_nodes=4)
    loader = neighbor_loader(data, num_neighbors=[-1, -1], batch_size=1, input_nodes=torch.tensor([0]), layout=layout)
    batch = next(iter(loader))
    assert batch.n_id.tolist() == [0, 1, 2, 3]
    assert batch.num_sampled_nodes == [1, 2, 1] and batch.num_sampled_edges == [2, 3]
    # e5 joins two of the batch's nodes, but 3 is first reached at the last hop.
    assert sorted(batch.e_id.tolist()) == [0, 1, 2, 3, 4]
    assert torch.equal(batch.n_id[batch.edge_index], edge_index[:, batch.e_id])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("num_neighbors", [[3, 2], [-1, 1]])
def test_replace_samples_fanout_draws_per_node(layout, num_neighbors):
    """``replace=True``: every node with in-edges gets exactly ``fanout`` draws (repeats
    allowed), ``-1`` still takes each in-edge once."""
    torch.manual_seed(0)
    data = Data(edge_index=get_random_edge_index(60, 60, 200), num_nodes=60)
    in_degree = torch.bincount(data.edge_index[1], minlength=60)
    for batch in neighbor_loader(data, num_neighbors=num_neighbors, batch_size=8, replace=True, layout=layout):
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])
        nodes, edges = hop_ranges(batch.num_sampled_nodes), hop_ranges(batch.num_sampled_edges)
        for hop, fanout in enumerate(num_neighbors):
            (first, end), (lo, hi) = nodes[hop], edges[hop]
            per_node = torch.bincount(batch.edge_index[1, lo:hi] - first, minlength=end - first)
            deg = in_degree[batch.n_id[first:end]]
            assert torch.equal(per_node, deg if fanout == -1 else torch.where(deg > 0, fanout, 0))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_isolated_seeds(layout):
    """Seeds without in-edges stay in the batch, first, with no edges; the hops after them are empty."""
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])  # 0 and 4 have no in-edges
    data = Data(edge_index=edge_index, num_nodes=5)
    batch = next(iter(neighbor_loader(data, num_neighbors=[2, 2], batch_size=2, input_nodes=torch.tensor([4, 0]), layout=layout)))
    assert batch.n_id.tolist() == [4, 0] and batch.batch_size == 2
    assert batch.edge_index.shape == (2, 0) and batch.e_id.numel() == 0
    assert batch.num_sampled_nodes == [2, 0, 0] and batch.num_sampled_edges == [0, 0]
    batch = next(iter(neighbor_loader(data, num_neighbors=[2, 2], batch_size=2, input_nodes=torch.tensor([0, 2]), layout=layout)))
    assert batch.n_id.tolist() == [0, 2, 1] and batch.num_sampled_nodes == [2, 1, 0]
    # 1 is in-neighbour of 2 (hop 1); 0 -> 1 is hop 2 (0 is known already)
    assert batch.num_sampled_edges == [1, 1] and batch.e_id.tolist() == [1, 0]
