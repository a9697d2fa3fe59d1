import numpy as np
import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph
from graphpipe.ops import derive_key, sample_uniform_negatives
from graphpipe.ops.edge_lookup import in_neighbours_sorted
from graphpipe.ops.negative_sampling import _uniform_negatives_torch

KEY = derive_key(7, 3)


def _edges(graph):
    src, dst = graph.edge_index()
    return set(zip(src.tolist(), dst.tolist()))


def _sorted_copy(graph):
    """The same graph with every node's sources sorted."""
    src, dst = graph.edge_index()
    order = torch.argsort(dst * graph.total_num_nodes + src)
    return CSCGraph.from_coo(src[order], dst[order], graph.total_num_nodes)


def _positive_pairs(graph, count, seed=0):
    src, dst = graph.edge_index()
    picks = torch.randperm(src.numel(), generator=torch.Generator().manual_seed(seed))[:count]
    return torch.stack([src[picks], dst[picks]], dim=1)


@pytest.mark.parametrize("ratio", [1, 3])
def test_negatives_are_valid_nodes_that_keep_the_source(graph_builder, ratio):
    graph = graph_builder(300, 40, seed=1)
    pairs = _positive_pairs(graph, 500)
    negatives = sample_uniform_negatives(pairs, graph.total_num_nodes, ratio, key=KEY)
    assert negatives.shape == (500, ratio) and negatives.dtype == torch.int64
    assert int(negatives.min()) >= 0 and int(negatives.max()) < graph.total_num_nodes


def test_with_exclusion_no_negative_is_an_edge_and_lookups_agree(graph_builder):
    graph = graph_builder(120, 60, seed=2)  # dense enough that plain draws hit edges
    sorted_graph = _sorted_copy(graph)
    assert not in_neighbours_sorted(graph.indptr, graph.indices)
    assert in_neighbours_sorted(sorted_graph.indptr, sorted_graph.indices)
    edges = _edges(graph)
    pairs = _positive_pairs(graph, 400)
    plain = sample_uniform_negatives(pairs, graph.total_num_nodes, 4, key=KEY)
    hits = sum((u, v) in edges for u, row in zip(pairs[:, 0].tolist(), plain.tolist()) for v in row)
    assert hits > 50  # without exclusion some negatives are edges: the test can fail
    results = []
    for g, is_sorted in ((graph, False), (sorted_graph, True)):
        negatives = sample_uniform_negatives(
            pairs, g.total_num_nodes, 4, key=KEY, indptr=g.indptr, indices=g.indices, exclude_edges=True,
            sorted_indices=is_sorted,
        )  # fmt: skip
        for u, row in zip(pairs[:, 0].tolist(), negatives.tolist()):
            assert not any((u, v) in edges for v in row)
        results.append(negatives)
    # Binary search and scan find the same edges, so they redraw the same negatives.
    assert torch.equal(results[0], results[1])
    # A negative that was not an edge is kept as first drawn.
    first_ok = torch.tensor([[(u, v) not in edges for v in row] for u, row in zip(pairs[:, 0].tolist(), plain.tolist())])
    assert torch.equal(results[0][first_ok], plain[first_ok])


def test_negatives_are_uniform():
    """Chi-square over 50 nodes: 40,000 draws from 4,000 pairs (fixed key)."""
    num_nodes = 50
    g = torch.Generator().manual_seed(0)
    pairs = torch.randint(num_nodes, (4000, 2), generator=g)
    negatives = sample_uniform_negatives(pairs, num_nodes, 10, key=KEY)
    counts = torch.bincount(negatives.flatten(), minlength=num_nodes).numpy()
    assert stats.chisquare(counts).pvalue > 1e-3
    # The same draws with another key: also uniform, and not the same draws.
    other = sample_uniform_negatives(pairs, num_nodes, 10, key=KEY + 1)
    assert stats.chisquare(torch.bincount(other.flatten(), minlength=num_nodes).numpy()).pvalue > 1e-3
    assert not torch.equal(negatives, other)


def test_with_exclusion_negatives_are_uniform_over_the_non_edges():
    """Source 0 points at nodes 1..19 of 40: its negatives are uniform over the other 21."""
    num_nodes = 40
    src = torch.zeros(19, dtype=torch.int64)
    dst = torch.arange(1, 20)
    graph = CSCGraph.from_coo(src, dst, num_nodes)
    pairs = torch.stack([torch.zeros(3000, dtype=torch.int64), torch.randint(1, 20, (3000,))], dim=1)
    negatives = sample_uniform_negatives(
        pairs, num_nodes, 5, key=KEY, indptr=graph.indptr, indices=graph.indices, exclude_edges=True
    )
    counts = torch.bincount(negatives.flatten(), minlength=num_nodes).numpy()
    assert counts[1:20].sum() == 0
    allowed = np.concatenate([counts[:1], counts[20:]])
    assert stats.chisquare(allowed).pvalue > 1e-3


