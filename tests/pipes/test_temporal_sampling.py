"""Temporal sampling checked by brute force against the seeds' times
(:mod:`temporal_checks`), typed and untyped, time-sorted and unsorted graphs, both layouts
(block: a row per sampled edge; pyg: disjoint subtrees)."""

from __future__ import annotations

import itertools

import numba
import pytest
import torch
from sampling_checks import EDGE, NODE
from graphpipe.ops.temporal import UNTIMED, valid_candidates
from temporal_checks import FANOUTS, USES, check_temporal_batch, items, timed_graph

import graphpipe as gp
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.pipes.capabilities import UnsupportedCombination

CASES = [  # (kind, task, layout, uses, comparison, window, strategy)
    *itertools.product(("untyped", "typed"), ("node", "link"), ("block", "pyg"), ("node", "edge", "both"), ("<",), (None,), ("uniform",)),
    *itertools.product(("untyped", "typed"), ("node",), ("block", "pyg"), ("node", "both"), ("<=",), (None, 30), ("uniform", "last")),
    *itertools.product(("untyped", "typed"), ("link",), ("pyg",), ("edge",), ("<",), (25,), ("last",)),
]


@pytest.mark.parametrize("sort", [False, True], ids=["unsorted", "sorted"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_every_sampled_edge_is_valid_for_its_root(case, sort):
    kind, task, layout, uses, comparison, width, strategy = case
    graph, edges, node_time, edge_time = timed_graph(kind, sort and USES[uses])
    gen = torch.Generator().manual_seed(3)
    pipe = gp.ItemSampler(items(kind, edges, task, gen, layout), 10, shuffle=True, seed=1).sample_neighbor(
        graph, FANOUTS, layout=layout, seed=5, comparison=comparison, time_window=width, temporal_strategy=strategy, **USES[uses]
    )
    assert pipe.time_filter.is_sorted == sort
    cfg = dict(uses={"node": ("node",), "edge": ("edge",), "both": ("node", "edge")}[uses], layout=layout,
               comparison=comparison, window=width, strategy=strategy, fanouts=FANOUTS)  # fmt: skip
    checked = sum(check_temporal_batch(graph, edges, node_time, edge_time, mb, cfg) for mb in pipe)
    assert checked > 0


@pytest.mark.parametrize("layout, strategy", [("block", "uniform"), ("pyg", "uniform"), ("pyg", "last")])
@pytest.mark.parametrize("fanouts", [[0, 3], [3, 0]])
@pytest.mark.parametrize("kind", ["untyped", "typed"])
def test_a_zero_fanout_layer_samples_no_edge(kind, layout, strategy, fanouts):
    graph, edges, node_time, edge_time = timed_graph(kind, False)
    gen = torch.Generator().manual_seed(3)
    pipe = gp.ItemSampler(items(kind, edges, "node", gen, layout), 10, seed=1).sample_neighbor(
        graph, fanouts, layout=layout, seed=5, comparison="<", temporal_strategy=strategy, **USES["both"]
    )
    cfg = dict(uses=("node", "edge"), layout=layout, comparison="<", window=None, strategy=strategy, fanouts=fanouts)
    batches = list(pipe)
    checked = sum(check_temporal_batch(graph, edges, node_time, edge_time, mb, cfg) for mb in batches)
    assert checked == 0 if layout == "pyg" and fanouts[-1] == 0 else checked > 0  # pyg: no hop past the seeds' 0
    for mb in batches:
        zero = mb.sampled_subgraphs[fanouts.index(0)].sampled_csc
        assert all(csc.indices.numel() == 0 for csc in (zero.values() if isinstance(zero, dict) else [zero]))


def test_sorted_and_unsorted_graphs_give_the_same_latest_neighbours():
    """``last`` has no randomness: the same edges (by the user's edge ids) on both."""
    runs = []
    for sort in (False, True):
        graph, edges, *_ = timed_graph("typed", sort and USES["both"])
        gen = torch.Generator().manual_seed(3)
        pipe = gp.ItemSampler(items("typed", edges, "node", gen), 8, seed=1).sample_neighbor(
            graph, FANOUTS, layout="pyg", temporal_strategy="last", node_timestamp_attr_name="nts", edge_timestamp_attr_name="ets"
        )
        runs.append([{e: sorted(ids.tolist()) for e, ids in sg.original_edge_ids.items()} for mb in pipe for sg in mb.sampled_subgraphs])
    assert runs[0] == runs[1]  # the same edges (a sorted graph orders each node's by time)
    assert len(runs[0]) == len(pipe) * len(FANOUTS) > 0  # of every batch's layers


CHI2_999 = {11: 31.26}  # chi-square critical values at p = 0.001 by degrees of freedom


def _star_copies(copies, ts, **attrs):
    """``copies`` destinations 0..copies-1, each with its own ``len(ts)`` in-edges (from
    sources of its own) at times ``ts``: destination d's j-th in-edge has edge id
    ``d * len(ts) + j``, so ``eid % len(ts)`` names the edge of the one-destination star.
    One batch of all the destinations makes ``copies`` independent draws of the star."""
    degree = ts.numel()
    src = torch.arange(copies * degree) + copies
    dst = torch.arange(copies).repeat_interleave(degree)
    edge_attributes = {"ets": ts.repeat(copies), **{k: v.repeat(copies) for k, v in attrs.items()}}
    return gp.CSCGraph.from_coo(src, dst, copies * (degree + 1), edge_attributes=edge_attributes)


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
@pytest.mark.parametrize("sort", [False, True], ids=["unsorted", "sorted"])
def test_draws_are_uniform_among_the_valid_neighbours(sampler, sort):
    """A destination with 20 in-edges at times 0..19, seed time 12 with '<': 12 valid edges,
    each drawn with probability 3/12; later edges never. 1500 draws at once: 1500 copies of
    the destination (each its own sources) in one batch."""
    copies = 1500
    ts = torch.randperm(20, generator=torch.Generator().manual_seed(0))
    graph = _star_copies(copies, ts)
    if sort:
        graph = graph.sort_by_time(edge_timestamp_attr_name="ets")
    item_set = gp.ItemSet((torch.arange(copies), torch.full((copies,), 12)), names=("seeds", "timestamp"))
    pipe = getattr(gp.ItemSampler(item_set, copies), sampler)(graph, [3], seed=9, edge_timestamp_attr_name="ets")
    (mb,) = list(pipe)
    sub = mb.sampled_subgraphs[0]
    assert sub.sampled_csc.indptr.diff().tolist() == [3] * copies
    counts = torch.bincount(sub.original_edge_ids.to(torch.int64) % 20, minlength=20).float()
    valid = ts < 12
    assert counts[~valid].sum() == 0
    expected = copies * 3 / 12
    chi2 = float(((counts[valid] - expected) ** 2 / expected).sum())
    assert chi2 < CHI2_999[11], (chi2, counts[valid])


def test_batches_do_not_depend_on_threads_workers_or_resuming():
    graph, edges, *_ = timed_graph("typed", sort=False)
    gen = torch.Generator().manual_seed(3)
    item_set = items("typed", edges, "link", gen)

    def pipe():
        return gp.ItemSampler(item_set, 6, shuffle=True, seed=2).sample_uniform_negative(graph, 1, seed=4).temporal_sample_neighbor(
            graph, FANOUTS, node_timestamp_attr_name="nts", edge_timestamp_attr_name="ets", seed=3
        )

    def digest(batches):
        return [repr([(sg.original_edge_ids, sg.original_row_node_ids) for sg in mb.sampled_subgraphs]) for mb in batches]

    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one_thread = digest(pipe())
    finally:
        numba.set_num_threads(threads)
    assert digest(pipe()) == one_thread
    assert digest(gp.DataLoader(pipe(), num_workers=2)) == one_thread
    loader = gp.DataLoader(pipe())
    it = iter(loader)
    first = [next(it), next(it)]
    state = loader.state_dict()
    resumed = gp.DataLoader(pipe())
    resumed.load_state_dict(state)
    assert digest(first) + digest(resumed) == one_thread


def test_negatives_get_their_positives_times():
    graph, edges, *_ = timed_graph("untyped", sort=False)
    pairs = torch.stack(edges[EDGE], 1)[:8]
    times = torch.arange(8) * 10 + 20
    item_set = gp.ItemSet((pairs, times), names=("seeds", "timestamp"))
    mb = next(iter(gp.ItemSampler(item_set, 8).sample_uniform_negative(graph, 2, seed=1)))
    assert torch.equal(mb.timestamp, times[mb.indexes])
    mb = next(iter(gp.ItemSampler(item_set, 8).sample_uniform_negative(graph, 0.5, neg_sampling="binary", seed=1)))
    assert torch.equal(mb.timestamp, torch.cat([times, times[:4]]))


def test_untimed_node_types_are_not_constrained():
    """PyG's rule: 'venue' has no times, so venue -> paper edges are all valid (venue in-edges only)."""
    graph, edges, *_ = timed_graph("typed", sort=False)
    item_set = gp.HeteroItemSet({"paper": gp.ItemSet((torch.arange(40), torch.zeros(40, dtype=torch.int64)), names=("seeds", "timestamp"))})
    mb = next(iter(gp.ItemSampler(item_set, 40).sample_neighbor(graph, [-1], layout="pyg", time_attr="nts")))
    hosts = mb.sampled_subgraphs[0].sampled_csc["venue:hosts:paper"]
    assert hosts.indices.numel() == edges["venue:hosts:paper"][0].numel()
    assert mb.sampled_subgraphs[0].sampled_csc["author:writes:paper"].indices.numel() == 0  # every author time >= 0


def test_pyg_seeds_of_an_untimed_type_without_timestamp_are_refused():
    """pyg-lib reads the seed type's node times and refuses a type without: its seeds
    would keep no timed in-edge (their time was the untimed fill)."""
    graph, *_ = timed_graph("typed", sort=False)
    venues = gp.HeteroItemSet({"venue": gp.ItemSet(torch.arange(3), names="seeds")})
    with pytest.raises(ValueError, match="seed node 0 of type 'venue' has no node time 'nts'; give the seeds' times"):
        next(iter(gp.ItemSampler(venues, 3).sample_neighbor(graph, [-1], layout="pyg", time_attr="nts")))
    papers = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(3), names="seeds")})
    assert next(iter(gp.ItemSampler(papers, 3).sample_neighbor(graph, [-1], layout="pyg", time_attr="nts"))).seeds


