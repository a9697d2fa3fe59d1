"""SubgraphSampler with link seeds, typed and untyped graphs as parameters of the same
tests: sampling from the pairs' endpoints, compacted_seeds, and seed-edge exclusion (with
reverse edges: GraphBolt's rule, reverse edge ids, reverse edge types) in every layer."""

import itertools

import numpy as np
import pytest
import torch

import graphpipe as gp
from hetero_graphs import random_typed_edges
from sampling_checks import EDGE, KINDS, check_batch, typed_view, user_weights

SAMPLERS = ("neighbor", "weighted", "labor")
# A typed graph's reverse edge types (GraphBolt's reverse_etypes_mapping).
REVERSE_TYPES = {"author:writes:paper": "paper:written_by:author", "paper:cites:paper": "paper:cites:paper"}
LINK_TYPES = ("author:writes:paper", "paper:cites:paper")


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


def typed_link_graph(seed=0, parallel=False):
    """A typed graph whose ``paper:written_by:author`` edges are the reverses of its
    ``author:writes:paper`` edges and whose ``paper:cites:paper`` edges come in both
    directions; ``(graph, edges)`` with a float32 ``"w"`` attribute."""
    g = torch.Generator().manual_seed(seed)
    writes = random_typed_edges(30, 40, 12, g, parallel)
    cites = random_typed_edges(40, 40, 10, g, parallel)
    edges = {
        "author:writes:paper": writes,
        "paper:written_by:author": (writes[1], writes[0]),
        "paper:cites:paper": (torch.cat([cites[0], cites[1]]), torch.cat([cites[1], cites[0]])),
        "venue:hosts:paper": random_typed_edges(5, 40, 3, g),
    }
    weights = {t: torch.rand(e[0].numel(), generator=g) + 0.1 for t, e in edges.items()}
    graph = gp.CSCGraph.from_hetero_edges(edges, {"author": 30, "paper": 40, "venue": 5}, edge_attributes={"w": weights})
    return graph, edges


def link_graph(kind, seed=0, parallel=False):
    """``(graph, edges, reverse_edge_ids)`` (the last: untyped only, else None)."""
    if kind == "typed":
        return (*typed_link_graph(seed, parallel), None)
    graph, edge_index, reverse = undirected_graph(seed=seed, parallel=40 if parallel else 0)
    return graph, {EDGE: (edge_index[0], edge_index[1])}, reverse


def link_items(kind, edges):
    if kind == "untyped":
        return gp.ItemSet(torch.stack(edges[EDGE], 1), names="seeds")
    return gp.HeteroItemSet({t: gp.ItemSet(torch.stack(edges[t], 1), names="seeds") for t in LINK_TYPES})


def _pipe(kind, graph, edges, sampler, fanouts=(4, 3), batch_size=30, ratio=1, **kwargs):
    pipe = gp.ItemSampler(link_items(kind, edges), batch_size, shuffle=True, seed=0)
    if ratio:
        pipe = pipe.sample_uniform_negative(graph, ratio, seed=1)
    if sampler == "labor":
        return pipe.sample_layer_neighbor(graph, list(fanouts), seed=2, **kwargs)
    weights = "w" if sampler == "weighted" else None
    return pipe.sample_neighbor(graph, list(fanouts), weights=weights, seed=2, **kwargs)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_pairs_are_sampled_from_their_endpoints(kind, sampler, layout):
    """The last layer's destinations are each type's distinct endpoints, ascending, and
    ``compacted_seeds`` map the pairs to them; every layer is a valid sample."""
    graph, edges, _ = link_graph(kind)
    pipe = _pipe(kind, graph, edges, sampler, layout=layout)
    weights = user_weights(graph) if sampler == "weighted" else None
    batches = list(itertools.islice(pipe, 8))
    assert len(batches) == 8
    for mb in batches:
        check_batch(graph, edges, mb, pipe.edge_type_fanouts, weights=weights, exact_counts=sampler != "labor")


def _excluded_ids(edges, seeds, reverse, reverse_edge_ids):
    """``{edge type: user ids}`` of the edges a batch must not sample: the seed pairs' edges
    of their type and, by ``reverse``, their reverse edges (``"pair"``: every edge v -> u of
    the reverse type; ``"map"``: the edges ``reverse_edge_ids`` maps them to)."""
    out = {}

    def add(etype, pairs):
        src, dst = edges[etype]
        n = int(max(src.max(), dst.max(), pairs.max())) + 1
        ids = torch.isin(src * n + dst, pairs[:, 0] * n + pairs[:, 1]).nonzero().flatten()
        out[etype] = torch.cat([out.get(etype, ids[:0]), ids])

    for etype, pairs in seeds.items():
        add(etype, pairs)
        if reverse == "pair":
            add(REVERSE_TYPES.get(etype, etype), pairs.flip(1))
        elif reverse == "map":
            out[etype] = torch.cat([out[etype], reverse_edge_ids[out[etype]]])
    return out


