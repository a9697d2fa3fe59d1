"""PyG's temporal NeighborLoader contract, beyond PyG's own tests, checked against a
plain-Python model of pyg-lib's temporal sampler (``neighbor_kernel.cpp``):

* a seed with time ``t`` is the root of its own subtree (disjoint: a node reached from two
  seeds is one node per subtree, ``batch`` names the subtree);
* at EVERY hop a neighbour is valid iff its time (the neighbour's node time, or the edge's
  time) is ``<= t``, the root seed's time (``<`` for link seeds, graphpipe's leak-free
  default); a node type without a time table is unconstrained;
* each (node first reached at the previous hop, edge type) takes ``min(k, valid)`` valid
  in-edges: ``"uniform"`` uniformly, ``"last"`` the ``k`` latest (ties: the later edge of
  the input order);
* ``seed_time`` (node seeds, triplets) and ``edge_label_time`` (node pairs) carry the
  seeds' times;
* node pairs: a subtree per end (sources, then destinations), ``batch`` PyG's ``row % P``;
  negatives take their positive's time (binary: tiled, as PyG) and are not later than it.

The batches are built as the README tells a PyG user (``time_attr`` a graph attribute and a
fetched feature, ``timestamp`` seed times, ``sample_neighbor(..., layout="pyg",
time_attr=...)``), on time-sorted graphs (``sort_by_time``) and unsorted ones.
"""

import math
from collections import Counter, defaultdict

import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402

import graphpipe as gp  # noqa: E402

NODE, EDGE = "_N", "_N:_E:_N"
KINDS = ("untyped", "typed")
TIMES = ("node", "edge")
# Typed: "shop" has no node time (PyG's dimension table), so shop -> item edges are
# unconstrained by node time.
NUM_TYPED = {"item": 30, "shop": 6, "user": 25}
TYPED_EDGES = {"user:buys:item": 120, "item:bought_by:user": 120, "shop:sells:item": 40, "item:sold_by:shop": 40}


class TemporalGraph:
    """The model's graph: edge lists per edge type (edge id = position, PyG's ``e_id``) and
    times (``node_time[type]`` ``[n]``, only for timed types; or ``edge_time[etype]``)."""

    def __init__(self, num_nodes, edges, node_time=None, edge_time=None, seed_type=None):
        self.kind = "untyped" if list(num_nodes) == [NODE] else "typed"
        self.seed_type = seed_type or (NODE if self.kind == "untyped" else "user")
        self.num_nodes, self.edges = num_nodes, edges
        self.node_time, self.edge_time = node_time or {}, edge_time or {}
        self.time_on = "node" if self.node_time else "edge"

    @classmethod
    def random(cls, kind, time_on, seed=0, max_time=6):
        """A random graph of ``kind`` timed on ``time_on`` with times in ``[0, max_time)``:
        few distinct times, so many ties ("last" must break them by input order)."""
        g = torch.Generator().manual_seed(seed)
        num_nodes, counts = ({NODE: 40}, {EDGE: 260}) if kind == "untyped" else (dict(NUM_TYPED), dict(TYPED_EDGES))
        edges = {}
        for etype, count in counts.items():
            src_type, _, dst_type = etype.split(":")
            src = torch.randint(num_nodes[src_type], (count,), generator=g)
            edges[etype] = (src, torch.randint(num_nodes[dst_type], (count,), generator=g))
        if time_on == "node":
            times = {t: torch.randint(max_time, (n,), generator=g) for t, n in num_nodes.items() if t != "shop"}
            return cls(num_nodes, edges, node_time=times)
        times = {e: torch.randint(max_time, (src.numel(),), generator=g) for e, (src, _) in edges.items()}
        return cls(num_nodes, edges, edge_time=times)

    def time_key(self, etype, eid):
        """The time that decides whether edge ``eid`` of ``etype`` is valid; None: unconstrained."""
        if self.time_on == "edge":
            return int(self.edge_time[etype][eid])
        src_type = etype.split(":")[0]
        if src_type not in self.node_time:
            return None
        return int(self.node_time[src_type][int(self.edges[etype][0][eid])])

    def valid_in_edges(self, etype, v, t, comparison="<="):
        """``[(time, eid)]`` of the in-edges of ``v`` of ``etype`` valid for a root at time ``t``."""
        dst = self.edges[etype][1]
        out = []
        for eid in (dst == v).nonzero().flatten().tolist():
            key = self.time_key(etype, eid)
            if key is None or key < t or (comparison == "<=" and key == t):
                out.append((-math.inf if key is None else key, eid))
        return out

    def in_types(self, node_type):
        return [e for e in self.edges if e.split(":")[2] == node_type]

    def csc_graph(self, sort):
        """The graphpipe graph, timed by ``"time"``; sorted by it when ``sort``."""
        attr = {}
        if self.kind == "untyped":
            src, dst = self.edges[EDGE]
            if self.time_on == "node":
                attr = {"node_attributes": {"time": self.node_time[NODE]}}
            else:
                attr = {"edge_attributes": {"time": self.edge_time[EDGE]}}
            graph = gp.CSCGraph.from_edge_index(torch.stack([src, dst]), self.num_nodes[NODE], **attr)
        else:
            edges = {e: torch.stack(pair) for e, pair in self.edges.items()}
            if self.time_on == "node":
                attr = {"node_attributes": {"time": self.node_time}}
            else:
                attr = {"edge_attributes": {"time": self.edge_time}}
            graph = gp.CSCGraph.from_hetero_edges(edges, self.num_nodes, **attr)
        if not sort:
            return graph
        name = {"node_timestamp_attr_name" if self.time_on == "node" else "edge_timestamp_attr_name": "time"}
        return graph.sort_by_time(**name)

    def features(self):
        """``(store, node_keys, edge_keys)``: the time as a node or edge feature ``"time"``."""
        if self.kind == "untyped":
            if self.time_on == "node":
                return gp.FeatureStore({"time": self.node_time[NODE]}), ["time"], []
            return gp.FeatureStore({}, {"time": self.edge_time[EDGE]}), [], ["time"]
        if self.time_on == "node":
            store = gp.FeatureStore({(t, "time"): x for t, x in self.node_time.items()})
            return store, {t: ["time"] for t in self.node_time}, None
        store = gp.FeatureStore({}, edge_features={(e, "time"): x for e, x in self.edge_time.items()})
        return store, {}, {e: ["time"] for e in self.edge_time}


