"""The torch-op samplers (the CUDA branch) on CPU tensors: contract and statistics.

The same functions run on a GPU; the CUDA-marked tests repeat the key checks there.
"""

import numpy as np
import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph
from graphpipe.ops import derive_key, gpu_sampling, sample_neighbors, torch_random
from graphpipe.ops.unique_and_compact import unique_and_compact



def random_graph(num_nodes=60, max_deg=25, seed=0, weighted=False):
    gen = np.random.default_rng(seed)
    deg = gen.integers(0, max_deg, num_nodes)
    deg[:3] = [0, 1, max_deg + 10]
    dst = np.repeat(np.arange(num_nodes), deg)
    src = gen.integers(0, num_nodes, dst.size)
    attrs = {}
    if weighted:
        w = gen.random(dst.size).astype(np.float32)
        w[gen.random(dst.size) < 0.2] = 0.0
        attrs["w"] = torch.from_numpy(w)
    return CSCGraph.from_coo(torch.from_numpy(src), torch.from_numpy(dst), num_nodes, attrs)


def check_contract(graph, nodes, sample, expected_counts=None, unique=True):
    indptr = sample.indptr
    assert indptr.dtype == sample.indices.dtype == sample.edge_ids.dtype == torch.int64
    assert indptr.numel() == nodes.numel() + 1 and int(indptr[0]) == 0
    assert int(indptr[-1]) == sample.indices.numel() == sample.edge_ids.numel()
    counts = indptr[1:] - indptr[:-1]
    if expected_counts is not None:
        assert torch.equal(counts, expected_counts)
    for j, v in enumerate(nodes.tolist()):
        eids = sample.edge_ids[indptr[j] : indptr[j + 1]]
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        assert bool(((eids >= lo) & (eids < hi)).all())
        assert bool((eids[1:] >= eids[:-1]).all())
        if unique:
            assert bool((eids[1:] > eids[:-1]).all())
    assert torch.equal(graph.indices[sample.edge_ids].long(), sample.indices)


@pytest.mark.parametrize("fanout", [1, 3, 10, -1])
def test_uniform_without_replacement_contract(fanout):
    graph = random_graph()
    nodes = torch.randperm(60, generator=torch.Generator().manual_seed(1))[:40]
    s = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, fanout, key=derive_key(1))
    deg = graph.in_degrees()[nodes]
    check_contract(graph, nodes, s, deg if fanout == -1 else deg.clamp(max=fanout))


@pytest.mark.parametrize("fanout", [1, 4])
def test_uniform_with_replacement_contract(fanout):
    graph = random_graph()
    nodes = torch.arange(60)
    s = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, fanout, key=derive_key(2), replace=True)
    check_contract(graph, nodes, s, torch.where(graph.in_degrees() > 0, fanout, 0), unique=False)


def test_weighted_contract_and_zero_weights_never_taken():
    graph = random_graph(weighted=True)
    w = graph.edge_attributes["w"]
    nodes = torch.arange(60)
    positive = torch.zeros(60, dtype=torch.int64).index_add_(
        0, torch.repeat_interleave(torch.arange(60), graph.in_degrees()), (w > 0).long()
    )
    for key in range(5):
        s = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, 4, key=derive_key(key), probs=w)
        check_contract(graph, nodes, s, positive.clamp(max=4))
        assert bool((w[s.edge_ids] > 0).all())
        r = gpu_sampling.sample_neighbors_torch(
            graph.indptr, graph.indices, nodes, 4, key=derive_key(key), probs=w, replace=True
        )
        check_contract(graph, nodes, r, torch.where(positive > 0, 4, 0), unique=False)
        assert bool((w[r.edge_ids] > 0).all())


def _one_node_graph(weights=None):
    deg = len(weights) if weights is not None else 8
    dst = torch.zeros(deg, dtype=torch.int64)
    src = torch.arange(1, deg + 1)
    attrs = {} if weights is None else {"w": torch.tensor(weights, dtype=torch.float32)}
    return CSCGraph.from_coo(src, dst, deg + 1, attrs)


def _edge_frequencies(graph, fanout, trials, **kwargs):
    counts = torch.zeros(graph.total_num_edges, dtype=torch.int64)
    node = torch.tensor([0])
    for key in range(trials):
        s = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, node, fanout, key=derive_key(99, key), **kwargs)
        counts += torch.bincount(s.edge_ids, minlength=graph.total_num_edges)
    return counts.numpy()


def test_uniform_inclusion_is_uniform():
    graph = _one_node_graph()
    freq = _edge_frequencies(graph, 3, 2000)
    assert freq.sum() == 3 * 2000
    assert stats.chisquare(freq).pvalue > 1e-3


