"""PyG's LinkNeighborLoader tests (``test/loader/test_link_neighbor_loader.py``), run
against graphpipe.

Each test builds what upstream builds and swaps ``LinkNeighborLoader(...)`` for
``link_neighbor_loader(...)`` (graphpipe with the same arguments, see
``neighbor_loader_like``) or, on a ``HeteroData``, ``hetero_link_neighbor_loader(...)``
(``to_pyg()`` of typed link MiniBatches from graphpipe's samplers), sampling in PyG's layout and in GraphBolt's block layout converted by
``to_pyg()``. Upstream's assertions are kept. Differences: negatives keep their positive's
source (GraphBolt's ``sample_uniform_negative``; PyG's binary mode draws both ends), so
the binary layout is checked, not the negatives' sources, and they are uniform (upstream's
hetero triplet case weights them); graphpipe needs at least one layer (upstream's
``num_neighbors=[]`` cases use ``[-1]`` on a graph without edges). The temporal cases are
in ``test_temporal_loaders.py``. Not ported: ``subgraph_type="bidirectional"``, custom
stores, and upstream's ``loader([indices])`` call on chosen edges.
"""

import functools

import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData

from neighbor_loader_like import LAYOUTS, hetero_link_neighbor_loader, link_neighbor_loader
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


@pytest.mark.parametrize("typed", [False, True])
def test_link_neighbor_loader_edge_label(typed):
    torch.manual_seed(12345)
    edge_index = get_random_edge_index(100, 100, 500)
    if typed:  # upstream's case on a HeteroData with one edge type
        data = HeteroData()
        data["paper"].x = torch.arange(100)
        data["paper", "paper"].edge_index = edge_index
        loader = functools.partial(hetero_link_neighbor_loader, edge_label_index=("paper", "paper"))
        label_store = lambda batch: batch["paper", "to", "paper"]  # noqa: E731
    else:
        data = Data(edge_index=edge_index, x=torch.arange(100))
        loader, label_store = link_neighbor_loader, lambda batch: batch  # noqa: E731

    for batch in loader(data, num_neighbors=[-1] * 2, batch_size=10, neg_sampling_ratio=1):
        assert label_store(batch).edge_label.dtype == torch.float
        assert torch.all(label_store(batch).edge_label[:10] == 1.0)
        assert torch.all(label_store(batch).edge_label[10:] == 0.0)

    loader = loader(
        data, num_neighbors=[-1] * 2, batch_size=10, edge_label=torch.ones(500, dtype=torch.long), neg_sampling_ratio=1
    )
    for batch in loader:
        assert label_store(batch).edge_label.dtype == torch.long
        assert torch.all(label_store(batch).edge_label[:10] == 1)
        assert torch.all(label_store(batch).edge_label[10:] == 0)


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


def check_disjoint_triplet(node_store, batch_size, amount):
    """Upstream's disjoint assertions: sources, then positive destinations, then negatives
    are the seed nodes in that order, each its own subtree (``batch``), pair by pair."""
    assert node_store.src_index.min() == 0 and node_store.src_index.max() == batch_size - 1
    assert node_store.dst_pos_index.min() == batch_size and node_store.dst_pos_index.max() == 2 * batch_size - 1
    assert node_store.dst_neg_index.min() == 2 * batch_size
    max_seed_nodes = 2 * batch_size + batch_size * amount
    assert node_store.dst_neg_index.max() == max_seed_nodes - 1
    assert node_store.batch.min() == 0 and node_store.batch.max() == batch_size - 1
    for i in range(0, max_seed_nodes, batch_size):
        assert torch.equal(node_store.batch[i : i + batch_size], torch.arange(batch_size))


LAYOUT_AND_DISJOINT = [(layout, False) for layout in LAYOUTS] + [("pyg", True)]


