"""Neighbor and LABOR sampling of node seeds through the pipes, typed and untyped graphs as
parameters of the same tests: every sampled edge exists, counts per (destination, edge
type), compaction, fanouts, weights, distributions and determinism."""

import warnings

import numba
import pytest
import torch
from scipy import stats

from graphpipe import CSCGraph, DataLoader, HeteroItemSet, ItemSampler, ItemSet, MiniBatch
from graphpipe import LayerNeighborSampler, NeighborSampler
from graphpipe.graph.edge_types import parse_edge_type
from hetero_graphs import EDGE_TYPES, hetero_graph
from sampling_checks import KINDS, NODE, check_batch, graph_and_edges, in_degrees, sampled_edges, typed_view, user_weights

SAMPLERS = {"neighbor": NeighborSampler, "labor": LayerNeighborSampler}
MIXED = {"author:writes:paper": 3, "paper:cites:paper": 2, "paper:written_by:author": 0, "venue:hosts:paper": -1}
# Seeds per node type (untyped: the "_N" entry), a few batches' worth.
SEEDS = [
    {"paper": [0, 3, 17, 39], NODE: [0, 3, 17, 59]},
    {"author": [5, 29], "paper": [8], NODE: [5, 29, 8]},
    {"venue": [0], NODE: [44]},
]
MANY = {"paper": list(range(40)), "author": list(range(30)), NODE: list(range(60))}


@pytest.fixture(scope="module", params=KINDS)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def graph_edges(kind):
    return graph_and_edges(kind, seed=0)


def seeds_of(kind, ids_by_type):
    """The batch's ``seeds``: a tensor on an untyped graph, a dict on a typed one."""
    if kind == "untyped":
        return torch.tensor(ids_by_type[NODE], dtype=torch.int64)
    return {t: torch.tensor(ids, dtype=torch.int64) for t, ids in ids_by_type.items() if t != NODE}


def sample(sampler, seeds, batch_index=0):
    return sampler.sample_subgraphs(MiniBatch(seeds=seeds, batch_index=batch_index))


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
@pytest.mark.parametrize("layout", ["block", "pyg"])
@pytest.mark.parametrize(
    "fanouts", [[2, 3], [-1, 1], [5, 5, 5], [0, 3], [3, 0]], ids=["int", "all", "three", "zero-outer", "zero-last"]
)
def test_every_edge_exists_and_counts_follow_the_fanouts(kind, graph_edges, sampler_kind, layout, fanouts):
    graph, edges = graph_edges
    sampler = SAMPLERS[sampler_kind](None, graph, fanouts, seed=7, layout=layout)
    for batch_index, seeds in enumerate(SEEDS):
        minibatch = sample(sampler, seeds_of(kind, seeds), batch_index)
        assert minibatch.layout == layout
        check_batch(graph, edges, minibatch, sampler.edge_type_fanouts)


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_a_fanout_per_edge_type(sampler_kind, layout):
    graph, edges = graph_and_edges("typed")
    sampler = SAMPLERS[sampler_kind](None, graph, [MIXED, [1, 4, 2, 0]], seed=7, layout=layout)
    for batch_index, seeds in enumerate(SEEDS):
        check_batch(graph, edges, sample(sampler, seeds_of("typed", seeds), batch_index), sampler.edge_type_fanouts)


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
def test_parallel_edges_and_int32_edge_type_ids(sampler_kind):
    """Parallel edges count as distinct edges; past 256 edge types ``type_per_edge`` is int32."""
    graph, edges = hetero_graph(seed=3, parallel=True)
    sampler = SAMPLERS[sampler_kind](None, graph, [3, MIXED], seed=1)
    check_batch(graph, edges, sample(sampler, seeds_of("typed", {"paper": list(range(40))})), sampler.edge_type_fanouts)
    gen = torch.Generator().manual_seed(0)
    many = {f"a:r{i:03d}:b": (torch.randint(0, 5, (3,), generator=gen), torch.randint(0, 4, (3,), generator=gen)) for i in range(300)}
    graph = CSCGraph.from_hetero_edges(many, {"a": 5, "b": 4})
    assert graph.type_per_edge.dtype == torch.int32 and graph.edge_types[-1] == "a:r299:b"
    sampler = SAMPLERS[sampler_kind](None, graph, [2], seed=1)
    check_batch(graph, many, sample(sampler, seeds_of("typed", {"b": [0, 1, 2, 3]})), sampler.edge_type_fanouts)


