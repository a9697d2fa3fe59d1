import numpy as np
import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph
from graphpipe.ops import derive_key, sample_labor
from graphpipe.ops.gpu_sampling import sample_labor_torch
from graphpipe.ops.labor import (
    _SEGMENT,
    Variates,
    _labor0,
    _labor_variates_torch,
    _normal_quantile,
    _order_key,
    _smallest_candidates,
    _update_vertex_probabilities,
    labor_variates,
)


def _check_edges(graph, nodes, sample):
    """Every sampled edge exists, belongs to its destination, no duplicates; eids ascend."""
    indptr, indices = graph.indptr.long(), graph.indices.long()
    counts = sample.indptr[1:] - sample.indptr[:-1]
    dst = torch.repeat_interleave(nodes, counts)
    assert torch.equal(indices[sample.edge_ids], sample.indices)
    assert bool(((sample.edge_ids >= indptr[dst]) & (sample.edge_ids < indptr[dst + 1])).all())
    for i in range(nodes.numel()):
        eids = sample.edge_ids[sample.indptr[i] : sample.indptr[i + 1]]
        assert bool((eids[1:] > eids[:-1]).all())
    return counts


def _star(degree=10, weights=None):
    """One destination (node 0) with in-neighbours 1..degree."""
    src = torch.arange(1, degree + 1)
    attrs = {} if weights is None else {"w": weights}
    return CSCGraph.from_coo(src, torch.zeros(degree, dtype=torch.int64), num_nodes=degree + 1, edge_attributes=attrs)


def _disjoint_copies(indptr, indices, nodes, copies, probs=None):
    """``copies`` disjoint copies of the in-neighbourhoods of ``nodes``, so that ONE call
    samples ``copies`` independent trials: LABOR's variates belong to the sources, and
    every copy has sources of its own. Destination ``i`` of copy ``c`` is node
    ``c * len(nodes) + i``; sources follow. Returns ``(indptr, indices, probs, original)``
    (int64 CSC, the weights per edge, and the original id of every node)."""
    indptr, indices, nodes = indptr.long(), indices.long(), nodes.long()
    n = nodes.numel()
    ranges = [torch.arange(int(indptr[v]), int(indptr[v + 1])) for v in nodes.tolist()]
    edges = torch.cat(ranges)
    sources, local = torch.unique(indices[edges], return_inverse=True)
    m = sources.numel()
    copy = torch.arange(copies).repeat_interleave(edges.numel())
    copy_indices = n * copies + copy * m + local.repeat(copies)
    degrees = indptr[nodes + 1] - indptr[nodes]
    copy_indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(degrees.repeat(copies), 0)])
    copy_indptr = torch.cat([copy_indptr, copy_indptr[-1:].expand(m * copies)])  # sources: no in-edges
    original = torch.cat([nodes.repeat(copies), sources.repeat(copies)])
    copy_probs = None if probs is None else probs[edges].repeat(copies)
    return copy_indptr, copy_indices, copy_probs, original


@pytest.mark.parametrize("fanout", [1, 3, 7, 100, -1])
def test_labor0_counts_edges_and_weights(graph_builder, fanout):
    graph = graph_builder(num_nodes=300, max_degree=40, seed=1)
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(0))[:120]
    sample = sample_labor(graph.indptr, graph.indices, nodes, fanout, variates=Variates(derive_key(5)))
    counts = _check_edges(graph, nodes, sample)
    deg = graph.in_degrees()[nodes]
    expected = deg if fanout == -1 else deg.clamp(max=fanout)
    assert torch.equal(counts, expected)
    # HT weights of LABOR-0: 1 / min(fanout, d), summing to 1 per destination with edges
    w_expected = torch.repeat_interleave(1.0 / expected.clamp(min=1).float(), expected)
    assert torch.allclose(sample.edge_weights, w_expected)


