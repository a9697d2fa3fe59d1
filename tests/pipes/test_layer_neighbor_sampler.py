import numpy as np
import pytest
import torch
from scipy import stats

import graphpipe as gp
from graphpipe.ops.labor import labor_variates
from graphpipe.pipes.capabilities import UnsupportedCombination


def _coo():
    """A power-law graph's edges (distinct, no self loops), in random order."""
    from graphpipe.datasets import rmat_edges

    src, dst = rmat_edges(5000, 80000, seed=1)
    keep = src != dst
    src, dst = torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])
    pairs = torch.unique(torch.stack([src.long(), dst.long()]), dim=1)
    return pairs[:, torch.randperm(pairs.size(1), generator=torch.Generator().manual_seed(1))]


COO = _coo()
GRAPH = gp.CSCGraph.from_coo(
    COO[0], COO[1], num_nodes=5000, edge_attributes={"w": torch.rand(COO.size(1), generator=torch.Generator().manual_seed(0))}
)
SEEDS = torch.nonzero(GRAPH.in_degrees() > 0).flatten()


def _r(sampler, batch_index, layer, ids):
    v = sampler.variates(batch_index, layer)
    return labor_variates(ids.numpy(), np.uint64(v.k0), np.uint64(v.k1), v.c0, v.c1, v.dependent)


@pytest.mark.parametrize("layout", ["block", "pyg"])
@pytest.mark.parametrize("kwargs", [{}, {"importance_sampling": -1}, {"weights": "w"}, {"batch_dependency": 8}])
def test_layers_are_valid_compacted_blocks_with_weights(kwargs, layout):
    pipe = gp.ItemSampler(gp.ItemSet(SEEDS), 64, shuffle=True, seed=0).sample_layer_neighbor(
        GRAPH, [5, 4, 3], seed=2, layout=layout, **kwargs
    )
    mb = next(iter(pipe))
    assert mb.layout == layout
    frontier_start = 0
    for i, sg in reversed(list(enumerate(mb.sampled_subgraphs))):
        n_dst = sg.num_dst_nodes
        assert torch.equal(sg.original_row_node_ids[:n_dst], sg.original_column_node_ids)
        src, dst = sg.edge_index()
        # edge ids are the user's: positions in the COO the graph was built from
        assert torch.equal(COO[0][sg.original_edge_ids], sg.original_row_node_ids[src])
        assert torch.equal(COO[1][sg.original_edge_ids], sg.original_column_node_ids[dst])
        if layout == "pyg":  # only the nodes the previous layer added are sampled
            assert bool((dst >= frontier_start).all())
            frontier_start = n_dst
        assert sg.edge_weights is not None and sg.edge_weights.dtype == torch.float32
        assert bool((sg.edge_weights > 0).all())
        if i + 1 < mb.num_layers:
            assert torch.equal(sg.original_column_node_ids, mb.sampled_subgraphs[i + 1].original_row_node_ids)
    assert torch.equal(mb.sampled_subgraphs[-1].original_column_node_ids, mb.seeds)
    assert torch.equal(mb.input_nodes, mb.sampled_subgraphs[0].original_row_node_ids)
    data = mb.to_pyg()
    assert data.edge_weight.numel() == data.edge_index.size(1)


def test_labor0_is_a_drop_in_for_neighbor_counts():
    for layout in ("block", "pyg"):
        pipe = gp.ItemSampler(gp.ItemSet(SEEDS), 128, seed=0).sample_layer_neighbor(GRAPH, [7, 3], seed=1, layout=layout)
        mb = next(iter(pipe))
        # pyg layout: the seeds' layer samples all its destinations, the next one only the new nodes
        sampled_from = [mb.sampled_subgraphs[1].num_dst_nodes if layout == "pyg" else 0, 0]
        for sg, fanout, start in zip(mb.sampled_subgraphs, [7, 3], sampled_from):
            deg = GRAPH.in_degrees()[sg.original_column_node_ids]
            counts = sg.sampled_csc.indptr[1:] - sg.sampled_csc.indptr[:-1]
            assert torch.equal(counts[start:], deg[start:].clamp(max=fanout)) and not counts[:start].any()


def test_layer_dependency_shares_variates_across_layers():
    ids = torch.arange(1000)
    dependent = gp.ItemSampler(gp.ItemSet(10), 5).sample_layer_neighbor(GRAPH, [3, 3], layer_dependency=True, seed=1)
    independent = gp.ItemSampler(gp.ItemSet(10), 5).sample_layer_neighbor(GRAPH, [3, 3], seed=1)
    assert np.array_equal(_r(dependent, 4, 0, ids), _r(dependent, 4, 1, ids))
    assert not np.array_equal(_r(independent, 4, 0, ids), _r(independent, 4, 1, ids))
    assert not np.array_equal(_r(dependent, 4, 0, ids), _r(dependent, 5, 0, ids))


