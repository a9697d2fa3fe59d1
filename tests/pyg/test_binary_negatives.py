"""sample_uniform_negative(neg_sampling="binary"): PyG's LinkNeighborLoader binary negatives
(torch_geometric/sampler/neighbor_sampler.py, ``edge_sample``/``neg_sample``): ``ceil(P *
ratio)`` pairs, source and destination each uniform over its node type, independent of the
positives. Compared with that plain-Python model by a chi-square test."""

import math

import pytest
import torch
from scipy.stats import chi2, chisquare

import graphpipe as gp

KINDS = ("untyped", "typed")
NUM = {"user": 3, "item": 4}


def graph_and_pairs(kind):
    """A small graph and its positives: untyped 5 nodes; typed users -> items."""
    g = torch.Generator().manual_seed(0)
    if kind == "untyped":
        edges = torch.randint(0, 5, (2, 40), generator=g)
        return gp.CSCGraph.from_edge_index(edges, 5), edges.t(), (5, 5)
    edges = torch.stack([torch.randint(0, 3, (40,), generator=g), torch.randint(0, 4, (40,), generator=g)])
    graph = gp.CSCGraph.from_hetero_edges({"user:to:item": edges, "item:rev_to:user": edges.flip(0)}, NUM)
    return graph, {"user:to:item": edges.t()}, (NUM["user"], NUM["item"])


def model(positives: int, ratio: float, counts, generator) -> torch.Tensor:
    """PyG's binary negatives, plainly: ceil(P * ratio) (randint(src), randint(dst)) pairs."""
    num = math.ceil(positives * ratio)
    return torch.stack([torch.randint(counts[0], (num,), generator=generator), torch.randint(counts[1], (num,), generator=generator)], 1)


@pytest.mark.parametrize("kind", KINDS)
def test_binary_negatives_are_pygs_random_pairs(kind):
    graph, pairs, counts = graph_and_pairs(kind)
    items = gp.ItemSet(pairs, names="seeds") if kind == "untyped" else gp.HeteroItemSet({k: gp.ItemSet(v, names="seeds") for k, v in pairs.items()})
    pipe = gp.ItemSampler(items, 6, shuffle=True, seed=0).sample_uniform_negative(graph, 1.5, seed=1, neg_sampling="binary")
    cells = counts[0] * counts[1]
    ours, theirs = torch.zeros(cells), torch.zeros(cells)
    generator = torch.Generator().manual_seed(2)
    for epoch in range(60):
        for mb in pipe:
            seeds = mb.seeds if kind == "untyped" else mb.seeds["user:to:item"]
            labels = mb.labels if kind == "untyped" else mb.labels["user:to:item"]
            num_pos = int(labels.sum())
            assert seeds.shape[0] == num_pos + math.ceil(num_pos * 1.5) and not bool(labels[num_pos:].any())
            assert mb.indexes is None
            negatives = seeds[num_pos:]
            ours += torch.bincount(negatives[:, 0] * counts[1] + negatives[:, 1], minlength=cells)
            expected = model(num_pos, 1.5, counts, generator)
            theirs += torch.bincount(expected[:, 0] * counts[1] + expected[:, 1], minlength=cells)
    assert ours.sum() == theirs.sum() > 2000
    # Both uniform over the (source, destination) cells, hence alike.
    assert chisquare(ours.numpy()).pvalue > 1e-3 and chisquare(theirs.numpy()).pvalue > 1e-3
    table = torch.stack([ours, theirs])
    expected = table.sum(0, keepdim=True) * table.sum(1, keepdim=True) / table.sum()
    statistic = float(((table - expected) ** 2 / expected).sum())
    assert chi2.sf(statistic, cells - 1) > 1e-3  # the two samples come from one distribution


def test_binary_batches_give_pygs_binary_layout():
    pytest.importorskip("torch_geometric")
    graph, pairs, _ = graph_and_pairs("untyped")
    pipe = (gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 8).sample_uniform_negative(graph, 1.0, neg_sampling="binary", seed=0)
            .sample_neighbor(graph, [2], layout="pyg"))
    data = next(iter(pipe)).to_pyg()
    assert data.edge_label.dtype == torch.float32 and data.edge_label.tolist() == [1.0] * 8 + [0.0] * 8
    assert torch.equal(data.n_id[data.edge_label_index[:, :8]].t(), pairs[:8])


def test_binary_options_are_checked():
    graph, pairs, _ = graph_and_pairs("untyped")
    items = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 8)
    with pytest.raises(ValueError, match="`neg_sampling` must be 'triplet'"):
        items.sample_uniform_negative(graph, 1, neg_sampling="pairs")
    with pytest.raises(ValueError, match="a finite number > 0"):
        items.sample_uniform_negative(graph, 0.0, neg_sampling="binary")
    with pytest.raises(ValueError, match="needs neg_sampling='triplet'"):
        items.sample_uniform_negative(graph, 1, neg_sampling="binary", exclude_existing_edges=True)


def test_binary_labels_are_float_and_a_positive_label_0_is_refused():
    """Labels are float32 (1.0 positives, 0.0 negatives), as the other negative layouts and
    PyG's ``edge_label``; a positive labelled 0 would read as a sampled negative (PyG shifts
    such labels by 1): refused."""
    graph, pairs, _ = graph_and_pairs("untyped")
    (mb, *_) = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 6).sample_uniform_negative(graph, 1, neg_sampling="binary")
    assert mb.labels.dtype == torch.float32 and mb.labels.tolist() == [1.0] * 6 + [0.0] * 6
    labelled = gp.ItemSet((pairs, torch.zeros(len(pairs))), names=("seeds", "labels"))
    with pytest.raises(ValueError, match=r"the positives' `labels` contain 0, the label of the sampled negatives"):
        next(iter(gp.ItemSampler(labelled, 6).sample_uniform_negative(graph, 1, neg_sampling="binary")))
