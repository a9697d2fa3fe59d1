"""``gp.exclude_seed_edges`` (GraphBolt's post-hoc transform) and
``SampledSubgraph.exclude_edges``: against a plain-Python model of the layers' edges, with
user attributes and edge features, through the DataLoader in GraphBolt's quickstart form,
and the refusals. Equality with GraphBolt's own: ``tests/interop/test_graphbolt_exclude_seed_edges.py``."""

import os
import sys

import pytest
import torch

import graphpipe as gp
from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from seed_edge_batches import REVERSE, graph_and_items, layer_edges, link_batches  # noqa: E402


def model_excluded(mb, reverse: bool) -> set:
    """``{(edge type, u, v)}`` the transform must remove: every seed pair of its own edge
    type (``"_N:_E:_N"`` untyped), and with ``reverse`` each one flipped, of the reverse type."""
    excluded = set()
    for etype, pairs in mb.as_typed().seeds.items():
        for u, v in pairs.tolist():
            excluded.add((etype, u, v))
            if reverse:
                excluded.add((REVERSE.get(etype, etype), v, u))
    return excluded


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layout", ["block", "pyg"])
@pytest.mark.parametrize("typed", [False, True])
def test_layers_lose_the_seed_edges_and_keep_every_other(typed, layout, reverse, sampler):
    removed = {"seed": 0, "reverse": 0}
    for mb in link_batches(typed, layout, sampler=sampler):
        before = [layer_edges(layer) for layer in mb.sampled_subgraphs]
        mapping = REVERSE if typed and reverse else None
        out = gp.exclude_seed_edges(mb, include_reverse_edges=reverse, reverse_etypes_mapping=mapping)
        excluded, seeds = model_excluded(out, reverse), model_excluded(out, False)
        assert [layer_edges(layer) for layer in mb.sampled_subgraphs] == before  # the argument is left as it was
        for old, new, edges in zip(mb.sampled_subgraphs, out.sampled_subgraphs, before):
            want = {etype: [e for e in found if (etype, *e[:2]) not in excluded] for etype, found in edges.items()}
            assert layer_edges(new) == want
            for etype, found in edges.items():
                gone = [e for e in found if (etype, *e[:2]) in excluded]
                removed["seed"] += sum((etype, *e[:2]) in seeds for e in gone)
                removed["reverse"] += sum((etype, *e[:2]) not in seeds for e in gone)
            assert new.original_row_node_ids is old.original_row_node_ids
            assert new.original_column_node_ids is old.original_column_node_ids
            _assert_weights_follow(old, new, excluded)
        for name in ("seeds", "labels", "indexes", "compacted_seeds", "input_nodes", "item_ids", "layout", "batch_index"):
            assert getattr(out, name) is getattr(mb, name), name
    assert removed["seed"] > 0 and (removed["reverse"] > 0) == reverse


def _assert_weights_follow(old, new, excluded):
    """LABOR's edge weights: the kept edges' own, in order (no weights: none)."""
    old, new = old.as_typed(), new.as_typed()
    if old.edge_weights is None:
        assert new.edge_weights is None
        return
    for etype, weights in old.edge_weights.items():
        (src, dst), rows = old.edge_index()[etype], old.original_row_node_ids[etype.split(":")[0]]
        columns = old.original_column_node_ids[etype.split(":")[2]]
        keep = [(etype, u, v) not in excluded for u, v in zip(rows[src].tolist(), columns[dst].tolist())]
        assert torch.equal(new.edge_weights[etype], weights[torch.tensor(keep, dtype=torch.bool)])


@pytest.mark.parametrize("typed", [False, True])
def test_edge_features_stay_those_of_the_edges_kept_and_user_attributes_stay(typed):
    graph, items = graph_and_items(typed)
    if typed:
        store = gp.FeatureStore({}, {(etype, "eid"): torch.arange(n) for etype, n in graph.num_edges.items()})
        keys = {etype: ["eid"] for etype in graph.edge_types}
    else:
        store, keys = gp.FeatureStore({}, {"eid": torch.arange(graph.total_num_edges)}), ["eid"]
    pipe = gp.ItemSampler(items, 4).sample_neighbor(graph, [5, 5], seed=3).fetch_feature(store, [] if not typed else {}, keys)
    mb = next(iter(pipe))
    mb.note = "mine"
    for layer in mb.sampled_subgraphs:  # a layer's attributes stay too, as through SampledSubgraph.to
        layer.note = "layer's"
    out = gp.exclude_seed_edges(mb)
    assert out.note == "mine" and all(layer.note == "layer's" for layer in out.sampled_subgraphs)
    assert sum(a != b for a, b in zip(_num_edges(mb), _num_edges(out))) > 0
    for layer, features in zip(out.sampled_subgraphs, out.edge_features):
        ids = layer.as_typed().original_edge_ids
        for key, rows in features.items():
            assert torch.equal(rows, ids[key[0]] if typed else ids["_N:_E:_N"]), key


