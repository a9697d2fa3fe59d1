"""Inputs that once crashed, hung or silently sampled wrong: extreme edge weights,
CSC arrays that disagree, huge fanouts, ids outside the graph.

Statistical checks use fixed keys and loose bounds (p > 1e-3, or |z| < 4.5)."""

import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy import stats

from graphpipe.ops import derive_key, gpu_sampling, neighbor_sampling, sample_labor, sample_neighbors, unique_and_compact
from graphpipe.ops.labor import Variates, _labor_variates_torch
from graphpipe.graph.checks import check_edge_weights

KEY = derive_key(77)


def _disjoint_stars(weights, n, dtype=torch.float64):
    """``n`` destinations (ids ``0..n-1``), each with its own ``d = len(weights)``
    in-neighbours (destination ``i`` has sources ``n + i*d + j``) and the edge weights
    ``weights``: ``n`` independent draws of one problem, for NS and LABOR alike (LABOR's
    variates belong to the sources, so the sources must differ)."""
    d = len(weights)
    indptr = torch.cat([torch.arange(n + 1) * d, torch.full((n * d,), n * d)])
    indices = n + torch.arange(n * d)
    probs = torch.tensor(weights, dtype=dtype).repeat(n)
    return indptr, indices, probs


def _positions(indptr, nodes, sample):
    """The positions (``0..d-1``) of the sampled edges in their destination's range."""
    dst = torch.repeat_interleave(nodes, sample.indptr[1:] - sample.indptr[:-1])
    return (sample.edge_ids - indptr[dst]).numpy()


def _assert_proportions(counts, expected):
    """``counts`` follow the proportions ``expected`` (zeros: never drawn)."""
    expected = np.asarray(expected, dtype=np.float64)
    zero = expected == 0
    assert (counts[zero] == 0).all(), counts
    p = expected[~zero] / expected[~zero].sum()
    if p.size > 1:
        assert stats.chisquare(counts[~zero], p * counts[~zero].sum()).pvalue > 1e-3, counts


# (weights, dtype, proportions of a draw): sums that overflow, subnormals (equal and in
# ratios 1:2:3), and weights spanning more than float64's range of ratios.
EXTREME = [
    ([1e308, 1e308, 1.0], torch.float64, [1, 1, 0]),
    ([1.7e308, 1.0, 1.7e308, 1.7e308], torch.float64, [1, 0, 1, 1]),
    ([5e-324] * 4, torch.float64, [1, 1, 1, 1]),
    ([5e-324, 1e-323, 1.5e-323], torch.float64, [1, 2, 3]),
    ([1e-45] * 3, torch.float32, [1, 1, 1]),
    ([3e38, 3e38, 3e38], torch.float32, [1, 1, 1]),
    ([1e300, 1e-320, 0.0, 2e-320], torch.float64, [1, 0, 0, 0]),
]


@pytest.mark.parametrize("weights, dtype, proportions", EXTREME)
def test_weighted_with_replacement_extreme_weights(weights, dtype, proportions):
    n, fanout = 2000, 3
    indptr, indices, probs = _disjoint_stars(weights, n, dtype)
    nodes = torch.arange(n)
    sample = sample_neighbors(indptr, indices, nodes, fanout, key=KEY, replace=True, probs=probs)
    assert sample.indptr.tolist() == list(range(0, (n + 1) * fanout, fanout))
    counts = np.bincount(_positions(indptr, nodes, sample), minlength=len(weights))
    _assert_proportions(counts, proportions)


@pytest.mark.parametrize("weights, dtype, proportions", EXTREME)
def test_weighted_without_replacement_extreme_weights(weights, dtype, proportions):
    """Fanout 1: one draw proportional to weight. Fanout 2: the second draw is
    proportional to the remaining weights (successive sampling)."""
    n = 3000
    indptr, indices, probs = _disjoint_stars(weights, n, dtype)
    nodes = torch.arange(n)
    one = sample_neighbors(indptr, indices, nodes, 1, key=KEY, probs=probs)
    assert torch.equal(one.indptr, torch.arange(n + 1))
    _assert_proportions(np.bincount(_positions(indptr, nodes, one), minlength=len(weights)), proportions)