def node_batches(model, seeds, times, num_neighbors, strategy="uniform", sort=True, batch_size=None, seed=0):
    """``to_pyg()`` of each batch of the temporal NeighborLoader pipe over ``seeds``/``times``."""
    items = gp.ItemSet((seeds, times), names=("seeds", "timestamp"))
    if model.kind == "typed":
        items = gp.HeteroItemSet({model.seed_type: items})
    store, node_keys, edge_keys = model.features()
    options = {"layout": "pyg", "time_attr": "time", "temporal_strategy": strategy, "seed": seed}
    pipe = gp.ItemSampler(items, batch_size or seeds.numel())
    pipe = pipe.sample_neighbor(model.csc_graph(sort), list(reversed(num_neighbors)), **options)
    if model.kind == "typed":
        pipe = pipe.fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys)
    else:
        pipe = pipe.fetch_feature(store, node_keys, edge_keys)
    batches = [mb.to_pyg() for mb in pipe]
    assert len(batches) == math.ceil(seeds.numel() / (batch_size or seeds.numel()))  # the callers' loops run
    return batches


def _stores(data):
    """``({type: node store}, {etype: edge store})`` of a Data (the one-type case) or HeteroData."""
    if isinstance(data, HeteroData):
        return {t: data[t] for t in data.node_types}, {":".join(k): data[k] for k in data.edge_types}
    return {NODE: data}, {EDGE: data}


def _hop_of(counts):
    return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts, dtype=torch.int64)).tolist()


