"""GraphBolt itself and graphpipe sample the same edges from the same typed graph where
the result is deterministic (fanout -1, or a fanout no smaller than any degree), layer
by layer, and the same number per (destination, edge type) otherwise. Runs in the DGL
environment (see test_dgl.py); skipped in the main one."""

import os
import sys

import pytest
import torch

gb = pytest.importorskip("dgl.graphbolt")

import graphpipe as gp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hetero_graphs import hetero_graph  # noqa: E402


def graphbolt_graph(graph):
    """GraphBolt's FusedCSCSamplingGraph of a typed CSCGraph, type-local edge ids as ORIGINAL_EDGE_ID."""
    return gb.fused_csc_sampling_graph(
        graph.indptr.long(),
        graph.indices.long(),
        node_type_offset=graph.node_type_offset,
        type_per_edge=graph.type_per_edge.long(),
        node_type_to_id=dict(graph.node_type_to_id),
        edge_type_to_id=dict(graph.edge_type_to_id),
        edge_attributes={gb.ORIGINAL_EDGE_ID: graph.original_edge_ids.long()},
    )


def edge_set(subgraph, etype, rows, columns):
    """``{(src, dst, edge id)}`` in type-local ids of ``etype``'s sampled edges."""
    src_type, _, dst_type = etype.split(":")
    csc = subgraph.sampled_csc[etype]
    dst = torch.arange(csc.indptr.numel() - 1).repeat_interleave(csc.indptr.diff())
    return set(zip(
        rows[src_type][csc.indices].tolist(), columns[dst_type][dst].tolist(), subgraph.original_edge_ids[etype].tolist()
    ))  # fmt: skip


@pytest.mark.parametrize("labor", [False, True])
@pytest.mark.parametrize("fanout", [-1, 20, 2])
def test_one_layer_equals_graphbolts(labor, fanout):
    graph, _ = hetero_graph(seed=4)
    theirs = graphbolt_graph(graph)
    seeds = {"paper": torch.tensor([0, 5, 9, 33]), "author": torch.tensor([2, 7])}
    sample = theirs.sample_layer_neighbors if labor else theirs.sample_neighbors
    their_subgraph = sample(seeds, torch.tensor([fanout] * len(graph.edge_types)))
    sampler = (gp.LayerNeighborSampler if labor else gp.NeighborSampler)(None, graph, [fanout], seed=0)
    ours = sampler.sample_subgraphs(gp.MiniBatch(seeds=seeds)).sampled_subgraphs[0]
    all_nodes = {t: torch.arange(n) for t, n in graph.num_nodes_per_type.items()}
    columns = {t: seeds.get(t, torch.empty(0, dtype=torch.int64)) for t in graph.node_types}
    for etype in graph.edge_types:
        dst_type = etype.split(":")[2]
        if dst_type not in seeds:
            continue  # GraphBolt leaves out edge types without destinations
        # GraphBolt's one-layer subgraph holds type-local source ids directly.
        theirs_edges = edge_set(their_subgraph, etype, all_nodes, columns)
        mine = edge_set(ours, etype, ours.original_row_node_ids, ours.original_column_node_ids)
        assert len(mine) > 0
        if fanout == 2:  # random: the same counts per destination, edges of the graph
            assert torch.equal(ours.sampled_csc[etype].indptr, their_subgraph.sampled_csc[etype].indptr), etype
            everything = edge_set(sample(seeds, torch.tensor([-1] * len(graph.edge_types))), etype, all_nodes, columns)
            assert mine <= everything and theirs_edges <= everything
        else:
            assert mine == theirs_edges, etype


@pytest.mark.parametrize("labor", [False, True])
def test_two_layers_through_the_pipes_equal_graphbolts(labor):
    graph, _ = hetero_graph(seed=5)
    theirs = graphbolt_graph(graph)
    item_set = {"paper": torch.arange(40), "author": torch.arange(30)}
    their_pipe = gb.ItemSampler(gb.ItemSetDict({t: gb.ItemSet(ids, names="seed_nodes") for t, ids in item_set.items()}), 16)
    their_pipe = (their_pipe.sample_layer_neighbor if labor else their_pipe.sample_neighbor)(
        theirs, [torch.tensor([-1] * 4), torch.tensor([-1] * 4)]
    )
    our_pipe = gp.ItemSampler(gp.HeteroItemSet(item_set), 16)
    our_pipe = (our_pipe.sample_layer_neighbor if labor else our_pipe.sample_neighbor)(graph, [-1, -1])
    batches = 0
    for their_batch, our_batch in zip(their_pipe, our_pipe):
        batches += 1
        for theirs_layer, ours_layer in zip(their_batch.sampled_subgraphs, our_batch.sampled_subgraphs):
            for t in graph.node_types:
                their_rows = theirs_layer.original_row_node_ids.get(t, torch.empty(0, dtype=torch.int64))
                assert sorted(their_rows.tolist()) == sorted(ours_layer.original_row_node_ids[t].tolist()), t
            for etype in graph.edge_types:
                if etype not in theirs_layer.sampled_csc:
                    assert ours_layer.original_edge_ids[etype].numel() == 0
                    continue
                mine = edge_set(ours_layer, etype, ours_layer.original_row_node_ids, ours_layer.original_column_node_ids)
                other = edge_set(
                    theirs_layer, etype, theirs_layer.original_row_node_ids, theirs_layer.original_column_node_ids
                )
                assert mine == other, etype
    assert batches == 5