def _reverse_arguments(kind, reverse, reverse_edge_ids):
    kwargs = dict(exclude_seed_edges=True, include_reverse_edges=reverse != "none")
    if reverse == "map":
        kwargs["reverse_edge_ids"] = reverse_edge_ids
    if reverse == "pair" and kind == "typed":
        kwargs["reverse_etypes_mapping"] = REVERSE_TYPES
    return kwargs


@pytest.mark.parametrize(
    "kind, reverse", [("untyped", "none"), ("untyped", "pair"), ("untyped", "map"), ("typed", "none"), ("typed", "pair")]
)
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_no_seed_edge_nor_its_reverse_in_any_layer(kind, reverse, sampler, layout):
    """Excluded edges are never sampled; neighbor sampling keeps exactly min(fanout, edges
    left) per destination; the same batches without exclusion do sample those edges (the
    check can fail)."""
    graph, edges, reverse_edge_ids = link_graph(kind, seed=1, parallel=True)
    fanouts = (-1, 3)
    pipe = _pipe(kind, graph, edges, sampler, layout=layout, fanouts=fanouts, **_reverse_arguments(kind, reverse, reverse_edge_ids))
    plain_pipe = _pipe(kind, graph, edges, sampler, layout=layout, fanouts=fanouts)
    weights = user_weights(graph) if sampler == "weighted" else None
    seen_excluded = 0
    for mb in itertools.islice(pipe, 4):
        excluded = _excluded_ids(edges, typed_view(mb).seeds, reverse, reverse_edge_ids)
        check_batch(graph, edges, mb, pipe.edge_type_fanouts, weights=weights, exact_counts=sampler == "neighbor", excluded=excluded)
        plain = typed_view(plain_pipe.sample_subgraphs(gp.MiniBatch(seeds=mb.seeds, batch_index=mb.batch_index)))
        for sg in plain.sampled_subgraphs:
            seen_excluded += sum(int(torch.isin(ids, excluded.get(t, ids[:0])).sum()) for t, ids in sg.original_edge_ids.items())
    assert seen_excluded > 0


def _in_edge_keys(edges, etype, rows, nodes):
    """Sorted ``row * E + user edge id`` of every edge of ``etype`` into ``nodes[i]``, row ``rows[i]``."""
    dst = edges[etype][1]
    order = torch.argsort(dst, stable=True)
    lo, hi = torch.searchsorted(dst[order], nodes), torch.searchsorted(dst[order], nodes, right=True)
    lengths = hi - lo
    starts = torch.cumsum(lengths, 0) - lengths
    at = torch.repeat_interleave(lo - starts, lengths) + torch.arange(int(lengths.sum()))
    return torch.sort(torch.repeat_interleave(rows, lengths) * dst.numel() + order[at]).values