def check_subtrees(data, model, seeds, times, num_neighbors, strategy, comparison="<="):
    """Assert that ``data`` (one batch of node seeds ``seeds`` at ``times``) is the model's
    disjoint temporal sample: per subtree, hop by hop, the nodes first reached at the
    previous hop took ``min(k, valid)`` valid in-edges of each type (the top ``k`` by
    (time, edge id) for ``"last"`` on timed types), and the hop's nodes are their sources not seen
    before in the subtree (each once). Returns the number of sampled edges."""
    nodes, edge_stores = _stores(data)
    seed_type = model.seed_type
    rows = {}  # (subtree, type, id) -> hop
    for node_type, store in nodes.items():
        n_id, batch, hops = store.n_id.tolist(), store.batch.tolist(), _hop_of(store.num_sampled_nodes)
        assert len(n_id) == len(batch) == len(hops)
        for v, b, h in zip(n_id, batch, hops):
            assert (b, node_type, v) not in rows, "a node appears twice in one subtree"
            rows[(b, node_type, v)] = h
    seed_store = nodes[seed_type]
    assert seed_store.n_id[: len(seeds)].tolist() == seeds.tolist()
    assert seed_store.batch[: len(seeds)].tolist() == list(range(len(seeds)))
    sampled = defaultdict(list)  # (subtree, hop, etype, dst) -> [eid]
    for etype, store in edge_stores.items():
        src_type, _, dst_type = etype.split(":")
        src_local, dst_local = store.edge_index.tolist()
        for s, d, eid, h in zip(src_local, dst_local, store.e_id.tolist(), _hop_of(store.num_sampled_edges)):
            b = int(nodes[dst_type].batch[d])
            assert int(nodes[src_type].batch[s]) == b, "an edge joins two subtrees"
            assert int(model.edges[etype][0][eid]) == int(nodes[src_type].n_id[s])
            assert int(model.edges[etype][1][eid]) == int(nodes[dst_type].n_id[d])
            sampled[(b, h + 1, etype, int(nodes[dst_type].n_id[d]))].append(eid)
    checked = 0
    for i, (root, t) in enumerate(zip(seeds.tolist(), times.tolist())):
        frontier, known = {(seed_type, root)}, {(seed_type, root)}
        for hop, k in enumerate(num_neighbors, start=1):
            new = set()
            for node_type, v in frontier:
                for etype in model.in_types(node_type):
                    got = sampled.pop((i, hop, etype, v), [])
                    valid = model.valid_in_edges(etype, v, t, comparison)
                    count = len(valid) if k < 0 else min(k, len(valid))
                    assert len(got) == len(set(got)) == count, (etype, v, t, got, valid)
                    assert set(got) <= {eid for _, eid in valid}, "an invalid neighbour was sampled"
                    timed = model.time_on == "edge" or etype.split(":")[0] in model.node_time
                    if strategy == "last" and timed:  # pyg-lib samples an untimed type uniformly, "last" or not
                        assert set(got) == {eid for _, eid in sorted(valid)[len(valid) - count :]}
                    checked += count
                    src_type = etype.split(":")[0]
                    for eid in got:
                        node = (src_type, int(model.edges[etype][0][eid]))
                        if node not in known:
                            known.add(node)
                            new.add(node)
            reached = {(nt, v) for (b, nt, v), h in rows.items() if b == i and h == hop}
            assert reached == new, f"subtree {i} hop {hop}: nodes differ from the model's"
            frontier = new
    assert not sampled, f"edges into nodes the model does not expand: {sorted(sampled)[:5]}"
    return checked