def test_uint64_seed_times_are_refused_not_wrapped():
    graph, edges, *_ = timed_graph("untyped", sort=False)
    late = torch.tensor([2**63 + 5] * 2, dtype=torch.uint64)
    with pytest.raises(TypeError, match=r"the `timestamp` field must be \[N\] integer times"):
        gp.ItemSampler(gp.ItemSet((torch.arange(2), late), names=("seeds", "timestamp")), 2)
    with pytest.raises(ValueError, match=r"`seeds_timestamp` must be \[2\] int64 times.*uint64"):
        graph.temporal_sample_neighbors(torch.arange(2), late, [2], edge_timestamp_attr_name="ets")


def test_time_windows_and_the_graph_method():
    """GraphBolt's graph method: '<' and the open window (t - w, t), per seed."""
    graph, edges, node_time, edge_time = timed_graph("untyped", sort=USES["both"])
    seeds = torch.arange(30)
    times = torch.randint(20, 100, (30,), generator=torch.Generator().manual_seed(1))
    for w in (10, torch.full((30,), 25)):
        sub = graph.temporal_sample_neighbors(seeds, times, [-1], seeds_pre_time_window=w, node_timestamp_attr_name="nts", edge_timestamp_attr_name="ets")
        eids = sub.original_edge_ids.to(torch.int64)
        cols = torch.repeat_interleave(seeds, sub.sampled_csc.indptr.diff())
        width = w if isinstance(w, int) else 25
        t = times[cols]
        for value in (node_time[NODE][edges[EDGE][0][eids]], edge_time[EDGE][eids]):
            assert bool(((value > t - width) & (value < t)).all())
        src, dst = edges[EDGE]
        ok = (edge_time[EDGE] < times[dst.clamp(max=29)]) & (edge_time[EDGE] > times[dst.clamp(max=29)] - width)
        ok &= (node_time[NODE][src] < times[dst.clamp(max=29)]) & (node_time[NODE][src] > times[dst.clamp(max=29)] - width) & (dst < 30)
        assert eids.numel() == int(ok.sum())


