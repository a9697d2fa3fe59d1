"""graphpipe's PyG batches against a plain-Python model of NeighborLoader's sampler.

The model follows pyg-lib's homogeneous ``neighbor_sample`` (``disjoint=False``,
directional): the seeds are the first nodes; hop by hop, each node of the frontier, in
order, samples ``min(k, degree)`` distinct in-edges (all with ``k = -1``); a source not
seen before is appended (order of first appearance) and every sampled edge is kept as
``(local source, local target, e_id)``, ``e_id`` the edge's column in the user's
``edge_index``. The frontier of the next hop is the nodes appended in this one.

The graph is an R-MAT power-law stream (hubs, nodes without in-edges, repeated edges,
self loops) with its edges randomly permuted, so CSC positions differ from the user's
edge ids. With ``k = -1`` the sample is deterministic and must be equal (node sets per
hop, edges with their ids and attributes, counts per hop). With finite fanouts the two
draw different random numbers: the checks are structural, plus the distribution of
per-edge inclusion and of the hop sizes.
"""

import random

import numpy as np
import pytest
import torch
from scipy import stats

pytest.importorskip("torch_geometric")

from torch_geometric.data import Data

import graphpipe as gp

from neighbor_loader_like import LAYOUTS, hop_ranges, neighbor_loader

NUM_NODES = 3000


def reference_neighbor_sample(src, in_edges, seeds, num_neighbors, rng):
    """NeighborLoader's sample of one batch, in plain Python (see the module docstring).

    ``src[e]``: the source of edge ``e``; ``in_edges[v]``: the ids of ``v``'s in-edges in
    the user's order. Returns ``(n_id, edge_index [2, E] local, e_id, num_sampled_nodes,
    num_sampled_edges)``.
    """
    nodes = list(seeds)
    local = {v: i for i, v in enumerate(nodes)}
    rows, cols, eids = [], [], []
    num_sampled_nodes, num_sampled_edges = [len(nodes)], []
    begin, end = 0, len(nodes)
    for k in num_neighbors:
        edges_before = len(eids)
        for i in range(begin, end):
            candidates = in_edges[nodes[i]]
            chosen = candidates if k < 0 or k >= len(candidates) else rng.sample(candidates, k)
            for e in chosen:
                u = src[e]
                if u not in local:
                    local[u] = len(nodes)
                    nodes.append(u)
                rows.append(local[u])
                cols.append(i)
                eids.append(e)
        num_sampled_nodes.append(len(nodes) - end)
        num_sampled_edges.append(len(eids) - edges_before)
        begin, end = end, len(nodes)
    return torch.tensor(nodes), torch.tensor([rows, cols]), torch.tensor(eids), num_sampled_nodes, num_sampled_edges


def _data():
    src, dst = gp.datasets.rmat_edges(NUM_NODES, 10 * NUM_NODES, seed=3)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(src.numel(), generator=g)
    edge_index = torch.stack([src.long(), dst.long()])[:, perm]
    return Data(edge_index=edge_index, num_nodes=NUM_NODES, edge_attr=torch.randn(src.numel(), 2, generator=g))


DATA = _data()
IN_DEGREE = torch.bincount(DATA.edge_index[1], minlength=NUM_NODES)
SOURCES = DATA.edge_index[0].tolist()
IN_EDGES = [[] for _ in range(NUM_NODES)]
for _e, _v in enumerate(DATA.edge_index[1].tolist()):
    IN_EDGES[_v].append(_e)


def _triples_by_hop(n_id, edge_index, e_id, num_sampled_edges):
    """Per hop, the set of (global source, global target, e_id)."""
    triples = torch.stack([n_id[edge_index[0]], n_id[edge_index[1]], e_id]).t().tolist()
    return [set(map(tuple, triples[lo:hi])) for lo, hi in hop_ranges(num_sampled_edges)]


def _nodes_by_hop(n_id, num_sampled_nodes):
    return [set(n_id[lo:hi].tolist()) for lo, hi in hop_ranges(num_sampled_nodes)]


def test_the_graph_has_what_the_comparison_needs():
    src, dst = DATA.edge_index
    assert int(IN_DEGREE.max()) > 200 and int((IN_DEGREE == 0).sum()) > 100  # hubs and isolated nodes
    assert bool((src == dst).any())  # self loops
    assert torch.unique(DATA.edge_index, dim=1).size(1) < DATA.edge_index.size(1)  # repeated edges
    assert not bool((dst.diff() >= 0).all())  # not in CSC order