def test_weighted_without_replacement_tiny_weights_second_draw():
    """``[1e300, 1e-320, 2e-320]``, fanout 2: edge 0 always, then edge 1 or 2 as 1:2;
    ``-log(u) / w`` overflows to inf for both tiny weights (not so in log space)."""
    n = 3000
    indptr, indices, probs = _disjoint_stars([1e300, 1e-320, 2e-320], n)
    nodes = torch.arange(n)
    sample = sample_neighbors(indptr, indices, nodes, 2, key=KEY, probs=probs)
    pos = _positions(indptr, nodes, sample).reshape(n, 2)
    assert (pos[:, 0] == 0).all()
    _assert_proportions(np.bincount(pos[:, 1], minlength=3), [0, 1, 2])


def test_equal_subnormal_weights_without_replacement_every_pair_equally_likely():
    n = 3000
    indptr, indices, probs = _disjoint_stars([5e-324] * 4, n)
    nodes = torch.arange(n)
    pos = _positions(indptr, nodes, sample_neighbors(indptr, indices, nodes, 2, key=KEY, probs=probs)).reshape(n, 2)
    pair = pos[:, 0] * 4 + pos[:, 1]
    counts = np.bincount(pair, minlength=16)[[1, 2, 3, 6, 7, 11]]  # the 6 pairs a < b
    assert counts.sum() == n
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize("weights, dtype, proportions", EXTREME)
def test_weighted_labor_extreme_weights(weights, dtype, proportions):
    """Weighted LABOR-0 keeps exactly one edge at fanout 1: the smallest ``r_t / A_t``,
    which is an edge drawn proportionally to weight among equal-weight edges (and
    never one outweighed by a factor of 1e300 in 3000 draws)."""
    n = 3000
    indptr, indices, probs = _disjoint_stars(weights, n, dtype)
    nodes = torch.arange(n)
    sample = sample_labor(indptr, indices, nodes, 1, variates=Variates(KEY), probs=probs)
    assert torch.equal(sample.indptr, torch.arange(n + 1))
    counts = np.bincount(_positions(indptr, nodes, sample), minlength=len(weights))
    equal = np.asarray(proportions) / max(proportions)
    if set(equal[equal > 0]) == {1.0}:  # equal weights: a uniform pick among them
        _assert_proportions(counts, proportions)
    else:  # 1:2:3 is not LABOR's law (priority sampling), only its order: more for heavier
        assert counts[0] < counts[1] < counts[2]
    assert bool(torch.isfinite(sample.edge_weights).all()) and bool((sample.edge_weights > 0).all())


@pytest.mark.parametrize(
    "weights, dtype, fanout",
    [([1e20, 1, 1], torch.float64, 1), ([1e20, 1, 1], torch.float64, 2), ([1e17, 1, 1, 1], torch.float32, 2)],
)
def test_weighted_labor_weights_of_any_spread_finish(weights, dtype, fanout):
    """These made the old water-filling loop spin forever (a spread above ~5e15)."""
    indptr, indices, probs = _disjoint_stars(weights, 50, dtype)
    sample = sample_labor(indptr, indices, torch.arange(50), fanout, variates=Variates(KEY), probs=probs)
    assert torch.equal(sample.indptr, torch.arange(51) * fanout)
    assert bool((_positions(indptr, torch.arange(50), sample).reshape(50, fanout)[:, 0] == 0).all())


# ------------------------------------------------------------------ non-finite weights
def _weights_graph(values, dtype=torch.float32):
    values = torch.tensor(values, dtype=dtype) if not isinstance(values, torch.Tensor) else values
    return SimpleNamespace(edge_attributes={"w": values}, total_num_edges=4, is_heterogeneous=False)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_check_edge_weights_rejects_non_finite(bad, dtype):
    with pytest.raises(ValueError, match=r"`weights` attribute 'w' must be finite"):
        check_edge_weights(_weights_graph([1.0, bad, 2.0, 0.0], dtype), "w", "Sampler")


def test_check_edge_weights_accepts_a_boolean_mask_and_checks_the_length():
    probs = check_edge_weights(_weights_graph(torch.tensor([True, False, True, True])), "w", "Sampler")
    assert probs.dtype == torch.float32 and probs.tolist() == [1.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"`weights` attribute 'w' must have num_edges = 4 entries, got 3"):
        check_edge_weights(_weights_graph([1.0, 2.0, 3.0]), "w", "Sampler")
    with pytest.raises(ValueError, match=r"must be non-negative"):
        check_edge_weights(_weights_graph([1.0, -2.0, 3.0, 0.0]), "w", "Sampler")
    with pytest.raises(ValueError, match=r"1-D float or bool tensor"):
        check_edge_weights(_weights_graph(torch.arange(4)), "w", "Sampler")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("op", ["ns", "ns-replace", "labor"])
