"""from_dgl of a DGL heterograph: the typed dataset equals the graph it came from. Runs in
the DGL environment (see test_dgl.py); skipped in the main one."""

import pytest
import torch

dgl = pytest.importorskip("dgl")

import graphpipe as gp  # noqa: E402
from graphpipe.batch.item_set import HeteroItemSet  # noqa: E402
from hetero_graphs import typed_edges  # noqa: E402

WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")


def make_heterograph(seed=0):
    gen = torch.Generator().manual_seed(seed)
    g = dgl.heterograph(
        {
            WRITES: (torch.randint(0, 20, (50,), generator=gen), torch.randint(0, 30, (50,), generator=gen)),
            CITES: (torch.randint(0, 30, (70,), generator=gen), torch.randint(0, 30, (70,), generator=gen)),
        },
        num_nodes_dict={"author": 20, "paper": 30},
    )
    split = torch.randint(0, 4, (30,), generator=gen)
    g.nodes["paper"].data["feat"] = torch.randn(30, 4, generator=gen)
    g.nodes["paper"].data["label"] = torch.randint(0, 3, (30,), generator=gen)
    g.nodes["paper"].data["train_mask"] = split == 0
    g.nodes["paper"].data["val_mask"] = split == 1
    g.nodes["paper"].data["test_mask"] = split == 2
    g.nodes["author"].data["feat"] = torch.randn(20, 3, generator=gen)
    g.edges[WRITES].data["w"] = torch.rand(50, generator=gen)
    return g


def test_from_dgl_heterograph_matches_the_graph():
    g = make_heterograph()
    ds = gp.datasets.from_dgl(g)
    graph = ds.graph
    assert graph.is_heterogeneous and graph.num_nodes_per_type == {"author": 20, "paper": 30}
    assert graph.edge_types == ["author:writes:paper", "paper:cites:paper"]
    for etype, (src, dst, eids) in typed_edges(graph).items():  # eids: DGL's edge ids within the type
        dgl_src, dgl_dst = g.find_edges(eids, etype=tuple(etype.split(":")))
        assert torch.equal(src, dgl_src)
        assert torch.equal(dst, dgl_dst)
    assert torch.equal(ds.features["node", "paper", "feat"].data, g.nodes["paper"].data["feat"])
    assert torch.equal(ds.features["node", "author", "feat"].data, g.nodes["author"].data["feat"])
    assert torch.equal(ds.features["edge", WRITES, "w"].data, g.edges[WRITES].data["w"])
    assert set(ds.labels) == {"paper"} and torch.equal(ds.labels["paper"], g.nodes["paper"].data["label"])
    assert isinstance(ds.train_set, HeteroItemSet) and list(ds.train_set.item_sets) == ["paper"]
    seeds, labels = ds.train_set.item_sets["paper"][torch.arange(len(ds.train_set))]
    assert torch.equal(seeds, torch.nonzero(g.nodes["paper"].data["train_mask"]).view(-1))
    assert torch.equal(labels, g.nodes["paper"].data["label"][seeds])


def test_sampled_edges_of_a_converted_heterograph_are_dgl_edges():
    g = make_heterograph()
    ds = gp.datasets.from_dgl(g)
    pipe = gp.ItemSampler(ds.train_set, batch_size=5).sample_neighbor(ds.graph, [3, 2], seed=0)
    pipe = pipe.fetch_feature(ds.features, node_feature_keys={"author": ["feat"]}, edge_feature_keys={WRITES: ["w"]})
    for mb in pipe:
        assert torch.equal(mb.node_features["author", "feat"], g.nodes["author"].data["feat"][mb.input_nodes["author"]])
        for layer, subgraph in zip(mb.edge_features, mb.sampled_subgraphs):
            eids = subgraph.original_edge_ids["author:writes:paper"]
            assert torch.equal(layer["author:writes:paper", "w"], g.edges[WRITES].data["w"][eids])
            csc = subgraph.sampled_csc["author:writes:paper"]
            dgl_src, dgl_dst = g.find_edges(eids, etype=WRITES)
            assert torch.equal(dgl_src, subgraph.original_row_node_ids["author"][csc.indices])
            targets = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
            assert torch.equal(dgl_dst, subgraph.original_column_node_ids["paper"][targets])