@pytest.mark.parametrize(
    "dependent, num_nodes", [(False, 5400), (True, 5400), (True, 1_000_000)], ids=["independent", "table", "per-edge"]
)
def test_labor0_keeps_the_smallest_variates(dependent, num_nodes):
    """Brute force: each destination keeps its k in-edges of smallest r_t (ties: lower
    position). Degrees 20..3000 and 400 destinations x 24 keys cover the kernel's
    candidate path and, several times, its fallback (fewer than k candidates: about one
    destination in 1500). Dependent variates come from a per-vertex table when more
    edges are scanned than the graph has nodes (5400), else are computed per edge."""
    generator = torch.Generator().manual_seed(3)
    degrees = torch.randint(20, 3000, (400,), generator=generator)
    dst = torch.repeat_interleave(torch.arange(400), degrees)
    src = torch.cat([torch.randperm(5000, generator=generator)[:d] + 400 for d in degrees.tolist()])
    graph = CSCGraph.from_coo(src, dst, num_nodes=num_nodes)
    nodes = torch.arange(400)
    indptr, indices = graph.indptr.long(), graph.indices.long()
    for key in range(24):
        variates = Variates(derive_key(key), derive_key(key, 1), 0.6, 0.8, dependent)
        sample = sample_labor(graph.indptr, graph.indices, nodes, 15, variates=variates)
        r = labor_variates(indices.numpy(), np.uint64(variates.k0), np.uint64(variates.k1), 0.6, 0.8, dependent)
        for i in range(400):
            lo, hi = int(indptr[i]), int(indptr[i + 1])
            smallest = np.sort(np.argsort(r[lo:hi], kind="stable")[:15]) + lo
            assert np.array_equal(sample.edge_ids[sample.indptr[i] : sample.indptr[i + 1]].numpy(), smallest)


def test_labor0_inclusion_probability_is_fanout_over_degree():
    graph = _star(degree=10)
    trials = 3000
    indptr, indices, _, _ = _disjoint_copies(graph.indptr, graph.indices, torch.tensor([0]), trials)
    s = sample_labor(indptr, indices, torch.arange(trials), 3, variates=Variates(derive_key(11)))
    positions = s.edge_ids - indptr[torch.arange(trials).repeat_interleave(3)]
    assert torch.equal(s.indptr, torch.arange(trials + 1) * 3)
    hits = torch.bincount(positions, minlength=10)
    # each edge in with probability 3/10: chi-square over the 10 edges
    assert stats.chisquare(hits.numpy(), np.full(10, trials * 0.3)).pvalue > 1e-3


def _priority_reference(a, r, k):
    """Weighted LABOR-0 by brute force: the positions kept from weights ``a`` and source
    variates ``r`` (the ``k`` smallest ``r / a`` among positive weights) and their HT
    weights ``a / (Σa · min(1, a τ))``, ``τ`` the ``(k + 1)``-th smallest ``r / a``."""
    a, r = np.asarray(a, np.float64), np.asarray(r, np.float64)
    positive = np.flatnonzero(a > 0)
    total = a[positive].sum()
    if k == -1 or k >= positive.size:
        return positive, a[positive] / total
    ratios = r[positive] / a[positive]
    order = np.argsort(ratios, kind="stable")
    kept = np.sort(positive[order[:k]])
    tau = ratios[order[k]]
    return kept, a[kept] / (total * np.minimum(1.0, a[kept] * tau))


@pytest.mark.parametrize("fanout", [1, 3, 7, -1])
@pytest.mark.parametrize("dependent", [False, True])
def test_weighted_labor0_is_priority_sampling(graph_builder, fanout, dependent):
    """Exactly min(fanout, #positive) edges per destination, GraphBolt's rule (the k
    smallest r_t / A_ts, zero weights never), and priority sampling's HT weights."""
    graph = graph_builder(num_nodes=300, max_degree=40, seed=11, weights=True)
    probs = graph.edge_attributes["weight"]
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(2))[:150]
    indptr, indices = graph.indptr.long(), graph.indices.long()
    for key in range(5):
        variates = Variates(derive_key(key, 3), derive_key(key, 4), 0.6, 0.8, dependent)
        sample = sample_labor(graph.indptr, graph.indices, nodes, fanout, variates=variates, probs=probs)
        counts = _check_edges(graph, nodes, sample)
        r = labor_variates(indices.numpy(), np.uint64(variates.k0), np.uint64(variates.k1), 0.6, 0.8, dependent)
        for i, v in enumerate(nodes.tolist()):
            lo, hi = int(indptr[v]), int(indptr[v + 1])
            kept, weights = _priority_reference(probs[lo:hi].numpy(), r[lo:hi], fanout)
            got = slice(int(sample.indptr[i]), int(sample.indptr[i + 1]))
            assert int(counts[i]) == kept.size == (min(fanout, int((probs[lo:hi] > 0).sum())) if fanout != -1 else kept.size)
            assert sample.edge_ids[got].tolist() == (kept + lo).tolist()
            assert np.allclose(sample.edge_weights[got].numpy(), weights, rtol=1e-5)
        assert bool((probs[sample.edge_ids] > 0).all())