@pytest.mark.parametrize("sampler", ["neighbor", "labor"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("num_neighbors", [[-1], [-1, -1], [-1, -1, -1]])
def test_all_neighbours_equal_the_reference(layout, sampler, num_neighbors):
    input_nodes = torch.randperm(NUM_NODES, generator=torch.Generator().manual_seed(1))[:48]
    loader = neighbor_loader(DATA, num_neighbors, batch_size=16, input_nodes=input_nodes, layout=layout, sampler=sampler)
    batches = list(loader)
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        seeds = input_nodes[16 * i : 16 * (i + 1)].tolist()
        n_id, edge_index, e_id, num_nodes, num_edges = reference_neighbor_sample(SOURCES, IN_EDGES, seeds, num_neighbors, None)
        assert batch.n_id[: batch.batch_size].tolist() == seeds
        assert batch.num_sampled_nodes == num_nodes and batch.num_sampled_edges == num_edges
        assert _nodes_by_hop(batch.n_id, batch.num_sampled_nodes) == _nodes_by_hop(n_id, num_nodes)
        assert _triples_by_hop(batch.n_id, batch.edge_index, batch.e_id, batch.num_sampled_edges) == _triples_by_hop(
            n_id, edge_index, e_id, num_edges
        )
        assert torch.equal(batch.edge_attr, DATA.edge_attr[batch.e_id])


@pytest.mark.parametrize("sampler", ["neighbor", "labor"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_finite_fanouts_sample_neighbor_loaders_structure(layout, sampler):
    num_neighbors = [10, 5, 3]
    input_nodes = torch.randperm(NUM_NODES, generator=torch.Generator().manual_seed(4))[:320]
    loader = neighbor_loader(DATA, num_neighbors, batch_size=32, input_nodes=input_nodes, layout=layout, sampler=sampler)
    for batch in loader:
        n_id, edge_index = batch.n_id, batch.edge_index
        # Every edge is an edge of the graph, with its id, once.
        assert torch.equal(n_id[edge_index], DATA.edge_index[:, batch.e_id])
        assert batch.e_id.unique().numel() == batch.e_id.numel()
        assert n_id.unique().numel() == n_id.numel() == batch.num_nodes
        assert sum(batch.num_sampled_nodes) == batch.num_nodes and sum(batch.num_sampled_edges) == batch.num_edges
        nodes, edges = hop_ranges(batch.num_sampled_nodes), hop_ranges(batch.num_sampled_edges)
        for hop, k in enumerate(num_neighbors):
            (first, end), (lo, hi) = nodes[hop], edges[hop]
            sources, targets = edge_index[:, lo:hi]
            # Targets: the nodes first reached at the hop before, min(k, degree) in-edges each.
            per_node = torch.bincount(targets - first, minlength=end - first)
            assert bool((targets >= first).all()) and bool((targets < end).all())
            assert torch.equal(per_node, IN_DEGREE[n_id[first:end]].clamp(max=k))
            # Sources: known nodes or the next hop's, which they reach (no unreachable nodes).
            next_end = nodes[hop + 1][1]
            assert bool((sources < next_end).all())
            assert torch.equal(sources[sources >= end].unique(), torch.arange(end, next_end))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_in_edge_is_equally_likely(layout):
    """A node of in-degree d with fanout k keeps each of its in-edges with probability
    k / d (NeighborLoader's uniform sampling without replacement): over all seeds of
    in-degree d and several batches, the rank of a kept edge among the node's in-edges
    (in the user's order) is uniform on [0, d)."""
    k, batches = 3, 12
    data = Data(edge_index=DATA.edge_index, num_nodes=NUM_NODES)
    for d in (5, 8, 12):
        seeds = torch.nonzero(IN_DEGREE == d).flatten()
        assert seeds.numel() >= 30
        # rank of every edge among its target's in-edges, in e_id order
        order = torch.argsort(DATA.edge_index[1], stable=True)
        rank = torch.empty_like(order)
        starts = torch.cumsum(IN_DEGREE, 0) - IN_DEGREE
        rank[order] = torch.arange(order.numel()) - starts[DATA.edge_index[1][order]]
        counts = torch.zeros(d, dtype=torch.int64)
        loader = neighbor_loader(data, [k], batch_size=seeds.numel(), input_nodes=seeds.repeat(batches), layout=layout)
        for batch in loader:
            counts += torch.bincount(rank[batch.e_id], minlength=d)
        assert int(counts.sum()) == batches * seeds.numel() * k
        assert stats.chisquare(counts.numpy(), np.full(d, counts.sum() / d)).pvalue > 1e-3


def test_hop_sizes_follow_the_reference_distribution():
    """Same seeds, independent randomness: graphpipe's and the model's nodes and edges per
    hop have the same mean (z-test; the nodes of a block-layout batch left unpruned are
    28% more at the last hop, z = 20)."""
    num_neighbors, trials = [10, 5, 3], 40
    seeds = torch.randperm(NUM_NODES, generator=torch.Generator().manual_seed(2))[:32]
    rng = random.Random(0)
    reference = [reference_neighbor_sample(SOURCES, IN_EDGES, seeds.tolist(), num_neighbors, rng) for _ in range(trials)]
    ref = np.array([r[3][1:] + r[4] for r in reference], dtype=np.float64)
    data = Data(edge_index=DATA.edge_index, num_nodes=NUM_NODES)
    for layout in LAYOUTS:
        loader = neighbor_loader(data, num_neighbors, batch_size=32, input_nodes=seeds.repeat(trials), layout=layout)
        ours = np.array([b.num_sampled_nodes[1:] + b.num_sampled_edges for b in loader], dtype=np.float64)
        assert ours.shape == ref.shape
        z = np.abs(ours.mean(0) - ref.mean(0)) / np.sqrt(ours.var(0, ddof=1) / trials + ref.var(0, ddof=1) / trials + 1e-9)
        assert bool((z < 5).all()), (layout, ours.mean(0), ref.mean(0), z)
