import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph
from graphpipe.ops import sample_neighbors
from graphpipe.ops.neighbor_sampling import _floyd_hashed, _floyd_small, _randint
from graphpipe.ops.random import derive_key

KEY = derive_key(2024, 0, 1)


def _check_valid(graph, nodes, sample, replace=False, probs=None):
    """Every sampled edge is an in-edge of its destination with the right source; each
    destination's edges ascend by edge id (strictly without replacement)."""
    indptr, indices = graph.indptr.to(torch.int64), graph.indices.to(torch.int64)
    assert sample.indptr.dtype == sample.indices.dtype == sample.edge_ids.dtype == torch.int64
    assert sample.indptr.shape == (nodes.numel() + 1,) and int(sample.indptr[0]) == 0
    assert int(sample.indptr[-1]) == sample.indices.numel() == sample.edge_ids.numel()
    assert torch.equal(indices[sample.edge_ids], sample.indices)
    for j, v in enumerate(nodes.tolist()):
        eids = sample.edge_ids[sample.indptr[j] : sample.indptr[j + 1]]
        if eids.numel():
            assert int(eids.min()) >= int(indptr[v]) and int(eids.max()) < int(indptr[v + 1])
            steps = eids[1:] - eids[:-1]
            assert bool((steps >= 0).all()) if replace else bool((steps > 0).all())
            if probs is not None:
                assert bool((probs[eids] > 0).all())


def _star_graph(num_dst, degree, weights=None):
    """``num_dst`` destinations with the same in-neighbourhood (sources ``0..degree-1``):
    one call samples ``num_dst`` independent draws of the same problem."""
    indptr = torch.arange(num_dst + 1, dtype=torch.int64) * degree
    indices = torch.arange(degree).repeat(num_dst)
    graph = CSCGraph(indptr, indices)
    probs = None if weights is None else torch.tensor(weights, dtype=torch.float64).repeat(num_dst)
    return graph, probs


def _positions(graph, nodes, sample):
    """``[num_dst, k]`` positions of the sampled edges within each destination's range."""
    dst = torch.repeat_interleave(nodes, sample.indptr[1:] - sample.indptr[:-1])
    return (sample.edge_ids - graph.indptr[dst]).view(nodes.numel(), -1)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("fanout", [1, 3, 10, -1])
@pytest.mark.parametrize("replace", [False, True])
def test_edges_exist_and_counts(graph_builder, index_dtype, fanout, replace):
    graph = graph_builder(300, 40, seed=1, index_dtype=index_dtype)
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(0))[:120]
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=replace)
    _check_valid(graph, nodes, sample, replace)
    deg = graph.in_degrees()[nodes]
    counts = sample.indptr[1:] - sample.indptr[:-1]
    if fanout == -1:
        expected = deg
    elif replace:
        expected = torch.where(deg > 0, fanout, 0)
    else:
        expected = deg.clamp(max=fanout)
    assert torch.equal(counts, expected)
    assert bool((deg == 0).any()) and bool((deg > 10).any())  # the graph covers both cases


@pytest.mark.parametrize("fanout", [10, 100])
@pytest.mark.parametrize("replace", [False, True])
def test_high_degree_nodes(graph_builder, fanout, replace):
    """Degrees above 64, with a small fanout (array set, draws sorted by rank) and a large
    one (the kernel for large fanouts: hash set, draws sorted by a sort call)."""
    graph = graph_builder(400, 300, seed=2)
    nodes = torch.arange(400)
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=replace)
    _check_valid(graph, nodes, sample, replace)
    deg = graph.in_degrees()
    assert bool((deg > 100).any())
    expected = torch.where(deg > 0, fanout, 0) if replace else deg.clamp(max=fanout)
    assert torch.equal(sample.indptr[1:] - sample.indptr[:-1], expected)


def _floyd_reference(vkey, start, d, k):
    """Floyd's algorithm written plainly, on the kernels' draws."""
    members = set()
    for s in range(k):
        j = d - k + s
        t = int(_randint(vkey, s, j + 1))
        members.add(j if t in members else t)
    return [start + p for p in sorted(members)]