def test_uniform_subsets_are_equally_likely():
    graph = _one_node_graph([1.0] * 5)
    node = torch.tensor([0])
    subsets = {}
    for key in range(3000):
        s = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, node, 2, key=derive_key(5, key))
        subsets[tuple(s.edge_ids.tolist())] = subsets.get(tuple(s.edge_ids.tolist()), 0) + 1
    assert len(subsets) == 10
    assert stats.chisquare(list(subsets.values())).pvalue > 1e-3


def test_weighted_with_replacement_follows_weights():
    weights = [1.0, 2.0, 0.0, 3.0, 4.0]
    freq = _edge_frequencies(_one_node_graph(weights), 3, 2000, replace=True, probs=torch.tensor(weights))
    expected = np.array(weights) / sum(weights) * freq.sum()
    assert freq[2] == 0
    assert stats.chisquare(freq[[0, 1, 3, 4]], expected[[0, 1, 3, 4]]).pvalue > 1e-3


def test_weighted_without_replacement_matches_successive_sampling():
    weights = [1.0, 2.0, 3.0, 4.0]
    freq = _edge_frequencies(_one_node_graph(weights), 1, 3000, probs=torch.tensor(weights))
    assert stats.chisquare(freq, np.array(weights) / 10 * 3000).pvalue > 1e-3
    # Two draws: P(i in S) = w_i/W + sum_{j != i} w_j/W * w_i/(W - w_j).
    w = np.array(weights)
    incl = w / w.sum() + np.array([sum(w[j] / w.sum() * w[i] / (w.sum() - w[j]) for j in range(4) if j != i) for i in range(4)])
    freq2 = _edge_frequencies(_one_node_graph(weights), 2, 3000, probs=torch.tensor(weights))
    assert stats.chisquare(freq2, incl * 3000).pvalue > 1e-3


def test_uniform_with_replacement_is_uniform():
    freq = _edge_frequencies(_one_node_graph(), 2, 2000, replace=True)
    assert stats.chisquare(freq).pvalue > 1e-3


def test_vertex_keyed_same_sample_in_any_batch():
    graph = random_graph(seed=3)
    key = derive_key(4, 0, 1)
    a = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, torch.tensor([2, 7, 9]), 5, key=key)
    b = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, torch.tensor([30, 9, 11, 2]), 5, key=key)
    for v in (2, 9):
        ja, jb = [2, 7, 9].index(v), [30, 9, 11, 2].index(v)
        assert torch.equal(a.edge_ids[a.indptr[ja] : a.indptr[ja + 1]], b.edge_ids[b.indptr[jb] : b.indptr[jb + 1]])
    other = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, torch.tensor([2]), 5, key=derive_key(5))
    assert not torch.equal(other.edge_ids, a.edge_ids[a.indptr[0] : a.indptr[1]])


def test_int32_and_int64_graphs_agree():
    graph = random_graph(seed=4)
    nodes = torch.arange(0, 60, 2)
    a = gpu_sampling.sample_neighbors_torch(graph.indptr.int(), graph.indices.int(), nodes, 3, key=7)
    b = gpu_sampling.sample_neighbors_torch(graph.indptr.long(), graph.indices.long(), nodes, 3, key=7)
    assert all(torch.equal(x, y) for x, y in zip(a[:3], b[:3]))


def _labor_reference(graph, nodes, fanout, r):
    """Per destination: the min(fanout, d) neighbours with the smallest r_t, by edge id."""
    eids, counts = [], []
    for v in nodes.tolist():
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        cand = list(range(lo, hi))
        k = len(cand) if fanout == -1 else min(fanout, len(cand))
        cand.sort(key=lambda e: (float(r[int(graph.indices[e])]), e))
        eids += sorted(cand[:k])
        counts.append(k)
    return torch.tensor(eids, dtype=torch.int64), torch.tensor(counts)


@pytest.mark.parametrize("fanout", [2, 5, -1])
def test_labor0_takes_smallest_vertex_variates(fanout):
    graph = random_graph(seed=5)
    nodes = torch.arange(0, 60, 3)
    key = derive_key(8, 1)
    r = torch_random.uniform(key, torch.arange(60))
    s = gpu_sampling.sample_labor_torch(
        graph.indptr, graph.indices, nodes, fanout, variates=lambda t: torch_random.uniform(key, t)
    )
    want_eids, want_counts = _labor_reference(graph, nodes, fanout, r)
    check_contract(graph, nodes, s, want_counts)
    assert torch.equal(s.edge_ids, want_eids)
    w = torch.repeat_interleave(1.0 / want_counts.clamp(min=1).float(), want_counts)
    assert s.edge_weights.dtype == torch.float32 and torch.equal(s.edge_weights, w)