@pytest.mark.parametrize("importance_sampling", [1, -1])
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_labor_with_importance_sampling_samples_existing_edges(kind, graph_edges, importance_sampling, layout):
    """LABOR-k / LABOR-*: random counts, but every edge exists, none twice, none of a zero-fanout type."""
    graph, edges = graph_edges
    fanouts = [MIXED, 3] if kind == "typed" else [4, 3]
    sampler = LayerNeighborSampler(None, graph, fanouts, importance_sampling=importance_sampling, layout=layout, seed=6)
    for b in range(3):
        minibatch = sample(sampler, seeds_of(kind, {"paper": list(range(0, 40, 4)), "author": [0, 9], NODE: list(range(0, 60, 5))}), b)
        check_batch(graph, edges, minibatch, sampler.edge_type_fanouts, exact_counts=False)
        weights = typed_view(minibatch).sampled_subgraphs[1].edge_weights
        assert all(bool((w > 0).all()) for w in weights.values())


@pytest.mark.parametrize("fanouts", [[0, 3], [3, 0]])
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_a_zero_fanout_layer_of_labor_k_samples_no_edge(fanouts, layout):
    # 0 for a layer of an untyped graph, as PyG's num_neighbors (LABOR-k sampled edges for it).
    graph, edges = graph_and_edges("untyped", seed=0)
    sampler = LayerNeighborSampler(None, graph, fanouts, importance_sampling=1, layout=layout, seed=6)
    for b in range(3):
        minibatch = sample(sampler, seeds_of("untyped", {NODE: list(range(0, 60, 5))}), b)
        check_batch(graph, edges, minibatch, sampler.edge_type_fanouts, exact_counts=False)
        layer = minibatch.sampled_subgraphs[fanouts.index(0)]
        assert layer.sampled_csc.indices.numel() == 0 and layer.edge_weights.numel() == 0


def test_replace_takes_exactly_fanout_per_type(kind, graph_edges):
    graph, edges = graph_edges
    fanouts = [{**MIXED, "venue:hosts:paper": 4}, 6] if kind == "typed" else [4, 6]
    sampler = NeighborSampler(None, graph, fanouts, replace=True, seed=3)
    minibatch = sample(sampler, seeds_of(kind, MANY))
    check_batch(graph, edges, minibatch, sampler.edge_type_fanouts, replace=True)
    # With replacement some destination draws an edge twice (degree <= fanout somewhere).
    _, _, eids, columns = next(iter(sampled_edges(typed_view(minibatch), 1).values()))
    assert torch.unique(columns * 10_000 + eids).numel() < eids.numel()


@pytest.mark.parametrize("sampler_kind, replace", [("neighbor", False), ("neighbor", True), ("labor", False)])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2]])
def test_weighted_sampling_never_takes_zero_weight_edges(kind, graph_edges, sampler_kind, replace, fanouts):
    graph, edges = graph_edges
    weights = user_weights(graph)
    assert any(bool((w == 0).any()) for w in weights.values())
    options = {"replace": True} if replace else {}
    sampler = SAMPLERS[sampler_kind](None, graph, fanouts, weights="w", seed=5, **options)
    for b in range(5):
        minibatch = sample(sampler, seeds_of(kind, {"paper": list(range(0, 40, 3)), "author": [1, 2, 3], NODE: list(range(0, 60, 3))}), b)
        check_batch(graph, edges, minibatch, sampler.edge_type_fanouts, replace=replace, weights=weights)


def test_a_zero_fanout_samples_none_of_that_type_and_minus_one_all():
    graph, edges = graph_and_edges("typed")
    fanouts = [{"author:writes:paper": -1, "paper:cites:paper": 0, "paper:written_by:author": 0, "venue:hosts:paper": 0}]
    sampler = NeighborSampler(None, graph, fanouts, seed=0)
    minibatch = sample(sampler, seeds_of("typed", {"paper": list(range(40))}))
    sub = minibatch.sampled_subgraphs[0]
    for etype in ("paper:cites:paper", "paper:written_by:author", "venue:hosts:paper"):
        assert sub.sampled_csc[etype].indices.numel() == 0 and sub.original_edge_ids[etype].numel() == 0
    # every author -> paper edge, once
    assert torch.equal(sub.original_edge_ids["author:writes:paper"].sort().values, torch.arange(edges["author:writes:paper"][0].numel()))
    assert sub.original_row_node_ids["venue"].numel() == 0


