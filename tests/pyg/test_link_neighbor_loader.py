"""PyG's LinkNeighborLoader tests (``test/loader/test_link_neighbor_loader.py``, homogeneous
cases), run against graphpipe.

Each test builds what upstream builds and swaps ``LinkNeighborLoader(...)`` for
``link_neighbor_loader(...)`` (graphpipe with the same arguments, see
``neighbor_loader_like``), sampling in PyG's layout and in GraphBolt's block layout
converted by ``to_pyg()``. Upstream's assertions are kept. Differences: negatives keep
their positive's source (GraphBolt's ``sample_uniform_negative``; PyG's binary mode draws
both ends), so the binary layout is checked, not the negatives' sources; graphpipe needs at
least one layer (upstream's ``num_neighbors=[]`` case uses ``[-1]`` on a graph without
edges). Not ported: heterogeneous, temporal, ``disjoint``, ``subgraph_type="bidirectional"``,
custom stores, and upstream's ``loader([indices])`` call on chosen edges.
"""

import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data

from neighbor_loader_like import LAYOUTS, link_neighbor_loader
from test_neighbor_loader_contract import TrimmedGNN, get_random_edge_index


def unique_edge_pairs(edge_index):
    return set(map(tuple, edge_index.t().tolist()))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("neg_sampling_ratio", [None, 1])
def test_homo_link_neighbor_loader_basic(layout, neg_sampling_ratio):
    torch.manual_seed(12345)
    pos_edge_index = get_random_edge_index(50, 50, 500)
    neg_edge_index = get_random_edge_index(50, 50, 500)
    neg_edge_index += 50

    input_edges = torch.cat([pos_edge_index, neg_edge_index], dim=-1)
    edge_label = torch.cat([torch.ones(500), torch.zeros(500)], dim=0)

    data = Data()
    data.edge_index = pos_edge_index
    data.x = torch.arange(100)
    data.edge_attr = torch.arange(500)

    loader = link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        batch_size=20,
        edge_label_index=input_edges,
        edge_label=edge_label if neg_sampling_ratio is None else None,
        neg_sampling_ratio=neg_sampling_ratio,
        shuffle=True,
        layout=layout,
    )
    assert len(loader) == 1000 / 20

    for batch in loader:
        assert isinstance(batch, Data)
        assert batch.n_id.size() == (batch.num_nodes,)
        assert batch.e_id.size() == (batch.num_edges,)
        assert batch.x.size(0) <= 100
        assert batch.x.min() >= 0 and batch.x.max() < 100
        assert batch.input_id.numel() == 20
        assert batch.edge_index.min() >= 0
        assert batch.edge_index.max() < batch.num_nodes
        assert batch.edge_attr.min() >= 0
        assert batch.edge_attr.max() < 500

        if neg_sampling_ratio is None:
            assert batch.edge_label_index.size(1) == 20

            # Assert positive samples are present in the original graph:
            edge_index = unique_edge_pairs(batch.edge_index)
            edge_label_index = batch.edge_label_index[:, batch.edge_label == 1]
            edge_label_index = unique_edge_pairs(edge_label_index)
            assert len(edge_index | edge_label_index) == len(edge_index)

            # Assert negative samples are not present in the original graph:
            edge_index = unique_edge_pairs(batch.edge_index)
            edge_label_index = batch.edge_label_index[:, batch.edge_label == 0]
            edge_label_index = unique_edge_pairs(edge_label_index)
            assert len(edge_index & edge_label_index) == 0
        else:
            assert batch.edge_label_index.size(1) == 40
            assert torch.all(batch.edge_label[:20] == 1)
            assert torch.all(batch.edge_label[20:] == 0)

        # Ensure local `edge_label_index` correctly maps to input edges.
        global_edge_label_index = batch.n_id[batch.edge_label_index]
        global_edge_label_index = global_edge_label_index[:, batch.edge_label >= 1]
        global_edge_label_index = unique_edge_pairs(global_edge_label_index)
        assert len(global_edge_label_index & unique_edge_pairs(input_edges)) == len(global_edge_label_index)

        # Beyond upstream: input_id names the positives, in order, and features follow n_id.
        assert torch.equal(batch.n_id[batch.edge_label_index[:, :20]], input_edges[:, batch.input_id])
        assert torch.equal(batch.x, data.x[batch.n_id]) and torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])
        assert batch.num_sampled_nodes[0] == batch.edge_label_index.unique().numel()


