"""NeighborSampler on untyped graphs: its arguments, the user's edge ids, the pyg layout's
frontier, fanouts too large for memory (sampling properties shared with typed graphs are in
test_sampling.py)."""

import pytest
import torch

import graphpipe as gp
from graphpipe import CSCGraph, FeatureStore, ItemSampler, MiniBatch, NeighborSampler
from graphpipe.pipes.capabilities import UnsupportedCombination


def test_bad_arguments_raise_clear_errors(graph_builder):
    graph = graph_builder(50, 10, seed=5, weights=True)
    source = ItemSampler(torch.arange(10), batch_size=5)
    for fanouts in (5, [], [-5], [2, -3], [2.0], "12"):
        with pytest.raises(ValueError, match="`fanouts"):
            NeighborSampler(source, graph, fanouts)
    with pytest.raises(KeyError, match=r"'prob' is not an edge attribute of the graph; known edge attributes: \['weight'\]; "
                                       r"graph attributes are given when the graph is built.*from_pyg and from_dgl keep"):
        NeighborSampler(source, graph, [2], weights="prob")
    bad = {
        "neg": -graph.edge_attributes["weight"] - 1,
        "ints": torch.ones(graph.total_num_edges, dtype=torch.int64),
        "wide": torch.ones(graph.total_num_edges, 2),
    }
    g2 = CSCGraph(graph.indptr, graph.indices, edge_attributes=bad)
    with pytest.raises(ValueError, match="`weights` attribute 'neg' must be non-negative"):
        NeighborSampler(source, g2, [2], weights="neg")
    for name in ("ints", "wide"):
        with pytest.raises(ValueError, match=f"`weights` attribute '{name}' must be a 1-D float"):
            NeighborSampler(source, g2, [2], weights=name)
    for layout in ("dgl", None, "PyG"):
        with pytest.raises(ValueError, match=r"`layout` must be 'block' \(GraphBolt/DGL blocks.*or 'pyg'"):
            NeighborSampler(source, graph, [2], layout=layout)
    with pytest.raises(UnsupportedCombination, match=r"mode=cooperative, layout=pyg is not supported: .*layout='block'"):
        NeighborSampler(source, graph, [2], cooperative=True, layout="pyg")
    sampler = NeighborSampler(source, graph, [2])
    with pytest.raises(ValueError, match=r"`seeds` holds node id 50, out of range: valid ids are 0..49"):
        sampler.sample_subgraphs(MiniBatch(seeds=torch.tensor([1, 50])))
    with pytest.raises(TypeError, match="`seeds` must be an integer tensor"):
        sampler.sample_subgraphs(MiniBatch(seeds=torch.tensor([1.0, 2.0])))


def test_prob_name_is_graphbolts_name_for_weights(graph_builder):
    """GraphBolt 2.1's ``sample_neighbor(graph, fanouts, replace, prob_name)``: by keyword
    or position, ``prob_name`` samples as ``weights`` does; passing both is refused."""
    graph = graph_builder(50, 10, seed=5, weights=True)
    mask = torch.arange(graph.total_num_edges) % 2 == 0  # zero-weight edges are never drawn
    graph = CSCGraph(graph.indptr, graph.indices, edge_attributes={"mask": mask.float()})
    batches = [
        next(iter(ItemSampler(torch.arange(50), batch_size=50).sample_neighbor(graph, [3], *args, seed=1, **kwargs)))
        for args, kwargs in (((), {"weights": "mask"}), ((), {"prob_name": "mask"}), ((False, "mask"), {}))
    ]
    eids = [mb.sampled_subgraphs[0].original_edge_ids for mb in batches]
    assert eids[0].numel() > 0 and bool(mask[eids[0]].all())
    assert all(torch.equal(e, eids[0]) for e in eids)
    with pytest.raises(ValueError, match=r"NeighborSampler: pass `weights` or `prob_name` \(GraphBolt's name for it\), not both"):
        ItemSampler(torch.arange(50), batch_size=50).sample_neighbor(graph, [3], weights="mask", prob_name="mask")


