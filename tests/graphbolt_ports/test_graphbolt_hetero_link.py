"""GraphBolt's heterogeneous link-prediction layout, against a plain-Python model of it.

GraphBolt (``dmlc/dgl``, ``python/dgl/graphbolt``): ``HeteroItemSet`` keyed by edge type
``"src:rel:dst"`` with ``[N, 2]`` ``seeds``; ``sample_uniform_negative`` appends per edge
type the negatives ``(u, v')`` of each positive (``impl/uniform_negative_sampler.py``,
``negative_sampler.py``: ``seeds``, ``labels``, ``indexes`` by edge type);
``SubgraphSampler._seeds_preprocess`` compacts the seeds' endpoints per node type
(``compacted_seeds`` by edge type, column 0 in the source type's ids, column 1 in the
destination type's); ``exclude_seed_edges`` (``internal/sample_utils.py``) removes from
every layer the seed edges of their own edge type and, with ``reverse_etypes_mapping``, the
reversed pairs of the reverse edge type. The model below writes that layout from the
edge lists alone (all in-edges sampled: fanout -1, so the batch is deterministic); the
batch must equal it field by field.
"""

import itertools

import pytest
import torch

import graphpipe as gp

NUM_NODES = {"author": 5, "paper": 7}
REVERSE = {"author:writes:paper": "paper:written_by:author", "paper:cites:paper": "paper:cites:paper"}


def small_graph():
    writes = ([0, 0, 1, 2, 2, 3, 4, 4, 1], [0, 1, 1, 2, 3, 3, 5, 6, 6])
    cites = ([1, 2, 3, 3, 5, 6, 0, 0, 2], [0, 0, 1, 2, 4, 4, 6, 3, 3])
    edges = {
        "author:writes:paper": writes,
        "paper:cites:paper": (cites[0] + cites[1], cites[1] + cites[0]),
        "paper:written_by:author": (writes[1], writes[0]),
    }
    edges = {t: (list(s), list(d)) for t, (s, d) in edges.items()}
    graph = gp.CSCGraph.from_hetero_edges({t: torch.tensor([s, d]) for t, (s, d) in edges.items()}, NUM_NODES)
    return graph, edges


def model_batch(edges, seeds, num_layers, exclude, reverse):
    """GraphBolt's typed link batch, in plain Python: ``compacted_seeds`` and, per layer
    (input first), ``(csc {etype: (indptr, indices)}, rows {ntype}, columns {ntype},
    edge ids {etype})``. Sources per node type: its destinations, then new nodes ascending;
    a destination's in-edges of a type in the order they were given."""
    excluded = set()
    if exclude:
        for etype, pairs in seeds.items():
            for u, v in pairs:
                excluded.add((etype, u, v))
                if reverse:
                    excluded.add((REVERSE[etype], v, u))
    endpoints = {t: set() for t in NUM_NODES}
    for etype, pairs in seeds.items():
        s, _, d = etype.split(":")
        for u, v in pairs:
            endpoints[s].add(u)
            endpoints[d].add(v)
    columns = {t: sorted(ids) for t, ids in endpoints.items()}
    compacted = {}
    for etype, pairs in seeds.items():
        s, _, d = etype.split(":")
        compacted[etype] = [[columns[s].index(u), columns[d].index(v)] for u, v in pairs]
    layers = []
    for _ in range(num_layers):
        picked = {}  # etype -> per destination [(source, edge id)]
        for etype in sorted(edges):
            s, _, d = etype.split(":")
            src, dst = edges[etype]
            picked[etype] = [
                [(src[e], e) for e in range(len(src)) if dst[e] == v and (etype, src[e], v) not in excluded] for v in columns[d]
            ]
        sources = {t: set() for t in NUM_NODES}
        for etype, per_dst in picked.items():
            sources[etype.split(":")[0]] |= {u for group in per_dst for u, _ in group}
        rows = {t: columns[t] + sorted(sources[t] - set(columns[t])) for t in NUM_NODES}
        csc, edge_ids = {}, {}
        for etype, per_dst in picked.items():
            s = etype.split(":")[0]
            indptr = list(itertools.accumulate([0] + [len(group) for group in per_dst]))
            csc[etype] = (indptr, [rows[s].index(u) for group in per_dst for u, _ in group])
            edge_ids[etype] = [e for group in per_dst for _, e in group]
        layers.insert(0, (csc, rows, columns, edge_ids))
        columns = rows
    return compacted, layers


def model_negatives(positives, negatives):
    """GraphBolt's ``_sample_with_etype`` layout: positives then each one's negatives."""
    k = len(negatives[0]) if negatives else 0
    seeds = positives + [[u, w] for (u, _), row in zip(positives, negatives) for w in row]
    labels = [True] * len(positives) + [False] * (len(positives) * k)
    indexes = list(range(len(positives))) + [i for i in range(len(positives)) for _ in range(k)]
    return seeds, labels, indexes


@pytest.mark.parametrize("sampler", ["neighbor", "labor"])
@pytest.mark.parametrize("exclude, reverse", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("ratio", [0, 2])
def test_typed_link_batches_are_graphbolts_layout(sampler, exclude, reverse, ratio):
    graph, edges = small_graph()
    items = gp.HeteroItemSet({
        "author:writes:paper": gp.ItemSet(torch.tensor(edges["author:writes:paper"]).t()[:6], names="seeds"),
        "paper:cites:paper": gp.ItemSet(torch.tensor(edges["paper:cites:paper"]).t()[:5], names="seeds"),
    })  # fmt: skip
    pipe = gp.ItemSampler(items, 4, shuffle=True, seed=3)
    if ratio:
        pipe = pipe.sample_uniform_negative(graph, ratio, seed=4)
    options = dict(exclude_seed_edges=exclude, include_reverse_edges=reverse)
    if reverse:
        options["reverse_etypes_mapping"] = REVERSE
    sample = pipe.sample_layer_neighbor if sampler == "labor" else pipe.sample_neighbor
    pipe = sample(graph, [-1, -1], seed=5, **options)
    batches = list(pipe)
    assert len(batches) == 3
    for mb in batches:
        seeds = {t: pairs.tolist() for t, pairs in mb.seeds.items()}
        if ratio:
            for etype, pairs in seeds.items():
                p = mb.item_ids[etype].numel()
                negatives = [[w for _, w in pairs[p + i * ratio : p + (i + 1) * ratio]] for i in range(p)]
                expected = model_negatives(pairs[:p], negatives)
                assert (pairs, mb.labels[etype].tolist(), mb.indexes[etype].tolist()) == expected
        compacted, layers = model_batch(edges, seeds, 2, exclude, reverse)
        assert {t: c.tolist() for t, c in mb.compacted_seeds.items()} == compacted
        assert {t: ids.tolist() for t, ids in mb.input_nodes.items()} == layers[0][1]
        for sg, (csc, rows, columns, edge_ids) in zip(mb.sampled_subgraphs, layers):
            assert {t: (c.indptr.tolist(), c.indices.tolist()) for t, c in sg.sampled_csc.items()} == csc
            assert {t: ids.tolist() for t, ids in sg.original_row_node_ids.items()} == rows
            assert {t: ids.tolist() for t, ids in sg.original_column_node_ids.items()} == columns
            assert {t: ids.tolist() for t, ids in sg.original_edge_ids.items()} == edge_ids