@pytest.mark.parametrize("layout, disjoint", LAYOUT_AND_DISJOINT)
@pytest.mark.parametrize("amount", [1, 2])
def test_homo_link_neighbor_loader_triplet(layout, disjoint, amount):
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
        disjoint=disjoint,
    )
    assert len(loader) == 500 / batch_size

    for batch in loader:
        assert isinstance(batch, Data)
        if disjoint:
            check_disjoint_triplet(batch, batch_size, amount)

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
    # PyG refuses edge_label with triplets; the sampler's own 1.0s for the positives are no labels of the user's.
    labelled = gp.ItemSet((pairs, torch.tensor([1.0, 2.0, 1.0, 1.0])), names=("seeds", "labels"))
    for items, refused in ((labelled, True), (gp.ItemSet(pairs, names="seeds"), False)):
        mb = next(iter(gp.ItemSampler(items, 4).sample_uniform_negative(graph, 2).sample_neighbor(graph, [2])))
        if refused:
            with pytest.raises(ValueError, match=r"the positive pairs have labels of their own.*'edge_label' needs to be undefined"):
                mb.to_pyg(neg_sampling="triplet")
        else:
            assert mb.to_pyg(neg_sampling="triplet").dst_neg_index.shape == (4, 2)


# Heterogeneous cases: typed link batches (seeds by edge type) give LinkNeighborLoader's HeteroData.


def _paper_author_data(with_edge_attr=True):
    data = HeteroData()
    data["paper"].x = torch.arange(100)
    data["author"].x = torch.arange(100, 300)
    data["paper", "paper"].edge_index = get_random_edge_index(100, 100, 500)
    data["paper", "author"].edge_index = get_random_edge_index(100, 200, 1000)
    data["author", "paper"].edge_index = get_random_edge_index(200, 100, 1000)
    if with_edge_attr:
        data["paper", "paper"].edge_attr = torch.arange(500)
        data["paper", "author"].edge_attr = torch.arange(500, 1500)
        data["author", "paper"].edge_attr = torch.arange(1500, 2500)
    return data


def _check_typed_batch(batch, data, pairs, seed_type):
    """Beyond upstream: every id maps back to ``data``, features follow ids, the seeds'
    endpoints lead each type (ascending), and node types carry no NeighborLoader fields."""
    for key in batch.edge_types:
        store = batch[key]
        assert torch.equal(batch[key[0]].n_id[store.edge_index[0]], data[key].edge_index[0, store.e_id])
        assert torch.equal(batch[key[-1]].n_id[store.edge_index[1]], data[key].edge_index[1, store.e_id])
        if "edge_attr" in data[key]:
            assert torch.equal(store.edge_attr, data[key].edge_attr[store.e_id])
        assert sum(store.num_sampled_edges) == store.num_edges
    for node_type in batch.node_types:
        assert torch.equal(batch[node_type].x, data[node_type].x[batch[node_type].n_id])
        assert sum(batch[node_type].num_sampled_nodes) == batch[node_type].num_nodes
        assert "batch_size" not in batch[node_type] and "input_id" not in batch[node_type]
    src_type, _, dst_type = seed_type
    store = batch[seed_type]
    assert torch.equal(batch[src_type].n_id[store.edge_label_index[0, : store.input_id.numel()]], pairs[0, store.input_id])
    assert torch.equal(batch[dst_type].n_id[store.edge_label_index[1, : store.input_id.numel()]], pairs[1, store.input_id])
    ends = {t: set() for t in batch.node_types}
    ends[src_type].update(batch[src_type].n_id[store.edge_label_index[0]].tolist())
    ends[dst_type].update(batch[dst_type].n_id[store.edge_label_index[1]].tolist())
    for node_type, ids in ends.items():
        count = batch[node_type].num_sampled_nodes[0]
        assert batch[node_type].n_id[:count].tolist() == sorted(ids)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("neg_sampling_ratio", [None, 1])
