"""SubgraphSampler with node-pair seeds (link prediction): sampling from the pairs'
endpoints, compacted_seeds, and seed-edge exclusion in every layer."""

import itertools

import numpy as np
import pytest
import torch

import graphpipe as gp

SAMPLERS = ("neighbor", "weighted", "labor")


def undirected_graph(num_nodes=120, num_edges=700, seed=0, parallel=0):
    """A graph with both directions of every edge, built from an ``edge_index`` in a shuffled
    order (user edge ids differ from CSC positions). Column ``e`` and ``(e + E/2) % E`` of
    the unshuffled list are reverses; returns ``(graph, edge_index, reverse_edge_ids)``."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(num_nodes, (num_edges,), generator=g) ** 2 // num_nodes  # skewed degrees
    dst = torch.randint(num_nodes, (num_edges,), generator=g)
    if parallel:
        src, dst = torch.cat([src, src[:parallel]]), torch.cat([dst, dst[:parallel]])
    half = src.numel()
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    reverse = (torch.arange(2 * half) + half) % (2 * half)
    perm = torch.randperm(2 * half, generator=g)
    inverse = torch.argsort(perm)
    edge_index, reverse = edge_index[:, perm], inverse[reverse[perm]]
    weight = torch.rand(2 * half, generator=g) + 0.1
    graph = gp.CSCGraph.from_edge_index(edge_index, num_nodes, edge_attributes={"w": weight[torch.argsort(perm)][perm]})
    return graph, edge_index, reverse


def _pipe(graph, pairs, sampler, fanouts=(4, 3), batch_size=30, ratio=1, **kwargs):
    pipe = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), batch_size, shuffle=True, seed=0)
    if ratio:
        pipe = pipe.sample_uniform_negative(graph, ratio, seed=1)
    if sampler == "labor":
        return pipe.sample_layer_neighbor(graph, list(fanouts), seed=2, **kwargs)
    weights = "w" if sampler == "weighted" else None
    return pipe.sample_neighbor(graph, list(fanouts), weights=weights, seed=2, **kwargs)


def _layer_edges(sg):
    """(global source, global destination, user edge id) of every edge of a layer."""
    src, dst = sg.edge_index()
    return sg.original_row_node_ids[src], sg.original_column_node_ids[dst], sg.original_edge_ids


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_pairs_are_sampled_from_their_endpoints(sampler, layout):
    graph, edge_index, _ = undirected_graph()
    pairs = edge_index.t()
    for mb in itertools.islice(_pipe(graph, pairs, sampler, layout=layout), 8):
        seed_nodes = mb.sampled_subgraphs[-1].original_column_node_ids
        assert torch.equal(seed_nodes, torch.unique(mb.seeds))  # distinct endpoints, ascending
        assert torch.equal(mb.input_nodes[: seed_nodes.numel()], seed_nodes)
        assert mb.compacted_seeds.shape == mb.seeds.shape
        assert torch.equal(seed_nodes[mb.compacted_seeds], mb.seeds)
        for lower, upper in zip(mb.sampled_subgraphs, mb.sampled_subgraphs[1:]):
            assert torch.equal(lower.original_column_node_ids, upper.original_row_node_ids)
        for sg in mb.sampled_subgraphs:
            src, dst, eids = _layer_edges(sg)
            assert torch.equal(edge_index[:, eids], torch.stack([src, dst]))


def _excluded_ids(edge_index, seeds, reverse, reverse_edge_ids):
    """User ids of the edges a batch must not sample."""
    wanted = torch.cat([seeds, seeds.flip(1)]) if reverse == "pair" else seeds
    n = int(edge_index.max()) + 1
    ids = torch.isin(edge_index[0] * n + edge_index[1], wanted[:, 0] * n + wanted[:, 1]).nonzero().flatten()
    if reverse == "map":
        ids = torch.cat([ids, reverse_edge_ids[ids]])
    return ids


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("layout", ["block", "pyg"])
@pytest.mark.parametrize("reverse", ["none", "pair", "map"])
def test_no_seed_edge_nor_its_reverse_in_any_layer(sampler, layout, reverse):
    graph, edge_index, reverse_edge_ids = undirected_graph(seed=1, parallel=40)
    pairs = edge_index.t()
    kwargs = dict(exclude_seed_edges=True, include_reverse_edges=reverse != "none")
    if reverse == "map":
        kwargs["reverse_edge_ids"] = reverse_edge_ids
    seen_excluded = 0
    plain_pipe = _pipe(graph, pairs, sampler, layout=layout, fanouts=(-1, 6))
    for mb in itertools.islice(_pipe(graph, pairs, sampler, layout=layout, fanouts=(-1, 6), **kwargs), 12):
        excluded = _excluded_ids(edge_index, mb.seeds, reverse, reverse_edge_ids)
        for sg in mb.sampled_subgraphs:
            assert not bool(torch.isin(sg.original_edge_ids, excluded).any())
        # The same batch without exclusion does sample them: the check can fail.
        plain = plain_pipe.sample_subgraphs(gp.MiniBatch(seeds=mb.seeds, batch_index=mb.batch_index))
        seen_excluded += sum(int(torch.isin(sg.original_edge_ids, excluded).sum()) for sg in plain.sampled_subgraphs)
    assert seen_excluded > 0


def test_reverse_by_map_spares_parallel_reverse_edges():
    """1 -> 0 twice and 0 -> 1 twice, each edge mapped to one reverse: excluding the seed
    (1, 0) by map removes its two edges and their two mapped reverses; mapping both to the
    same reverse leaves the other 0 -> 1 edge in the sample."""
    edge_index = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1]])
    graph = gp.CSCGraph.from_edge_index(edge_index, 2)
    items = gp.ItemSet(torch.tensor([[1, 0]]), names="seeds")

    def sampled(reverse_edge_ids):
        pipe = gp.ItemSampler(items, 1).sample_neighbor(
            graph, [-1], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=reverse_edge_ids
        )
        return sorted(next(iter(pipe)).sampled_subgraphs[0].original_edge_ids.tolist())

    assert sampled(torch.tensor([2, 3, 0, 1])) == []
    assert sampled(torch.tensor([2, 2, 0, 0])) == [3]
    # DGL's reverse_eids as a numpy array (any integer dtype) samples the same.
    assert sampled(np.array([2, 3, 0, 1])) == []
    assert sampled(np.array([2, 2, 0, 0], dtype=np.int32)) == [3]


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_neighbor_sampling_keeps_its_fanout_among_the_edges_left(layout):
    graph, edge_index, _ = undirected_graph(seed=2)
    fanout = 3
    pipe = _pipe(graph, edge_index.t(), "neighbor", fanouts=(2, fanout), layout=layout, exclude_seed_edges=True,
                 include_reverse_edges=True)  # fmt: skip
    short = 0
    for mb in itertools.islice(pipe, 12):
        last = mb.sampled_subgraphs[-1]
        excluded = _excluded_ids(edge_index, mb.seeds, "pair", None)
        counts = last.sampled_csc.indptr[1:] - last.sampled_csc.indptr[:-1]
        degree = graph.in_degrees()[last.original_column_node_ids]
        _, dst = edge_index[:, excluded]
        num_excluded = torch.tensor([int((dst == v).sum()) for v in last.original_column_node_ids.tolist()])
        assert torch.equal(counts, torch.clamp(degree - num_excluded, max=fanout))
        short += int(((degree > fanout) & (degree - num_excluded < fanout)).sum())
    assert short > 0  # some seeds keep fewer than the fanout because of exclusion


def test_exclusion_arguments_are_checked():
    graph, edge_index, reverse = undirected_graph(seed=3)
    source = gp.ItemSampler(gp.ItemSet(edge_index.t(), names="seeds"), 10)
    with pytest.raises(ValueError, match="`include_reverse_edges=True` needs `exclude_seed_edges=True`"):
        source.sample_neighbor(graph, [2], include_reverse_edges=True)
    with pytest.raises(ValueError, match="`reverse_edge_ids` says which edges are reverses, but `include_reverse_edges`"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, reverse_edge_ids=reverse)
    with pytest.raises(TypeError, match="`exclude_seed_edges` must be a bool"):
        source.sample_layer_neighbor(graph, [2], exclude_seed_edges=1)
    with pytest.raises(ValueError, match=r"`reverse_edge_ids` must be a \[num_edges\]"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=reverse[:-1])
    with pytest.raises(ValueError, match="`reverse_edge_ids` holds edge id"):
        source.sample_neighbor(
            graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=reverse + graph.num_edges
        )
    for bad, error, match in [
        (reverse.numpy().astype(np.float64), TypeError, r"`reverse_edge_ids` must be .* integer tensor or numpy array .*, got a numpy array of dtype float64"),
        ("reverse", TypeError, r"`reverse_edge_ids` must be .* integer tensor or numpy array .*, got str"),
        (reverse.numpy()[:-1], ValueError, rf"`reverse_edge_ids` must be a \[num_edges\] = \[{graph.num_edges}\] .*got shape \({graph.num_edges - 1},\)"),
    ]:
        with pytest.raises(error, match=match):
            source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=bad)
    not_reverse = torch.arange(graph.num_edges)
    with pytest.raises(ValueError, match=r"`reverse_edge_ids` must map every edge u -> v to an edge v -> u"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=not_reverse)
    with pytest.raises(ValueError, match=r"`exclude_seed_edges=True` needs node pairs as seeds \(\[N, 2\]\).*ItemSet of node seeds"):
        gp.ItemSampler(gp.ItemSet(torch.arange(10), names="seeds"), 5).sample_neighbor(graph, [2], exclude_seed_edges=True)
    sampler = gp.NeighborSampler(None, graph, [2], exclude_seed_edges=True)
    with pytest.raises(ValueError, match=r"`exclude_seed_edges=True` needs node pairs as seeds \(\[N, 2\]\).*\(10,\)"):
        sampler.sample_subgraphs(gp.MiniBatch(seeds=torch.arange(10)))
    out_of_range = gp.ItemSampler(gp.ItemSet(torch.tensor([[0, 120]]), names="seeds"), 5).sample_neighbor(graph, [2])
    with pytest.raises(ValueError, match="NeighborSampler: `seeds` holds node id 120, out of range"):
        next(iter(out_of_range))