def test_bad_temporal_input_gets_clear_errors():
    graph, edges, *_ = timed_graph("untyped", sort=False)
    seeds = gp.ItemSet(torch.arange(5), names="seeds")
    timed = gp.ItemSet((torch.arange(5), torch.arange(5)), names=("seeds", "timestamp"))
    with pytest.raises(ValueError, match=r"`time_attr`='nope' is neither a node attribute.*CSCGraph.from_edge_index\(\.\.\., edge_attributes="):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], time_attr="nope")
    both = gp.CSCGraph.from_coo(*edges[EDGE], graph.total_num_nodes, edge_attributes={"t": torch.zeros(edges[EDGE][0].numel(), dtype=torch.int64)}, node_attributes={"t": torch.zeros(graph.total_num_nodes, dtype=torch.int64)})
    with pytest.raises(ValueError, match="`time_attr`='t' is both a node and an edge attribute"):
        gp.ItemSampler(timed, 2).sample_neighbor(both, [2], time_attr="t")
    floats = gp.CSCGraph.from_coo(*edges[EDGE], graph.total_num_nodes, node_attributes={"t": torch.zeros(graph.total_num_nodes)})
    with pytest.raises(ValueError, match=r"must name \[60\] int64 timestamps"):
        gp.ItemSampler(timed, 2).sample_neighbor(floats, [2], time_attr="t")
    with pytest.raises(ValueError, match="needs the seeds' times: an ItemSet field named 'timestamp'"):
        next(iter(gp.ItemSampler(seeds, 2).sample_neighbor(graph, [2], edge_timestamp_attr_name="ets")))
    with pytest.raises(ValueError, match=r"`time_window` must be an int in \[0, 2\*\*63\)"):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], time_attr="ets", time_window=-1)
    with pytest.raises(ValueError, match="`comparison` must be '<'"):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], time_attr="ets", comparison=">")
    with pytest.raises(ValueError, match="`temporal_strategy` must be 'uniform' or 'last'"):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], time_attr="ets", temporal_strategy="recent")
    with pytest.raises(ValueError, match="`temporal_strategy` applies to temporal sampling"):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], temporal_strategy="last")
    with pytest.raises(ValueError, match="temporal_strategy='last' takes the most recent neighbours"):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], time_attr="ets", temporal_strategy="last", weights="w")
    with pytest.raises(ValueError, match="'last' takes the fanout most recent distinct neighbours.*pass replace=False"):
        gp.ItemSampler(timed, 2).sample_neighbor(graph, [2], time_attr="ets", temporal_strategy="last", replace=True)
    with pytest.raises(UnsupportedCombination, match="LABOR does not support"):
        gp.ItemSampler(timed, 2).sample_layer_neighbor(graph, [2], time_attr="ets", layout="pyg")
    with pytest.raises(ValueError, match=r"temporal_strategy='last' takes the fanout most recent in-edges, which is not LABOR"):
        gp.ItemSampler(timed, 2).sample_layer_neighbor(graph, [2], time_attr="ets", temporal_strategy="last")  # it had no edge_weights
    with pytest.raises(ValueError, match="name the timestamps"):
        gp.ItemSampler(timed, 2).temporal_sample_neighbor(graph, [2])
    bad_times = gp.ItemSet((torch.arange(5), torch.arange(5.0)), names=("seeds", "timestamp"))
    with pytest.raises(TypeError, match="the `timestamp` field must be \\[N\\] integer times"):
        gp.ItemSampler(bad_times, 2)
    with pytest.raises(ValueError, match="`seeds_pre_time_window` must be >= 0"):
        graph.temporal_sample_neighbors(torch.arange(3), torch.arange(3), [2], seeds_pre_time_window=-1, edge_timestamp_attr_name="ets")
    with pytest.raises(ValueError, match="the pairs need times: an ItemSet field named 'timestamp'"):
        pairs = gp.ItemSet(torch.stack(edges[EDGE], 1)[:4], names="seeds")
        next(iter(gp.ItemSampler(pairs, 4).sample_uniform_negative(graph, 1, node_timestamp_attr_name="nts")))
    with pytest.raises(ValueError, match=r"`seeds_timestamp` must be \[3\] int64 times"):
        graph.temporal_sample_neighbors(torch.arange(3), torch.arange(2), [2], edge_timestamp_attr_name="ets")