def test_weighted_labor0_keeps_the_heavy_edges_together():
    """Weights 8:4:2:1:1:0.5:0:3, fanout 3, one destination: 3 edges every time, never the
    zero-weight one, the heaviest almost always, and the HT weights of each sample are
    those of priority sampling. The trials are disjoint copies of the star, sampled in
    one call."""
    weights = torch.tensor([8.0, 4.0, 2.0, 1.0, 1.0, 0.5, 0.0, 3.0])
    graph = _star(degree=8, weights=weights)
    trials = 2000
    indptr, indices, probs, _ = _disjoint_copies(graph.indptr, graph.indices, torch.tensor([0]), trials, weights)
    variates = Variates(derive_key(3))
    s = sample_labor(indptr, indices, torch.arange(trials), 3, variates=variates, probs=probs)
    assert torch.equal(s.indptr, torch.arange(trials + 1) * 3)
    r = labor_variates(indices.numpy(), np.uint64(variates.k0), np.uint64(0), 1.0, 0.0, False)
    positions = (s.edge_ids - indptr[torch.arange(trials).repeat_interleave(3)]).view(trials, 3).numpy()
    edge_weights = s.edge_weights.view(trials, 3).numpy()
    for trial in range(trials):
        kept, w = _priority_reference(weights.numpy(), r[8 * trial : 8 * trial + 8], 3)
        assert positions[trial].tolist() == kept.tolist() and np.allclose(edge_weights[trial], w, rtol=1e-5)
    hits = np.bincount(positions.ravel(), minlength=8)
    assert hits[6] == 0 and hits.sum() == 3 * trials
    assert hits[0] > 0.9 * trials and (np.diff(hits[[0, 1, 7, 2, 3]]) < 0).all()


@pytest.mark.parametrize("weights", ["equal", "random", "huge", "subnormal"])
def test_weighted_labor0_mean_estimate_is_unbiased(graph_builder, weights):
    """Σ w_ts h_t over many keys averages to the weighted mean Σ A h / Σ A (priority
    sampling's HT estimator), also for weights near float64's largest (their sums
    overflow) and for subnormal ones."""
    graph = graph_builder(num_nodes=200, max_degree=40, seed=3, weights=True)
    probs = graph.edge_attributes["weight"].double()
    generator = torch.Generator().manual_seed(1)
    if weights == "equal":
        probs = torch.ones(graph.total_num_edges, dtype=torch.float64)
    elif weights == "huge":
        probs = probs * 10.0 ** torch.empty(probs.numel(), dtype=torch.float64).uniform_(306, 308, generator=generator)
    elif weights == "subnormal":
        probs = torch.where(probs > 0, torch.randint(1, 50, probs.shape, generator=generator, dtype=torch.float64) * 5e-324, 0.0)
    assert bool(torch.isfinite(probs).all())
    h = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    indptr, indices = graph.indptr.long(), graph.indices.long()
    positive = torch.zeros(200, dtype=torch.int64).index_add_(
        0, torch.repeat_interleave(torch.arange(200), graph.in_degrees()), (probs > 0).long()
    )
    nodes = torch.nonzero(positive > 8).flatten()[:40]
    truth = []
    for v in nodes.tolist():
        a = probs[indptr[v] : indptr[v + 1]]
        a = a / a.max()  # ratios: the sums of "huge" overflow, "subnormal" ones lose bits
        truth.append((a * h[indices[indptr[v] : indptr[v + 1]]]).sum() / a.sum())

    def sample(copy_indptr, copy_indices, copy_nodes, copy_probs, copies):
        s = sample_labor(copy_indptr, copy_indices, copy_nodes, 4, variates=Variates(derive_key(19)), probs=copy_probs)
        assert torch.equal(s.indptr[1:] - s.indptr[:-1], positive[nodes].clamp(max=4).repeat(copies))
        return s

    assert_unbiased(graph, nodes, h, torch.stack(truth), sample, probs)


@pytest.mark.parametrize("importance_sampling", [0, -1])
def test_unbiased_mean_estimate(graph_builder, importance_sampling):
    graph = graph_builder(num_nodes=200, max_degree=40, seed=3)
    h = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    deg = graph.in_degrees()
    nodes = torch.nonzero(deg > 8).flatten()[:40]
    indptr, indices = graph.indptr.long(), graph.indices.long()
    truth = torch.stack([h[indices[indptr[v] : indptr[v + 1]]].mean() for v in nodes])

    def sample(copy_indptr, copy_indices, copy_nodes, copy_probs, copies):
        return sample_labor(
            copy_indptr, copy_indices, copy_nodes, 4, variates=Variates(derive_key(9)),
            importance_sampling=importance_sampling,
        )  # fmt: skip

    assert_unbiased(graph, nodes, h, truth, sample)


