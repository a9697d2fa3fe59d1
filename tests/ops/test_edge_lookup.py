"""Seed-edge exclusion: the per-seed lists of edges to skip, and the sampling ops honouring them."""

import collections
import itertools

import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph
from graphpipe.ops import EdgeExclusion, sample_labor, sample_neighbors, seed_edge_exclusion, unique_and_compact
from graphpipe.ops.edge_lookup import EdgeQueries, drop_excluded, in_neighbours_sorted
from graphpipe.ops.labor import Variates
from graphpipe.ops.random import derive_key

KEY = derive_key(11, 0, 2)


def _multigraph(seed=0):
    """80 nodes, skewed in-degrees, some parallel edges and both directions of some edges."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(80, (900,), generator=g) ** 2 // 80
    dst = torch.randint(80, (900,), generator=g)
    src = torch.cat([src, src[:100], dst[:200]])  # parallel edges, reverse edges
    dst = torch.cat([dst, dst[:100], src[:200]])
    return CSCGraph.from_coo(src, dst, 80)


def _pairs_and_locals(graph, count, seed=1):
    g = torch.Generator().manual_seed(seed)
    src, dst = graph.edge_index()
    picks = torch.randint(src.numel(), (count,), generator=g)
    pairs = torch.stack([src[picks], dst[picks]], 1)
    pairs = torch.cat([pairs, torch.randint(graph.total_num_nodes, (count, 2), generator=g)])  # non-edges too
    nodes, local = unique_and_compact(pairs.new_empty(0), pairs.reshape(-1), graph.total_num_nodes)
    return pairs, nodes, local.view(-1, 2)


def _expected(graph, pairs, nodes, reverse):
    """Per seed node, the CSC positions to exclude, by brute force."""
    src, dst = graph.edge_index()
    wanted = set(map(tuple, pairs.tolist()))
    if reverse:
        wanted |= {(v, u) for u, v in wanted}
    per_node = {int(v): [] for v in nodes}
    for p, (u, v) in enumerate(zip(src.tolist(), dst.tolist())):
        if (u, v) in wanted:
            per_node[v].append(p)
    return [per_node[int(v)] for v in nodes]


def _queries(pairs, local, reverse=False, by_map=False):
    """The :class:`EdgeQueries` of node pairs on an untyped graph: edges u -> v for v's seed
    position, and with ``reverse`` the edges v -> u for u's; ``by_map``: u's position owns
    the mapped reverses."""
    u, v, lu, lv = pairs[:, 0], pairs[:, 1], local[:, 0], local[:, 1]
    if reverse:
        return EdgeQueries(torch.cat([v, u]), torch.cat([u, v]), torch.cat([lv, lu]))
    return EdgeQueries(v, u, lv, reverse_owners=lu if by_map else None)


def _lists(exclusion):
    return [exclusion.positions[a:b].tolist() for a, b in zip(exclusion.indptr[:-1], exclusion.indptr[1:])]


@pytest.mark.parametrize("reverse", [False, True])
def test_exclusion_lists_match_brute_force_for_sorted_and_unsorted_graphs(reverse):
    graph = _multigraph()
    src, dst = graph.edge_index()
    order = torch.argsort(dst * 80 + src)
    sorted_graph = CSCGraph.from_coo(src[order], dst[order], 80)
    assert not in_neighbours_sorted(graph.indptr, graph.indices)
    assert in_neighbours_sorted(sorted_graph.indptr, sorted_graph.indices)
    pairs, nodes, local = _pairs_and_locals(graph, 60)
    for g, is_sorted in ((graph, False), (sorted_graph, True)):
        exclusion = seed_edge_exclusion(g.indptr, g.indices, _queries(pairs, local, reverse), nodes.numel(), sorted_indices=is_sorted)
        assert _lists(exclusion) == _expected(g, pairs, nodes, reverse)
    assert sum(map(len, _expected(graph, pairs, nodes, reverse))) > 60  # parallel edges counted


def test_reverse_by_map_excludes_exactly_the_mapped_edges():
    # 0 -> 1 twice, 1 -> 0 twice: each edge's reverse is one of the two reverse edges.
    graph = CSCGraph.from_coo(torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 0]), 2)  # positions: 0,1 -> node 0
    reverse_positions = torch.tensor([2, 3, 0, 1])  # position 0 (1->0) <-> position 2 (0->1), 1 <-> 3
    pairs = torch.tensor([[1, 0]])
    nodes, local = unique_and_compact(pairs.new_empty(0), pairs.reshape(-1), 2)
    local = local.view(-1, 2)
    by_map = seed_edge_exclusion(
        graph.indptr, graph.indices, _queries(pairs, local, by_map=True), 2, sorted_indices=True, reverse_positions=reverse_positions
    )
    by_pair = seed_edge_exclusion(graph.indptr, graph.indices, _queries(pairs, local, reverse=True), 2, sorted_indices=True)
    assert _lists(by_map) == _lists(by_pair) == [[0, 1], [2, 3]]
    reverse_positions = torch.tensor([2, 2, 0, 0])  # both parallel 1->0 edges map to position 2
    by_map = seed_edge_exclusion(
        graph.indptr, graph.indices, _queries(pairs, local, by_map=True), 2, sorted_indices=True, reverse_positions=reverse_positions
    )
    assert _lists(by_map) == [[0, 1], [2]]


def _exclusion_for(graph, nodes, fraction, seed=0):
    """Exclude about ``fraction`` of the in-edges of every other node of ``nodes``."""
    g = torch.Generator().manual_seed(seed)
    indptr, lists = [0], []
    for i, v in enumerate(nodes.tolist()):
        start, end = int(graph.indptr[v]), int(graph.indptr[v + 1])
        chosen = [p for p in range(start, end) if i % 2 == 0 and torch.rand((), generator=g) < fraction]
        lists += chosen
        indptr.append(len(lists))
    return EdgeExclusion(torch.tensor(indptr), torch.tensor(lists, dtype=torch.int64))


@pytest.mark.parametrize("fanout, replace", [(3, False), (10, False), (80, False), (-1, False), (4, True)])
@pytest.mark.parametrize("weighted", [False, True])
def test_neighbor_sampling_skips_excluded_edges_and_keeps_its_fanout(graph_builder, fanout, replace, weighted):
    graph = graph_builder(300, 120, seed=4, weights=weighted)
    probs = graph.edge_attributes["weight"] if weighted else None
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(0))[:150]
    exclusion = _exclusion_for(graph, nodes[:100], 0.4)  # a prefix of the destinations
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=replace, probs=probs, exclude=exclusion)
    plain = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=replace, probs=probs)
    assert not bool(torch.isin(sample.edge_ids, exclusion.positions).any())
    assert bool(torch.isin(plain.edge_ids, exclusion.positions).any())  # the check can fail
    assert torch.equal(graph.indices[sample.edge_ids].to(torch.int64), sample.indices)
    counts = sample.indptr[1:] - sample.indptr[:-1]
    for i, v in enumerate(nodes.tolist()):
        start, end = int(graph.indptr[v]), int(graph.indptr[v + 1])
        excluded = exclusion.positions[exclusion.indptr[i] : exclusion.indptr[i + 1]].tolist() if i < 100 else []
        allowed = [p for p in range(start, end) if p not in excluded and (probs is None or probs[p] > 0)]
        edges = sample.edge_ids[sample.indptr[i] : sample.indptr[i + 1]].tolist()
        assert set(edges) <= set(allowed) and edges == sorted(edges)
        if replace:
            assert int(counts[i]) == (fanout if allowed else 0)
        else:
            assert int(counts[i]) == (len(allowed) if fanout == -1 else min(fanout, len(allowed)))
            assert len(set(edges)) == len(edges)
        if not excluded:  # destinations without exclusions draw as before
            assert edges == plain.edge_ids[plain.indptr[i] : plain.indptr[i + 1]].tolist()


def test_excluding_keeps_uniform_subsets_of_the_remaining_edges():
    """A destination with 6 in-edges, positions 1 and 4 excluded, fanout 2: the 6 pairs
    of the 4 remaining edges are equally likely (chi-square over 6,000 draws: one call on
    6,000 copies of the destination, then 300 keys on the one destination)."""
    copies = 6000
    graph = CSCGraph(torch.arange(0, 6 * copies + 1, 6), torch.zeros(6 * copies, dtype=torch.int64))
    starts = 6 * torch.arange(copies)
    exclusion = EdgeExclusion(torch.arange(0, 2 * copies + 1, 2), torch.stack([starts + 1, starts + 4], 1).flatten())
    sample = sample_neighbors(graph.indptr, graph.indices, torch.arange(copies), 2, key=derive_key(0), exclude=exclusion)
    assert sample.indptr.diff().tolist() == [2] * copies
    pairs = (sample.edge_ids - starts.repeat_interleave(2)).view(copies, 2).sort(dim=1).values
    counts = collections.Counter(map(tuple, pairs.tolist()))
    assert set(counts) == set(itertools.combinations([0, 2, 3, 5], 2))
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3
    exclusion = EdgeExclusion(torch.tensor([0, 2]), torch.tensor([1, 4]))  # and across keys
    counts = collections.Counter(
        tuple(sorted(sample_neighbors(graph.indptr, graph.indices, torch.tensor([0]), 2, key=derive_key(key), exclude=exclusion).edge_ids.tolist()))
        for key in range(300)
    )
    assert set(counts) == set(itertools.combinations([0, 2, 3, 5], 2))
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


def test_labor_drops_excluded_edges_and_reweights_to_the_remaining_mean(graph_builder):
    """LABOR-0 cannot skip edges while sampling: they are dropped, and the HT weights are
    scaled so that sum(w) stays an unbiased estimate of 1 (the mean of a constant)."""
    graph = graph_builder(200, 60, seed=5)
    nodes = torch.argsort(graph.in_degrees(), descending=True)[:20]
    exclusion = _exclusion_for(graph, nodes, 0.3)
    totals = torch.zeros(20, dtype=torch.float64)
    rounds = 400
    for r in range(rounds):
        sample = sample_labor(graph.indptr, graph.indices, nodes, 5, variates=Variates(derive_key(r)))
        sample = drop_excluded(sample, exclusion, nodes, graph.indptr)
        assert not bool(torch.isin(sample.edge_ids, exclusion.positions).any())
        dst = torch.repeat_interleave(torch.arange(20), sample.indptr[1:] - sample.indptr[:-1])
        totals.index_add_(0, dst, sample.edge_weights.to(torch.float64))
    has_edges_left = (graph.in_degrees()[nodes] - (exclusion.indptr[1:] - exclusion.indptr[:-1])) > 0
    mean = (totals / rounds)[has_edges_left]
    assert bool(((mean - 1).abs() < 0.12).all()), mean
    assert bool((exclusion.indptr[1:] > exclusion.indptr[:-1]).any())


def test_bad_exclusions_are_refused(graph_builder):
    graph = graph_builder(50, 10, seed=6)
    v = int(torch.argmax(graph.in_degrees()))
    start = int(graph.indptr[v])
    nodes = torch.tensor([v])
    cases = [
        (EdgeExclusion(torch.tensor([0, 1]), torch.tensor([start - 1])), "ascend strictly within"),
        (EdgeExclusion(torch.tensor([0, 2]), torch.tensor([start + 1, start])), "ascend strictly within"),
        (EdgeExclusion(torch.tensor([0, 1, 1]), torch.tensor([start])), "covers 2 destinations"),
        (EdgeExclusion(torch.tensor([0, 2]), torch.tensor([start])), "must rise from 0"),
        ((torch.tensor([0, 1]), torch.tensor([start])), "must be a graphpipe.ops.edge_lookup.EdgeExclusion"),
    ]
    for exclusion, message in cases:
        with pytest.raises((ValueError, TypeError), match=message):
            sample_neighbors(graph.indptr, graph.indices, nodes, 2, key=KEY, exclude=exclusion)