def test_deduplicate_defaults_by_layout_and_refuses_true_on_temporal_blocks():
    """``deduplicate`` unset: True, but temporal block layers are rows (never deduplicated);
    an explicit ``deduplicate=True`` there is refused, not ignored."""
    graph, *_ = timed_graph("untyped", sort=False)
    timed = gp.ItemSet((torch.arange(5), torch.arange(20, 25)), names=("seeds", "timestamp"))
    assert gp.NeighborSampler(None, graph, [2]).deduplicate
    assert not gp.NeighborSampler(None, graph, [2], time_attr="ets").deduplicate
    assert not gp.NeighborSampler(None, graph, [2], time_attr="ets", deduplicate=False).deduplicate
    assert gp.NeighborSampler(None, graph, [2], time_attr="ets", layout="pyg", deduplicate=True).deduplicate
    assert not gp.NeighborSampler(None, graph, [2], deduplicate=False).deduplicate
    refused = r"`deduplicate=True` does not apply to temporal block layers.*pass deduplicate=False"
    for stage in ("sample_neighbor", "temporal_sample_neighbor", "sample_layer_neighbor"):
        with pytest.raises(ValueError, match=refused):
            getattr(gp.ItemSampler(timed, 2), stage)(graph, [2], edge_timestamp_attr_name="ets", deduplicate=True)
    with pytest.raises(ValueError, match="`deduplicate=False` .* builds block layers: pass layout='block'"):
        gp.NeighborSampler(None, graph, [2], layout="pyg", deduplicate=False)
    with pytest.raises(TypeError, match="`deduplicate` must be a bool"):
        gp.NeighborSampler(None, graph, [2], deduplicate=1)


