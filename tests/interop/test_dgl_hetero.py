"""DGL heterograph blocks of typed MiniBatches (``MiniBatch.blocks``), as GraphBolt's.

Runs in the DGL environment (see ``tests/interop/test_dgl.py``); skipped without dgl.
"""

import pytest
import torch

dgl = pytest.importorskip("dgl")

import graphpipe as gp  # noqa: E402
from hetero_graphs import uniform_typed_edges  # noqa: E402

NUM_NODES = {"author": 40, "inst": 8, "paper": 60}
NUM_EDGES = {
    "author:affiliated:inst": 50,
    "author:writes:paper": 180,
    "paper:cites:paper": 240,
    "paper:written_by:author": 180,
}


def _typed_batch(sampler="sample_neighbor"):
    g = torch.Generator().manual_seed(0)
    edges = uniform_typed_edges(NUM_NODES, NUM_EDGES, g)
    graph = gp.CSCGraph.from_hetero_edges(edges, NUM_NODES)
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(NUM_NODES["paper"]), names="seeds")})
    pipe = getattr(gp.ItemSampler(items, 8, shuffle=True, seed=0), sampler)(graph, [3, 2], seed=1)
    return edges, next(iter(pipe))


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
def test_hetero_blocks_match_the_sampled_csc(sampler):
    edges, mb = _typed_batch(sampler)
    blocks = mb.blocks
    assert len(blocks) == mb.num_layers == 2
    for block, sg in zip(blocks, mb.sampled_subgraphs):
        assert sorted(block.srctypes) == sorted(NUM_NODES) and sorted(block.dsttypes) == sorted(NUM_NODES)
        assert set(block.canonical_etypes) == {tuple(etype.split(":")) for etype in NUM_EDGES}
        for ntype in NUM_NODES:
            assert block.num_src_nodes(ntype) == sg.num_src_nodes[ntype]
            assert block.num_dst_nodes(ntype) == sg.num_dst_nodes[ntype]
            assert torch.equal(block.srcnodes[ntype].data[dgl.NID], sg.original_row_node_ids[ntype])
            assert torch.equal(block.dstnodes[ntype].data[dgl.NID], sg.original_column_node_ids[ntype])
        edge_index = sg.edge_index()
        for etype in NUM_EDGES:
            key = tuple(etype.split(":"))
            src, dst = block.edges(etype=key, order="eid")
            assert torch.equal(torch.stack([src, dst]), edge_index[etype])
            eids = block.edges[key].data[dgl.EID]
            assert torch.equal(eids, sg.original_edge_ids[etype])
            # Block edges are the user's edges of that type, named by type-local ids.
            assert torch.equal(edges[etype][0, eids], block.srcnodes[key[0]].data[dgl.NID][src])
            assert torch.equal(edges[etype][1, eids], block.dstnodes[key[2]].data[dgl.NID][dst])
            assert ("edge_weights" in block.edges[key].data) == (sampler == "sample_layer_neighbor")
            if sg.edge_weights is not None:
                assert torch.equal(block.edges[key].data["edge_weights"], sg.edge_weights[etype])
        assert sum(block.num_edges(key) for key in block.canonical_etypes) > 0


def _manual_sage_layer(conv, sg, h):
    """One HeteroGraphConv(SAGEConv "mean", aggregate="sum") layer from the sampled CSC:
    per destination type, the sum over its edge types (those whose end types have
    inputs, as DGL runs them) of ``fc_self(h_dst) + fc_neigh(mean of sampled
    in-neighbours)``."""
    out = {}
    for etype, csc in sg.sampled_csc.items():
        src_type, rel, dst_type = etype.split(":")
        if src_type not in h or dst_type not in h:
            continue
        mod = conv.mods[rel]
        degrees = csc.indptr[1:] - csc.indptr[:-1]
        dst = torch.repeat_interleave(torch.arange(degrees.numel()), degrees)
        total = torch.zeros(degrees.numel(), h[src_type].size(1)).index_add_(0, dst, h[src_type][csc.indices])
        mean = total / degrees.clamp(min=1).unsqueeze(1)
        h_dst = h[dst_type][: degrees.numel()]
        rst = mod.fc_self(h_dst) + mod.fc_neigh(mean)  # fc_self holds the bias
        out[dst_type] = out[dst_type] + rst if dst_type in out else rst
    return out


def test_two_layer_hetero_graph_conv_on_blocks():
    _, mb = _typed_batch()
    torch.manual_seed(0)
    rels = [etype.split(":")[1] for etype in NUM_EDGES]
    convs = [
        dgl.nn.HeteroGraphConv({rel: dgl.nn.SAGEConv(c_in, 3, "mean") for rel in rels}, aggregate="sum")
        for c_in in (5, 3)
    ]
    h = {t: torch.randn(ids.numel(), 5) for t, ids in mb.input_nodes.items()}
    expected = dict(h)
    with torch.no_grad():
        for conv, block, sg in zip(convs, mb.blocks, mb.sampled_subgraphs):
            h = conv(block, h)
            expected = _manual_sage_layer(conv, sg, expected)
            assert set(h) == set(expected) and "paper" in h
            for ntype, value in h.items():
                assert value.shape == (sg.num_dst_nodes[ntype], 3)
                torch.testing.assert_close(value, expected[ntype], rtol=1e-5, atol=1e-5)
    assert h["paper"].shape[0] == mb.seeds["paper"].numel()