def test_batch_dependency_variates_are_uniform_and_drift_smoothly():
    ids = torch.arange(20_000)
    sampler = gp.ItemSampler(gp.ItemSet(10), 5).sample_layer_neighbor(GRAPH, [3], batch_dependency=16, seed=1)
    for j in (0, 5, 8, 15, 16, 37):
        assert stats.kstest(_r(sampler, j, 0, ids), "uniform").pvalue > 1e-3
    # consecutive batches correlate strongly, also across a period boundary (15 -> 16)
    for j in (3, 15):
        assert np.corrcoef(_r(sampler, j, 0, ids), _r(sampler, j + 1, 0, ids))[0, 1] > 0.9
    # a whole period apart, the variates are nearly independent
    assert abs(np.corrcoef(_r(sampler, 0, 0, ids), _r(sampler, 32, 0, ids))[0, 1]) < 0.05


def _overlap_of_consecutive_batches(kappa):
    pipe = gp.ItemSampler(gp.ItemSet(SEEDS), 128, shuffle=True, seed=0).sample_layer_neighbor(
        GRAPH, [5, 5], batch_dependency=kappa, seed=3
    )
    overlaps, previous = [], None
    for i, mb in enumerate(pipe):
        nodes = set(mb.input_nodes.tolist())
        if previous is not None:
            overlaps.append(len(nodes & previous) / len(nodes))
        previous = nodes
        if i == 12:
            break
    return float(np.mean(overlaps))


def test_batch_dependency_overlap_grows_with_kappa():
    independent, dependent = _overlap_of_consecutive_batches(1), _overlap_of_consecutive_batches(64)
    assert dependent > independent + 0.05, (independent, dependent)