def test_edge_ids_are_the_users_edge_ids():
    """``original_edge_ids`` (and the edge features fetched by them) are positions in the
    edge list the graph was built from, not in the graph's CSC order."""
    graph = CSCGraph.from_edge_index(torch.tensor([[0, 1, 2], [2, 0, 1]]), 3)
    store = FeatureStore({}, {"attr": torch.tensor([[10.0], [11.0], [12.0]])})
    for layout in ("block", "pyg"):
        pipe = ItemSampler(torch.tensor([0]), 1).sample_neighbor(graph, [-1], layout=layout)
        (mb,) = list(pipe.fetch_feature(store, edge_feature_keys=["attr"]))
        (sg,) = mb.sampled_subgraphs
        assert sg.original_edge_ids.tolist() == [1]  # the edge 1 -> 0 is column 1
        assert mb.edge_features[0]["attr"].tolist() == [[11.0]]

    # A larger graph whose edges come in random order.
    g = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, 200, (2, 2000), generator=g)
    graph = CSCGraph.from_coo(src, dst, num_nodes=200)
    for layout in ("block", "pyg"):
        pipe = ItemSampler(torch.arange(200), 50).sample_neighbor(graph, [3, -1], seed=1, layout=layout)
        for mb in pipe:
            for sg in mb.sampled_subgraphs:
                local_src, local_dst = sg.edge_index()
                eids = sg.original_edge_ids
                assert eids.dtype == torch.int64
                assert torch.equal(src[eids], sg.original_row_node_ids[local_src])
                assert torch.equal(dst[eids], sg.original_column_node_ids[local_dst])


@pytest.mark.parametrize("replace", [False, True])
def test_pyg_layout_samples_each_node_once_at_its_first_hop(graph_builder, replace):
    """layout="pyg": a layer samples only the nodes its previous layer added (less work);
    its earlier destinations have no in-edges; sources are deduplicated against every
    node known so far; the frontier's edges are those of the block layout."""
    graph = graph_builder(300, 30, seed=6)
    fanouts = [3, 4, 2]
    sizes = {"block": [], "pyg": []}

    def run(layout):
        sampler = ItemSampler(torch.arange(0, 300, 7), 16, seed=0).sample_neighbor(
            graph, fanouts, replace=replace, seed=5, layout=layout
        )
        real = sampler.sample_layer
        sampler.sample_layer = lambda nodes, layer, mb: sizes[layout].append(nodes.numel()) or real(nodes, layer, mb)
        return list(sampler)

    blocks, pygs = run("block"), run("pyg")
    assert sum(sizes["pyg"]) < sum(sizes["block"])
    for block_mb, mb in zip(blocks, pygs):
        assert mb.layout == "pyg" and block_mb.layout == "block"
        assert mb.input_nodes.numel() < block_mb.input_nodes.numel()
        subgraphs = mb.sampled_subgraphs
        assert torch.equal(subgraphs[-1].original_column_node_ids, mb.seeds)
        assert torch.equal(subgraphs[0].original_row_node_ids, mb.input_nodes)
        assert mb.input_nodes.unique().numel() == mb.input_nodes.numel()
        frontier_start = 0
        for layer in reversed(range(len(fanouts))):
            sg, block_sg = subgraphs[layer], block_mb.sampled_subgraphs[layer]
            dst = sg.original_column_node_ids
            assert torch.equal(sg.original_row_node_ids[: dst.numel()], dst)
            if layer + 1 < len(fanouts):
                assert torch.equal(dst, subgraphs[layer + 1].original_row_node_ids)
            counts = sg.sampled_csc.indptr[1:] - sg.sampled_csc.indptr[:-1]
            assert not counts[:frontier_start].any()
            deg = graph.in_degrees()[dst[frontier_start:]]
            expected = torch.where(deg > 0, fanouts[layer], 0) if replace else deg.clamp(max=fanouts[layer])
            assert torch.equal(counts[frontier_start:], expected)
            # The frontier's in-edges are the ones the block layout samples for those nodes.
            local = torch.searchsorted(block_sg.original_column_node_ids.sort().values, dst[frontier_start:])
            block_local = block_sg.original_column_node_ids.sort().indices[local]
            ptr = block_sg.sampled_csc.indptr
            block_eids = torch.cat([block_sg.original_edge_ids[ptr[j] : ptr[j + 1]] for j in block_local.tolist()])
            assert torch.equal(sg.original_edge_ids, block_eids)
            frontier_start = dst.numel()


@pytest.mark.parametrize("weighted", [False, True])
def test_a_fanout_too_large_for_memory_is_named_by_its_layer(weighted):
    graph = gp.CSCGraph.from_edge_index(
        torch.tensor([[0, 1, 2], [2, 0, 1]]), edge_attributes={"w": torch.ones(3)}
    )
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(3)), 3).sample_neighbor(
        graph, [2, 2**40], replace=True, weights="w" if weighted else None
    )
    with pytest.raises(ValueError, match=r"NeighborSampler: `fanouts\[1\]` is too large: .*`fanout`=1099511627776"):
        next(iter(pipe))
