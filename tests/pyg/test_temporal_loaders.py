"""PyG's temporal loader tests (``test/loader/test_neighbor_loader.py``,
``test_link_neighbor_loader.py``, pytorch_geometric@5c6461b2305a), run against graphpipe.

Each test builds what upstream builds and swaps ``NeighborLoader(...)`` /
``LinkNeighborLoader(...)`` for ``neighbor_loader(...)`` / ``link_neighbor_loader(...)`` /
``hetero_link_neighbor_loader(...)`` (graphpipe with the same arguments, see
``neighbor_loader_like``: the time is a graph attribute and a fetched feature, seed times
the ItemSet field ``timestamp``, ``sample_neighbor(..., layout="pyg", time_attr=...)``).
Upstream needs pyg-lib for these; graphpipe does not. Upstream's assertions are kept.
Differences: the karate club is graphpipe's offline copy (``datasets.karate_club``, the
same 156 directed edges) with PyG's one-hot ``x``; a link loader without
``edge_label_time`` fails with graphpipe's error naming the seeds' missing ``timestamp``
field (upstream: LinkNeighborLoader's "'edge_label_time' is not set"), raised when the
first batch is sampled; link seeds are sampled with graphpipe's leak-free ``<`` by
default, PyG's ``<=`` as a parameter (upstream's assertions hold for both); the triplet
tests are upstream's ``disjoint=True, temporal=True`` cases (the others are in
``test_link_neighbor_loader.py``); ``str(loader)`` is not checked. Not ported:
``test_temporal_custom_neighbor_loader_on_karate`` (PyG's custom FeatureStore /
GraphStore).
"""

import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data, HeteroData  # noqa: E402

import graphpipe as gp  # noqa: E402
from neighbor_loader_like import hetero_link_neighbor_loader, link_neighbor_loader, neighbor_loader  # noqa: E402
from test_neighbor_loader_contract import get_random_edge_index  # noqa: E402
from test_temporal_contract import EDGE, NODE, TemporalGraph, check_subtrees  # noqa: E402


def _karate():
    """PyG's ``KarateClub()[0]`` fields that the test reads: one-hot ``x``, ``edge_index``."""
    return Data(x=torch.eye(34), edge_index=gp.datasets.karate_club().graph.edge_index())


@pytest.mark.parametrize("typed", [True, False], ids=["hetero", "homo"])
def test_temporal_hetero_neighbor_loader_on_karate(typed):
    data = _karate()

    hetero_data = HeteroData()
    hetero_data["v"].x = data.x
    hetero_data["v"].time = torch.arange(data.num_nodes, 0, -1)
    hetero_data["v", "v"].edge_index = data.edge_index
    if not typed:  # beyond upstream: the same on a Data
        hetero_data = Data(x=data.x, time=torch.arange(data.num_nodes, 0, -1), edge_index=data.edge_index)

    input_nodes = "v" if typed else None
    loader = neighbor_loader(hetero_data, num_neighbors=[-1, -1], input_nodes=input_nodes, time_attr="time", batch_size=1)

    for batch in loader:
        store = batch["v"] if typed else batch
        mask = store.time[0] >= store.time[1:]
        assert torch.all(mask)

        # Beyond upstream: the batch is the model's subtree of the seed at its own node time.
        node_type, edge_type = ("v", "v:to:v") if typed else (NODE, EDGE)
        times = {node_type: torch.arange(34, 0, -1)}
        model = TemporalGraph({node_type: 34}, {edge_type: tuple(data.edge_index)}, times, seed_type=node_type)
        seed = store.n_id[:1]
        check_subtrees(batch, model, seed, model.node_time[node_type][seed], [-1, -1], "uniform")