@pytest.mark.parametrize(
    "kind, reverse", [("untyped", "none"), ("untyped", "pair"), ("untyped", "map"), ("typed", "none"), ("typed", "pair")]
)
def test_disjoint_batches_exclude_the_batch_seed_edges_in_every_hop(kind, reverse):
    """disjoint=True: a pair's endpoint is a row of several subtrees, in any hop; each such
    row skips the seed edges (and reverses) of the whole batch, and with fanout -1 every
    row of hops < L gets exactly its other in-edges (nothing else excluded)."""
    pytest.importorskip("torch_geometric")
    graph, edges, reverse_edge_ids = link_graph(kind, seed=1, parallel=True)
    pipe = _pipe(
        kind, graph, edges, "neighbor", fanouts=(-1, -1, -1), batch_size=4, layout="pyg", disjoint=True,
        **_reverse_arguments(kind, reverse, reverse_edge_ids),
    )  # fmt: skip
    later_hops = 0  # rows of hops >= 1 that skip an edge: what the check is about
    for mb in itertools.islice(pipe, 3):
        data, excluded = mb.to_pyg(), _excluded_ids(edges, typed_view(mb).seeds, reverse, reverse_edge_ids)
        for etype in edges:
            src_type, _, dst_type = etype.split(":")
            store, dst_store = (data[tuple(etype.split(":"))], data[dst_type]) if kind == "typed" else (data, data)
            hops = torch.repeat_interleave(torch.arange(4), torch.tensor(dst_store.num_sampled_nodes))
            rows = torch.nonzero(hops < 3).flatten()
            every = _in_edge_keys(edges, etype, rows, dst_store.n_id[rows])
            allowed = every[~torch.isin(every % edges[etype][1].numel(), excluded.get(etype, every[:0]))]
            sampled = torch.sort(store.edge_index[1] * edges[etype][1].numel() + store.e_id).values
            assert torch.equal(sampled, allowed), etype
            skipped_rows = torch.unique(every[~torch.isin(every, allowed)] // edges[etype][1].numel())
            later_hops += int((hops[skipped_rows] >= 1).sum())
    assert later_hops > 0


@pytest.mark.parametrize("kind, reverse", [("untyped", "none"), ("untyped", "map"), ("typed", "pair")])
def test_temporal_pyg_batches_exclude_the_batch_seed_edges_in_every_hop(kind, reverse):
    """Temporal sampling in the pyg layout is disjoint: no layer holds an excluded edge."""
    graph, edges, reverse_edge_ids = link_graph(kind, seed=1, parallel=True)
    g = torch.Generator().manual_seed(0)
    ts = {t: torch.randint(0, 100, (src.numel(),), generator=g) for t, (src, _) in edges.items()}
    if kind == "untyped":
        graph = gp.CSCGraph.from_edge_index(torch.stack(edges[EDGE]), graph.total_num_nodes, edge_attributes={"ts": ts[EDGE]})
    else:
        graph = gp.CSCGraph.from_hetero_edges(edges, {"author": 30, "paper": 40, "venue": 5}, edge_attributes={"ts": ts})
    at = {t: gp.ItemSet((torch.stack(edges[t], 1), torch.full((edges[t][0].numel(),), 100)), names=("seeds", "timestamp")) for t in edges}
    items = at[EDGE] if kind == "untyped" else gp.HeteroItemSet({t: at[t] for t in LINK_TYPES})
    pipe = gp.ItemSampler(items, 4, shuffle=True, seed=0).sample_neighbor(
        graph, [-1, -1, -1], layout="pyg", edge_timestamp_attr_name="ts", seed=2, **_reverse_arguments(kind, reverse, reverse_edge_ids)
    )
    for mb in itertools.islice(pipe, 3):
        view = typed_view(mb)
        excluded = _excluded_ids(edges, view.seeds, reverse, reverse_edge_ids)
        for sg in view.sampled_subgraphs:
            assert not any(bool(torch.isin(ids, excluded.get(t, ids[:0])).any()) for t, ids in sg.original_edge_ids.items())


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


def test_typed_exclusion_arguments_are_checked():
    graph, edges = typed_link_graph()
    source = gp.ItemSampler(link_items("typed", edges), 10)
    with pytest.raises(ValueError, match="`include_reverse_edges=True` on a typed graph needs reverse_etypes_mapping"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True)
    with pytest.raises(ValueError, match="the graph is typed, so reverse edges are named by edge type"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=torch.arange(3))
    with pytest.raises(ValueError, match="`reverse_etypes_mapping` says which edges are reverses, but `include_reverse_edges` is False"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, reverse_etypes_mapping=REVERSE_TYPES)
    with pytest.raises(ValueError, match=r"names an edge type the graph lacks; its edge types: \['author:writes:paper'"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_etypes_mapping={"a:b:c": "c:d:a"})
    with pytest.raises(ValueError, match="maps 'author:writes:paper' to 'paper:cites:paper', whose edges do not run the other way"):
        source.sample_neighbor(
            graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_etypes_mapping={"author:writes:paper": "paper:cites:paper"}
        )
    untyped, _, _ = undirected_graph()
    with pytest.raises(ValueError, match="`reverse_etypes_mapping` names edge types, but the graph is untyped"):
        gp.NeighborSampler(None, untyped, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_etypes_mapping=REVERSE_TYPES)
    sampler = gp.NeighborSampler(None, graph, [2], exclude_seed_edges=True)
    for seeds, match in [
        ({"paper:likes:paper": torch.tensor([[0, 1]])}, r"link seeds on a typed graph are a dict edge type -> \[N, 2\]"),
        ({"paper:cites:paper": torch.tensor([[0, 40]])}, r"`seeds\['paper:cites:paper'\]\[:, 1\]` holds node id 40, out of range"),
        ({"author:writes:paper": torch.tensor([[30, 1]])}, r"`seeds\['author:writes:paper'\]\[:, 0\]` holds node id 30"),
    ]:
        with pytest.raises(ValueError, match=match):
            sampler.sample_subgraphs(gp.MiniBatch(seeds=seeds))


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
            graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=reverse + graph.total_num_edges
        )
    for bad, error, match in [
        (reverse.numpy().astype(np.float64), TypeError, r"`reverse_edge_ids` must be .* integer tensor or numpy array .*, got a numpy array of dtype float64"),
        ("reverse", TypeError, r"`reverse_edge_ids` must be .* integer tensor or numpy array .*, got str"),
        (reverse.numpy()[:-1], ValueError, rf"`reverse_edge_ids` must be a \[num_edges\] = \[{graph.total_num_edges}\] .*got shape \({graph.total_num_edges - 1},\)"),
    ]:
        with pytest.raises(error, match=match):
            source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=bad)
    not_reverse = torch.arange(graph.total_num_edges)
    with pytest.raises(ValueError, match=r"`reverse_edge_ids` must map every edge u -> v to an edge v -> u"):
        source.sample_neighbor(graph, [2], exclude_seed_edges=True, include_reverse_edges=True, reverse_edge_ids=not_reverse)
    with pytest.raises(ValueError, match=r"`exclude_seed_edges=True` needs node pairs as seeds \(\[N, 2\]\).*ItemSet of node seeds"):
        gp.ItemSampler(gp.ItemSet(torch.arange(10), names="seeds"), 5).sample_neighbor(graph, [2], exclude_seed_edges=True)
    sampler = gp.NeighborSampler(None, graph, [2], exclude_seed_edges=True)
    with pytest.raises(ValueError, match=r"`exclude_seed_edges=True` needs node pairs as seeds \(\[N, 2\]\).*\(10,\)"):
        sampler.sample_subgraphs(gp.MiniBatch(seeds=torch.arange(10)))
    with pytest.raises(ValueError, match=r"NeighborSampler \(the items upstream\): `seeds` holds node id 120, out of range"):
        gp.ItemSampler(gp.ItemSet(torch.tensor([[0, 120]]), names="seeds"), 5).sample_neighbor(graph, [2])
    with pytest.raises(ValueError, match="NeighborSampler: `seeds` holds node id 120, out of range"):
        sampler.sample_subgraphs(gp.MiniBatch(seeds=torch.tensor([[0, 120]])))  # seeds not from an item set