def test_link_neighbor_loader_edge_label():
    torch.manual_seed(12345)
    edge_index = get_random_edge_index(100, 100, 500)
    data = Data(edge_index=edge_index, x=torch.arange(100))

    loader = link_neighbor_loader(data, num_neighbors=[-1] * 2, batch_size=10, neg_sampling_ratio=1)
    for batch in loader:
        assert batch.edge_label.dtype == torch.float
        assert torch.all(batch.edge_label[:10] == 1.0)
        assert torch.all(batch.edge_label[10:] == 0.0)

    loader = link_neighbor_loader(
        data, num_neighbors=[-1] * 2, batch_size=10, edge_label=torch.ones(500, dtype=torch.long), neg_sampling_ratio=1
    )
    for batch in loader:
        assert batch.edge_label.dtype == torch.long
        assert torch.all(batch.edge_label[:10] == 1)
        assert torch.all(batch.edge_label[10:] == 0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_homo_link_neighbor_loader_no_edges(layout):
    torch.manual_seed(12345)
    loader = link_neighbor_loader(
        Data(num_nodes=100),
        num_neighbors=[-1],  # upstream: [] (no layer); graphpipe samples one, which finds no edges
        batch_size=20,
        edge_label_index=get_random_edge_index(100, 100, 100),
        layout=layout,
    )
    for batch in loader:
        assert isinstance(batch, Data)
        assert batch.input_id.numel() == 20
        assert batch.edge_label_index.size(1) == 20
        assert batch.num_nodes == batch.edge_label_index.unique().numel()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("amount", [1, 2])
def test_homo_link_neighbor_loader_triplet(layout, amount):
    torch.manual_seed(12345)
    data = Data()
    data.x = torch.arange(100)
    data.edge_index = get_random_edge_index(100, 100, 400)
    data.edge_label_index = get_random_edge_index(100, 100, 500)
    data.edge_attr = torch.arange(data.num_edges)

    batch_size = 20
    loader = link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        batch_size=batch_size,
        edge_label_index=data.edge_label_index,
        neg_sampling=dict(mode="triplet", amount=amount),
        shuffle=True,
        layout=layout,
    )
    assert len(loader) == 500 / batch_size

    for batch in loader:
        assert isinstance(batch, Data)

        # Check that `src_index` and `dst_pos_index` point to valid edges:
        assert torch.equal(batch.x[batch.src_index], data.edge_label_index[0, batch.input_id])
        assert torch.equal(batch.x[batch.dst_pos_index], data.edge_label_index[1, batch.input_id])

        # Check that `dst_neg_index` points to valid nodes in the batch:
        if amount == 1:
            assert batch.dst_neg_index.size() == (batch_size,)
        else:
            assert batch.dst_neg_index.size() == (batch_size, amount)
        assert batch.dst_neg_index.min() >= 0
        assert batch.dst_neg_index.max() < batch.num_nodes

        # Beyond upstream: the triplet fields are seed nodes, and no edge_label_index is left.
        assert int(batch.dst_neg_index.max()) < batch.num_sampled_nodes[0]
        assert "edge_label_index" not in batch and "edge_label" not in batch


@pytest.mark.parametrize("layout", LAYOUTS)
def test_link_neighbor_loader_mapping(layout):
    edge_index = torch.tensor([
        [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 5],
        [1, 2, 3, 4, 5, 8, 6, 7, 9, 10, 6, 11],
    ])  # fmt: skip
    data = Data(edge_index=edge_index, num_nodes=12)
    loader = link_neighbor_loader(data, edge_label_index=data.edge_index, num_neighbors=[1], batch_size=2, shuffle=True, layout=layout)
    for batch in loader:
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])


def test_both_layouts_give_the_same_batches():
    """A block batch pruned by to_pyg() equals the pyg-layout batch with the same seed."""
    torch.manual_seed(1)
    data = Data(x=torch.arange(200), edge_index=get_random_edge_index(200, 200, 1500))
    loaders = [
        link_neighbor_loader(data, num_neighbors=[3, 2], batch_size=16, neg_sampling_ratio=2, shuffle=True, layout=layout)
        for layout in LAYOUTS
    ]
    for pyg_batch, block_batch in zip(*loaders):
        for key in ("n_id", "e_id", "edge_index", "edge_label_index", "edge_label", "input_id", "x"):
            assert torch.equal(pyg_batch[key], block_batch[key]), key
        assert pyg_batch.num_sampled_nodes == block_batch.num_sampled_nodes
        assert pyg_batch.num_sampled_edges == block_batch.num_sampled_edges


