"""DGL interop: ``MiniBatch.blocks`` of typed and untyped batches, as GraphBolt's.

DGL 2.1 needs torch <= 2.2 and numpy < 2, so this runs in its own environment and is
skipped in the main one. From the repository root::

    python3 -m venv venv-dgl
    venv-dgl/bin/pip install torch==2.2.1 torchdata==0.7.1 dgl==2.1.0 "numpy<2" "numba<0.61" \
        pandas pydantic pyyaml "setuptools<70" tqdm pytest scipy torchmetrics ogb psutil  # the last three: tests/dropin
    venv-dgl/bin/pip install --no-deps -e .
    venv-dgl/bin/python -m pytest tests/interop -p no:cacheprovider
"""

import subprocess
import sys

import pytest
import torch

dgl = pytest.importorskip("dgl")

import graphpipe as gp  # noqa: E402
from hetero_graphs import uniform_typed_edges  # noqa: E402
from typed_link_model import typed_link_batch  # noqa: E402

NUM_NODES = {"author": 40, "inst": 8, "paper": 60}
NUM_EDGES = {
    "author:affiliated:inst": 50,
    "author:writes:paper": 180,
    "paper:cites:paper": 240,
    "paper:written_by:author": 180,
}


def _minibatch(sampler="sample_neighbor", typed=False):
    """``(edges, mb)``: a batch and the graph's user edges ``{etype: [2, m]}`` (one edge
    type ``"_N:_E:_N"`` for an untyped graph, the one-type case)."""
    gen = torch.Generator().manual_seed(0)
    if typed:
        edges = uniform_typed_edges(NUM_NODES, NUM_EDGES, gen)
        graph = gp.CSCGraph.from_hetero_edges(edges, NUM_NODES)
        items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(NUM_NODES["paper"]), names="seeds")})
    else:
        edges = {"_N:_E:_N": torch.randint(0, 300, (2, 3000), generator=gen)}
        graph = gp.CSCGraph.from_edge_index(edges["_N:_E:_N"], num_nodes=300)
        items = gp.ItemSet(300)
    pipe = getattr(gp.ItemSampler(items, 32, shuffle=True, seed=0), sampler)(graph, [6, 4], seed=1)
    return edges, next(iter(pipe))


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
def test_blocks_match_sampled_subgraphs(sampler, typed):
    """Block i is layer i, type by type (an untyped layer has DGL's homogeneous types
    ``_N`` and ``_E``): sizes, local edges, node and edge ids, estimator weights."""
    edges, mb = _minibatch(sampler, typed)
    blocks = mb.blocks
    assert len(blocks) == mb.num_layers == 2
    for block, sg in zip(blocks, mb.sampled_subgraphs):
        view = sg.as_typed()
        assert sorted(block.srctypes) == sorted(block.dsttypes) == sorted(view.original_row_node_ids)
        assert set(block.canonical_etypes) == {tuple(etype.split(":")) for etype in edges}
        for ntype, ids in view.original_row_node_ids.items():
            assert block.num_src_nodes(ntype) == ids.numel()
            assert block.num_dst_nodes(ntype) == view.num_dst_nodes[ntype]
            assert torch.equal(block.srcnodes[ntype].data[dgl.NID], ids)
            assert torch.equal(block.dstnodes[ntype].data[dgl.NID], view.original_column_node_ids[ntype])
        edge_index = view.edge_index()
        for etype in edges:
            key = tuple(etype.split(":"))
            src, dst = block.edges(etype=key, order="eid")
            assert torch.equal(torch.stack([src, dst]), edge_index[etype])
            eids = block.edges[key].data[dgl.EID]
            assert torch.equal(eids, view.original_edge_ids[etype])
            # Block edges are the user's edges (of that type), named by (type-local) ids.
            assert torch.equal(edges[etype][0, eids], block.srcnodes[key[0]].data[dgl.NID][src])
            assert torch.equal(edges[etype][1, eids], block.dstnodes[key[2]].data[dgl.NID][dst])
            assert ("edge_weights" in block.edges[key].data) == (sampler == "sample_layer_neighbor")
            if view.edge_weights is not None:
                assert torch.equal(block.edges[key].data["edge_weights"], view.edge_weights[etype])
        if not typed:  # DGL's homogeneous accessors work on it
            assert torch.equal(block.srcdata[dgl.NID], sg.original_row_node_ids)
            assert torch.equal(block.edata[dgl.EID], sg.original_edge_ids) and block.num_edges() == sg.num_edges
        assert sum(block.num_edges(key) for key in block.canonical_etypes) > 0


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
    _, mb = _minibatch(typed=True)
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


def test_typed_link_batches_give_heterograph_blocks():
    """GraphBolt's typed link layout: blocks as for node batches, and compacted_seeds
    (on the MiniBatch) index the last block's destinations of each end's type."""
    gen = torch.Generator().manual_seed(2)
    edges = uniform_typed_edges(NUM_NODES, NUM_EDGES, gen)
    seeds = {etype: edges[etype][:, :count].t() for etype, count in (("author:writes:paper", 12), ("paper:cites:paper", 9))}
    mb = typed_link_batch(edges, NUM_NODES, seeds, [3, 2], "block")
    blocks = mb.blocks
    assert len(blocks) == 2 and set(blocks[-1].canonical_etypes) == {tuple(etype.split(":")) for etype in NUM_EDGES}
    for etype, pairs in mb.seeds.items():
        src_type, _, dst_type = etype.split(":")
        local = mb.compacted_seeds[etype]
        assert torch.equal(blocks[-1].dstnodes[src_type].data[dgl.NID][local[:, 0]], pairs[:, 0])
        assert torch.equal(blocks[-1].dstnodes[dst_type].data[dgl.NID][local[:, 1]], pairs[:, 1])
    for block, sg in zip(blocks, mb.sampled_subgraphs):
        for etype, ids in sg.original_edge_ids.items():
            assert torch.equal(block.edges[tuple(etype.split(":"))].data[dgl.EID], ids)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_blocks_of_a_hand_built_batch(dtype):
    """GraphBolt's test_get_dgl_blocks_homo with its dtypes (found in review: int32 CSC
    raised a DGLError, a layer without original_edge_ids an AttributeError)."""
    csc = gp.CSCFormat(torch.tensor([0, 2, 3], dtype=dtype), torch.tensor([1, 2, 0], dtype=dtype))
    layer = gp.SampledSubgraph(csc, torch.tensor([5, 6, 7], dtype=dtype), torch.tensor([5, 6], dtype=dtype), None)
    (block,) = gp.MiniBatch(seeds=torch.tensor([5, 6]), sampled_subgraphs=[layer]).blocks
    assert block.num_src_nodes() == 3 and block.num_dst_nodes() == 2
    assert [t.tolist() for t in block.edges()] == [[1, 2, 0], [0, 0, 1]]
    assert block.srcdata[dgl.NID].tolist() == [5, 6, 7] and dgl.EID not in block.edata