def _num_edges(mb):
    return [sum(layer.as_typed().num_edges.values()) for layer in mb.sampled_subgraphs]


def test_exclude_edges_of_a_layer_by_hand():
    """GraphBolt's docstring example, typed; and an untyped layer with weights, in both
    forms of ``edges``, ids past int32 with ``assume_num_node_within_int32=False``."""
    typed = SampledSubgraph({"A:r:B": CSCFormat(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 2]))}, {"A": torch.tensor([13, 14, 15])},
                            {"B": torch.tensor([10, 11, 12])}, {"A:r:B": torch.tensor([19, 20, 21])})  # fmt: skip
    out = typed.exclude_edges({"A:r:B": (torch.tensor([14, 15]), torch.tensor([11, 12])), "B:s:A": torch.tensor([[10, 13]])})
    assert out.sampled_csc["A:r:B"].indptr.tolist() == [0, 1, 1, 1] and out.sampled_csc["A:r:B"].indices.tolist() == [0]
    assert out.original_edge_ids["A:r:B"].tolist() == [19] and out.original_row_node_ids is typed.original_row_node_ids
    big = 2**40
    rows = torch.tensor([5, 7, big, 9])  # destinations 5, 7; sources into 5: 7, big, 7 (parallel); into 7: 9, 5
    layer = SampledSubgraph(CSCFormat(torch.tensor([0, 3, 5]), torch.tensor([1, 2, 1, 3, 0])), rows, rows[:2],
                            torch.tensor([40, 41, 42, 43, 44]), torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5]))  # fmt: skip
    for edges in (torch.tensor([[7, 5], [big, 5], [5, 7]]), (torch.tensor([7, big, 5]), torch.tensor([5, 5, 7]))):
        out = layer.exclude_edges(edges, assume_num_node_within_int32=False)
        assert out.sampled_csc.indptr.tolist() == [0, 0, 1] and out.sampled_csc.indices.tolist() == [3]
        assert out.original_edge_ids.tolist() == [43] and out.edge_weights.tolist() == [2.0]
    with pytest.raises(ValueError, match=r"outside \[0, 2\*\*32\).*assume_num_node_within_int32=False"):
        layer.exclude_edges(torch.tensor([[7, 5]]))
    small = SampledSubgraph(layer.sampled_csc, torch.tensor([5, 7, 8, 9]), rows[:2], layer.original_edge_ids)
    assert small.exclude_edges(torch.tensor([[9, 7]]).int()).original_edge_ids.tolist() == [40, 41, 42, 44]
    # int32 ids and indptr (a layer built by hand, GraphBolt's int32 graphs): the pair keys
    # wrapped at << 32 and nothing was excluded; the indptr keeps its dtype
    narrow = SampledSubgraph(CSCFormat(torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([0, 1, 1], dtype=torch.int32)),
                             torch.tensor([5, 3_000_000], dtype=torch.int32), torch.tensor([5, 7], dtype=torch.int32), None)  # fmt: skip
    out = narrow.exclude_edges(torch.tensor([[3_000_000, 5]], dtype=torch.int32)).sampled_csc
    assert out.indptr.dtype == torch.int32 and out.indptr.tolist() == [0, 1, 2] and out.indices.tolist() == [0, 1]


def test_quickstart_form_through_the_loader():
    """GraphBolt's quickstart: ``.sample_neighbor(g, [4, 2]).transform(gb.exclude_seed_edges)``,
    through the DataLoader in its placement and in a worker process: the batches equal the
    transform applied to the sampler's own."""
    graph, items = graph_and_items(False)

    def pipe():
        return gp.ItemSampler(items, 4, shuffle=True, seed=1).sample_uniform_negative(graph, 1, seed=2).sample_neighbor(graph, [4, 2], seed=3)

    want = [[layer_edges(layer) for layer in gp.exclude_seed_edges(mb).sampled_subgraphs] for mb in pipe()]
    for num_workers in (0, 1):
        got = [[layer_edges(layer) for layer in mb.sampled_subgraphs] for mb in gp.DataLoader(pipe().transform(gp.exclude_seed_edges), num_workers=num_workers)]
        assert got == want, num_workers