def test_edge_level_temporal_homo_neighbor_loader():
    edge_index = torch.tensor([
        [0, 1, 1, 2, 2, 3, 3, 4],
        [1, 0, 2, 1, 3, 2, 4, 3],
    ])  # fmt: skip
    edge_time = torch.arange(edge_index.size(1))

    data = Data(edge_index=edge_index, edge_time=edge_time, num_nodes=5)

    loader = neighbor_loader(
        data,
        num_neighbors=[-1, -1],
        input_time=torch.tensor([4, 4, 4, 4, 4]),
        time_attr="edge_time",
        batch_size=1,
    )

    for batch in loader:
        assert batch.edge_time.numel() == batch.num_edges
        if batch.edge_time.numel() > 0:
            assert batch.edge_time.max() <= 4
        # Beyond upstream: the edge times are the sampled edges' own, and the batch is the
        # model's subtree (every edge at time <= 4, at both hops).
        assert torch.equal(batch.edge_time, edge_time[batch.e_id])
        assert torch.equal(batch.seed_time, torch.tensor([4]))
        model = TemporalGraph({NODE: 5}, {EDGE: tuple(edge_index)}, edge_time={EDGE: edge_time})
        check_subtrees(batch, model, batch.n_id[:1], batch.seed_time, [-1, -1], "uniform")


def test_edge_level_temporal_hetero_neighbor_loader():
    edge_index = torch.tensor([
        [0, 1, 1, 2, 2, 3, 3, 4],
        [1, 0, 2, 1, 3, 2, 4, 3],
    ])  # fmt: skip
    edge_time = torch.arange(edge_index.size(1))

    data = HeteroData()
    data["A"].num_nodes = 5
    data["A", "A"].edge_index = edge_index
    data["A", "A"].edge_time = edge_time

    loader = neighbor_loader(
        data,
        num_neighbors=[-1, -1],
        input_nodes="A",
        input_time=torch.tensor([4, 4, 4, 4, 4]),
        time_attr="edge_time",
        batch_size=1,
    )

    for batch in loader:
        assert batch["A", "A"].edge_time.numel() == batch["A", "A"].num_edges
        if batch["A", "A"].edge_time.numel() > 0:
            assert batch["A", "A"].edge_time.max() <= 4
        # Beyond upstream: something was sampled, and only edges at times <= 4.
        assert torch.equal(batch["A", "A"].edge_time, edge_time[batch["A", "A"].e_id])
    assert sum(batch["A", "A"].num_edges for batch in loader) > 0


def test_temporal_neighbor_loader_single_link():
    data = HeteroData()
    data["a"].x = torch.arange(10)
    data["b"].x = torch.arange(10)
    data["c"].x = torch.arange(10)

    data["b"].time = torch.arange(0, 10)
    data["c"].time = torch.arange(1, 11)

    data["a", "b"].edge_index = torch.arange(10).view(1, -1).repeat(2, 1)
    data["b", "a"].edge_index = torch.arange(10).view(1, -1).repeat(2, 1)
    data["a", "c"].edge_index = torch.arange(10).view(1, -1).repeat(2, 1)
    data["c", "a"].edge_index = torch.arange(10).view(1, -1).repeat(2, 1)

    loader = neighbor_loader(
        data,
        num_neighbors=[-1],
        input_nodes="a",
        time_attr="time",
        input_time=torch.arange(0, 10),
        batch_size=10,
    )
    batch = next(iter(loader))
    assert batch["a"].num_nodes == 10
    assert batch["b"].num_nodes == 10
    assert batch["c"].num_nodes == 0