@pytest.mark.parametrize("layout", LAYOUTS)
def test_trim_to_layer_with_link_batches(layout):
    """Trimmed and untrimmed passes agree on the pairs' endpoints, and full neighbourhoods
    reproduce the full-graph outputs of the endpoints."""
    torch.manual_seed(3)
    data = Data(x=torch.randn(300, 16), edge_index=get_random_edge_index(300, 300, 2000))
    data.edge_attr = torch.rand(2000)
    model = TrimmedGNN(num_layers=3)
    for num_neighbors in ([4, 3, 2], [-1, -1, -1]):
        loader = link_neighbor_loader(data, num_neighbors=num_neighbors, batch_size=16, neg_sampling_ratio=1, layout=layout)
        for batch in loader:
            num_seeds = batch.num_sampled_nodes[0]
            out1 = model(batch.x, batch.edge_index, batch.edge_attr)[:num_seeds]
            out2 = model(batch.x, batch.edge_index, batch.edge_attr, batch.num_sampled_nodes, batch.num_sampled_edges)
            assert torch.allclose(out1, out2[:num_seeds], atol=1e-5)
            if num_neighbors[0] == -1:
                full = model(data.x, data.edge_index, data.edge_attr)[batch.n_id[:num_seeds]]
                assert torch.allclose(out1, full, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("include_reverse_edges", [False, True])
def test_seed_edges_never_reach_the_batch(layout, include_reverse_edges):
    """With exclude_seed_edges, neither a seed pair (positive or negative) nor, when asked,
    its reverse is an edge of the batch; without it, upstream's "positives are present in
    the graph" holds instead."""
    torch.manual_seed(4)
    edge_index = get_random_edge_index(60, 60, 400)
    data = Data(x=torch.arange(60), edge_index=torch.cat([edge_index, edge_index.flip(0)], dim=1))
    kwargs = dict(num_neighbors=[-1, -1], batch_size=10, neg_sampling_ratio=1, layout=layout)
    excluding = link_neighbor_loader(data, exclude_seed_edges=True, include_reverse_edges=include_reverse_edges, **kwargs)
    plain = link_neighbor_loader(data, **kwargs)
    for batch, plain_batch in zip(excluding, plain):
        seeds = batch.n_id[batch.edge_label_index]
        forbidden = unique_edge_pairs(seeds) | (unique_edge_pairs(seeds.flip(0)) if include_reverse_edges else set())
        sampled = unique_edge_pairs(batch.n_id[batch.edge_index])
        assert not sampled & forbidden
        assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])
        positives = unique_edge_pairs(plain_batch.n_id[plain_batch.edge_label_index[:, plain_batch.edge_label == 1]])
        assert positives <= unique_edge_pairs(plain_batch.n_id[plain_batch.edge_index])


def test_to_pyg_of_link_batches_refuses_what_it_cannot_lay_out():
    import graphpipe as gp

    graph = gp.CSCGraph.from_edge_index(get_random_edge_index(30, 30, 200), 30)
    pairs = torch.tensor([[0, 1], [2, 3], [0, 4], [2, 5]])
    labels, indexes = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([0, 1, 1, 0])  # not grouped as the sampler does
    items = gp.ItemSet((pairs, labels, indexes), names=("seeds", "labels", "indexes"))
    mb = next(iter(gp.ItemSampler(items, 4).sample_neighbor(graph, [2])))
    assert mb.to_pyg().edge_label_index.shape == (2, 4)  # binary: any pairs
    with pytest.raises(ValueError, match="needs the layout of sample_uniform_negative"):
        mb.to_pyg(neg_sampling="triplet")
    with pytest.raises(ValueError, match="`neg_sampling` must be 'binary' or 'triplet'"):
        mb.to_pyg(neg_sampling="pairs")
    nodes = next(iter(gp.ItemSampler(gp.ItemSet(torch.arange(4), names="seeds"), 4).sample_neighbor(graph, [2])))
    with pytest.raises(ValueError, match="neg_sampling='triplet' needs node-pair seeds"):
        nodes.to_pyg(neg_sampling="triplet")
    with pytest.raises(ValueError, match="has no compacted_seeds"):
        gp.MiniBatch(seeds=pairs, sampled_subgraphs=mb.sampled_subgraphs).to_pyg()