def test_fanout_forms_agree():
    """An int, a dict naming every type and the list in edge type id order are the same fanouts."""
    graph, _ = graph_and_edges("typed")
    seeds = seeds_of("typed", {"paper": [1, 2, 3], "author": [4]})
    by_dict = NeighborSampler(None, graph, [MIXED], seed=1)
    by_list = NeighborSampler(None, graph, [[MIXED[t] for t in graph.edge_types]], seed=1)
    by_tuple_keys = NeighborSampler(None, graph, [{tuple(t.split(":")): f for t, f in MIXED.items()}], seed=1)
    assert by_dict.edge_type_fanouts == by_list.edge_type_fanouts == by_tuple_keys.edge_type_fanouts == [[3, 2, 0, -1]]
    a, b = sample(by_dict, seeds), sample(by_list, seeds)
    for etype in graph.edge_types:
        assert torch.equal(a.sampled_subgraphs[0].original_edge_ids[etype], b.sampled_subgraphs[0].original_edge_ids[etype])
    assert NeighborSampler(None, graph, [4, 4]).edge_type_fanouts == [[4] * 4, [4] * 4]


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
def test_inclusion_probability_is_fanout_over_degree_per_type(kind, sampler_kind):
    """Each in-edge of type t of a destination with d_t > k in-edges of that type is taken
    with probability k / d_t (LABOR-0 too): chi-square over 200 batches, fixed seeds."""
    graph, edges = graph_and_edges(kind, seed=1)
    fanout = {"author:writes:paper": 2, "paper:cites:paper": 3, "paper:written_by:author": 1, "venue:hosts:paper": 1}
    sampler = SAMPLERS[sampler_kind](None, graph, [fanout if kind == "typed" else 3], seed=11)
    counts = {t: torch.zeros(edges[t][0].numel()) for t in edges}
    batches = 200
    for b in range(batches):
        for etype, (_, _, eids, _) in sampled_edges(typed_view(sample(sampler, seeds_of(kind, MANY), b)), 0).items():
            counts[etype] += torch.bincount(eids, minlength=counts[etype].numel())
    tested = 0
    for t_id, etype in enumerate(graph.schema.edge_types):
        k = sampler.edge_type_fanouts[0][t_id]
        dst = edges[etype][1]
        degree = in_degrees(graph, edges, etype)
        statistic, dof = 0.0, 0
        for v in torch.nonzero(degree > k).flatten().tolist():
            observed = counts[etype][dst == v]
            expected = batches * k / degree[v]
            assert float(observed.sum()) == batches * k  # exactly k per batch
            statistic += float(((observed - expected) ** 2 / expected).sum())
            dof += int(degree[v]) - 1
        if dof:
            tested += 1
            assert stats.chi2.sf(statistic, dof) > 1e-4, (etype, statistic, dof)
        for v in torch.nonzero((degree <= k) & (degree > 0)).flatten().tolist():
            assert bool((counts[etype][dst == v] == batches).all()), (etype, v)  # always all of them
    assert tested >= (3 if kind == "typed" else 1)