def test_deterministic_under_seed():
    def run(seed):
        pipe = gp.ItemSampler(gp.ItemSet(SEEDS), 64, shuffle=True, seed=0).sample_layer_neighbor(
            GRAPH, [4, 4], importance_sampling=2, seed=seed
        )
        return next(iter(pipe)).sampled_subgraphs[0].original_edge_ids

    assert torch.equal(run(7), run(7))
    assert not torch.equal(run(7), run(8))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"importance_sampling": -2}, ValueError, "`importance_sampling` must be an int >= -1"),
        ({"importance_sampling": 1.5}, ValueError, "`importance_sampling` must be an int >= -1"),
        ({"batch_dependency": 0}, ValueError, r"`batch_dependency` must be an int >= 1"),
        ({"batch_dependency": 2.5}, ValueError, r"`batch_dependency` must be an int >= 1"),
        ({"seed": 1.7}, ValueError, r"`seed` must be an int"),
        ({"weights": "nope"}, KeyError, r"'nope' is not an edge attribute.*\['w'\]"),
        ({"weights": "w", "importance_sampling": -1}, ValueError, "importance_sampling=0 only"),
        ({"cooperative": True, "importance_sampling": -1}, UnsupportedCombination, "LABOR-0"),
        ({"fanouts": [3, -2]}, ValueError, r"`fanouts\[1\]` must be an int >= 0 or -1"),
        ({"layout": "blocks"}, ValueError, r"`layout` must be 'block' .* or 'pyg'"),
        ({"cooperative": True, "layout": "pyg"}, UnsupportedCombination, r"builds block layers only \(layout='block'\)"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    kwargs = {"fanouts": [3, 3], **kwargs}
    with pytest.raises(error, match=match):
        gp.ItemSampler(gp.ItemSet(10), 5).sample_layer_neighbor(GRAPH, **kwargs)


def test_integer_arguments_in_the_forms_graphbolt_users_pass_become_ints():
    sampler = gp.ItemSampler(gp.ItemSet(10), 5).sample_layer_neighbor(
        GRAPH, [torch.LongTensor([3])], importance_sampling=torch.tensor([2]), batch_dependency=np.int64(4), seed=np.int64(7)
    )
    values = (sampler.fanouts[0], sampler.importance_sampling, sampler.batch_dependency, sampler.seed)
    assert values == (3, 2, 4, 7) and all(type(v) is int for v in values)


def test_graphbolts_positional_order_and_prob_name():
    """GraphBolt 2.1's ``sample_layer_neighbor(graph, fanouts, replace, prob_name)``:
    ``prob_name`` (keyword or 4th position) samples as ``weights``; the 3rd position is
    ``replace``, never ``importance_sampling``, and LABOR's own options are keyword-only."""
    mask = torch.arange(GRAPH.total_num_edges) % 2 == 0  # zero-weight edges are never drawn
    graph = gp.CSCGraph(GRAPH.indptr, GRAPH.indices, {"mask": mask.float()})
    source = gp.ItemSampler(gp.ItemSet(SEEDS[:64]), 64)
    batches = [
        next(iter(gp.ItemSampler(gp.ItemSet(SEEDS[:64]), 64).sample_layer_neighbor(graph, [3], *args, seed=1, **kwargs)))
        for args, kwargs in (((), {"weights": "mask"}), ((), {"prob_name": "mask"}), ((False, "mask"), {}))
    ]
    eids = [mb.sampled_subgraphs[0].original_edge_ids for mb in batches]
    assert eids[0].numel() > 0 and bool(mask[eids[0]].all())
    assert all(torch.equal(e, eids[0]) for e in eids)
    with pytest.raises(ValueError, match=r"LayerNeighborSampler: pass `weights` or `prob_name` \(GraphBolt's name"):
        source.sample_layer_neighbor(graph, [3], weights="mask", prob_name="mask")
    with pytest.raises(TypeError, match="`replace` must be a bool, got 1"):  # GraphBolt's replace=1, not LABOR-1
        source.sample_layer_neighbor(graph, [3], 1)
    with pytest.raises(TypeError, match="positional argument"):
        source.sample_layer_neighbor(graph, [3], False, None, 1)


def test_negative_weights_rejected():
    graph = gp.CSCGraph(GRAPH.indptr, GRAPH.indices, {"w": -GRAPH.edge_attributes["w"]})
    with pytest.raises(ValueError, match="must be non-negative"):
        gp.ItemSampler(gp.ItemSet(10), 5).sample_layer_neighbor(graph, [3], weights="w")



def test_kappa_normal_tables_give_the_same_batches_and_are_computed_once_per_key(monkeypatch):
    """With batch_dependency > 1 a layer that scans more edges than the graph has nodes
    takes its variates from normal tables cached across the batches of a period: the
    batches equal those with the normals computed on the spot, and each key's table is
    computed once."""
    import graphpipe.pipes.layer_neighbor_sampler as module

    src, dst = torch.randint(0, 300, (2, 6000), generator=torch.Generator().manual_seed(0))
    graph = gp.CSCGraph.from_coo(src, dst, num_nodes=300)
    items = gp.ItemSet(torch.arange(300), names="seeds")

    def sampler():
        return gp.ItemSampler(items, 64, seed=1).sample_layer_neighbor(graph, [5, 5], batch_dependency=4, seed=2)

    keys = []
    real = module.vertex_normals
    monkeypatch.setattr(module, "vertex_normals", lambda key, n: keys.append(int(key)) or real(key, n))
    cached = list(sampler())
    uncached_pipe = sampler()
    uncached_pipe._normals = None  # Variates(normals=None): normals computed on the spot
    uncached = list(uncached_pipe)
    # 5 batches: periods 0 (batches 0-3) and 1 (batch 4) need keys of periods 0, 1, 2, per layer.
    assert len(keys) == len(set(keys)) == 2 * 3
    for a, b in zip(cached, uncached):
        for x, y in zip(a.sampled_subgraphs, b.sampled_subgraphs):
            assert torch.equal(x.original_edge_ids, y.original_edge_ids)


def test_normals_cache_lru_pickles_empty_and_computes_a_key_once_across_threads(monkeypatch):
    import pickle
    import threading
    import time

    import graphpipe.pipes.layer_neighbor_sampler as module

    cache = module._NormalsCache(10, capacity=2)
    cache(1), cache(2), cache(3)
    assert list(cache._tables) == [2, 3]  # least recently used dropped
    assert np.array_equal(cache(3), module.vertex_normals(np.uint64(3), 10))
    copy = pickle.loads(pickle.dumps(cache))
    assert len(copy._tables) == 0 and copy.capacity == 2 and copy.num_nodes == 10

    calls = []
    real = module.vertex_normals

    def slow_normals(key, n):
        calls.append(int(key))
        time.sleep(0.05)
        return real(key, n)

    monkeypatch.setattr(module, "vertex_normals", slow_normals)
    results = []
    threads = [threading.Thread(target=lambda: results.append(copy(7))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [7] and len(results) == 4 and all(r is results[0] for r in results)


def test_dependent_sampler_pickles_to_the_same_batches():
    import pickle

    src, dst = torch.randint(0, 300, (2, 6000), generator=torch.Generator().manual_seed(0))
    graph = gp.CSCGraph.from_coo(src, dst, num_nodes=300)
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(300), names="seeds"), 64, seed=1).sample_layer_neighbor(
        graph, [5, 5], batch_dependency=4, seed=2
    )
    pairs = list(zip(pipe, pickle.loads(pickle.dumps(pipe))))
    assert len(pairs) == 5  # 300 seeds in batches of 64
    for a, b in pairs:
        assert all(torch.equal(x.original_edge_ids, y.original_edge_ids) for x, y in zip(a.sampled_subgraphs, b.sampled_subgraphs))


@pytest.mark.cuda
@pytest.mark.parametrize("options", [{"importance_sampling": 1}, {"weights": "w"}])
def test_weighted_or_labor_k_on_a_cuda_graph_is_refused_when_the_pipe_is_built(options):
    """Found in review: it raised NotImplementedError at the first batch."""
    graph = gp.CSCGraph.from_coo(torch.tensor([0, 1]), torch.tensor([1, 0]), edge_attributes={"w": torch.ones(2)}).to("cuda")
    with pytest.raises(UnsupportedCombination, match="on a GPU only unweighted LABOR-0 is implemented"):
        gp.ItemSampler(gp.ItemSet(torch.arange(2)), 2).sample_layer_neighbor(graph, [1], **options)