@pytest.mark.parametrize(
    "typed, change, kwargs, error, says",
    [
        (False, "node seeds", {}, ValueError, r"`minibatch.seeds` must be \[N, 2\] .* node pairs.*shape \(4,\) \(node seeds\)"),
        (False, "hyperlinks", {}, ValueError, r"`minibatch.seeds` must be \[N, 2\].*shape \(4, 3\) \(hyperlinks\)"),
        (False, "unsampled", {}, TypeError, r"`minibatch` must be a sampled MiniBatch.*without sampled_subgraphs"),
        (False, None, {"include_reverse_edges": 1}, TypeError, r"`include_reverse_edges` must be a bool"),
        (False, None, {"include_reverse_edges": True, "reverse_etypes_mapping": REVERSE}, ValueError, r"`reverse_etypes_mapping` names edge types, but the batch is untyped"),
        (True, None, {"include_reverse_edges": True}, ValueError, r"`include_reverse_edges=True` on a typed batch needs reverse_etypes_mapping"),
        (True, None, {"reverse_etypes_mapping": REVERSE}, ValueError, r"`include_reverse_edges` is False"),
        (True, None, {"include_reverse_edges": True, "reverse_etypes_mapping": {"user:like:item": "item:similar:item"}}, ValueError, r"do not run the other way"),
        (True, "node seeds", {}, ValueError, r"`minibatch.seeds\['user'\]` must be \[N, 2\]"),
    ],
)  # fmt: skip
def test_what_it_cannot_do_is_refused_by_name(typed, change, kwargs, error, says):
    mb = link_batches(typed, negatives=0)[0]
    if change == "node seeds":
        mb.seeds = {"user": torch.arange(4)} if typed else torch.arange(4)
    elif change == "hyperlinks":
        mb.seeds = torch.zeros(4, 3, dtype=torch.int64)
    elif change == "unsampled":
        mb.sampled_subgraphs = None
    with pytest.raises(error, match=says):
        gp.exclude_seed_edges(mb, **kwargs)


def test_exclude_edges_refuses_edges_of_the_wrong_form():
    untyped, typed = link_batches(False, negatives=0)[0].sampled_subgraphs[0], link_batches(True, negatives=0)[0].sampled_subgraphs[0]
    for layer, edges, error, says in [
        (untyped, {"_N:_E:_N": torch.zeros(1, 2)}, TypeError, r"`edges` must be \[N, 2\] pairs \(the layer is untyped\), got dict"),
        (typed, torch.zeros(1, 2, dtype=torch.int64), TypeError, r"`edges` must be a dict edge type -> \[N, 2\] pairs"),
        (untyped, torch.zeros(3, dtype=torch.int64), ValueError, r"`edges` must be \[N, 2\].*got shape \(3,\)"),
        (untyped, torch.zeros(1, 2), TypeError, r"`edges` must hold integer node ids.*float32"),
        (typed, {"user:like:item": (torch.arange(2), torch.arange(3))}, ValueError, r"`edges\['user:like:item'\]` \(sources, destinations\) must have one shape"),
    ]:  # fmt: skip
        with pytest.raises(error, match=says):
            layer.exclude_edges(edges)
    with pytest.raises(TypeError, match=r"`assume_num_node_within_int32` must be a bool"):
        untyped.exclude_edges(torch.zeros(1, 2, dtype=torch.int64), assume_num_node_within_int32=None)


def test_layers_without_node_ids_and_cooperative_batches():
    """A layer built by hand without ``original_row_node_ids`` (or without a type's) has
    local ids that are the ids, as in GraphBolt; a cooperative batch's layers hold other
    ranks' seed edges, which this rank's seeds do not name: refused, naming the sampler flag."""
    from graphpipe.distributed.cooperative import CooperativeSampledSubgraph

    bare = SampledSubgraph(CSCFormat(torch.tensor([0, 2, 3]), torch.tensor([7, 9, 7])), None, None, None)
    assert bare.exclude_edges(torch.tensor([[7, 0]])).sampled_csc.indices.tolist() == [9, 7]
    typed = SampledSubgraph({"A:r:B": CSCFormat(torch.tensor([0, 2]), torch.tensor([7, 9]))}, {}, {"B": torch.tensor([4])}, None)
    assert typed.exclude_edges({"A:r:B": torch.tensor([[9, 4]])}).sampled_csc["A:r:B"].indices.tolist() == [7]
    mb = link_batches(False, negatives=0)[0]
    layer = mb.sampled_subgraphs[-1]
    mb.sampled_subgraphs[-1] = CooperativeSampledSubgraph(layer.sampled_csc, layer.original_row_node_ids, layer.original_column_node_ids,
                                                          layer.original_edge_ids, exchange=object())  # fmt: skip
    with pytest.raises(ValueError, match=r"cooperative batch's layers hold .* pass exclude_seed_edges=True to the cooperative sampler"):
        gp.exclude_seed_edges(mb)
