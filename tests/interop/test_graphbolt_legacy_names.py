"""GraphBolt 2.1's MiniBatch names (``seed_nodes``, ``node_pairs``, ``negative_dsts``,
``compacted_node_pairs``, ``node_pairs_with_labels``, ...) read on graphpipe's batches equal
GraphBolt 2.1's on the same items, untyped and typed, with and without negatives; local
ids are compared as global ids (the last layer's destinations, numbered differently).
Runs in the DGL environment (see test_dgl.py); skipped in the main one."""

import os
import sys

import pytest
import torch

gb = pytest.importorskip("dgl.graphbolt")

import graphpipe as gp  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from hetero_graphs import hetero_graph  # noqa: E402
from test_graphbolt_hetero_equivalence import graphbolt_graph  # noqa: E402

GLOBAL = ("seed_nodes", "node_pairs", "negative_srcs", "negative_dsts")
LOCAL = ("compacted_node_pairs", "compacted_negative_srcs", "compacted_negative_dsts", "positive_node_pairs", "negative_node_pairs")
PAIRS = torch.tensor([[0, 1], [1, 2], [3, 4], [2, 0], [4, 4]])
NEGATIVES = torch.tensor([[3, 4], [0, 2], [1, 1], [4, 0], [2, 3]])


def _global(value, columns, side=None, types=None):
    """``value`` (a tensor, a ``(sources, destinations)`` tuple, a dict by edge type) with
    local ids made global; ``side``: 0 or 1 for a dict of sources or destinations only."""
    if isinstance(value, dict):
        return {etype: _global(v, columns, side, etype.split(":")[::2]) for etype, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_global(v, columns, i, types) for i, v in enumerate(value))
    if value is None:
        return None
    return (columns if types is None else columns[types[side]])[value.long()]


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (tuple, dict)):
        keys = range(len(a)) if isinstance(a, tuple) else a.keys()
        return type(a) is type(b) and len(a) == len(b) and all(_same(a[k], b[k]) for k in keys)
    return a.shape == b.shape and torch.equal(a.long(), b.long())


def _compare(theirs, ours, local=True):
    for name in GLOBAL:
        assert _same(getattr(theirs, name), getattr(ours, name)), name
    if not local:
        return
    their_columns = theirs.sampled_subgraphs[-1].original_column_node_ids
    our_columns = ours.sampled_subgraphs[-1].original_column_node_ids
    for name in LOCAL:
        side = {"s": 0, "d": 1}.get(name[-4])
        assert _same(_global(getattr(theirs, name), their_columns, side), _global(getattr(ours, name), our_columns, side)), name
    their_pairs, our_pairs = theirs.node_pairs_with_labels, ours.node_pairs_with_labels
    assert (their_pairs is None) == (our_pairs is None)
    if their_pairs is not None:
        assert _same(_global(their_pairs[0], their_columns), _global(our_pairs[0], our_columns))
        assert _same(their_pairs[1], our_pairs[1])


CASES = {
    "seed_nodes": ("seed_nodes", torch.arange(5)),
    "node_pairs": ("node_pairs", PAIRS),
    "labels": (("node_pairs", "labels"), (PAIRS, torch.arange(5))),
    "negative_dsts": (("node_pairs", "negative_dsts"), (PAIRS, NEGATIVES)),
    "negative_srcs": (("node_pairs", "negative_srcs"), (PAIRS, NEGATIVES)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_untyped_batches_read_as_graphbolt_21s(case):
    names, items = CASES[case]
    indices = torch.tensor([1, 2, 0, 3, 4, 1, 0, 2, 3, 4])
    theirs = gb.fused_csc_sampling_graph(torch.arange(0, 11, 2), indices)
    ours = gp.CSCGraph.from_coo(indices, torch.arange(5).repeat_interleave(2), num_nodes=5)
    their_batch = next(iter(gb.ItemSampler(gb.ItemSet(items, names=names), 3).sample_neighbor(theirs, [-1])))
    our_batch = next(iter(gp.ItemSampler(gp.ItemSet(items, names=names), 3).sample_neighbor(ours, [-1])))
    _compare(their_batch, our_batch)


@pytest.mark.parametrize("case", ["seed_nodes", "node_pairs", "negative_dsts"])
def test_typed_batches_read_as_graphbolt_21s(case):
    graph, _ = hetero_graph(seed=3)
    theirs = graphbolt_graph(graph)
    if case == "seed_nodes":
        items = {"paper": (torch.arange(6),), "author": (torch.arange(4),)}
        names = "seed_nodes"
    else:
        items = {"author:writes:paper": (PAIRS, NEGATIVES), "paper:cites:paper": (PAIRS + 1, NEGATIVES + 2)}
        names = ("node_pairs", "negative_dsts") if case == "negative_dsts" else "node_pairs"
    if names != ("node_pairs", "negative_dsts"):
        items = {key: value[0] for key, value in items.items()}

    def pipe(lib, graph):
        sets = lib.ItemSetDict({key: lib.ItemSet(value, names=names) for key, value in items.items()})
        return next(iter(lib.ItemSampler(sets, 7).sample_neighbor(graph, [torch.tensor([-1] * 4)] if lib is gb else [-1])))

    _compare(pipe(gb, theirs), pipe(gp, graph))


def test_uniform_negatives_read_as_graphbolt_21s():
    """``sample_uniform_negative``: the same positives, no negative sources (each keeps its
    positive's), ``[P, k]`` destinations; graphpipe's compacted negatives are its own."""
    indices = torch.tensor([1, 2, 0, 3, 4, 1, 0, 2, 3, 4])
    theirs = gb.fused_csc_sampling_graph(torch.arange(0, 11, 2), indices)
    ours = gp.CSCGraph.from_coo(indices, torch.arange(5).repeat_interleave(2), num_nodes=5)
    their_batch = next(iter(gb.ItemSampler(gb.ItemSet(PAIRS, names="node_pairs"), 4).sample_uniform_negative(theirs, 2).sample_neighbor(theirs, [-1])))
    our_batch = next(iter(gp.ItemSampler(gp.ItemSet(PAIRS, names="node_pairs"), 4).sample_uniform_negative(ours, 2).sample_neighbor(ours, [-1])))
    assert _same(their_batch.node_pairs, our_batch.node_pairs)
    assert their_batch.negative_srcs is None and our_batch.negative_srcs is None
    assert their_batch.compacted_negative_srcs is None and our_batch.compacted_negative_srcs is None
    assert their_batch.negative_dsts.shape == our_batch.negative_dsts.shape == (4, 2)
    columns = our_batch.sampled_subgraphs[-1].original_column_node_ids
    assert torch.equal(columns[our_batch.compacted_negative_dsts], our_batch.negative_dsts)
    their_pairs, their_labels = their_batch.node_pairs_with_labels
    our_pairs, our_labels = our_batch.node_pairs_with_labels
    assert their_labels.dtype == our_labels.dtype and torch.equal(their_labels, our_labels)
    assert [p.shape for p in their_pairs] == [p.shape for p in our_pairs]