def test_hetero_link_neighbor_loader_basic(layout, neg_sampling_ratio):
    torch.manual_seed(12345)
    data = _paper_author_data()

    loader = hetero_link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        edge_label_index=("paper", "author"),
        batch_size=20,
        neg_sampling_ratio=neg_sampling_ratio,
        shuffle=True,
        layout=layout,
    )
    assert len(loader) == 1000 / 20

    for batch in loader:
        assert isinstance(batch, HeteroData)
        assert batch.input_type == ("paper", "to", "author")

        if neg_sampling_ratio is None:
            # Assert only positive samples are present in the original graph:
            edge_index = unique_edge_pairs(batch["paper", "author"].edge_index)
            edge_label_index = batch["paper", "author"].edge_label_index
            edge_label_index = unique_edge_pairs(edge_label_index)
            assert len(edge_index | edge_label_index) == len(edge_index)

        else:
            assert batch["paper", "author"].edge_label_index.size(1) == 40
            assert torch.all(batch["paper", "author"].edge_label[:20] == 1)
            assert torch.all(batch["paper", "author"].edge_label[20:] == 0)

        _check_typed_batch(batch, data, data["paper", "author"].edge_index, ("paper", "to", "author"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hetero_link_neighbor_loader_loop(layout):
    torch.manual_seed(12345)
    data = _paper_author_data(with_edge_attr=False)

    loader = hetero_link_neighbor_loader(
        data, num_neighbors=[-1] * 2, edge_label_index=("paper", "paper"), batch_size=20, layout=layout
    )

    for batch in loader:
        assert batch["paper"].x.size(0) <= 100
        assert batch["paper"].x.min() >= 0 and batch["paper"].x.max() < 100

        # Assert positive samples are present in the original graph:
        edge_index = unique_edge_pairs(batch["paper", "paper"].edge_index)
        edge_label_index = batch["paper", "paper"].edge_label_index
        edge_label_index = unique_edge_pairs(edge_label_index)
        assert len(edge_index | edge_label_index) == len(edge_index)

        _check_typed_batch(batch, data, data["paper", "paper"].edge_index, ("paper", "to", "paper"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hetero_link_neighbor_loader_no_edges(layout):
    torch.manual_seed(12345)
    loader = hetero_link_neighbor_loader(
        HeteroData(paper=dict(num_nodes=100)),
        num_neighbors=[-1],  # upstream: [] (no layer); graphpipe samples one, which finds no edges
        edge_label_index=(("paper", "paper"), get_random_edge_index(100, 100, 100)),
        batch_size=20,
        layout=layout,
    )

    for batch in loader:
        assert isinstance(batch, HeteroData)
        assert batch["paper", "paper"].input_id.numel() == 20
        assert batch["paper", "paper"].edge_label_index.size(1) == 20
        assert batch["paper"].num_nodes == batch["paper", "paper"].edge_label_index.unique().numel()


@pytest.mark.parametrize("layout, disjoint", LAYOUT_AND_DISJOINT)
@pytest.mark.parametrize("amount", [1, 2])
def test_hetero_link_neighbor_loader_triplet(layout, disjoint, amount):
    torch.manual_seed(12345)
    data = HeteroData()

    data["paper"].x = torch.arange(100)
    data["author"].x = torch.arange(100, 300)

    data["paper", "paper"].edge_index = get_random_edge_index(100, 100, 400)
    edge_label_index = get_random_edge_index(100, 100, 500)
    data["paper", "paper"].edge_label_index = edge_label_index
    data["paper", "author"].edge_index = get_random_edge_index(100, 200, 1000)
    data["author", "paper"].edge_index = get_random_edge_index(200, 100, 1000)

    batch_size = 20
    index = (("paper", "paper"), data["paper", "paper"].edge_label_index)
    loader = hetero_link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        batch_size=batch_size,
        edge_label_index=index,
        neg_sampling=dict(mode="triplet", amount=amount),  # upstream also weights the negatives
        shuffle=True,
        layout=layout,
        disjoint=disjoint,
    )
    assert len(loader) == 500 / batch_size

    for batch in loader:
        assert isinstance(batch, HeteroData)

        node_store = batch["paper"]
        edge_store = batch["paper", "paper"]
        if disjoint:
            check_disjoint_triplet(node_store, batch_size, amount)

        # Check that `src_index` and `dst_pos_index` point to valid edges:
        assert torch.equal(node_store.x[node_store.src_index], data["paper", "paper"].edge_label_index[0, edge_store.input_id])
        assert torch.equal(
            node_store.x[node_store.dst_pos_index], data["paper", "paper"].edge_label_index[1, edge_store.input_id]
        )

        # Check that `dst_neg_index` points to valid nodes in the batch:
        if amount == 1:
            assert node_store.dst_neg_index.size() == (batch_size,)
        else:
            assert node_store.dst_neg_index.size() == (batch_size, amount)
        assert node_store.dst_neg_index.min() >= 0
        assert node_store.dst_neg_index.max() < node_store.num_nodes

        # Beyond upstream: the triplet fields are seed nodes, and no edge_label_index is left.
        assert int(node_store.dst_neg_index.max()) < node_store.num_sampled_nodes[0]
        assert "edge_label_index" not in edge_store and "edge_label" not in edge_store
        assert batch.input_type == ("paper", "to", "paper")


def _hetero_link_batches(layout, neg_sampling=None, fanouts=(3, 2)):
    torch.manual_seed(7)
    data = HeteroData()
    data["paper"].x = torch.randn(80, 4)
    data["author"].x = torch.randn(60, 4)
    data["paper", "cites", "paper"].edge_index = get_random_edge_index(80, 80, 400)
    data["author", "writes", "paper"].edge_index = get_random_edge_index(60, 80, 300)
    data["paper", "rev_writes", "author"].edge_index = data["author", "writes", "paper"].edge_index.flip(0)
    return data, hetero_link_neighbor_loader(
        data, num_neighbors=list(fanouts), edge_label_index=("author", "paper"), batch_size=16,
        neg_sampling=neg_sampling or dict(mode="binary", amount=2), shuffle=True, layout=layout,
    )


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_hetero_link_batches_agree_between_layouts(mode):
    """A typed link batch of block layout, pruned by to_pyg(), equals the pyg-layout batch."""
    _, pyg_batches = _hetero_link_batches("pyg", dict(mode=mode, amount=2))
    _, block_batches = _hetero_link_batches("block", dict(mode=mode, amount=2))
    for a, b in zip(pyg_batches, block_batches):
        assert a.node_types == b.node_types and a.edge_types == b.edge_types
        for key in a.node_types + a.edge_types:
            assert set(a[key].keys()) == set(b[key].keys()), key
            for name in a[key].keys():
                equal = torch.equal if isinstance(a[key][name], torch.Tensor) else (lambda x, y: x == y)
                assert equal(a[key][name], b[key][name]), (key, name)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_trim_to_layer_with_hetero_link_batches(layout):
    """Trimmed and untrimmed passes agree on the pairs' endpoints, and full neighbourhoods
    reproduce the full-graph outputs of the endpoints."""
    from test_hetero_neighbor_loader import HeteroSAGE

    for fanouts in ([3, 2], [-1, -1]):
        data, loader = _hetero_link_batches(layout, fanouts=fanouts)
        torch.manual_seed(0)
        model = HeteroSAGE(data.edge_types, num_layers=2).eval()
        full, _ = model(data.x_dict, data.edge_index_dict)
        for batch in loader:
            out1, _ = model(batch.x_dict, batch.edge_index_dict)
            out2, sizes = model(batch.x_dict, batch.edge_index_dict, batch.num_sampled_nodes_dict, batch.num_sampled_edges_dict)
            for node_type in batch.node_types:
                num_seeds = batch[node_type].num_sampled_nodes[0]
                torch.testing.assert_close(out1[node_type][:num_seeds], out2[node_type][:num_seeds])
                if fanouts[0] == -1:
                    expected = full[node_type][batch[node_type].n_id[:num_seeds]]
                    torch.testing.assert_close(out1[node_type][:num_seeds], expected, rtol=1e-5, atol=1e-5)


def test_triplet_fields_of_two_seed_edge_types_must_not_collide():
    """Triplet fields live on node types (PyG's layout): two seed edge types ending at the
    same node type cannot both place theirs."""
    from typed_link_model import typed_link_batch

    edges = {"a:x:b": get_random_edge_index(10, 10, 30), "b:y:b": get_random_edge_index(10, 10, 30)}
    seeds = {"a:x:b": torch.tensor([[0, 1], [0, 2]]), "b:y:b": torch.tensor([[3, 4], [3, 5]])}
    indexes = {etype: torch.tensor([0, 0]) for etype in seeds}
    item_ids = {etype: torch.tensor([0]) for etype in seeds}
    mb = typed_link_batch(edges, {"a": 10, "b": 10}, seeds, [-1], "pyg", indexes=indexes, item_ids=item_ids)
    with pytest.raises(ValueError, match="two seed edge types of the batch put `dst_pos_index` on node type 'b'"):
        mb.to_pyg(neg_sampling="triplet")
    binary = mb.to_pyg()  # binary fields live on the edge types: both fit
    assert binary["a", "x", "b"].edge_label_index.shape == binary["b", "y", "b"].edge_label_index.shape == (2, 2)