def assert_unbiased(graph, nodes, h, truth, sample, probs=None, trials=600):
    """Over ``trials`` independent samples, ``Σ edge_weights · h[source]`` per destination
    of ``nodes`` averages to ``truth`` within 4.5 standard errors, and the estimates do
    vary (a test that cannot fail on a constant). The trials are disjoint copies of the
    destinations' in-neighbourhoods (:func:`_disjoint_copies`), sampled in one call by
    ``sample(indptr, indices, nodes, probs, copies)`` (a LayerSample)."""
    indptr, indices, copy_probs, original = _disjoint_copies(graph.indptr, graph.indices, nodes, trials, probs)
    s = sample(indptr, indices, torch.arange(trials * nodes.numel()), copy_probs, trials)
    dst = torch.repeat_interleave(torch.arange(trials * nodes.numel()), s.indptr[1:] - s.indptr[:-1])
    estimates = torch.zeros(trials * nodes.numel(), dtype=torch.float64)
    estimates.index_add_(0, dst, s.edge_weights.double() * h[original[s.indices]])
    estimates = estimates.view(trials, truth.numel())
    mean, se = estimates.mean(0), estimates.std(0) / trials**0.5
    z = (mean - truth) / se
    assert z.abs().max() < 4.5, z
    assert bool((se > 0).all())


def _rmat_graph(num_nodes=4000, num_edges=60000):
    from graphpipe.datasets import rmat_edges

    src, dst = rmat_edges(num_nodes, num_edges, seed=0)
    keep = src != dst
    src, dst = torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])
    pairs = torch.unique(torch.stack([src.long(), dst.long()]), dim=1)
    return CSCGraph.from_coo(pairs[0], pairs[1], num_nodes=num_nodes)


def test_vertex_efficiency_on_power_law_graph():
    from graphpipe.ops import sample_neighbors

    graph = _rmat_graph()
    deg = graph.in_degrees()
    nodes = torch.nonzero(deg > 0).flatten()
    nodes = nodes[torch.randperm(nodes.numel(), generator=torch.Generator().manual_seed(0))[:600]]
    counts = {"ns": [], "labor0": [], "labor*": []}
    for k in range(5):
        key = derive_key(21, k)
        ns = sample_neighbors(graph.indptr, graph.indices, nodes, 10, key=key)
        l0 = sample_labor(graph.indptr, graph.indices, nodes, 10, variates=Variates(key))
        ls = sample_labor(graph.indptr, graph.indices, nodes, 10, variates=Variates(key), importance_sampling=-1)
        counts["ns"].append(torch.unique(ns.indices).numel())
        counts["labor0"].append(torch.unique(l0.indices).numel())
        counts["labor*"].append(torch.unique(ls.indices).numel())
    ns, l0, ls = (np.mean(counts[k]) for k in ("ns", "labor0", "labor*"))
    assert l0 < 0.9 * ns, counts
    assert ls < 0.9 * l0, counts


def test_labor0_same_edges_as_torch_path():
    graph = _rmat_graph(2000, 20000)
    nodes = torch.arange(0, 2000, 3)
    variates = Variates(derive_key(4, 2))
    numba_sample = sample_labor(graph.indptr, graph.indices, nodes, 5, variates=variates)
    torch_sample = sample_labor_torch(
        graph.indptr, graph.indices, nodes, 5, variates=lambda t: _labor_variates_torch(t, variates)
    )
    for a, b in zip(numba_sample, torch_sample):
        assert torch.equal(a, b)


def test_variates_same_in_torch_and_numba_and_uniform():
    ids = torch.arange(50_000)
    for variates in (Variates(derive_key(1)), Variates(derive_key(1), derive_key(2), 0.6, 0.8, True)):
        r = labor_variates(ids.numpy(), np.uint64(variates.k0), np.uint64(variates.k1), variates.c0, variates.c1, variates.dependent)
        r_torch = _labor_variates_torch(ids, variates).numpy()
        assert np.allclose(r, r_torch, atol=1e-12)
        assert stats.kstest(r, "uniform").pvalue > 1e-3