def test_labor0_shares_vertices_across_destinations():
    """Destinations that share neighbours pick overlapping sets: fewer distinct sources than NS."""
    gen = torch.Generator().manual_seed(0)
    dst = torch.arange(200).repeat_interleave(30)
    src = torch.randint(0, 60, (dst.numel(),), generator=gen)
    graph = CSCGraph.from_coo(src, dst, 200)
    nodes = torch.arange(200)
    labor, ns = [], []
    for key in range(5):
        k = derive_key(key)
        labor.append(
            gpu_sampling.sample_labor_torch(
                graph.indptr, graph.indices, nodes, 5, variates=lambda t: torch_random.uniform(k, t)
            ).indices.unique().numel()
        )
        ns.append(gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, 5, key=k).indices.unique().numel())
    assert max(labor) < min(ns)


def test_unique_and_compact_torch_matches_reference_contract():
    gen = torch.Generator().manual_seed(6)
    for n_dst, n_src in [(0, 0), (5, 0), (5, 40), (1, 100)]:
        dst = torch.randperm(50, generator=gen)[:n_dst]
        src = torch.randint(0, 50, (n_src,), generator=gen)
        got_nodes, got_local = gpu_sampling.unique_and_compact_torch(dst, src)
        want_nodes, want_local = unique_and_compact(dst, src)
        assert torch.equal(got_nodes, want_nodes) and torch.equal(got_local, want_local)
        assert torch.equal(got_nodes[:n_dst], dst) and torch.equal(got_nodes[got_local], src)
        new = got_nodes[n_dst:]
        assert bool((new[1:] > new[:-1]).all()) and not bool(torch.isin(new, dst).any())


@pytest.mark.cuda
@pytest.mark.parametrize("pinned", [False, True])
def test_cuda_equals_cpu_bit_for_bit(pinned):
    graph = random_graph(weighted=True)
    if pinned:
        graph.pin_memory_()
        indptr, indices, w = graph.indptr, graph.indices, graph.edge_attributes["w"]
    else:
        indptr, indices, w = graph.indptr.cuda(), graph.indices.cuda(), graph.edge_attributes["w"].cuda()
    nodes = torch.arange(60)
    key = derive_key(3)
    for kwargs in [{}, {"replace": True}, {"probs": "w"}, {"probs": "w", "replace": True}]:
        cpu_kwargs = {k: (graph.edge_attributes["w"] if v == "w" else v) for k, v in kwargs.items()}
        gpu_kwargs = {k: (w if v == "w" else v) for k, v in kwargs.items()}
        want = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, 4, key=key, **cpu_kwargs)
        got = gpu_sampling.sample_neighbors_torch(indptr, indices, nodes.cuda(), 4, key=key, **gpu_kwargs)
        assert got.indices.is_cuda
        assert all(torch.equal(x.cpu(), y) for x, y in zip(got[:3], want[:3]))
    variates = lambda t: torch_random.uniform(key, t)  # noqa: E731
    want = gpu_sampling.sample_labor_torch(graph.indptr, graph.indices, nodes, 4, variates=variates)
    got = gpu_sampling.sample_labor_torch(indptr, indices, nodes.cuda(), 4, variates=variates)
    assert all(torch.equal(x.cpu(), y) for x, y in zip(got, want))
    dst, src = nodes.cuda(), got.indices
    u, local = gpu_sampling.unique_and_compact_torch(dst, src)
    wu, wl = unique_and_compact(dst.cpu(), src.cpu())
    assert torch.equal(u.cpu(), wu) and torch.equal(local.cpu(), wl)


def test_same_edges_as_the_numba_neighbor_sampler():
    graph = random_graph(num_nodes=300, max_deg=90, seed=7, weighted=True)
    w = graph.edge_attributes["w"]
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(8))[:200]
    cases = [
        dict(fanout=f, replace=r, probs=p)
        for f in (1, 5, 70, -1)
        for r in (False, True)
        for p in (None, w)
        if not (r and p is not None)  # weighted with replacement: rounding may differ, tested statistically above
    ]
    for case in cases:
        for seed in range(3):
            key = derive_key(seed, 11)
            want = sample_neighbors(graph.indptr, graph.indices, nodes, key=key, **case)
            got = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, key=key, **case)
            for name, x, y in zip(("indptr", "indices", "edge_ids"), got[:3], want[:3]):
                assert torch.equal(x, y), (case, name)