@pytest.mark.parametrize("comparison", [None, "<="], ids=["default", "pyg"])
@pytest.mark.parametrize("batch_size", [1])
def test_temporal_homo_link_neighbor_loader(batch_size, comparison):
    torch.manual_seed(12345)
    data = Data(
        x=torch.randn(10, 5),
        edge_index=torch.randint(0, 10, (2, 123)),
        time=torch.arange(10),
    )

    # Ensure that nodes exist at the time of the `edge_label_time`:
    edge_label_time = torch.max(
        data.time[data.edge_index[0]],
        data.time[data.edge_index[1]],
    )

    loader = link_neighbor_loader(
        data,
        num_neighbors=[-1],
        time_attr="time",
        edge_label=torch.ones(data.num_edges),
        edge_label_time=edge_label_time,
        batch_size=batch_size,
        shuffle=True,
        **({} if comparison is None else {"comparison": comparison}),
    )

    for batch in loader:
        assert batch.edge_label_index.size() == (2, batch_size)
        assert batch.edge_label_time.size() == (batch_size,)
        assert batch.edge_label.size() == (batch_size,)
        assert torch.all(batch.time <= batch.edge_label_time)
        # Beyond upstream: the pair's time, and the sampled neighbours' times.
        assert torch.equal(batch.edge_label_time, edge_label_time[batch.input_id])
        if comparison is None:  # graphpipe's strict default: every neighbour is earlier
            assert torch.all(batch.time[batch.edge_index[0]] < batch.edge_label_time)


def test_temporal_hetero_link_neighbor_loader():
    torch.manual_seed(12345)
    data = HeteroData()

    data["paper"].x = torch.arange(100)
    data["paper"].time = torch.arange(data["paper"].num_nodes) - 200
    data["author"].x = torch.arange(100, 300)
    data["author"].time = torch.arange(data["author"].num_nodes)

    data["paper", "paper"].edge_index = get_random_edge_index(100, 100, 500)
    data["paper", "author"].edge_index = get_random_edge_index(100, 200, 1000)
    data["author", "paper"].edge_index = get_random_edge_index(200, 100, 1000)

    with pytest.raises(ValueError, match="timestamp"):  # upstream: r"'edge_label_time' is not set"
        loader = hetero_link_neighbor_loader(
            data,
            num_neighbors=[-1] * 2,
            edge_label_index=("paper", "paper"),
            batch_size=32,
            time_attr="time",
        )

    # With edge_time:
    edge_time = torch.arange(data["paper", "paper"].edge_index.size(1))
    loader = hetero_link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        edge_label_index=("paper", "paper"),
        edge_label_time=edge_time,
        batch_size=32,
        time_attr="time",
        neg_sampling_ratio=0.5,
        drop_last=True,
    )
    assert len(loader) == 500 // 32
    for batch in loader:
        # Check if each seed edge has a different batch:
        assert int(batch["paper"].batch.max()) + 1 == 32

        author_max = batch["author"].time.max()
        edge_max = batch["paper", "paper"].edge_label_time.max()
        assert edge_max >= author_max
        author_min = batch["author"].time.min()
        edge_min = batch["paper", "paper"].edge_label_time.min()
        assert edge_min >= author_min
        # Beyond upstream: the positives' times lead edge_label_time.
        store = batch["paper", "paper"]
        assert torch.equal(store.edge_label_time[: store.input_id.numel()], edge_time[store.input_id])


def _check_triplet_batch(node_store, edge_store, label_index, batch_size, amount):
    """Upstream's triplet assertions (``disjoint=True``, ``temporal=True``) on the seed
    node type's store and the seed edge type's store."""
    # Check that `src_index` and `dst_pos_index` point to valid edges:
    assert torch.equal(node_store.x[node_store.src_index], label_index[0, edge_store.input_id])
    assert torch.equal(node_store.x[node_store.dst_pos_index], label_index[1, edge_store.input_id])

    # Check that `dst_neg_index` points to valid nodes in the batch:
    if amount == 1:
        assert node_store.dst_neg_index.size() == (batch_size,)
    else:
        assert node_store.dst_neg_index.size() == (batch_size, amount)
    assert node_store.dst_neg_index.min() >= 0
    assert node_store.dst_neg_index.max() < node_store.num_nodes

    # In disjoint mode, seed nodes should always be placed first:
    assert node_store.src_index.min() == 0
    assert node_store.src_index.max() == batch_size - 1

    assert node_store.dst_pos_index.min() == batch_size
    assert node_store.dst_pos_index.max() == 2 * batch_size - 1

    assert node_store.dst_neg_index.min() == 2 * batch_size
    max_seed_nodes = 2 * batch_size + batch_size * amount
    assert node_store.dst_neg_index.max() == max_seed_nodes - 1

    assert node_store.batch.min() == 0
    assert node_store.batch.max() == batch_size - 1

    # Check that `batch` is always increasing:
    for i in range(0, max_seed_nodes, batch_size):
        batch_vector = node_store.batch[i : i + batch_size]
        assert torch.equal(batch_vector, torch.arange(batch_size))

    # temporal:
    for i in range(batch_size):
        assert node_store.time[node_store.batch == i].max() <= node_store.seed_time[i]