@pytest.mark.parametrize("neg_sampling", ["triplet", "binary"])
@pytest.mark.parametrize("kind", ["untyped", "typed"])
def test_negatives_are_never_later_than_their_pair(kind, neg_sampling):
    """Most nodes are later than the pairs' times, so most first draws are redrawn: every
    negative end (triplet: the destination; binary: both) is earlier than its pair ('<'),
    the same rule at every draw; untimed node types ('venue') are any time."""
    graph, edges, node_time, _ = timed_graph(kind, sort=False)
    gen = torch.Generator().manual_seed(3)
    item_set = items(kind, edges, "link", gen)
    pipe = gp.ItemSampler(item_set, 10, seed=1).sample_uniform_negative(
        graph, 3, seed=2, neg_sampling=neg_sampling, node_timestamp_attr_name="nts"
    )
    negatives = 0
    for mb in pipe:
        tv_seeds = mb.seeds if mb.is_heterogeneous else {EDGE: mb.seeds}
        tv_times = mb.timestamp if mb.is_heterogeneous else {EDGE: mb.timestamp}
        for etype, pairs in tv_seeds.items():
            s, _, d = parse_edge_type(etype)
            labels = mb.labels[etype] if mb.is_heterogeneous else mb.labels
            neg, t = pairs[labels == 0], tv_times[etype][labels == 0]
            ends = [(d, neg[:, 1])] + ([(s, neg[:, 0])] if neg_sampling == "binary" else [])
            for node_type, ids in ends:
                if node_type in node_time:
                    assert bool((node_time[node_type][ids] < t).all())
            negatives += neg.size(0)
    assert negatives > 0


@pytest.mark.parametrize("neg_sampling", ["triplet", "binary"])
def test_pairs_earlier_than_every_candidate_get_the_earliest_node(neg_sampling):
    """PyG's neg_sample: where no node is early enough (a dataset's first events), the
    negative end is the node with the earliest time; later pairs still draw valid ones."""
    times = torch.tensor([9, 5, 7, 5, 8, 6])  # nodes 1 and 3 earliest: argmin is 1
    graph = gp.CSCGraph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]), 6, node_attributes={"nt": times})
    pairs = torch.tensor([[1, 2]] * 8 + [[2, 4]] * 8)  # at time 5: no node earlier; at 9: 1, 2, 3, 4, 5
    pair_times = torch.tensor([5] * 8 + [9] * 8)
    item_set = gp.ItemSet((pairs, pair_times), names=("seeds", "timestamp"))
    pipe = gp.ItemSampler(item_set, 16).sample_uniform_negative(graph, 2, neg_sampling=neg_sampling, node_timestamp_attr_name="nt", seed=1)
    mb = next(iter(pipe))
    negatives, negative_times = mb.seeds[mb.labels == 0], mb.timestamp[mb.labels == 0]
    ends = negatives[:, 1:] if neg_sampling == "triplet" else negatives
    early = negative_times == 5
    assert bool((ends[early] == 1).all()) and bool(early.any())
    assert bool((times[ends[~early]] < 9).all()) and set(ends[~early].flatten().tolist()) - {1} != set()