@pytest.mark.parametrize("kind", KINDS)
def test_exclude_seed_edges_stage_is_the_keyword(kind):
    """GraphBolt's stage form ``sample_neighbor(...).exclude_seed_edges(...)`` (with its
    no-op ``overlap_fetch`` / ``asynchronous`` flags) samples the batches of the keyword
    form, leaves the sampler it follows unchanged, and is refused after a non-sampler."""
    graph, edges, _ = link_graph(kind, seed=1)
    mapping = {"reverse_etypes_mapping": REVERSE_TYPES} if kind == "typed" else {}
    keyword = _pipe(kind, graph, edges, "neighbor", exclude_seed_edges=True, include_reverse_edges=True, **mapping)
    plain = _pipe(kind, graph, edges, "neighbor", overlap_fetch=False, asynchronous=False)
    stage = plain.exclude_seed_edges(include_reverse_edges=True, asynchronous=False, **mapping)
    assert stage.excludes_seed_edges and not plain.excludes_seed_edges and stage.source is plain.source
    differs = False
    for a, b, c in itertools.islice(zip(keyword, stage, plain), 4):
        for x, y, z in zip(typed_view(a).sampled_subgraphs, typed_view(b).sampled_subgraphs, typed_view(c).sampled_subgraphs):
            for t, ids in x.original_edge_ids.items():
                assert torch.equal(ids, y.original_edge_ids[t])
                differs |= not torch.equal(ids, z.original_edge_ids[t])
    assert differs
    with pytest.raises(TypeError, match=r"FeatureFetcher: exclude_seed_edges\(\.\.\.\) follows a sampler stage directly"):
        plain.fetch_feature(gp.FeatureStore({}), []).exclude_seed_edges(include_reverse_edges=True)
    with pytest.raises(TypeError, match="`asynchronous` must be a bool"):
        _pipe(kind, graph, edges, "neighbor", asynchronous="yes")


@pytest.mark.parametrize("sampler", ["neighbor", "labor"])
def test_graphbolts_gpu_graph_cache_options_are_accepted_and_change_nothing(sampler):
    """GraphBolt's samplers take ``num_gpu_cached_edges`` / ``gpu_cache_threshold`` (its GPU
    cache of in-edges; its PyG examples pass them): accepted, the same batches."""
    graph, edges, _ = link_graph("untyped", seed=1)
    plain = _pipe("untyped", graph, edges, sampler)
    cached = _pipe("untyped", graph, edges, sampler, num_gpu_cached_edges=1000, gpu_cache_threshold=2)
    for a, b in itertools.islice(zip(plain, cached), 3):
        for x, y in zip(a.sampled_subgraphs, b.sampled_subgraphs):
            assert torch.equal(x.original_edge_ids, y.original_edge_ids)
    with pytest.raises(ValueError, match=r"`num_gpu_cached_edges` must be .*>= 0"):
        _pipe("untyped", graph, edges, sampler, num_gpu_cached_edges=-1)
    with pytest.raises(ValueError, match=r"`gpu_cache_threshold` must be .*>= 1"):
        _pipe("untyped", graph, edges, sampler, gpu_cache_threshold=0)
