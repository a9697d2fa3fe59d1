"""DGL interop. DGL 2.1 needs torch <= 2.2 and numpy < 2, so this runs in its own environment
and is skipped in the main one. From the repository root::

    python3 -m venv venv-dgl
    venv-dgl/bin/pip install torch==2.2.1 torchdata==0.7.1 dgl==2.1.0 "numpy<2" "numba<0.61" \
        pandas pydantic pyyaml "setuptools<70" tqdm pytest scipy
    venv-dgl/bin/pip install --no-deps -e .
    venv-dgl/bin/python -m pytest tests/interop -p no:cacheprovider
"""

import subprocess
import sys

import pytest
import torch

dgl = pytest.importorskip("dgl")

import graphpipe as gp  # noqa: E402


def _minibatch(weighted=False):
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 300, (2, 3000), generator=gen)
    graph = gp.CSCGraph.from_edge_index(edge_index, num_nodes=300)
    pipe = gp.ItemSampler(gp.ItemSet(300), 32, shuffle=True, seed=0)
    if weighted:
        pipe = pipe.sample_layer_neighbor(graph, [6, 4], seed=1)
    else:
        pipe = pipe.sample_neighbor(graph, [6, 4], seed=1)
    return edge_index, next(iter(pipe))


@pytest.mark.parametrize("weighted", [False, True])
def test_blocks_match_sampled_subgraphs(weighted):
    edge_index, mb = _minibatch(weighted)
    blocks = mb.blocks
    assert len(blocks) == mb.num_layers == 2
    for block, sg in zip(blocks, mb.sampled_subgraphs):
        assert block.num_src_nodes() == sg.num_src_nodes
        assert block.num_dst_nodes() == sg.num_dst_nodes
        src, dst = block.edges(order="eid")
        assert torch.equal(torch.stack([src, dst]), sg.edge_index())
        assert torch.equal(block.srcdata[dgl.NID], sg.original_row_node_ids)
        assert torch.equal(block.dstdata[dgl.NID], sg.original_column_node_ids)
        assert torch.equal(block.edata[dgl.EID], sg.original_edge_ids)
        # every block edge is the user's edge EID (a column of the edge_index the graph was built from)
        user_src, user_dst = edge_index[:, block.edata[dgl.EID]]
        assert torch.equal(user_src, block.srcdata[dgl.NID][src])
        assert torch.equal(user_dst, block.dstdata[dgl.NID][dst])
        assert ("edge_weights" in block.edata) == weighted


def test_dgl_sageconv_on_blocks_matches_manual_mean():
    _, mb = _minibatch()
    block = mb.blocks[-1]
    sg = mb.sampled_subgraphs[-1]
    conv = dgl.nn.SAGEConv(8, 5, "mean")
    h_src = torch.randn(sg.num_src_nodes, 8)
    out = conv(block, (h_src, h_src[: sg.num_dst_nodes]))
    src, dst = sg.edge_index()
    mean = torch.zeros(sg.num_dst_nodes, 8).index_add_(0, dst, h_src[src])
    deg = torch.bincount(dst, minlength=sg.num_dst_nodes).clamp(min=1).unsqueeze(1)
    manual = conv.fc_self(h_src[: sg.num_dst_nodes]) + conv.fc_neigh(mean / deg)
    assert torch.allclose(out, manual, atol=1e-5)


@pytest.mark.parametrize("order", ["graphpipe first", "dgl first"])
def test_imports_side_by_side_with_graphbolt(order):
    first, second = ("graphpipe", "dgl.graphbolt") if order == "graphpipe first" else ("dgl.graphbolt", "graphpipe")
    code = f"import {first}; import {second}; import graphpipe, dgl.graphbolt as gb; print(gb.ItemSampler)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_link_batches_give_blocks_and_compacted_seeds():
    """GraphBolt's link-prediction layout: the last block's destinations are the pairs'
    endpoints, compacted_seeds index them, and excluded seed edges are in no block."""
    gen = torch.Generator().manual_seed(1)
    edge_index = torch.randint(0, 200, (2, 2000), generator=gen)
    graph = gp.CSCGraph.from_edge_index(edge_index, num_nodes=200)
    pairs = edge_index.t()[:256]
    pipe = (
        gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 64, shuffle=True, seed=0)
        .sample_uniform_negative(graph, 2, seed=1)
        .sample_neighbor(graph, [-1, -1], exclude_seed_edges=True, seed=2)
    )
    for mb in pipe:
        blocks = mb.blocks
        assert torch.equal(blocks[-1].dstdata[dgl.NID][mb.compacted_seeds], mb.seeds)
        seed_keys = mb.seeds[:, 0] * 200 + mb.seeds[:, 1]
        for block in blocks:
            src, dst = block.edges(order="eid")
            keys = block.srcdata[dgl.NID][src] * 200 + block.dstdata[dgl.NID][dst]
            assert not bool(torch.isin(keys, seed_keys).any())
        conv = dgl.nn.SAGEConv(4, 3, "mean")
        h = conv(blocks[-1], torch.randn(blocks[-1].num_src_nodes(), 4))
        score = (h[mb.compacted_seeds[:, 0]] * h[mb.compacted_seeds[:, 1]]).sum(1)
        assert score.shape == mb.labels.shape == (mb.seeds.size(0),)