def test_a_hub_on_a_time_sorted_graph_is_cut_by_binary_search():
    """GraphBolt's FastTemporalPick never accepts a draw with edge times (an unconditional
    `continue`), so a hub costs O(degree) there; on a time-sorted graph graphpipe cuts the
    hub's in-edges to the valid ones by binary search (the `cuts` path) and draws among them."""
    degree = 100_000
    ts = torch.randperm(degree, generator=torch.Generator().manual_seed(0))
    graph = gp.CSCGraph.from_coo(torch.arange(1, degree + 1), torch.zeros(degree, dtype=torch.int64), degree + 1, edge_attributes={"ets": ts})
    graph = graph.sort_by_time(edge_timestamp_attr_name="ets")
    item_set = gp.ItemSet((torch.zeros(4, dtype=torch.int64), torch.tensor([10, 500, 50_000, 99_999])), names=("seeds", "timestamp"))
    pipe = gp.ItemSampler(item_set, 4).temporal_sample_neighbor(graph, [10], edge_timestamp_attr_name="ets", seed=1)
    assert pipe.time_filter.is_sorted  # and no window: the binary-search cut
    sub = next(iter(pipe)).sampled_subgraphs[0]
    eids = sub.original_edge_ids.to(torch.int64)
    cols = torch.repeat_interleave(torch.arange(4), sub.sampled_csc.indptr.diff())
    assert sub.sampled_csc.indptr.diff().tolist() == [10, 10, 10, 10]
    assert bool((ts[eids] < torch.tensor([10, 500, 50_000, 99_999])[cols]).all())


def test_distributed_item_sampler_shares_carry_their_times():
    """Two ranks (explicit rank/world_size): each share keeps its seeds' times, and every
    rank's temporal batches pass the brute-force check."""
    graph, edges, node_time, edge_time = timed_graph("untyped", sort=USES["both"])
    gen = torch.Generator().manual_seed(3)
    item_set = items("untyped", edges, "node", gen)
    times = dict(zip(item_set.field("seeds").tolist(), item_set.field("timestamp").tolist()))
    cfg = dict(uses=("node", "edge"), layout="block", comparison="<", window=None, strategy="uniform", fanouts=FANOUTS)
    seen, checked = [], 0
    for rank in range(2):
        source = gp.DistributedItemSampler(item_set, 6, shuffle=True, seed=2, rank=rank, world_size=2)
        for mb in source.temporal_sample_neighbor(graph, FANOUTS, node_timestamp_attr_name="nts", edge_timestamp_attr_name="ets"):
            assert mb.timestamp.tolist() == [times[s] for s in mb.seeds.tolist()]
            checked += check_temporal_batch(graph, edges, node_time, edge_time, mb, cfg)
            seen += mb.seeds.tolist()
    assert sorted(seen) == sorted(times) and checked > 0


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
@pytest.mark.parametrize("sort", [False, True], ids=["unsorted", "sorted"])
def test_weighted_draws_skip_invalid_and_zero_weight_edges(sampler, sort):
    """Weighted temporal sampling: only valid edges of positive weight, in proportion to
    their weights (12 valid edges, weights 1 or 3 alternating, zero for every fifth).
    1500 draws at once: 1500 copies of the destination (each its own sources) in one batch."""
    copies = 1500
    ts = torch.randperm(20, generator=torch.Generator().manual_seed(1))
    w = torch.tensor([1.0, 3.0] * 10)
    w[::5] = 0.0
    graph = _star_copies(copies, ts, w=w)
    if sort:
        graph = graph.sort_by_time(edge_timestamp_attr_name="ets")
    item_set = gp.ItemSet((torch.arange(copies), torch.full((copies,), 12)), names=("seeds", "timestamp"))
    pipe = getattr(gp.ItemSampler(item_set, copies), sampler)(graph, [1], seed=9, weights="w", edge_timestamp_attr_name="ets")
    (mb,) = list(pipe)
    sub = mb.sampled_subgraphs[0]
    assert sub.sampled_csc.indptr.diff().tolist() == [1] * copies
    counts = torch.bincount(sub.original_edge_ids.to(torch.int64) % 20, minlength=20).float()
    drawable = (ts < 12) & (w > 0)
    assert counts[~drawable].sum() == 0
    expected = counts.sum() * w[drawable] / w[drawable].sum()
    chi2 = ((counts[drawable] - expected) ** 2 / expected).sum()
    p_value = float(torch.special.gammaincc(torch.tensor((int(drawable.sum()) - 1) / 2), chi2 / 2))
    assert p_value > 1e-3, (p_value, counts[drawable], expected)