def test_ops_reject_non_finite_probs(bad, op):
    indptr, indices, probs = _disjoint_stars([1.0, 2.0, 3.0], 4)
    probs[7] = bad  # an in-edge of destination 2
    nodes = torch.tensor([0, 2, 3])
    with pytest.raises(ValueError, match="`probs` must be finite"):
        if op == "labor":
            sample_labor(indptr, indices, nodes, 2, variates=Variates(KEY), probs=probs)
        else:
            sample_neighbors(indptr, indices, nodes, 2, key=KEY, replace=op == "ns-replace", probs=probs)


# ------------------------------------------------------------------ CSC arrays that disagree
def _sample_all_ways(indptr, indices, nodes):
    probs = torch.ones(indices.numel())
    yield lambda: sample_neighbors(indptr, indices, nodes, 3, key=KEY)
    yield lambda: sample_neighbors(indptr, indices, nodes, 3, key=KEY, replace=True)
    yield lambda: sample_neighbors(indptr, indices, nodes, 3, key=KEY, probs=probs)
    yield lambda: sample_neighbors(indptr, indices, nodes, 3, key=KEY, replace=True, probs=probs)
    yield lambda: sample_labor(indptr, indices, nodes, 3, variates=Variates(KEY))
    yield lambda: sample_labor(indptr, indices, nodes, 3, variates=Variates(KEY, KEY + 1, 0.6, 0.8, True))
    yield lambda: sample_labor(indptr, indices, nodes, 3, variates=Variates(KEY), probs=probs)
    yield lambda: sample_labor(indptr, indices, nodes, 3, variates=Variates(KEY), importance_sampling=-1)


def test_indptr_out_of_step_with_indices_raises():
    indptr, indices, _ = _disjoint_stars([1.0] * 5, 100)
    nodes = torch.arange(100)
    cases = {
        "scaled": indptr * 10_000_000,  # indptr[-1] > len(indices) too
        "a seed's range past the end": torch.cat([indptr[:50], torch.full((indptr.numel() - 50,), 2**40)]),
        "decreasing": torch.where(torch.arange(indptr.numel()) == 7, indptr + 10, indptr),
        "negative": torch.where(torch.arange(indptr.numel()) == 3, -(2**40), indptr),
    }
    cases["decreasing"][-1] = indices.numel()
    for name, bad in cases.items():
        for sample in _sample_all_ways(bad, indices, nodes):
            with pytest.raises(ValueError, match="`indptr`"):
                sample()


def test_torch_ops_check_ranges_and_weights_too():
    """The CUDA branches (torch ops, run here on CPU tensors) raise the same errors at
    their first host read, before gathering edges with the bad ranges."""
    indptr, indices, probs = _disjoint_stars([1.0, 2.0, 3.0], 20)
    nodes = torch.arange(20)
    bad = indptr.clone()
    bad[4] = 10**9
    variates = lambda t: _labor_variates_torch(t, Variates(KEY))  # noqa: E731
    for replace in (False, True):
        for p in (None, probs):
            with pytest.raises(ValueError, match="`indptr` and `indices` disagree"):
                gpu_sampling.sample_neighbors_torch(bad, indices, nodes, 2, key=KEY, replace=replace, probs=p)
        non_finite = probs.clone()
        non_finite[7] = float("nan")
        with pytest.raises(ValueError, match="`probs` must be finite"):
            gpu_sampling.sample_neighbors_torch(indptr, indices, nodes, 2, key=KEY, replace=replace, probs=non_finite)
    with pytest.raises(ValueError, match="`indptr` and `indices` disagree"):
        gpu_sampling.sample_labor_torch(bad, indices, nodes, 2, variates=variates)


@pytest.mark.parametrize("replace", [False, True])
def test_torch_ops_extreme_weights(replace):
    n = 2000
    for weights, proportions in [([1e308, 1e308, 1.0], [1, 1, 0]), ([5e-324] * 4, [1, 1, 1, 1])]:
        indptr, indices, probs = _disjoint_stars(weights, n)
        nodes = torch.arange(n)
        sample = gpu_sampling.sample_neighbors_torch(indptr, indices, nodes, 1, key=KEY, replace=replace, probs=probs)
        _assert_proportions(np.bincount(_positions(indptr, nodes, sample), minlength=len(weights)), proportions)