@pytest.mark.parametrize("sort", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("time_on", TIMES)
@pytest.mark.parametrize("kind", KINDS)
def test_last_takes_the_latest_valid_neighbours(kind, time_on, sort):
    """``temporal_strategy="last"``: exactly the top ``k`` by time, ties broken by the
    later edge of the input order (PyG's stable sort of the CSC by time)."""
    model = TemporalGraph.random(kind, time_on, seed=1)
    g = torch.Generator().manual_seed(2)
    seeds = torch.randint(model.num_nodes[model.seed_type], (24,), generator=g)
    times = torch.randint(1, 6, (24,), generator=g)
    (data,) = node_batches(model, seeds, times, [3, 2], strategy="last", sort=sort)
    assert check_subtrees(data, model, seeds, times, [3, 2], "last") > 30


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("time_on", TIMES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_hop_is_filtered_by_the_root_seeds_time(kind, time_on, strategy):
    """Random fanouts: every sampled edge is valid for its ROOT seed's time at every hop,
    counts are ``min(k, valid)``, subtrees are disjoint; ``[-1, -1]`` is the model's
    sample exactly."""
    model = TemporalGraph.random(kind, time_on, seed=3)
    g = torch.Generator().manual_seed(4)
    seeds = torch.randint(model.num_nodes[model.seed_type], (20,), generator=g)
    times = torch.randint(0, 7, (20,), generator=g)
    for num_neighbors in ([2, 2], [-1, -1]):
        for data in node_batches(model, seeds, times, num_neighbors, strategy=strategy, batch_size=20):
            check_subtrees(data, model, seeds, times, num_neighbors, strategy)


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_reached_from_two_seeds_is_in_both_subtrees(kind):
    """Disjoint: the same node as two seeds at two times is two subtrees, each filtered
    by its own time; a neighbour shared by both appears once in each, with its ``batch``."""
    model = TemporalGraph.random(kind, "node", seed=5)
    seed_type = model.seed_type
    degrees = torch.bincount(model.edges[model.in_types(seed_type)[0]][1], minlength=model.num_nodes[seed_type])
    hub = int(degrees.argmax())
    seeds, times = torch.tensor([hub, hub, hub]), torch.tensor([1, 5, 5])
    (data,) = node_batches(model, seeds, times, [-1])
    check_subtrees(data, model, seeds, times, [-1], "uniform")
    nodes, _ = _stores(data)
    subtrees = [set() for _ in range(3)]
    for node_type, node_store in nodes.items():
        for b, v in zip(node_store.batch.tolist(), node_store.n_id.tolist()):
            subtrees[b].add((node_type, v))
    assert subtrees[1] == subtrees[2]  # the same nodes, once in each subtree
    assert len(subtrees[2]) > len(subtrees[0]) > 0  # the later time sees more


def _chi_square_p_value(counts):
    """P-value of a chi-square goodness-of-fit test of ``counts`` against uniform."""
    counts = torch.tensor(counts, dtype=torch.float64)
    expected = counts.sum() / counts.numel()
    statistic = ((counts - expected) ** 2 / expected).sum()
    dof = torch.tensor((counts.numel() - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(dof, statistic / 2))


@pytest.mark.parametrize("sort", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("time_on", TIMES)
@pytest.mark.parametrize("kind", KINDS)
def test_uniform_is_uniform_among_valid_neighbours(kind, time_on, sort):
    """A hub with 12 in-neighbours at times 0..5 (interleaved in the CSC); seeds at times
    2 and 4 pick 2 each, once per subtree: every valid neighbour is picked equally often
    (chi-square), invalid ones never."""
    src_type, dst_type = (NODE, NODE) if kind == "untyped" else ("item", "user")
    etype = f"{src_type}:{'_E' if kind == 'untyped' else 'bought_by'}:{dst_type}"
    num_nodes = {NODE: 13} if kind == "untyped" else {"item": 13, "user": 1}
    hub, edges = 0, {etype: (torch.arange(1, 13), torch.zeros(12, dtype=torch.int64))}
    cyclic = torch.tensor([5, 0, 3, 1, 4, 2, 2, 4, 1, 3, 0, 5])
    if time_on == "node":
        node_time = {t: torch.zeros(n, dtype=torch.int64) for t, n in num_nodes.items()}
        node_time[src_type][1:] = cyclic
        model = TemporalGraph(num_nodes, edges, node_time=node_time)
    else:
        model = TemporalGraph(num_nodes, edges, edge_time={etype: cyclic})
    reps = 1500
    seeds = torch.full((2 * reps,), hub)
    times = torch.tensor([2, 4]).repeat(reps)
    (data,) = node_batches(model, seeds, times, [2], sort=sort, seed=7)
    nodes, edge_stores = _stores(data)
    store = edge_stores[etype]
    picks = {2: Counter(), 4: Counter()}
    for d, eid in zip(store.edge_index[1].tolist(), store.e_id.tolist()):
        picks[int(times[int(nodes[dst_type].batch[d])])][eid] += 1
    for t, counter in picks.items():
        valid = [eid for eid in range(12) if int(cyclic[eid]) <= t]
        assert set(counter) == set(valid), f"time {t}: picked {sorted(counter)}, valid {valid}"
        assert sum(counter.values()) == 2 * reps
        assert _chi_square_p_value([counter[eid] for eid in valid]) > 1e-3


def _link_batches(comparison=None):
    """``(model, pairs, times, batches)``: 60 edges of a graph with edge times as link seeds
    at their own times, batches of 20, ``[-1, -1]``, the time fetched as edge feature."""
    model = TemporalGraph.random("untyped", "edge", seed=6, max_time=20)
    src, dst = model.edges[EDGE]
    pairs, times = torch.stack([src, dst], 1)[:60], model.edge_time[EDGE][:60]
    options = {} if comparison is None else {"comparison": comparison}
    pipe = gp.ItemSampler(gp.ItemSet((pairs, times), names=("seeds", "timestamp")), 20).sample_neighbor(
        model.csc_graph(sort=True), [-1, -1], layout="pyg", time_attr="time", seed=0, **options
    )
    pipe = pipe.fetch_feature(gp.FeatureStore({}, {"time": model.edge_time[EDGE]}), [], ["time"])
    batches = [mb.to_pyg() for mb in pipe]
    assert len(batches) == 3  # the callers' loops run
    return model, pairs, times, batches


@pytest.mark.parametrize("comparison", [None, "<="])
def test_link_seeds_are_filtered_by_their_pairs_time(comparison):
    """Node pairs (LinkNeighborLoader): both endpoints' subtrees are filtered by the pair's
    ``edge_label_time`` at every hop; ``batch`` is the pair. graphpipe's default is strict
    (``<``: the target edge, at the pair's time, is never sampled: no leakage);
    ``comparison="<="`` is PyG's rule, which samples it."""
    model, pairs, times, batches = _link_batches(comparison)
    seed_edges_sampled = 0
    for i, data in enumerate(batches):
        pair_times = times[20 * i : 20 * (i + 1)]
        assert torch.equal(data.n_id[data.edge_label_index], pairs[20 * i : 20 * (i + 1)].t())
        assert torch.equal(data.batch[: 40], torch.arange(20).repeat(2))  # PyG: cat(src, dst) % num_pairs
        root_time = pair_times[data.batch[data.edge_index[1]]]
        assert torch.equal(data.time, model.edge_time[EDGE][data.e_id])
        if comparison is None:
            assert bool((data.time < root_time).all())
        else:
            assert bool((data.time <= root_time).all())
        target = torch.arange(20 * i, 20 * (i + 1))[data.batch[data.edge_index[1]]]
        seed_edges_sampled += int((data.e_id == target).sum())
    assert (seed_edges_sampled == 0) == (comparison is None)


@pytest.mark.parametrize("task", ["node", "link", "triplet"])
def test_batches_carry_the_seeds_times(task):
    """NeighborLoader's ``seed_time`` (the seeds' ``input_time``), LinkNeighborLoader's
    ``edge_label_time`` (the pairs' times) and, for triplets, ``seed_time`` (the positives'
    times, on the source and destination types), in the batch's seed order."""
    if task == "triplet":
        model, etype, times, batches = _negative_batches("typed", 2, "triplet")
        for data in batches:
            positives = times[data[tuple(etype.split(":"))].input_id]
            assert torch.equal(data["item"].seed_time, positives) and torch.equal(data["user"].seed_time, positives)
        return
    if task == "link":
        _, _, times, batches = _link_batches()
        for i, data in enumerate(batches):
            assert torch.equal(data.edge_label_time, times[20 * i : 20 * (i + 1)])
        return
    model = TemporalGraph.random("typed", "node", seed=1)
    seeds, times = torch.arange(12), torch.arange(12) % 5
    for i, data in enumerate(node_batches(model, seeds, times, [2], batch_size=4)):
        assert torch.equal(data[model.seed_type].seed_time, times[4 * i : 4 * (i + 1)])


@pytest.mark.parametrize(
    "etype",
    [
        EDGE,
        "item:bought_by:user",
        "user:buys:item",
        "shop:sells:item",
    ],
)
def test_link_pairs_map_back_to_the_seeds(etype):
    """``edge_label_index`` are local ids of the pairs' ends (``n_id[edge_label_index]`` is the
    pairs), in PyG's disjoint layout (sources, then destinations, first), ``batch`` the pair."""
    model = TemporalGraph.random("untyped" if etype == EDGE else "typed", "node", seed=8, max_time=20)
    pairs, times = torch.stack(model.edges[etype], 1)[:6], torch.full((6,), 15)
    items = gp.ItemSet((pairs, times), names=("seeds", "timestamp"))
    items = items if etype == EDGE else gp.HeteroItemSet({etype: items})
    pipe = gp.ItemSampler(items, 6).sample_neighbor(model.csc_graph(sort=True), [-1], layout="pyg", time_attr="time")
    nodes, edge_stores = _stores(next(iter(pipe)).to_pyg())
    src_type, _, dst_type = etype.split(":")
    label_index = edge_stores[etype].edge_label_index
    assert torch.equal(nodes[src_type].n_id[label_index[0]], pairs[:, 0])
    assert torch.equal(nodes[dst_type].n_id[label_index[1]], pairs[:, 1])
    assert torch.equal(nodes[src_type].batch[label_index[0]], torch.arange(6))
    assert torch.equal(nodes[dst_type].batch[label_index[1]], torch.arange(6))


def _negative_batches(kind, ratio, mode):
    """``(model, etype, times, batches)``: 40 timed pairs in batches of 20 with
    ``sample_uniform_negative(graph, ratio, neg_sampling=mode)``, ``[-1, -1]``, pyg layout."""
    model = TemporalGraph.random(kind, "node", seed=8, max_time=20)
    etype = EDGE if kind == "untyped" else "item:bought_by:user"
    g = torch.Generator().manual_seed(9)
    pairs, times = torch.stack(model.edges[etype], 1)[:40], torch.randint(8, 20, (40,), generator=g)
    items = gp.ItemSet((pairs, times), names=("seeds", "timestamp"))
    items = items if kind == "untyped" else gp.HeteroItemSet({etype: items})
    graph = model.csc_graph(sort=True)
    negatives = {"seed": 0, "neg_sampling": mode, "node_timestamp_attr_name": "time"}
    pipe = gp.ItemSampler(items, 20).sample_uniform_negative(graph, ratio, **negatives)
    pipe = pipe.sample_neighbor(graph, [-1, -1], layout="pyg", time_attr="time", seed=0)
    batches = [mb.to_pyg(neg_sampling=mode) for mb in pipe]
    assert len(batches) == 2  # the callers' loops run
    return model, etype, times, batches


def _node_times(model, nodes):
    """``{type: [n] int64}`` the model's node time of each node of each timed type of a batch."""
    return {t: model.node_time[t][store.n_id] for t, store in nodes.items() if t in model.node_time}


@pytest.mark.parametrize("kind", KINDS)
def test_binary_negatives_take_their_positives_times(kind):
    """PyG's binary negatives (``ceil(P * ratio)`` random pairs) on a temporal pipe: their
    ``edge_label_time`` is the positives' tiled (PyG's ``edge_label_time.repeat``);
    ``batch`` is PyG's ``seed row % P`` (seeds: sources then destinations of all pairs; a
    whole ratio keeps each subtree on its pair's time), and every sampled neighbour is
    earlier than its pair's time (the sampler's strict link rule)."""
    model, etype, times, batches = _negative_batches(kind, 2, "binary")
    src_type, _, dst_type = etype.split(":")
    for data in batches:
        nodes, edge_stores = _stores(data)
        node_time = _node_times(model, nodes)
        label_store = edge_stores[etype]
        num_pos = label_store.input_id.numel()
        label_time = label_store.edge_label_time
        num_pairs = label_time.numel()
        assert num_pairs == 3 * num_pos
        assert torch.equal(label_time[:num_pos], times[label_store.input_id])
        assert torch.equal(label_time, label_time[:num_pos].repeat(3))
        if kind == "untyped":
            assert torch.equal(nodes[NODE].batch[: 2 * num_pairs], torch.arange(2 * num_pairs) % num_pos)
        else:
            assert torch.equal(nodes[src_type].batch[:num_pairs], torch.arange(num_pairs) % num_pos)
            assert torch.equal(nodes[dst_type].batch[:num_pairs], torch.arange(num_pairs) % num_pos)
        for key, edge_store in edge_stores.items():
            s, _, d = key.split(":")
            if s in model.node_time:
                root_time = label_time[nodes[d].batch[edge_store.edge_index[1]]]
                assert bool((node_time[s][edge_store.edge_index[0]] < root_time).all())


@pytest.mark.parametrize("mode", ["binary", "triplet"])
@pytest.mark.parametrize("kind", KINDS)
def test_negatives_are_not_later_than_their_pair(kind, mode):
    """With ``node_timestamp_attr_name``, the ends a negative sampler draws (binary: both,
    PyG's; per positive: the destination) are earlier than the pair's time (the sampler's
    strict link rule)."""
    model, etype, times, batches = _negative_batches(kind, 0.5 if mode == "binary" else 2, mode)
    src_type, _, dst_type = etype.split(":")
    for data in batches:
        nodes, edge_stores = _stores(data)
        node_time = _node_times(model, nodes)
        if mode == "binary":
            label_store = edge_stores[etype]
            num_pos = label_store.input_id.numel()
            label_time, negatives = label_store.edge_label_time[num_pos:], label_store.edge_label_index[:, num_pos:]
            assert bool((node_time[src_type][negatives[0]] < label_time).all())
            assert bool((node_time[dst_type][negatives[1]] < label_time).all())
        else:
            seed_time = times[edge_stores[etype].input_id]  # the positives' times
            dst_neg = nodes[dst_type].dst_neg_index
            assert bool((node_time[dst_type][dst_neg] < seed_time[:, None]).all())
