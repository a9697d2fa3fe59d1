"""Typed (heterogeneous) neighbor and LABOR sampling through the pipes: every sampled
edge exists with its type, counts per (destination, edge type), typed compaction,
per-type fanouts, weights, distributions and determinism."""

import numba
import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph, DataLoader, HeteroItemSet, ItemSampler, ItemSet, MiniBatch
from graphpipe import LayerNeighborSampler, NeighborSampler
from graphpipe.graph.edge_types import parse_edge_type
from hetero_graphs import EDGE_TYPES, NUM_NODES, check_typed_batch, hetero_graph, sampled_edges, typed_in_degrees

SAMPLERS = {"neighbor": NeighborSampler, "labor": LayerNeighborSampler}
MIXED = {"author:writes:paper": 3, "paper:cites:paper": 2, "paper:written_by:author": 0, "venue:hosts:paper": -1}


@pytest.fixture(scope="module")
def typed():
    return hetero_graph(seed=0)


def sample(sampler, seeds, batch_index=0):
    return sampler.sample_subgraphs(MiniBatch(seeds=seeds, batch_index=batch_index))


def seeds_of(ids_by_type):
    return {t: torch.tensor(ids, dtype=torch.int64) for t, ids in ids_by_type.items()}


@pytest.mark.parametrize("kind", ["neighbor", "labor"])
@pytest.mark.parametrize("layout", ["block", "pyg"])
@pytest.mark.parametrize("fanouts", [[2, 3], [MIXED, [1, 4, 2, 0]], [-1, 1], [5, 5, 5]], ids=["int", "dict-list", "all", "three"])
def test_every_edge_exists_and_counts_follow_the_fanouts(typed, kind, layout, fanouts):
    graph, edges = typed
    sampler = SAMPLERS[kind](None, graph, fanouts, seed=7, layout=layout)
    for batch_index, seeds in enumerate([{"paper": [0, 3, 17, 39]}, {"author": [5, 29], "paper": [8]}, {"venue": [0]}]):
        minibatch = sample(sampler, seeds_of(seeds), batch_index)
        assert minibatch.layout == layout
        check_typed_batch(graph, edges, minibatch, sampler.edge_type_fanouts)


@pytest.mark.parametrize("kind", ["neighbor", "labor"])
def test_parallel_edges_and_int32_edge_type_ids(kind):
    """Parallel edges count as distinct edges; past 256 edge types ``type_per_edge`` is int32."""
    graph, edges = hetero_graph(seed=3, parallel=True)
    sampler = SAMPLERS[kind](None, graph, [3, MIXED], seed=1)
    check_typed_batch(graph, edges, sample(sampler, seeds_of({"paper": list(range(40))})), sampler.edge_type_fanouts)
    gen = torch.Generator().manual_seed(0)
    many = {f"a:r{i:03d}:b": (torch.randint(0, 5, (3,), generator=gen), torch.randint(0, 4, (3,), generator=gen)) for i in range(300)}
    graph = CSCGraph.from_hetero_edges(many, {"a": 5, "b": 4})
    assert graph.type_per_edge.dtype == torch.int32 and graph.edge_types[-1] == "a:r299:b"
    sampler = SAMPLERS[kind](None, graph, [2], seed=1)
    check_typed_batch(graph, many, sample(sampler, seeds_of({"b": [0, 1, 2, 3]})), sampler.edge_type_fanouts)


@pytest.mark.parametrize("importance_sampling", [1, -1])
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_labor_with_importance_sampling_samples_existing_edges(typed, importance_sampling, layout):
    """LABOR-k / LABOR-*: random counts, but every edge exists, none twice, none of a zero-fanout type."""
    graph, edges = typed
    sampler = LayerNeighborSampler(None, graph, [MIXED, 3], importance_sampling=importance_sampling, layout=layout, seed=6)
    for b in range(3):
        minibatch = sample(sampler, seeds_of({"paper": list(range(0, 40, 4)), "author": [0, 9]}), b)
        check_typed_batch(graph, edges, minibatch, sampler.edge_type_fanouts, exact_counts=False)
        weights = minibatch.sampled_subgraphs[1].edge_weights
        assert all(bool((w > 0).all()) for w in weights.values())


def test_replace_takes_exactly_fanout_per_type(typed):
    graph, edges = typed
    sampler = NeighborSampler(None, graph, [{**MIXED, "venue:hosts:paper": 4}, 6], replace=True, seed=3)
    minibatch = sample(sampler, seeds_of({"paper": list(range(40)), "author": list(range(30))}))
    check_typed_batch(graph, edges, minibatch, sampler.edge_type_fanouts, replace=True)
    # With replacement some destination draws an edge twice (degree <= fanout somewhere).
    _, _, eids, columns = sampled_edges(minibatch, 1)["paper:cites:paper"]
    assert torch.unique(columns * 10_000 + eids).numel() < eids.numel()