def test_graph_array_types_are_checked():
    indptr, indices, _ = _disjoint_stars([1.0] * 5, 10)
    nodes = torch.arange(10)
    for bad_indptr, bad_indices, error in [
        (indptr.double(), indices, TypeError),
        (indptr, indices.double(), TypeError),
        (indptr[None], indices, ValueError),
        (indptr, indices[None], ValueError),
        (indptr, indices[:-1], ValueError),  # indptr[-1] > len(indices)
    ]:
        for sample in _sample_all_ways(bad_indptr, bad_indices, nodes):
            with pytest.raises(error, match="`indptr`|`indices`"):
                sample()


def test_source_ids_outside_the_graph_do_not_crash():
    """A corrupted (e.g. memory-mapped) ``indices`` with an id far outside the graph:
    sampling copies it (the dependent-variate table path must not read out of bounds)
    and unique_and_compact names it."""
    n, d = 40, 30
    indptr = torch.arange(n + 1) * d
    indices = (torch.arange(n)[:, None] + torch.arange(d)[None, :]).flatten() % n  # distinct per node
    indices[5] = 2**40
    nodes = torch.arange(n)
    variates = Variates(KEY, KEY + 1, 0.6, 0.8, True)  # n * d scanned edges > n nodes: a per-vertex table
    for fanout in (3, 29):
        sample = sample_labor(indptr, indices, nodes, fanout, variates=variates)
        assert torch.equal(sample.indptr, torch.arange(n + 1) * fanout)
    sample = sample_neighbors(indptr, indices, nodes, -1, key=KEY)
    assert 2**40 in sample.indices.tolist()
    with pytest.raises(ValueError, match=rf"node id {2**40} .*num_nodes.* {n}"):
        unique_and_compact(nodes, sample.indices, n)


# ------------------------------------------------------------------ huge fanouts
def _physical_memory():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@pytest.mark.parametrize("weighted", [False, True])
def test_huge_fanout_with_replacement_is_refused_before_allocating(weighted):
    indptr, indices, probs = _disjoint_stars([1.0, 2.0, 0.0], 3)
    probs = probs if weighted else None
    nodes = torch.arange(3)
    too_many = _physical_memory() // 16 + 1  # one destination's sampled edges alone
    for fanout in (too_many, 2**40, 2**70):
        with pytest.raises(ValueError, match=r"`fanout`.*memory"):
            sample_neighbors(indptr, indices, nodes, fanout, key=KEY, replace=True, probs=probs)
    # a destination without in-edges draws nothing, whatever the fanout
    empty = torch.tensor([5])
    sample = sample_neighbors(indptr, indices, empty, 2**70, key=KEY, replace=True, probs=probs)
    assert sample.indptr.tolist() == [0, 0]


def test_a_failed_allocation_names_the_fanout(monkeypatch):
    """Below the physical-memory bound an allocation can still fail (memory in use):
    numba's bare MemoryError comes back naming the fanout."""
    monkeypatch.setattr(neighbor_sampling, "max_output_edges", lambda bytes_per_edge: 1 << 60)
    indptr, indices, _ = _disjoint_stars([1.0, 2.0], 3)
    with pytest.raises(MemoryError, match=r"`fanout`=1099511627776"):
        sample_neighbors(indptr, indices, torch.arange(3), 2**40, key=KEY, replace=True)


def test_huge_fanout_without_replacement_keeps_every_edge():
    indptr, indices, probs = _disjoint_stars([1.0, 2.0, 0.0], 3)
    nodes = torch.arange(3)
    for fanout in (2**40, 2**70):
        ns = sample_neighbors(indptr, indices, nodes, fanout, key=KEY)
        assert ns.edge_ids.tolist() == list(range(9))
        weighted = sample_neighbors(indptr, indices, nodes, fanout, key=KEY, probs=probs)
        assert weighted.edge_ids.tolist() == [0, 1, 3, 4, 6, 7]
        labor = sample_labor(indptr, indices, nodes, fanout, variates=Variates(KEY))
        assert labor.edge_ids.tolist() == list(range(9))
        labor = sample_labor(indptr, indices, nodes, fanout, variates=Variates(KEY), probs=probs)
        assert labor.edge_ids.tolist() == [0, 1, 3, 4, 6, 7]
