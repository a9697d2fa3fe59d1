"""PyG users' node attributes: from_pyg keeps every one (labels, masks, time, year), to_pyg
gives each sliced by n_id as NeighborLoader does (typed batches too), from_pyg reads a
sparse adj_t, and DataLoader.dataset is NeighborLoader's range of seed items."""

import pytest
import torch

pytest.importorskip("torch_geometric")
import torch_geometric.transforms as T  # noqa: E402
from torch_geometric.data import Data, HeteroData  # noqa: E402

import graphpipe as gp  # noqa: E402

KINDS = ("untyped", "typed")


def pyg_data(kind):
    """A small Data / HeteroData (paper, author) with x, y, time, year and masks."""
    g = torch.Generator().manual_seed(0)

    def nodes(store, n, labelled):
        store.x = torch.randn(n, 3, generator=g)
        store.time = torch.randint(0, 100, (n,), generator=g)
        if labelled:
            store.y = torch.randint(0, 4, (n,), generator=g)
            store.year = torch.randint(2000, 2020, (n, 1), generator=g)
            store.train_mask = torch.rand(n, generator=g) < 0.5

    def edges(n_src, n_dst, m):
        return torch.stack([torch.randint(0, n_src, (m,), generator=g), torch.randint(0, n_dst, (m,), generator=g)])

    if kind == "untyped":
        data = Data(edge_index=edges(50, 50, 300))
        nodes(data, 50, True)
        return data
    data = HeteroData()
    nodes(data["paper"], 50, True)
    nodes(data["author"], 20, False)
    data["paper", "cites", "paper"].edge_index = edges(50, 50, 200)
    data["author", "writes", "paper"].edge_index = edges(20, 50, 100)
    data["paper", "rev_writes", "author"].edge_index = edges(50, 20, 100)
    return data


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.filterwarnings("ignore:from_pyg. no `val_mask`")
def test_to_pyg_carries_every_node_attribute_sliced_by_n_id(kind):
    data = pyg_data(kind)
    ds = gp.datasets.from_pyg(data)
    typed = kind == "typed"
    keys = ds.features.node_keys
    if typed:
        keys = {t: [name for of, name in keys if of == t] for t in ds.graph.node_types}
    pipe = gp.ItemSampler(ds.train_set, 8).sample_neighbor(ds.graph, [4, 4], layout="pyg").fetch_feature(ds.features, keys)
    batch = next(iter(pipe)).to_pyg()
    for node_type in data.node_types if typed else [None]:
        store, source = (batch[node_type], data[node_type]) if typed else (batch, data)
        for name, value in source.items():
            if name == "edge_index":
                continue
            expected = value.view(-1) if name == "y" else value
            assert torch.equal(store[name], expected[store.n_id]), name
        assert store.y.numel() == store.n_id.numel() if "y" in source else "y" not in store


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.filterwarnings("ignore:from_pyg. no `val_mask`")
def test_from_pyg_reads_a_sparse_adj_t(kind):
    data = pyg_data(kind)
    plain = gp.datasets.from_pyg(data.clone()).graph
    sparse = gp.datasets.from_pyg(T.ToSparseTensor()(data.clone())).graph

    def edge_list(graph):
        src, dst = graph.edge_index()
        types = graph.type_per_edge.tolist() if graph.is_heterogeneous else [0] * src.numel()
        return list(zip(types, src.tolist(), dst.tolist()))

    # ToSparseTensor merges parallel edges: the same edges, each once.
    assert sorted(edge_list(sparse)) == sorted(set(edge_list(plain)))


@pytest.mark.filterwarnings("ignore:from_pyg. no `val_mask`")
def test_loader_dataset_is_the_range_of_seed_items():
    ds = gp.datasets.from_pyg(pyg_data("untyped"))
    loader = gp.DataLoader(gp.ItemSampler(ds.train_set, 8).sample_neighbor(ds.graph, [2], layout="pyg"))
    assert loader.dataset == range(len(ds.train_set)) and len(loader.dataset) == int(pyg_data("untyped").train_mask.sum())


@pytest.mark.filterwarnings("ignore:from_pyg. no `val_mask`")
def test_from_pyg_refuses_an_adj_t_with_edge_values():
    """``ToSparseTensor(attr="edge_weight")`` moves the weights into ``adj_t``'s values:
    reading only its edges would drop them silently."""
    data = pyg_data("untyped")
    data.edge_weight = torch.rand(data.edge_index.size(1)) + 2
    with pytest.raises(ValueError, match=r"`adj_t` holds edge values"):
        gp.datasets.from_pyg(T.ToSparseTensor(attr="edge_weight")(data))