def test_a_hub_on_an_unsorted_graph_is_drawn_by_rejection_uniformly():
    """Unweighted NS without replacement draws a large unsorted range's valid in-edges by
    rejection (GraphBolt's fast path): a uniform subset of the valid ones (chi-square),
    never an invalid one; with fewer valid in-edges than the fanout, all of them. 800 draws
    at once: 800 copies of the hub (each its own sources) seeded at time 200 in one batch,
    and hub 0 again at time 2."""
    degree, copies = 400, 800
    ts = torch.randperm(degree, generator=torch.Generator().manual_seed(2))
    graph = _star_copies(copies, ts)
    seeds = torch.cat([torch.arange(copies), torch.zeros(1, dtype=torch.int64)])
    times = torch.cat([torch.full((copies,), 200), torch.tensor([2])])
    item_set = gp.ItemSet((seeds, times), names=("seeds", "timestamp"))
    pipe = gp.ItemSampler(item_set, copies + 1).temporal_sample_neighbor(graph, [5], edge_timestamp_attr_name="ets", seed=3)
    assert not pipe.time_filter.is_sorted
    (mb,) = list(pipe)
    sub = mb.sampled_subgraphs[0]
    assert sub.sampled_csc.indptr.diff().tolist() == [5] * copies + [2]  # the seed at time 2 has 2 valid in-edges
    eids = sub.original_edge_ids.to(torch.int64)
    drawn = eids[: 5 * copies].view(copies, 5).sort(dim=1).values
    assert bool((drawn.diff(dim=1) > 0).all())  # 5 distinct in-edges of each hub
    assert bool((drawn // degree == torch.arange(copies)[:, None]).all())  # of its own
    assert sorted(ts[eids[5 * copies :]].tolist()) == [0, 1]
    counts = torch.bincount(drawn.flatten() % degree, minlength=degree).float()
    valid = ts < 200
    assert counts[~valid].sum() == 0
    # The drawn path: the hub's candidates are the 5 drawn, not its 200 valid in-edges.
    arrays = pipe.time_filter.arrays
    bounds, hi = torch.tensor([0, degree]), torch.tensor([199])
    lo, fanouts = torch.full((1,), UNTIMED), torch.tensor([5])
    assert valid_candidates(bounds, lo, hi, arrays)[1].numel() == 200
    assert valid_candidates(bounds, lo, hi, arrays, draws=(7, torch.zeros(1, dtype=torch.int64), fanouts))[1].numel() == 5
    expected = copies * 5 / 200
    chi2 = ((counts[valid] - expected) ** 2 / expected).sum()
    assert float(torch.special.gammaincc(torch.tensor(199 / 2), chi2 / 2)) > 1e-3


def test_review_cases_untimed_types_extremes_and_pyg_batches():
    """Found in review: int32 node times leave a type untimed as int64's do; a window on a
    sorted graph keeps untimed edges as the scan does; "last" draws an untimed type
    uniformly (pyg-lib's uniform_sample); windows at int64's ends; a link batch's `batch`
    counts every pair as positive when no negative sampler ran."""
    edges = {"c:buys:t": torch.tensor([[0, 1, 2], [0, 0, 0]]), "t:by:t": torch.tensor([[1, 2, 3], [0, 0, 0]])}
    for dtype in (torch.int64, torch.int32):
        times = {"t": torch.tensor([50, 40, 30, 20], dtype=dtype)}  # type c: untimed
        graph = gp.CSCGraph.from_hetero_edges(edges, {"c": 3, "t": 4}, node_attributes={"ts": times})
        item_set = gp.HeteroItemSet({"t": gp.ItemSet((torch.tensor([0]), torch.tensor([45])), names=("seeds", "timestamp"))})
        for g in (graph, graph.sort_by_time("ts")):
            mb = next(iter(gp.ItemSampler(item_set, 1).sample_neighbor(g, [-1], time_attr="ts", time_window=20, layout="pyg")))
            sub = mb.sampled_subgraphs[0]
            assert sub.original_edge_ids["c:buys:t"].numel() == 3, dtype  # untimed: every in-edge
            assert sorted(sub.original_edge_ids["t:by:t"].tolist()) == [0, 1]  # times 40, 30 in (25, 45]
    seen = set()
    for seed in range(8):
        mb = next(iter(gp.ItemSampler(item_set, 1).sample_neighbor(graph, [1], time_attr="ts", temporal_strategy="last", layout="pyg", seed=seed)))
        seen.add(int(mb.sampled_subgraphs[0].original_edge_ids["c:buys:t"]))
        assert mb.sampled_subgraphs[0].original_edge_ids["t:by:t"].tolist() == [0]  # the latest valid one: time 40
    assert len(seen) > 1
    big = torch.iinfo(torch.int64).max
    plain = gp.CSCGraph.from_edge_index(torch.tensor([[1, 2], [0, 0]]), 3, edge_attributes={"ts": torch.tensor([0, big - 5])})
    at_max = gp.ItemSet((torch.tensor([0]), torch.tensor([big])), names=("seeds", "timestamp"))
    mb = next(iter(gp.ItemSampler(at_max, 1).sample_neighbor(plain, [-1], time_attr="ts", time_window=0)))
    assert mb.sampled_subgraphs[0].original_edge_ids.numel() == 0  # (t - 0, t) is empty
    with pytest.raises(ValueError, match=r"`time_window` must be an int in \[0, 2\*\*63\)"):
        gp.ItemSampler(at_max, 1).sample_neighbor(plain, [-1], time_attr="ts", time_window=2**64)
    pairs = gp.ItemSet((torch.tensor([[1, 0], [2, 0], [1, 0], [2, 0]]), torch.tensor([[1], [0], [1], [0]]).view(-1), torch.arange(4) * 10), names=("seeds", "labels", "timestamp"))
    mb = next(iter(gp.ItemSampler(pairs, 4).sample_neighbor(plain, [1], time_attr="ts", layout="pyg")))
    assert mb.to_pyg().batch[:8].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]  # PyG's num_pos: all 4 input pairs


@pytest.mark.parametrize("layout", ["pyg", "block"])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
def test_seed_edges_of_untimed_edge_types_are_excluded(strategy, layout):
    """Found in review: under "last", the in-edges of untimed edge types (drawn uniformly, as
    pyg-lib's) were drawn without the seed-edge exclusion, so a pyg batch could hold the
    pair it must predict. Here "item" has no times: "item:bought_by:user" is untimed."""
    edges = {"user:buys:item": torch.tensor([[0, 1, 2, 0], [0, 0, 1, 1]]), "item:bought_by:user": torch.tensor([[0, 0, 1, 1], [0, 1, 2, 0]])}
    graph = gp.CSCGraph.from_hetero_edges(edges, {"user": 3, "item": 2}, node_attributes={"ts": {"user": torch.tensor([1, 2, 3])}})
    reverse = {"user:buys:item": "item:bought_by:user", "item:bought_by:user": "user:buys:item"}  # edge k reverses edge k
    for etype in edges:
        pairs = gp.ItemSet((edges[etype][:, :2].T, torch.full((2,), 100)), names=("seeds", "timestamp"))
        pipe = gp.ItemSampler(gp.HeteroItemSet({etype: pairs}), 2).sample_neighbor(
            graph, [-1, -1], layout=layout, time_attr="ts", temporal_strategy=strategy, exclude_seed_edges=True,
            include_reverse_edges=True, reverse_etypes_mapping=reverse,
        )  # fmt: skip
        sampled = {t: set() for t in edges}
        for sub in next(iter(pipe)).sampled_subgraphs:
            for t, eids in sub.original_edge_ids.items():
                sampled[t] |= set(eids.tolist())
        # Edges 0, 1 are the pairs and their reverses; two hops from them reach the others but
        # "item:bought_by:user" 2 (into user 2, a source of the second hop only).
        assert sampled == {"user:buys:item": {2, 3}, "item:bought_by:user": {3}}, (etype, sampled)