def test_labor_edge_weights_are_one_over_min_fanout_degree(kind, graph_edges):
    """LABOR-0's Horvitz-Thompson weights: 1 / (d_t * min(1, k / d_t)) = 1 / min(k, d_t) per type."""
    graph, edges = graph_edges
    sampler = LayerNeighborSampler(None, graph, [MIXED if kind == "typed" else 3], seed=2)
    minibatch = typed_view(sample(sampler, seeds_of(kind, MANY)))
    sub = minibatch.sampled_subgraphs[0]
    assert set(sub.edge_weights) == set(graph.schema.edge_types)
    for t_id, etype in enumerate(graph.schema.edge_types):
        _, _, _, columns = sampled_edges(minibatch, 0)[etype]
        d = parse_edge_type(etype)[2]
        degree = in_degrees(graph, edges, etype)[sub.original_column_node_ids[d]][columns].to(torch.float32)
        k = sampler.edge_type_fanouts[0][t_id]
        expected = 1.0 / (degree if k == -1 else torch.clamp(degree, max=k))
        assert sub.edge_weights[etype].dtype == torch.float32
        assert torch.allclose(sub.edge_weights[etype], expected), etype
    plain = sample(NeighborSampler(None, graph, [2]), seeds_of(kind, SEEDS[0]))
    assert plain.sampled_subgraphs[0].edge_weights is None


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
def test_a_nodes_sample_depends_only_on_seed_batch_layer_and_node(kind, graph_edges, sampler_kind):
    graph, _ = graph_edges
    sampler = SAMPLERS[sampler_kind](None, graph, [MIXED if kind == "typed" else 3, 3], seed=4)
    a = typed_view(sample(sampler, seeds_of(kind, {"paper": [7], NODE: [7]}), batch_index=9))
    b = typed_view(sample(sampler, seeds_of(kind, {"paper": [1, 7, 30], "author": [2, 3], NODE: [1, 30, 7, 2]}), batch_index=9))
    again = typed_view(sample(sampler, seeds_of(kind, {"paper": [7], NODE: [7]}), batch_index=9))
    other = typed_view(sample(SAMPLERS[sampler_kind](None, graph, sampler.fanouts, seed=5), seeds_of(kind, MANY), batch_index=9))
    changed = 0
    for etype in graph.schema.edge_types:
        if parse_edge_type(etype)[2] not in ("paper", NODE):
            continue
        _, _, eid_a, _ = sampled_edges(a, 1)[etype]
        _, dst_b, eid_b, _ = sampled_edges(b, 1)[etype]
        _, dst_o, eid_o, _ = sampled_edges(other, 1)[etype]
        assert torch.equal(eid_a, eid_b[dst_b == 7]), etype
        assert torch.equal(eid_a, sampled_edges(again, 1)[etype][2]), etype
        changed += not torch.equal(eid_a, eid_o[dst_o == 7])
    assert changed  # another seed samples other edges


def _layers(minibatch):
    return [
        (
            {t: sub.original_row_node_ids[t].tolist() for t in sub.original_row_node_ids},
            {t: (c.indptr.tolist(), c.indices.tolist()) for t, c in sub.sampled_csc.items()},
            {t: e.tolist() for t, e in sub.original_edge_ids.items()},
            None if sub.edge_weights is None else {t: w.tolist() for t, w in sub.edge_weights.items()},
        )
        for sub in typed_view(minibatch).sampled_subgraphs
    ]


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
def test_same_batch_on_one_and_two_numba_threads(kind, graph_edges, sampler_kind, numba_threads):
    graph, _ = graph_edges
    sampler = SAMPLERS[sampler_kind](None, graph, [MIXED if kind == "typed" else 3, 4], seed=8)
    seeds = seeds_of(kind, {"paper": list(range(0, 40, 2)), "author": list(range(0, 30, 3)), NODE: list(range(0, 60, 2))})
    with numba_threads(1):
        assert numba.get_num_threads() == 1
        one = _layers(sample(sampler, seeds, 5))
    with numba_threads(2):
        two = _layers(sample(sampler, seeds, 5))
    assert one == two


def _pipe(kind, graph, sampler_kind, item_seed=3):
    if kind == "typed":
        items = HeteroItemSet({"paper": ItemSet(torch.arange(40), names="seeds"), "author": ItemSet(torch.arange(30), names="seeds")})
    else:
        items = ItemSet(torch.arange(60), names="seeds")
    source = ItemSampler(items, batch_size=16, shuffle=True, seed=item_seed)
    return SAMPLERS[sampler_kind](source, graph, [MIXED if kind == "typed" else 2, 3], seed=9)


@pytest.mark.parametrize("sampler_kind", ["neighbor", "labor"])
def test_worker_processes_give_the_batches_of_plain_iteration(kind, graph_edges, sampler_kind):
    graph, _ = graph_edges
    plain = [(_layers(mb), str(mb.seeds)) for mb in _pipe(kind, graph, sampler_kind)]
    assert len(plain) in (4, 5)
    loader = DataLoader(_pipe(kind, graph, sampler_kind), num_workers=2)
    try:
        workers = [(_layers(mb), str(mb.seeds)) for mb in loader]
    finally:
        loader.close()
    assert workers == plain