def test_determinism_across_thread_counts(numba_threads):
    graph = _rmat_graph(3000, 40000)
    nodes = torch.arange(0, 3000, 2)
    results = []
    for threads in (1, 2):
        with numba_threads(threads):
            for mode in (0, -1):
                results.append(
                    sample_labor(graph.indptr, graph.indices, nodes, 6, variates=Variates(derive_key(8)), importance_sampling=mode)
                )
    for a, b in zip(results[:2], results[2:]):
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def test_fixed_point_sum_is_the_same_for_any_thread_count(numba_threads):
    """The LABOR-* stopping test compares Σ_t min(1, π_t) of consecutive iterations, so
    that sum must not depend on how a parallel reduction splits it."""
    rng = np.random.default_rng(0)
    offsets = np.arange(0, 2_000_001, 200, dtype=np.int64)
    local = rng.integers(0, 300_000, offsets[-1]).astype(np.int64)
    pi = rng.uniform(0.01, 2.0, 300_000)
    c = rng.uniform(0.5, 3.0, offsets.size - 1)
    sums = []
    for threads in (1, 2):
        with numba_threads(threads):
            partial = np.empty((threads, pi.size), np.float32)
            sums.append(_update_vertex_probabilities(offsets, local, pi, c, partial)[2])
    assert sums[0] == sums[1]


@pytest.mark.parametrize("z, degree, scan", [(-10.0, 5000, "overflows"), (0.0, 5000, "is empty"), (0.0, 20, "is all")])
def test_labor0_ties_and_the_heap_fallback(z, degree, scan):
    """Equal variates everywhere (a table of one key): ties go to the lowest positions,
    whether the candidate scan overflows its buffer (every edge is below the threshold,
    about z = -2.5 here) or finds none (both fall back to the heap), or, with few more
    in-edges than k, takes every edge as a candidate."""
    k = 15
    graph = _star(degree=degree)
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    table = np.full(degree + 1, _order_key(z), np.int64)
    score, pos = (np.empty(4 * (k + 16) + _SEGMENT, np.int64) for _ in range(2))  # as _labor0 sizes them
    heap_score, heap_pos = (np.empty(k + 1, np.int64) for _ in range(2))
    found = _smallest_candidates(indices, 0, degree, k, score, pos, heap_score, heap_pos, np.empty(_SEGMENT, np.int64), table)
    assert found == (scan == "is all")
    _, _, edge_ids, _, bad_ranges = _labor0(indptr, indices, np.array([0]), k, table, 4)
    assert bad_ranges == 0
    assert edge_ids.tolist() == list(range(k))


def test_wrong_normal_tables_are_rejected():
    src, dst = torch.meshgrid(torch.arange(10), torch.arange(10), indexing="ij")
    keep = src != dst
    graph = CSCGraph.from_coo(src[keep], dst[keep], num_nodes=10)  # complete: 90 scanned edges
    variates = Variates(1, 2, 0.6, 0.8, True, normals=lambda key: np.zeros(3))
    with pytest.raises(ValueError, match=r"Variates.normals must give float64 arrays of shape \(10,\)"):
        sample_labor(graph.indptr, graph.indices, torch.arange(10), 5, variates=variates)


def test_candidate_threshold_quantile():
    p = np.concatenate([np.logspace(-12, -1, 50), np.linspace(0.1, 0.999, 50)])
    ours = np.array([_normal_quantile(x) for x in p])
    assert np.abs(ours - stats.norm.ppf(p)).max() < 1e-3


def test_labor0_huge_fanout_keeps_every_edge():
    graph = _star(degree=7)
    sample = sample_labor(graph.indptr, graph.indices, torch.tensor([0, 3]), 2**34, variates=Variates(derive_key(1)))
    assert sample.edge_ids.tolist() == list(range(7))


def test_bad_arguments():
    graph = _star(5)
    nodes = torch.tensor([0])
    with pytest.raises(ValueError, match="`importance_sampling` must be an int >= -1"):
        sample_labor(graph.indptr, graph.indices, nodes, 2, variates=Variates(1), importance_sampling=-2)
    with pytest.raises(ValueError, match="`fanout` must be an int >= 0 or -1"):
        sample_labor(graph.indptr, graph.indices, nodes, -2, variates=Variates(1))
    with pytest.raises(ValueError, match="node id 9, out of range"):
        sample_labor(graph.indptr, graph.indices, torch.tensor([9]), 2, variates=Variates(1))