def test_deterministic_per_pair_and_thread_count_independent(graph_builder, numba_threads):
    graph = graph_builder(300, 40, seed=3)
    pairs = _positive_pairs(graph, 600)
    kwargs = dict(key=KEY, indptr=graph.indptr, indices=graph.indices, exclude_edges=True)
    with numba_threads(1):
        one = sample_uniform_negatives(pairs, graph.total_num_nodes, 3, **kwargs)
    with numba_threads(4):
        many = sample_uniform_negatives(pairs, graph.total_num_nodes, 3, **kwargs)
    assert torch.equal(one, many)
    # The first pairs of a batch draw the same whatever follows them; a repeated pair, or
    # the same pair at another position (another rank's batch), draws other negatives.
    part = sample_uniform_negatives(pairs[:10], graph.total_num_nodes, 3, **kwargs)
    assert torch.equal(part, one[:10])
    repeated = sample_uniform_negatives(pairs[:1].repeat(2, 1), graph.total_num_nodes, 3, **kwargs)
    assert torch.equal(repeated[0], one[0]) and not torch.equal(repeated[1], repeated[0])


def test_torch_path_draws_the_same_negatives():
    pairs = torch.randint(1000, (200, 2), generator=torch.Generator().manual_seed(0))
    kernel = sample_uniform_negatives(pairs, 1000, 4, key=KEY)
    assert torch.equal(_uniform_negatives_torch(pairs, 1000, 4, KEY), kernel)


def test_a_source_linked_to_every_node_is_named():
    num_nodes = 6
    src = torch.full((num_nodes,), 2, dtype=torch.int64)
    dst = torch.arange(num_nodes)
    graph = CSCGraph.from_coo(src, dst, num_nodes)
    pairs = torch.tensor([[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="source node 2"):
        sample_uniform_negatives(pairs, num_nodes, 1, key=KEY, indptr=graph.indptr, indices=graph.indices, exclude_edges=True)


def test_bad_inputs_raise_errors_naming_the_argument(graph_builder):
    graph = graph_builder(50, 10)
    pairs = torch.tensor([[0, 1], [2, 3]])
    with pytest.raises(ValueError, match=r"`pairs` must be node pairs of shape \[N, 2\].*\(2, 3\)"):
        sample_uniform_negatives(torch.zeros(2, 3, dtype=torch.int64), 50, 1, key=KEY)
    with pytest.raises(ValueError, match=r"`pairs` must be node pairs"):
        sample_uniform_negatives(torch.arange(4), 50, 1, key=KEY)
    with pytest.raises(ValueError, match=r"`pairs` holds node id 50, out of range"):
        sample_uniform_negatives(torch.tensor([[0, 50]]), 50, 1, key=KEY)
    with pytest.raises(ValueError, match=r"`pairs` holds node id -1"):
        sample_uniform_negatives(torch.tensor([[-1, 0]]), 50, 1, key=KEY)
    with pytest.raises(TypeError, match="`pairs` must be an integer tensor"):
        sample_uniform_negatives(torch.zeros(2, 2), 50, 1, key=KEY)
    for ratio in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="`negative_ratio` must be an int >= 1"):
            sample_uniform_negatives(pairs, 50, ratio, key=KEY)
    with pytest.raises(ValueError, match="`key`"):
        sample_uniform_negatives(pairs, 50, 1, key=-1)
    with pytest.raises(ValueError, match="`exclude_edges=True` needs the graph's `indptr` and `indices`"):
        sample_uniform_negatives(pairs, 50, 1, key=KEY, exclude_edges=True)
    with pytest.raises(ValueError, match="`indptr` has 50 nodes, `num_nodes` is 60"):
        sample_uniform_negatives(pairs, 60, 1, key=KEY, indptr=graph.indptr, indices=graph.indices, exclude_edges=True)


def test_empty_batch():
    negatives = sample_uniform_negatives(torch.zeros(0, 2, dtype=torch.int64), 10, 2, key=KEY)
    assert negatives.shape == (0, 2)


@pytest.mark.parametrize("ratio", [10**12, 2**63, 2**70])
def test_a_ratio_too_large_for_memory_is_refused_naming_it(ratio):
    pairs = torch.tensor([[0, 1], [2, 3]])
    with pytest.raises(ValueError, match=rf"`negative_ratio`={ratio}: {2 * ratio} negatives .* would not fit in the machine's memory"):
        sample_uniform_negatives(pairs, 50, ratio, key=KEY)
