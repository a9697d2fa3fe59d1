"""from_dgl: the dataset equals the DGL graph it came from. Runs in the DGL environment
(see test_dgl.py); skipped in the main one."""

import pytest
import torch

dgl = pytest.importorskip("dgl")

import graphpipe as gp  # noqa: E402


def make_graph(num_nodes=60, num_edges=400, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    g = dgl.graph((src, dst), num_nodes=num_nodes)
    masks = torch.randint(0, 4, (num_nodes,), generator=gen)
    g.ndata["feat"] = torch.randn(num_nodes, 4, generator=gen)
    g.ndata["label"] = torch.randint(0, 5, (num_nodes,), generator=gen)
    g.ndata["train_mask"], g.ndata["val_mask"], g.ndata["test_mask"] = masks == 0, masks == 1, masks == 2
    g.ndata["degree_bucket"] = torch.randint(0, 9, (num_nodes, 2), generator=gen)
    g.edata["w"] = torch.rand(num_edges, generator=gen)
    return g


def test_from_dgl_matches_the_graph():
    g = make_graph()
    ds = gp.datasets.from_dgl(g)
    csc = ds.graph
    eids = csc.map_edge_ids(torch.arange(csc.total_num_edges))
    src, dst = g.edges(order="eid")
    assert torch.equal(csc.edge_index(), torch.stack([src, dst])[:, eids])
    assert sorted(eids.tolist()) == list(range(g.num_edges()))
    ids = torch.arange(g.num_nodes())
    assert torch.equal(ds.features["feat"].read(ids), g.ndata["feat"])
    assert torch.equal(ds.features["degree_bucket"].read(ids), g.ndata["degree_bucket"])
    assert torch.equal(ds.features["edge", "w"].read(eids), g.edata["w"][eids])
    assert torch.equal(ds.labels, g.ndata["label"]) and ds.num_classes == int(g.ndata["label"].max()) + 1
    for item_set, key in ((ds.train_set, "train_mask"), (ds.validation_set, "val_mask"), (ds.test_set, "test_mask")):
        seeds = torch.nonzero(g.ndata[key]).view(-1)
        assert torch.equal(item_set.field("seeds"), seeds)
        assert torch.equal(item_set.field("labels"), g.ndata["label"][seeds])
    # Sampled blocks carry DGL's own edge ids.
    mb = next(iter(gp.ItemSampler(ds.train_set, 8).sample_neighbor(csc, [-1])))
    block_eids = mb.sampled_subgraphs[0].original_edge_ids
    assert torch.equal(dst[block_eids], mb.sampled_subgraphs[0].original_column_node_ids[
        torch.repeat_interleave(torch.arange(mb.seeds.numel()), mb.sampled_subgraphs[0].sampled_csc.indptr.diff().long())])


def test_from_dgl_reads_a_graph_with_two_node_types_as_typed():
    g = dgl.heterograph({("a", "r", "b"): ([0, 1], [0, 0])})
    graph = gp.datasets.from_dgl(g).graph
    assert graph.is_heterogeneous and graph.edge_types == ["a:r:b"] and graph.num_nodes_per_type == {"a": 2, "b": 1}