def random_exclusion(graph, nodes, num_excluding, seed):
    """An EdgeExclusion over the first ``num_excluding`` of ``nodes``: a random subset of each
    one's in-edge positions (all of them for some), ascending."""
    from graphpipe.ops.edge_lookup import EdgeExclusion

    gen = torch.Generator().manual_seed(seed)
    counts, positions = [0], []
    for i, v in enumerate(nodes[:num_excluding].tolist()):
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        take = torch.rand(hi - lo, generator=gen) < (1.0 if i % 7 == 0 else 0.3)
        positions.append(torch.arange(lo, hi)[take])
        counts.append(int(take.sum()))
    return EdgeExclusion(torch.tensor(counts).cumsum(0), torch.cat(positions))


def test_excluded_in_edges_are_skipped_while_drawing_as_the_numba_kernels():
    """With an EdgeExclusion the torch op draws among the other in-edges, edge for edge the
    CPU kernels' sample (so fanouts count only drawable edges)."""
    graph = random_graph(num_nodes=300, max_deg=90, seed=3, weighted=True)
    w = graph.edge_attributes["w"]
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(4))[:200]
    exclude = random_exclusion(graph, nodes, 120, seed=5)
    assert exclude.positions.numel() > 500
    cases = [dict(fanout=f, replace=r, probs=p) for f in (1, 5, 70, -1) for r in (False, True) for p in (None, w)]
    for case in cases:
        want = sample_neighbors(graph.indptr, graph.indices, nodes, key=7, exclude=exclude, **case)
        got = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, key=7, exclude=exclude, **case)
        assert torch.equal(got.indptr, want.indptr), case
        assert not bool(torch.isin(got.edge_ids, exclude.positions).any()), case
        if case["replace"] and case["probs"] is not None and case["fanout"] != -1:
            assert float((got.edge_ids == want.edge_ids).double().mean()) > 0.99, case  # prefix-sum rounding
            continue
        for name, x, y in zip(("indices", "edge_ids"), got[1:3], want[1:3]):
            assert torch.equal(x, y), (case, name)


def test_weighted_with_replacement_mostly_equals_numba():
    graph = random_graph(num_nodes=300, max_deg=40, seed=9, weighted=True)
    w = graph.edge_attributes["w"]
    nodes = torch.arange(300)
    want = sample_neighbors(graph.indptr, graph.indices, nodes, 6, key=5, replace=True, probs=w)
    got = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, 6, key=5, replace=True, probs=w)
    assert torch.equal(got.indptr, want.indptr)
    assert float((got.edge_ids == want.edge_ids).double().mean()) > 0.99


@pytest.mark.cuda
def test_sample_neighbors_dispatches_cuda_tensors_to_the_torch_op():
    from graphpipe.ops.neighbor_sampling import sample_neighbors

    graph = random_graph(num_nodes=300, max_deg=40, seed=1)
    nodes = torch.arange(0, 300, 2)
    want = sample_neighbors(graph.indptr, graph.indices, nodes, 7, key=3)
    on_device = graph.to("cuda")
    for indptr, indices, n in [
        (on_device.indptr, on_device.indices, nodes.cuda()),  # graph and nodes on the GPU
        (on_device.indptr, on_device.indices, nodes),  # CPU nodes, GPU graph
    ]:
        got = sample_neighbors(indptr, indices, n, 7, key=3)
        assert got.indices.is_cuda and all(torch.equal(x.cpu(), y) for x, y in zip(got[:3], want[:3]))
    dst, src = nodes.cuda(), want.indices.cuda()
    u, local = unique_and_compact(dst, src)
    wu, wl = unique_and_compact(nodes, want.indices)
    assert u.is_cuda and torch.equal(u.cpu(), wu) and torch.equal(local.cpu(), wl)