def test_floyd_variants_pick_floyds_subset():
    """Both set representations (small fanout: array behind a bit filter, exact below 64
    in-edges; large: hash set) give Floyd's subset, ascending, and write only ``out[:k]``."""
    rng = np.random.default_rng(0)
    for trial in range(400):
        d = int(rng.integers(2, (65, 500, 5000)[trial % 3]))
        k = int(rng.integers(1, d))
        vkey = np.uint64(rng.integers(0, 2**63))
        start = int(rng.integers(0, 1000))
        expected = _floyd_reference(vkey, start, d, k)
        variants = [_floyd_hashed] + ([_floyd_small] if k <= 64 else [])
        for variant in variants:
            out = np.full(k + 3, -1, np.int64)
            scratch = (np.empty(64, np.int64),) if variant is _floyd_small else ()
            variant(vkey, start, d, k, out[2 : 2 + k], *scratch)
            assert out[:2].tolist() == [-1, -1] and out[-1] == -1
            assert out[2 : 2 + k].tolist() == expected, (variant.__name__, d, k)


def test_uniform_without_replacement_every_subset_equally_likely():
    degree, fanout, n = 6, 2, 6000
    graph, _ = _star_graph(n, degree)
    nodes = torch.arange(n)
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY)
    pos = _positions(graph, nodes, sample)
    subsets = list(itertools.combinations(range(degree), fanout))
    index = {s: i for i, s in enumerate(subsets)}
    freq = np.bincount([index[tuple(p)] for p in pos.tolist()], minlength=len(subsets))
    assert stats.chisquare(freq).pvalue > 1e-3


def test_uniform_with_replacement_is_uniform():
    degree, fanout, n = 7, 4, 4000
    graph, _ = _star_graph(n, degree)
    nodes = torch.arange(n)
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=True)
    pos = _positions(graph, nodes, sample)
    assert stats.chisquare(np.bincount(pos.view(-1).numpy(), minlength=degree)).pvalue > 1e-3
    # draws are independent: repeats within a destination happen as often as chance says
    distinct = np.array([len(set(p)) for p in pos.tolist()])
    assert abs((distinct < fanout).mean() - (1 - 7 * 6 * 5 * 4 / 7**4)) < 0.03


def test_weighted_with_replacement_follows_weights():
    weights = [1.0, 0.0, 2.0, 4.0, 0.0, 3.0]
    n, fanout = 3000, 5
    graph, probs = _star_graph(n, len(weights), weights)
    nodes = torch.arange(n)
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=True, probs=probs)
    _check_valid(graph, nodes, sample, replace=True, probs=probs)
    freq = np.bincount(_positions(graph, nodes, sample).view(-1).numpy(), minlength=len(weights))
    assert freq[1] == freq[4] == 0
    positive = np.array([0, 2, 3, 5])
    w = np.array(weights)[positive]
    expected = w / w.sum() * freq.sum()
    assert stats.chisquare(freq[positive], expected).pvalue > 1e-3


def test_weighted_without_replacement_matches_successive_sampling():
    weights = [1.0, 2.0, 0.0, 3.0, 4.0]
    n, fanout = 6000, 2
    graph, probs = _star_graph(n, len(weights), weights)
    nodes = torch.arange(n)
    sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, probs=probs)
    pos = _positions(graph, nodes, sample)
    assert not bool((pos == 2).any())
    positive = [0, 1, 3, 4]
    total = sum(weights)
    pairs = list(itertools.combinations(positive, 2))
    exact = np.array(
        [
            weights[a] / total * weights[b] / (total - weights[a])
            + weights[b] / total * weights[a] / (total - weights[b])
            for a, b in pairs
        ]
    )
    assert abs(exact.sum() - 1) < 1e-12
    index = {p: i for i, p in enumerate(pairs)}
    freq = np.bincount([index[tuple(p)] for p in pos.tolist()], minlength=len(pairs))
    assert stats.chisquare(freq, exact * n).pvalue > 1e-3


def test_weighted_counts_only_positive_edges(graph_builder):
    graph = graph_builder(300, 40, seed=3, weights=True)
    probs = graph.edge_attributes["weight"]
    nodes = torch.arange(300)
    positive = torch.zeros(300, dtype=torch.int64).index_add_(
        0, torch.repeat_interleave(torch.arange(300), graph.in_degrees()), (probs > 0).to(torch.int64)
    )
    for fanout, replace in [(4, False), (4, True), (-1, False), (-1, True)]:
        sample = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY, replace=replace, probs=probs)
        _check_valid(graph, nodes, sample, replace and fanout != -1, probs)
        counts = sample.indptr[1:] - sample.indptr[:-1]
        if fanout == -1:
            expected = positive
        elif replace:
            expected = torch.where(positive > 0, fanout, 0)
        else:
            expected = positive.clamp(max=fanout)
        assert torch.equal(counts, expected)