def test_pipe_batches_hold_typed_seeds_labels_and_item_ids():
    graph, edges = graph_and_edges("typed")
    labels = torch.arange(40) * 10
    item_set = HeteroItemSet({
        "author": ItemSet((torch.arange(30), torch.zeros(30, dtype=torch.int64)), names=("seeds", "labels")),
        "paper": ItemSet((torch.arange(40), labels), names=("seeds", "labels")),
    })  # fmt: skip
    pipe = ItemSampler(item_set, batch_size=32, shuffle=True, seed=1).sample_neighbor(graph, [2, MIXED], seed=2)
    seen = {"author": [], "paper": []}
    for minibatch in pipe:
        check_batch(graph, edges, minibatch, pipe.edge_type_fanouts)
        for t, ids in minibatch.item_ids.items():
            seen[t] += ids.tolist()
            assert torch.equal(minibatch.seeds[t], ids)  # seeds are arange: item position == node id
        assert torch.equal(minibatch.labels["paper"], minibatch.seeds["paper"] * 10)
    assert sorted(seen["author"]) == list(range(30)) and sorted(seen["paper"]) == list(range(40))


# ---------------------------------------------------------------------------- errors
def test_unknown_node_type_in_seeds():
    graph, _ = graph_and_edges("typed")
    with pytest.raises(ValueError, match=r"`seeds` has unknown node type 'journal'.*\['author', 'paper', 'venue'\]"):
        sample(NeighborSampler(None, graph, [2]), {"journal": torch.tensor([0])})


def test_seeds_out_of_range_name_their_type(kind, graph_edges):
    graph, _ = graph_edges
    sampler = LayerNeighborSampler(None, graph, [2])
    if kind == "untyped":
        with pytest.raises(ValueError, match=r"`seeds` holds node id 60, out of range: valid ids are 0..59"):
            sample(sampler, torch.tensor([1, 60]))
        return
    with pytest.raises(ValueError, match=r"`seeds\['paper'\]` holds node id 40, out of range: valid ids are 0..39"):
        sample(sampler, {"paper": torch.tensor([1, 40])})
    with pytest.raises(ValueError, match=r"`seeds\['venue'\]` holds node id -1"):
        sample(sampler, {"venue": torch.tensor([-1])})


def test_seeds_of_the_other_graph_kind_are_refused(kind, graph_edges):
    graph, _ = graph_edges
    sampler = NeighborSampler(None, graph, [2])
    if kind == "typed":
        with pytest.raises(ValueError, match="`seeds` must be a dict of node type -> ids"):
            sample(sampler, torch.tensor([0, 1]))
    else:
        with pytest.raises(ValueError, match=r"`seeds` is a dict of types \['paper'\].*the graph is homogeneous"):
            sample(sampler, {"paper": torch.tensor([0])})


def test_one_fanout_on_a_typed_graph_is_per_edge_type_and_graphbolts_form_warns():
    """PyG's meaning: k in-edges of each edge type; GraphBolt's torch.LongTensor([k]) means
    k over all types together, so that form warns (once per sampler), an int does not."""
    edges = {"a:r:b": torch.tensor([[0, 1, 2], [0, 0, 0]]), "b:s:b": torch.tensor([[1, 2, 3], [0, 0, 0]])}
    graph = CSCGraph.from_hetero_edges(edges, {"a": 3, "b": 4})
    items = HeteroItemSet({"b": ItemSet(torch.tensor([0]), names="seeds")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mb = next(iter(ItemSampler(items, 1).sample_neighbor(graph, [2])))
    assert {t: csc.indices.numel() for t, csc in mb.sampled_subgraphs[0].sampled_csc.items()} == {"a:r:b": 2, "b:s:b": 2}
    with pytest.warns(UserWarning, match=r"`fanouts\[0\]` is a one-element tensor \(2\): graphpipe samples up to 2 in-edges of EACH") as caught:
        ItemSampler(items, 1).sample_neighbor(graph, [torch.LongTensor([2]), torch.LongTensor([2])])
    assert len(caught) == 1


def test_bad_typed_fanouts():
    graph, _ = graph_and_edges("typed")
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
    untyped, _ = graph_and_edges("untyped")
    with pytest.raises(ValueError, match=r"`fanouts\[0\]` must be an int >= 0 or -1"):
        NeighborSampler(None, untyped, [{"a:b:c": 2}])