@pytest.mark.parametrize("kind, replace", [("neighbor", False), ("neighbor", True), ("labor", False)])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2]])
def test_weighted_sampling_never_takes_zero_weight_edges(typed, kind, replace, fanouts):
    graph, edges = typed
    weights = {}
    for etype in EDGE_TYPES:  # the input-order weights of each type, read back from the graph
        per_type = torch.empty(edges[etype][0].numel())
        mask = graph.type_per_edge.to(torch.int64) == graph.edge_type_to_id[etype]
        per_type[graph.original_edge_ids[mask].to(torch.int64)] = graph.edge_attributes["w"][mask]
        weights[etype] = per_type
    options = {"replace": True} if replace else {}
    sampler = SAMPLERS[kind](None, graph, fanouts, weights="w", seed=5, **options)
    for b in range(5):
        minibatch = sample(sampler, seeds_of({"paper": list(range(0, 40, 3)), "author": [1, 2, 3]}), b)
        check_typed_batch(graph, edges, minibatch, sampler.edge_type_fanouts, replace=replace, weights=weights)


def test_a_zero_fanout_samples_none_of_that_type_and_minus_one_all(typed):
    graph, edges = typed
    fanouts = [{"author:writes:paper": -1, "paper:cites:paper": 0, "paper:written_by:author": 0, "venue:hosts:paper": 0}]
    sampler = NeighborSampler(None, graph, fanouts, seed=0)
    minibatch = sample(sampler, seeds_of({"paper": list(range(40))}))
    sub = minibatch.sampled_subgraphs[0]
    for etype in ("paper:cites:paper", "paper:written_by:author", "venue:hosts:paper"):
        assert sub.sampled_csc[etype].indices.numel() == 0 and sub.original_edge_ids[etype].numel() == 0
    # every author -> paper edge, once
    assert torch.equal(sub.original_edge_ids["author:writes:paper"].sort().values, torch.arange(edges["author:writes:paper"][0].numel()))
    assert sub.original_row_node_ids["venue"].numel() == 0


def test_fanout_forms_agree(typed):
    """An int, a dict naming every type and the list in edge type id order are the same fanouts."""
    graph, _ = typed
    seeds = seeds_of({"paper": [1, 2, 3], "author": [4]})
    by_dict = NeighborSampler(None, graph, [MIXED], seed=1)
    by_list = NeighborSampler(None, graph, [[MIXED[t] for t in graph.edge_types]], seed=1)
    by_tuple_keys = NeighborSampler(None, graph, [{tuple(t.split(":")): f for t, f in MIXED.items()}], seed=1)
    assert by_dict.edge_type_fanouts == by_list.edge_type_fanouts == by_tuple_keys.edge_type_fanouts == [[3, 2, 0, -1]]
    a, b = sample(by_dict, seeds), sample(by_list, seeds)
    for etype in graph.edge_types:
        assert torch.equal(a.sampled_subgraphs[0].original_edge_ids[etype], b.sampled_subgraphs[0].original_edge_ids[etype])
    assert NeighborSampler(None, graph, [4, 4]).edge_type_fanouts == [[4] * 4, [4] * 4]


@pytest.mark.parametrize("kind", ["neighbor", "labor"])
def test_inclusion_probability_is_fanout_over_degree_per_type(kind):
    """Each in-edge of type t of a destination with d_t > k in-edges of that type is taken
    with probability k / d_t (LABOR-0 too): chi-square over 200 batches, fixed seeds."""
    graph, edges = hetero_graph(seed=1)
    fanout = {"author:writes:paper": 2, "paper:cites:paper": 3, "paper:written_by:author": 1, "venue:hosts:paper": 1}
    sampler = SAMPLERS[kind](None, graph, [fanout], seed=11)
    seeds = seeds_of({"paper": list(range(40)), "author": list(range(30))})
    counts = {t: torch.zeros(edges[t][0].numel()) for t in EDGE_TYPES}
    batches = 200
    for b in range(batches):
        minibatch = sample(sampler, seeds, b)
        for etype, (_, _, eids, _) in sampled_edges(minibatch, 0).items():
            counts[etype] += torch.bincount(eids, minlength=counts[etype].numel())
    tested = 0
    for etype in EDGE_TYPES:
        k = fanout[etype]
        dst = edges[etype][1]
        degree = typed_in_degrees(edges, NUM_NODES, etype)
        statistic, dof = 0.0, 0
        for v in torch.nonzero(degree > k).flatten().tolist():
            observed = counts[etype][dst == v]
            expected = batches * k / degree[v]
            assert float(observed.sum()) == batches * k  # exactly k per batch
            statistic += float(((observed - expected) ** 2 / expected).sum())
            dof += int(degree[v]) - 1
        if dof:
            tested += 1
            p = stats.chi2.sf(statistic, dof)
            assert p > 1e-3, (etype, statistic, dof, p)
        for v in torch.nonzero((degree <= k) & (degree > 0)).flatten().tolist():
            assert bool((counts[etype][dst == v] == batches).all()), (etype, v)  # always all of them
    assert tested >= 3