@pytest.mark.parametrize("weighted", [False, True])
def test_deterministic_keyed_and_thread_count_independent(graph_builder, numba_threads, weighted):
    graph = graph_builder(500, 60, seed=4, weights=True)
    probs = graph.edge_attributes["weight"] if weighted else None
    nodes = torch.arange(500)
    runs = []
    for threads in (1, 2):
        with numba_threads(threads):
            runs.append(sample_neighbors(graph.indptr, graph.indices, nodes, 5, key=KEY, probs=probs))
    again = sample_neighbors(graph.indptr, graph.indices, nodes, 5, key=KEY, probs=probs)
    other = sample_neighbors(graph.indptr, graph.indices, nodes, 5, key=KEY + 1, probs=probs)
    for a in runs[1:] + [again]:
        assert all(torch.equal(x, y) for x, y in zip(runs[0][:3], a[:3]))
    assert not torch.equal(runs[0].edge_ids, other.edge_ids)


@pytest.mark.parametrize("replace", [False, True])
def test_a_node_gets_the_same_neighbours_in_any_batch(graph_builder, replace):
    graph = graph_builder(300, 40, seed=5)
    a = torch.tensor([7, 19, 250, 3, 101])
    b = torch.tensor([101, 42, 7, 0, 250, 19, 3])
    sa = sample_neighbors(graph.indptr, graph.indices, a, 4, key=KEY, replace=replace)
    sb = sample_neighbors(graph.indptr, graph.indices, b, 4, key=KEY, replace=replace)

    def edges_of(sample, nodes):
        return {
            v: sample.edge_ids[sample.indptr[j] : sample.indptr[j + 1]].tolist() for j, v in enumerate(nodes.tolist())
        }

    ea, eb = edges_of(sa, a), edges_of(sb, b)
    for v in a.tolist():
        assert ea[v] == eb[v]


def test_bad_inputs_raise_clear_errors(graph_builder):
    graph = graph_builder(50, 10, seed=6)
    nodes = torch.tensor([1, 2])
    for fanout in (-2, 1.5, True, "3"):
        with pytest.raises(ValueError, match="`fanout` must be an int >= 0 or -1"):
            sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=KEY)
    with pytest.raises(ValueError, match=r"`nodes` holds node id 50, out of range: valid ids are 0..49"):
        sample_neighbors(graph.indptr, graph.indices, torch.tensor([3, 50]), 2, key=KEY)
    with pytest.raises(TypeError, match="`nodes` must be an integer tensor"):
        sample_neighbors(graph.indptr, graph.indices, torch.tensor([1.0]), 2, key=KEY)
    with pytest.raises(ValueError, match=r"`key` must be an int in \[0, 2\*\*64\)"):
        sample_neighbors(graph.indptr, graph.indices, nodes, 2, key=-1)
    with pytest.raises(TypeError, match="`probs` must be a float32 or float64 tensor"):
        sample_neighbors(graph.indptr, graph.indices, nodes, 2, key=KEY, probs=torch.ones(graph.total_num_edges, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"`probs` must have shape \[num_edges\]"):
        sample_neighbors(graph.indptr, graph.indices, nodes, 2, key=KEY, probs=torch.ones(graph.total_num_edges + 1))


def test_numpy_integer_fanout_and_key_accepted(graph_builder):
    graph = graph_builder(50, 10, seed=7)
    nodes = torch.arange(50)
    a = sample_neighbors(graph.indptr, graph.indices, nodes, np.int64(3), key=np.uint64(KEY))
    b = sample_neighbors(graph.indptr, graph.indices, nodes, 3, key=KEY)
    assert all(torch.equal(x, y) for x, y in zip(a[:3], b[:3]))


def test_empty_nodes():
    graph, _ = _star_graph(3, 2)
    sample = sample_neighbors(graph.indptr, graph.indices, torch.empty(0, dtype=torch.int64), 3, key=KEY)
    assert sample.indptr.tolist() == [0] and sample.edge_ids.numel() == 0
