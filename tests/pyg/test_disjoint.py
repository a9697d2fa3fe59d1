"""disjoint=True: one subtree per seed, as PyG's NeighborLoader(disjoint=True) (pyg-lib's
disjoint mode): a node reached from two seeds is two nodes, sampled independently."""

import dataclasses
import itertools

import pytest
import torch

pytest.importorskip("torch_geometric")
from scipy.stats import chi2_contingency  # noqa: E402

import graphpipe as gp  # noqa: E402
from sampling_checks import KINDS, NODE, check_disjoint_batch, graph_and_edges, seed_items  # noqa: E402

FANOUTS = [3, 2]


def disjoint_pipe(kind, graph, edges, fanouts=FANOUTS):
    seeds = seed_items(kind, edges, "node")
    if kind == "untyped":
        items = gp.ItemSet(seeds[NODE], names="seeds")
    else:
        items = gp.HeteroItemSet({"paper": gp.ItemSet(seeds["paper"], names="seeds")})
    return gp.ItemSampler(items, 8, shuffle=True, seed=0).sample_neighbor(graph, fanouts, layout="pyg", disjoint=True, seed=3)


@pytest.mark.parametrize("kind", KINDS)
def test_every_subtree_is_a_neighbor_loader_sample_of_its_seed(kind):
    graph, edges = graph_and_edges(kind)
    pipe = disjoint_pipe(kind, graph, edges)
    shared = 0
    for mb in itertools.islice(pipe, 3):
        check_disjoint_batch(graph, edges, mb, pipe.edge_type_fanouts)
        ids = mb.input_nodes if kind == "untyped" else mb.input_nodes["paper"]
        shared += ids.numel() - ids.unique().numel()
    assert shared > 0  # some node is in several subtrees


def test_duplicate_seeds_are_two_subtrees():
    graph, edges = graph_and_edges("untyped")
    pipe = gp.ItemSampler(gp.ItemSet(torch.tensor([5, 5, 7]), names="seeds"), 3).sample_neighbor(
        graph, FANOUTS, layout="pyg", disjoint=True, seed=0
    )
    mb = next(iter(pipe))
    check_disjoint_batch(graph, edges, mb, pipe.edge_type_fanouts)
    assert torch.equal(mb.to_pyg().batch[:3], torch.arange(3))


def test_a_node_samples_independently_in_each_subtree():
    """Seeds 0 and 1 share their only in-neighbour, hub 2, whose 4 in-neighbours are
    sampled once per subtree: the pair of picks is uniform over 4 x 4 (chi-square), where
    variates keyed by the node alone would pick the same one in both."""
    src = torch.tensor([2, 2, 3, 4, 5, 6])
    dst = torch.tensor([0, 1, 2, 2, 2, 2])
    graph = gp.CSCGraph.from_coo(src, dst, 7)
    pipe = gp.ItemSampler(gp.ItemSet(torch.tensor([0, 1]).repeat(800), names="seeds"), 2).sample_neighbor(
        graph, [1, 1], layout="pyg", disjoint=True, seed=11
    )
    table = torch.zeros(4, 4)
    for mb in pipe:  # 800 batches of seeds [0, 1]
        data = mb.to_pyg()
        hop2 = data.edge_index[:, data.num_sampled_edges[0]:]
        picks = data.n_id[hop2[0]][torch.argsort(data.batch[hop2[1]])] - 3
        table[picks[0], picks[1]] += 1
    assert table.sum() == 800
    assert chi2_contingency(table.numpy()).pvalue > 1e-3
    assert all(table[i].sum() > 150 for i in range(4))  # uniform marginals


def test_disjoint_is_refused_where_unsupported():
    graph, edges = graph_and_edges("untyped")
    items = gp.ItemSampler(gp.ItemSet(torch.arange(4), names="seeds"), 2)
    with pytest.raises(gp.UnsupportedCombination, match="layout='pyg'"):
        items.sample_neighbor(graph, FANOUTS, disjoint=True)
    with pytest.raises(gp.UnsupportedCombination, match="LABOR"):
        items.sample_layer_neighbor(graph, FANOUTS, layout="pyg", disjoint=True)
    with pytest.raises(ValueError, match="cooperative=False"):
        items.sample_neighbor(graph, FANOUTS, layout="pyg", disjoint=True, cooperative=True)
    with pytest.raises(TypeError, match="`disjoint` must be a bool"):
        items.sample_neighbor(graph, FANOUTS, layout="pyg", disjoint=1)



@pytest.mark.parametrize("options", [{"disjoint": True}, {"edge_timestamp_attr_name": "ts"}], ids=["disjoint", "temporal"])
@pytest.mark.parametrize("kind", KINDS)
def test_pairs_that_carry_their_own_indexes_are_a_subtree_each(kind, options):
    """Found in review: link items with negatives and ``indexes`` of their own (the README's
    ``ItemSet((pairs, labels, indexes), ...)``) were laid out as a negative sampler's
    triplets (one source row per query), so a pair lost its source, and a batch cutting a
    query raised. Each such pair is a subtree of its own, as PyG's ``edge_label_index``
    without negative sampling, in disjoint and temporal pyg batches."""
    graph, edges = graph_and_edges(kind)
    if "edge_timestamp_attr_name" in options:  # every edge before the seeds' time
        graph = dataclasses.replace(graph, edge_attributes={**graph.edge_attributes, "ts": torch.zeros(graph.total_num_edges, dtype=torch.int64)})
    fields = lambda pairs: (pairs, torch.ones(12), torch.arange(12) // 2, torch.full((12,), 1000))  # noqa: E731
    sets = {t: gp.ItemSet(fields(pairs), names=("seeds", "labels", "indexes", "timestamp")) for t, pairs in seed_items(kind, edges, "link", 12).items()}
    items = next(iter(sets.values())) if kind == "untyped" else gp.HeteroItemSet(sets)
    pipe = gp.ItemSampler(items, 5).sample_neighbor(graph, FANOUTS, layout="pyg", seed=3, **options)
    batches = list(pipe)
    assert len(batches) == (3 if kind == "untyped" else 5)
    for mb in batches:
        check_disjoint_batch(graph, edges, mb, pipe.edge_type_fanouts)