def test_labor_edge_weights_are_one_over_min_fanout_degree(typed):
    """LABOR-0's Horvitz-Thompson weights: 1 / (d_t * min(1, k / d_t)) = 1 / min(k, d_t) per type."""
    graph, edges = typed
    sampler = LayerNeighborSampler(None, graph, [MIXED], seed=2)
    minibatch = sample(sampler, seeds_of({"paper": list(range(40)), "author": list(range(30))}))
    sub = minibatch.sampled_subgraphs[0]
    assert set(sub.edge_weights) == set(graph.edge_types)
    for etype in graph.edge_types:
        _, _, _, columns = sampled_edges(minibatch, 0)[etype]
        d = parse_edge_type(etype)[2]
        degree = typed_in_degrees(edges, NUM_NODES, etype)[sub.original_column_node_ids[d]][columns].to(torch.float32)
        k = MIXED[etype]
        expected = 1.0 / (degree if k == -1 else torch.clamp(degree, max=k))
        assert sub.edge_weights[etype].dtype == torch.float32
        assert torch.allclose(sub.edge_weights[etype], expected), etype
    assert NeighborSampler(None, graph, [2]).sample_subgraphs(MiniBatch(seeds=seeds_of({"paper": [0]}))).sampled_subgraphs[0].edge_weights is None


@pytest.mark.parametrize("kind", ["neighbor", "labor"])
def test_a_nodes_sample_does_not_depend_on_the_rest_of_the_batch(typed, kind):
    graph, _ = typed
    sampler = SAMPLERS[kind](None, graph, [MIXED, 3], seed=4)
    a = sample(sampler, seeds_of({"paper": [7]}), batch_index=9)
    b = sample(sampler, seeds_of({"paper": [1, 7, 30], "author": [2, 3]}), batch_index=9)
    for etype in graph.edge_types:
        if parse_edge_type(etype)[2] != "paper":
            continue
        _, _, eid_a, _ = sampled_edges(a, 1)[etype]
        _, dst_b, eid_b, _ = sampled_edges(b, 1)[etype]
        assert torch.equal(eid_a, eid_b[dst_b == 7]), etype


def _layers(minibatch):
    return [
        (
            {t: sub.original_row_node_ids[t].tolist() for t in sub.original_row_node_ids},
            {t: (c.indptr.tolist(), c.indices.tolist()) for t, c in sub.sampled_csc.items()},
            {t: e.tolist() for t, e in sub.original_edge_ids.items()},
            None if sub.edge_weights is None else {t: w.tolist() for t, w in sub.edge_weights.items()},
        )
        for sub in minibatch.sampled_subgraphs
    ]


@pytest.mark.parametrize("kind", ["neighbor", "labor"])
def test_same_batch_on_one_and_two_numba_threads(typed, kind, numba_threads):
    graph, _ = typed
    sampler = SAMPLERS[kind](None, graph, [MIXED, 4], seed=8)
    seeds = seeds_of({"paper": list(range(0, 40, 2)), "author": list(range(0, 30, 3))})
    with numba_threads(1):
        assert numba.get_num_threads() == 1
        one = _layers(sample(sampler, seeds, 5))
    with numba_threads(2):
        two = _layers(sample(sampler, seeds, 5))
    assert one == two


def _hetero_pipe(graph, kind, item_seed=3):
    item_set = HeteroItemSet({
        "paper": ItemSet(torch.arange(40), names="seeds"),
        "author": ItemSet(torch.arange(30), names="seeds"),
    })  # fmt: skip
    items = ItemSampler(item_set, batch_size=16, shuffle=True, seed=item_seed)
    return SAMPLERS[kind](items, graph, [MIXED, 3], seed=9)


@pytest.mark.parametrize("kind", ["neighbor", "labor"])
def test_worker_processes_give_the_batches_of_plain_iteration(typed, kind):
    graph, _ = typed
    plain = [(_layers(mb), {t: s.tolist() for t, s in mb.seeds.items()}) for mb in _hetero_pipe(graph, kind)]
    assert len(plain) == 5
    loader = DataLoader(_hetero_pipe(graph, kind), num_workers=2)
    try:
        workers = [(_layers(mb), {t: s.tolist() for t, s in mb.seeds.items()}) for mb in loader]
    finally:
        loader.close()
    assert workers == plain