@pytest.mark.parametrize("amount", [1, 2])
def test_homo_link_neighbor_loader_triplet(amount):
    """Upstream's ``disjoint=True, temporal=True`` cases (the others are in
    ``test_link_neighbor_loader.py``)."""
    torch.manual_seed(12345)
    data = Data()
    data.x = torch.arange(100)
    data.edge_index = get_random_edge_index(100, 100, 400)
    data.edge_label_index = get_random_edge_index(100, 100, 500)
    data.edge_attr = torch.arange(data.num_edges)

    time_attr = "time"
    data.time = torch.arange(data.num_nodes)

    edge_label_time = torch.max(data.time[data.edge_label_index[0]], data.time[data.edge_label_index[1]])
    edge_label_time = edge_label_time + 50

    batch_size = 20
    loader = link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        batch_size=batch_size,
        edge_label_index=data.edge_label_index,
        edge_label_time=edge_label_time,
        time_attr=time_attr,
        disjoint=True,
        neg_sampling=dict(mode="triplet", amount=amount),
        shuffle=True,
    )

    assert len(loader) == 500 / batch_size

    for batch in loader:
        assert isinstance(batch, Data)
        _check_triplet_batch(batch, batch, data.edge_label_index, batch_size, amount)


@pytest.mark.parametrize("amount", [1, 2])
def test_hetero_link_neighbor_loader_triplet(amount):
    """Upstream's ``disjoint=True, temporal=True`` cases (upstream weights the negatives
    only when not temporal)."""
    torch.manual_seed(12345)
    data = HeteroData()

    data["paper"].x = torch.arange(100)
    data["author"].x = torch.arange(100, 300)

    data["paper", "paper"].edge_index = get_random_edge_index(100, 100, 400)
    edge_label_index = get_random_edge_index(100, 100, 500)
    data["paper", "paper"].edge_label_index = edge_label_index
    data["paper", "author"].edge_index = get_random_edge_index(100, 200, 1000)
    data["author", "paper"].edge_index = get_random_edge_index(200, 100, 1000)

    time_attr = "time"
    data["paper"].time = torch.arange(data["paper"].num_nodes)
    data["author"].time = torch.arange(data["author"].num_nodes)

    edge_label_time = torch.max(
        data["paper"].time[data["paper", "paper"].edge_label_index[0]],
        data["paper"].time[data["paper", "paper"].edge_label_index[1]],
    )
    edge_label_time = edge_label_time + 50

    batch_size = 20
    index = (("paper", "paper"), data["paper", "paper"].edge_label_index)
    loader = hetero_link_neighbor_loader(
        data,
        num_neighbors=[-1] * 2,
        batch_size=batch_size,
        edge_label_index=index,
        edge_label_time=edge_label_time,
        time_attr=time_attr,
        disjoint=True,
        neg_sampling=dict(mode="triplet", amount=amount),
        shuffle=True,
    )

    assert len(loader) == 500 / batch_size

    for batch in loader:
        assert isinstance(batch, HeteroData)
        label_index = data["paper", "paper"].edge_label_index
        _check_triplet_batch(batch["paper"], batch["paper", "paper"], label_index, batch_size, amount)