@pytest.mark.cuda
@pytest.mark.parametrize("place", ["mapped file, pinned", "device memory"])
def test_public_ops_on_cuda_equal_the_numba_kernels_edge_for_edge(place, tmp_path):
    """sample_neighbors / sample_labor with CUDA ids against the numba kernels: uniform
    and weighted NS (with and without excluded seed edges), LABOR-0 (independent and dependent variates), on a graph loaded
    from a file with mmap=True and pinned in place (registered read-only), or on the GPU."""
    from graphpipe.ops.labor import Variates, sample_labor

    random_graph(num_nodes=400, max_deg=60, seed=4, weighted=True).save(tmp_path / "g.pt")
    cpu = CSCGraph.load(tmp_path / "g.pt")
    graph = CSCGraph.load(tmp_path / "g.pt", mmap=True).pin_memory_() if place.startswith("mapped") else cpu.to("cuda")
    if place.startswith("mapped"):
        assert graph.indices.is_pinned() and graph.edge_attributes["w"].is_pinned()
    nodes = torch.randperm(400, generator=torch.Generator().manual_seed(5))[:250]
    cases = [dict(fanout=5), dict(fanout=5, probs="w"), dict(fanout=-1), dict(fanout=3, replace=True)]
    exclusion = random_exclusion(cpu, nodes, 150, seed=6)  # seed edges skipped while drawing
    for case in cases + [dict(case, exclude=exclusion) for case in cases]:
        want = sample_neighbors(cpu.indptr, cpu.indices, nodes, key=9,
                                **{k: cpu.edge_attributes["w"] if v == "w" else v for k, v in case.items()})
        got = sample_neighbors(graph.indptr, graph.indices, nodes.cuda(), key=9,
                               **{k: graph.edge_attributes["w"] if v == "w" else v for k, v in case.items()})
        assert got.indices.is_cuda
        for name, x, y in zip(("indptr", "indices", "edge_ids"), got[:3], want[:3]):
            assert torch.equal(x.cpu(), y), (case, name)
    independent, dependent = Variates(derive_key(2)), Variates(derive_key(2), derive_key(3), 0.6, 0.8, True)
    want = sample_labor(cpu.indptr, cpu.indices, nodes, 6, variates=independent)
    got = sample_labor(graph.indptr, graph.indices, nodes.cuda(), 6, variates=independent)
    assert all(torch.equal(x.cpu(), y) for x, y in zip(got, want))
    want = sample_labor(cpu.indptr, cpu.indices, nodes, 6, variates=dependent)
    got = sample_labor(graph.indptr, graph.indices, nodes.cuda(), 6, variates=dependent)
    assert torch.equal(got.indptr.cpu(), want.indptr)
    # Φ(z) on the GPU and the CPU's order keys may round apart on near ties: almost all edges agree.
    assert float((got.edge_ids.cpu() == want.edge_ids).double().mean()) > 0.99
    torch.cuda.synchronize()


def test_uniform_sampling_launches_as_many_ops_for_any_fanout():
    """On a GPU every torch op is a kernel launch: Floyd's steps run all at once, so a
    layer's op count grows only by the pointer-jumping rounds (log2 of the fanout), not
    by one round of hashing per draw."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountOps(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.count += 1
            return func(*args, **(kwargs or {}))

    graph = random_graph(num_nodes=300, max_deg=90, seed=7)
    nodes = torch.arange(300)
    counts = {}
    for fanout in (2, 64):
        with CountOps() as ops:
            gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, fanout, key=1)
        counts[fanout] = ops.count
    rounds = (64 - 1).bit_length() - (2 - 1).bit_length()
    assert counts[64] - counts[2] <= 3 * rounds, counts


def test_floyd_subsets_are_drawn_for_the_rows_over_the_fanout_only(monkeypatch):
    """Found in review: Floyd's ``[rows, fanout]`` temporaries were built for every
    destination (5 GB for 4,000 destinations at fanout 20,000, one of them over it); only
    the rows with more drawable in-edges than the fanout need them. The edges stay the
    numba kernels'."""
    graph = random_graph(num_nodes=300, max_deg=90, seed=7)
    nodes = torch.arange(300)
    shapes = []
    floyd = gpu_sampling._floyd
    monkeypatch.setattr(gpu_sampling, "_floyd", lambda vkeys, deg, k: shapes.append(deg.numel()) or floyd(vkeys, deg, k))
    for fanout in (5, 70, 200):
        got = gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, nodes, fanout, key=3)
        want = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=3)
        assert all(torch.equal(x, y) for x, y in zip(got[:3], want[:3])), fanout
    over = [int((graph.in_degrees()[nodes] > fanout).sum()) for fanout in (5, 70)]
    assert shapes == over and 0 < over[1] < 300  # fanout 200: no row over it, no Floyd


@pytest.mark.cuda
def test_unique_and_compact_on_cuda_refuses_ids_outside_the_graph():
    """Found in review: the CUDA branch skipped the range check, the guard against a
    corrupted ``indices`` (a memory-mapped graph file is not checksummed)."""
    dst = torch.tensor([0, 1], device="cuda")
    with pytest.raises(ValueError, match=r"node id 1000000 is outside \[0, num_nodes\) = \[0, 4\)"):
        unique_and_compact(dst, torch.tensor([2, 1_000_000], device="cuda"), num_nodes=4)
    with pytest.raises(ValueError, match="node ids must be >= 0, got -3"):
        unique_and_compact(dst, torch.tensor([-3], device="cuda"))
