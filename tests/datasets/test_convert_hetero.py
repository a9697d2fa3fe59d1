"""from_pyg(HeteroData): a typed graph, typed features and HeteroItemSets, sampled and fetched."""

import pytest
import torch

pyg_data = pytest.importorskip("torch_geometric.data")

import graphpipe as gp  # noqa: E402
from graphpipe.batch.item_set import HeteroItemSet  # noqa: E402
from hetero_graphs import typed_edges  # noqa: E402

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
    assert ("node", "paper", "train_mask") not in store
    assert set(ds.labels) == {"paper"} and torch.equal(ds.labels["paper"], data["paper"].y)
    assert ds.num_classes == int(data["paper"].y.max()) + 1
    for item_set, mask in ((ds.train_set, "train_mask"), (ds.validation_set, "val_mask"), (ds.test_set, "test_mask")):
        assert isinstance(item_set, HeteroItemSet) and list(item_set.item_sets) == ["paper"]
        seeds, labels = item_set.item_sets["paper"][torch.arange(len(item_set))]
        assert torch.equal(seeds, torch.nonzero(data["paper"][mask]).view(-1))
        assert torch.equal(labels, data["paper"].y[seeds])
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
    assert list(ds.train_set.item_sets) == ["author", "paper"] and ds.train_set.names == ("seeds",)
    assert list(ds.validation_set.item_sets) == ["paper"]


def test_hetero_errors_name_the_node_type():
    data = make_hetero()
    data["paper"].y = torch.zeros(30, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"labels `y` of node type 'paper' must be \[num_nodes\] or "
                       r"\[num_nodes, 1\] with num_nodes=30, got shape \(30, 2\)"):
        gp.datasets.from_pyg(data)
    data = make_hetero()
    data["author"].val_mask = torch.zeros(20, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"`val_mask` of node type 'author' must be a \[num_nodes\] bool tensor"):
        gp.datasets.from_pyg(data)
    with pytest.raises(ValueError, match=r"the HeteroData has no edge types"):
        gp.datasets.from_pyg(pyg_data.HeteroData())