def test_pipe_batches_hold_typed_seeds_labels_and_item_ids(typed):
    graph, edges = typed
    labels = torch.arange(40) * 10
    item_set = HeteroItemSet({
        "author": ItemSet((torch.arange(30), torch.zeros(30, dtype=torch.int64)), names=("seeds", "labels")),
        "paper": ItemSet((torch.arange(40), labels), names=("seeds", "labels")),
    })  # fmt: skip
    pipe = ItemSampler(item_set, batch_size=32, shuffle=True, seed=1).sample_neighbor(graph, [2, MIXED], seed=2)
    seen = {"author": [], "paper": []}
    for minibatch in pipe:
        check_typed_batch(graph, edges, minibatch, pipe.edge_type_fanouts)
        for t, ids in minibatch.item_ids.items():
            seen[t] += ids.tolist()
            assert torch.equal(minibatch.seeds[t], ids)  # seeds are arange: item position == node id
        assert torch.equal(minibatch.labels["paper"], minibatch.seeds["paper"] * 10)
    assert sorted(seen["author"]) == list(range(30)) and sorted(seen["paper"]) == list(range(40))


# ---------------------------------------------------------------------------- errors
def test_unknown_node_type_in_seeds(typed):
    graph, _ = typed
    sampler = NeighborSampler(None, graph, [2])
    with pytest.raises(ValueError, match=r"`seeds` has unknown node type 'journal'.*\['author', 'paper', 'venue'\]"):
        sample(sampler, seeds_of({"journal": [0]}))


def test_typed_seeds_out_of_range_name_the_type(typed):
    graph, _ = typed
    sampler = LayerNeighborSampler(None, graph, [2])
    with pytest.raises(ValueError, match=r"`seeds\['paper'\]` holds node id 40, out of range: valid ids are 0..39"):
        sample(sampler, seeds_of({"paper": [1, 40]}))
    with pytest.raises(ValueError, match=r"`seeds\['venue'\]` holds node id -1"):
        sample(sampler, seeds_of({"venue": [-1]}))


def test_plain_seeds_on_a_typed_graph(typed):
    graph, _ = typed
    with pytest.raises(ValueError, match="`seeds` must be a dict of node type -> ids"):
        sample(NeighborSampler(None, graph, [2]), torch.tensor([0, 1]))


def test_bad_typed_fanouts(typed):
    graph, _ = typed
    missing = {t: 1 for t in EDGE_TYPES[:-1]}
    with pytest.raises(ValueError, match=r"`fanouts\[0\]` has no fanout for edge type\(s\) \['venue:hosts:paper'\]"):
        NeighborSampler(None, graph, [missing])
    with pytest.raises(ValueError, match=r"`fanouts\[1\]` names unknown edge type 'paper:likes:paper'"):
        NeighborSampler(None, graph, [2, {**MIXED, "paper:likes:paper": 1}])
    with pytest.raises(ValueError, match=r"`fanouts\[0\]` has 3 fanouts, but the graph has 4 edge types"):
        LayerNeighborSampler(None, graph, [[1, 2, 3]])
    with pytest.raises(ValueError, match=r"`fanouts\[0\]` for edge type 'author:writes:paper' must be an int >= 0 or -1"):
        NeighborSampler(None, graph, [[-2, 1, 1, 1]])
    with pytest.raises(ValueError, match=r"`fanouts\[1\]` must be an int >= 0 or -1 \(all\) for every edge type"):
        NeighborSampler(None, graph, [2, -2])
    with pytest.raises(ValueError, match="`fanouts` must be a non-empty list with one entry per GNN layer"):
        NeighborSampler(None, graph, MIXED)


def test_dict_fanouts_on_a_homogeneous_graph(graph_builder):
    graph = graph_builder(num_nodes=50, max_degree=10)
    with pytest.raises(ValueError, match=r"`fanouts\[0\]` must be an int >= 1 or -1"):
        NeighborSampler(None, graph, [{"a:b:c": 2}])


def test_typed_seeds_on_a_homogeneous_graph(graph_builder):
    graph = graph_builder(num_nodes=50, max_degree=10)
    with pytest.raises(ValueError, match=r"`seeds` is a dict of types \['paper'\].*the graph is homogeneous"):
        NeighborSampler(None, graph, [2]).sample_subgraphs(MiniBatch(seeds={"paper": torch.tensor([0])}))
