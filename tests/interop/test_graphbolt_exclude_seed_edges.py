"""``gp.exclude_seed_edges`` equals GraphBolt 2.1's ``gb.exclude_seed_edges`` applied to the
same sampled layers (as GraphBolt's ``SampledSubgraphImpl`` in a ``gb.MiniBatch`` with the
same ``seeds``), typed and untyped, both layouts, with and without reverse edges. Runs in
the DGL environment (see test_dgl.py); skipped in the main one."""

import os
import sys

import pytest
import torch

gb = pytest.importorskip("dgl.graphbolt")

import graphpipe as gp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from seed_edge_batches import REVERSE, link_batches  # noqa: E402


def graphbolt_layer(layer):
    """GraphBolt 2.1's ``SampledSubgraphImpl`` of a graphpipe layer (without edge weights,
    which 2.1's has not)."""

    def csc(value):
        return gb.CSCFormatBase(indptr=value.indptr, indices=value.indices)

    sampled = {etype: csc(c) for etype, c in layer.sampled_csc.items()} if layer.is_heterogeneous else csc(layer.sampled_csc)
    return gb.SampledSubgraphImpl(
        sampled_csc=sampled,
        original_column_node_ids=layer.original_column_node_ids,
        original_row_node_ids=layer.original_row_node_ids,
        original_edge_ids=layer.original_edge_ids,
    )


def fields(layer) -> dict:
    """A layer's CSC, node and edge ids as lists, by edge / node type (untyped: key None)."""
    def by_type(value, fn):
        return {k: fn(v) for k, v in value.items()} if isinstance(value, dict) else {None: fn(value)}

    return {
        "csc": by_type(layer.sampled_csc, lambda c: (c.indptr.tolist(), c.indices.tolist())),
        "rows": by_type(layer.original_row_node_ids, torch.Tensor.tolist),
        "columns": by_type(layer.original_column_node_ids, torch.Tensor.tolist),
        "edge ids": by_type(layer.original_edge_ids, torch.Tensor.tolist),
    }


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layout", ["block", "pyg"])
@pytest.mark.parametrize("typed", [False, True])
def test_equals_graphbolts_exclude_seed_edges(typed, layout, reverse):
    mapping = REVERSE if typed and reverse else None
    removed = 0
    for mb in link_batches(typed, layout):
        theirs = gb.MiniBatch(seeds=mb.seeds, sampled_subgraphs=[graphbolt_layer(layer) for layer in mb.sampled_subgraphs])
        theirs = gb.exclude_seed_edges(theirs, include_reverse_edges=reverse, reverse_etypes_mapping=mapping)
        ours = gp.exclude_seed_edges(mb, include_reverse_edges=reverse, reverse_etypes_mapping=mapping)
        for before, their_layer, our_layer in zip(mb.sampled_subgraphs, theirs.sampled_subgraphs, ours.sampled_subgraphs):
            assert fields(our_layer) == fields(their_layer)
            removed += sum(before.as_typed().num_edges.values()) - sum(our_layer.as_typed().num_edges.values())
    assert removed > 0
