"""Temporal sampling of independent batches over a partitioned dataset: each rank samples its
own batch over its part, the owners filtering the in-edges they sample by the requesting
row's root time (graphpipe.distributed.remote), and gets, bit for bit, what one process
samples for that batch over the whole graph: node and link batches (the seeds' own times;
negatives not later than their pair), block and pyg layouts, node and edge timestamps, "uniform" and "last", typed and untyped.

Disjoint batches and rows without deduplication, without times, go the same way (their
hops depend on their root too) and are checked alike.

The graphs are test_cooperative's with int64 node times ``nts`` (typed: "venue" has none)
and edge times ``ets``, sorted by ``ets`` but for one of two hubs (in-edges enough for
rejection draws): the whole graph is not sorted, while a part without that hub is, so
its owner must draw the other hub's in-edges as the whole graph's (unsorted) filter does.
"""

import dataclasses

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import load_partition, partition

from dist_harness import run_ranks, values
from test_cooperative import FANOUTS, LINK_TYPES, NUM_NODES, REVERSE, edges_of, summary
from test_partitioned import KINDS, same

HUB_TYPE = {"untyped": "_N:_E:_N", "typed": "paper:cites:paper"}
EDGE_TIMES = {"edge_timestamp_attr_name": "ets"}
BOTH_TIMES = {"node_timestamp_attr_name": "nts", "edge_timestamp_attr_name": "ets"}
# (sampler, task, layout, options: temporal ones, or disjoint / deduplicate=False without times)
CASES = [
    ("neighbor", "node", "block", EDGE_TIMES),
    ("neighbor", "node", "pyg", {**BOTH_TIMES, "temporal_strategy": "last", "time_window": 30}),
    ("labor", "node", "block", {"time_attr": "nts", "comparison": "<=", "time_window": 40}),
    ("neighbor", "link", "block", EDGE_TIMES),
    ("neighbor", "link", "pyg", BOTH_TIMES),
    ("neighbor", "link", "block", {**EDGE_TIMES, "negatives_by": "nts"}),  # negatives no later than their pair
    ("neighbor", "node", "pyg", {"disjoint": True}),  # the subtrees without times
    ("labor", "link", "block", {"deduplicate": False}),  # the rows without times
]
OPTIONS = {"shuffle": True, "seed": 3, "drop_uneven_inputs": True}
SIZES = {"node": 7, "link": 5}  # items per rank and batch


def timed_graph(kind) -> gp.CSCGraph:
    """test_cooperative's graph, two hubs (nodes 0 and 1 of the hub edge type's
    destination type) given 40 more in-edges each, with node times ``nts`` and edge times
    ``ets`` in [0, 100), sorted by ``ets`` but for hub 0's in-edges (first and last swapped)."""
    gen = torch.Generator().manual_seed(11)
    edges = edges_of(kind)
    src, dst = edges[HUB_TYPE[kind]]
    edges[HUB_TYPE[kind]] = (torch.cat([src, torch.arange(40).repeat(2)]), torch.cat([dst, torch.arange(2).repeat_interleave(40)]))
    edge_time = {t: torch.randint(0, 100, (s.numel(),), generator=gen) for t, (s, _) in edges.items()}
    node_time = {t: torch.randint(0, 100, (n,), generator=gen) for t, n in NUM_NODES[kind].items() if t != "venue"}
    if kind == "untyped":
        (src, dst), = edges.values()
        graph = gp.CSCGraph.from_coo(src, dst, num_nodes=NUM_NODES[kind]["_N"], edge_attributes={"ets": edge_time["_N:_E:_N"]},
                                     node_attributes={"nts": node_time["_N"]})  # fmt: skip
    else:
        graph = gp.CSCGraph.from_hetero_edges({t: torch.stack(p) for t, p in edges.items()}, NUM_NODES[kind],
                                              edge_attributes={"ets": edge_time}, node_attributes={"nts": node_time})  # fmt: skip
    graph = graph.sort_by_time(edge_timestamp_attr_name="ets")
    etype = graph.schema.edge_type_id.get(HUB_TYPE[kind], 0)
    hub = graph.schema.node_type_offset[graph.schema.edge_type_ends[etype][1]]
    positions = torch.arange(int(graph.indptr[hub]), int(graph.indptr[hub + 1]))
    if kind == "typed":  # the hub's in-edges of the hub edge type
        positions = positions[graph.type_per_edge[positions] == etype]
    ets = graph.edge_attributes["ets"].clone()
    ets[positions[[0, -1]]] = ets[positions[[-1, 0]]]
    return dataclasses.replace(graph, edge_attributes={"ets": ets})


def timed_items(kind, task):
    """Node items (typed: papers and authors) or node pairs that are edges (typed: of the
    link edge types), each with an int64 ``timestamp`` in [20, 100)."""
    gen = torch.Generator().manual_seed(5)
    if task == "node":
        seeds = {"_N": torch.arange(60)} if kind == "untyped" else {"paper": torch.arange(30), "author": torch.arange(20)}
    else:
        seeds = {t: torch.stack(edges_of(kind)[t], 1)[:24] for t in LINK_TYPES[kind]}
    sets = {t: gp.ItemSet((s, torch.randint(20, 100, (s.size(0),), generator=gen)), names=("seeds", "timestamp")) for t, s in seeds.items()}
    return next(iter(sets.values())) if kind == "untyped" else gp.HeteroItemSet(sets)


def pipe_of(kind, case, graph, source):
    """``source``'s batches sampled from ``graph`` with the case's times; link batches with
    2 negatives per pair that are not edges (nor, ``negatives_by``, later than the pair by
    that node time), seed edges and their reverses excluded."""
    sampler, task, layout, times = case
    options = {"seed": 7, "layout": layout, **times}
    if task == "link":
        by_time = {"node_timestamp_attr_name": options.pop("negatives_by")} if "negatives_by" in options else {}
        source = source.sample_uniform_negative(graph, 2, exclude_existing_edges=True, seed=1, **by_time)
        options.update(exclude_seed_edges=True, include_reverse_edges=True, **({"reverse_etypes_mapping": REVERSE} if kind == "typed" else {}))
    sample = source.sample_neighbor if sampler == "neighbor" else source.sample_layer_neighbor
    return sample(graph, FANOUTS[kind], **options)


def record(mb):
    """``summary`` plus the layout, the seeds' times and their indexes, the subtrees and
    LABOR's edge weights."""
    view = mb.as_typed()
    weights = [sg.edge_weights for sg in view.sampled_subgraphs]
    return {**summary(mb), "layout": mb.layout, "timestamp": mb.timestamp, "indexes": mb.indexes, "subtree_ids": mb.subtree_ids, "weights": weights}


def temporal_rank(rank, world_size, out_dirs):
    """Per (kind, case number): ``(records over the part, over the whole graph, whether the part's
    and the whole graph's filters find their in-edges sorted by time)``."""
    out = {}
    for kind in KINDS:
        part, graph = load_partition(out_dirs[kind], rank, num_parts=world_size), timed_graph(kind)
        assert torch.equal(part.graph.node_attributes["nts"], graph.node_attributes["nts"])  # every node's times: sources' too
        for i, case in enumerate(CASES):
            sources = [gp.DistributedItemSampler.from_part(part, case[1], SIZES[case[1]], **OPTIONS) for _ in range(2)]  # the same batches
            on_part, on_whole = pipe_of(kind, case, part.graph, sources[0]), pipe_of(kind, case, graph, sources[1])
            # Over the whole graph (no collective), batch by batch; a typed link share without pairs loses its
            # times in the negative sampler, which the whole graph's sampler then refuses: None (empty over the part).
            whole = [None if mb.timestamp is None else record(on_whole.process(mb)) for mb in on_whole.source]
            sorted_times = [None if pipe.time_filter is None else pipe.time_filter.is_sorted for pipe in (on_part, on_whole)]
            out[kind, i] = ([record(mb) for mb in gp.DataLoader(on_part)], whole, *sorted_times)
    return out


def partitioned(tmp_path, world_size, method):
    out_dirs = {}
    for kind in KINDS:
        out_dirs[kind] = str(tmp_path / f"{kind}-{world_size}")
        splits = {task: timed_items(kind, task) for task in ("node", "link")}
        partition(timed_graph(kind), None, splits, world_size, out_dirs[kind], method=method)
    return out_dirs


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
@pytest.mark.usefixtures("kernels_for_child_processes")
# No 1-rank case: each rank of these samples its own destinations locally, the hub's owner over an unsorted
# part (asserted below), and test_partitioned_independent checks one rank holding the whole graph.
@pytest.mark.parametrize("world_size, method", [(2, "hash"), (3, "metis")])
def test_temporal_batches_on_parts_equal_one_process(world_size, method, tmp_path):
    """Each rank maps only its part; its own temporal (disjoint, ``deduplicate=False``)
    node and link batches equal, bit for bit, those one process samples over the whole
    graph: items and their times, every layer's edges (user edge ids), subtrees (pyg),
    LABOR's weights; a rank's empty share is an empty batch."""
    if method == "metis":
        pytest.importorskip("pymetis")
    out_dirs = partitioned(tmp_path, world_size, method)
    results = values(run_ranks(temporal_rank, world_size, tmp_path, args=(out_dirs,)))
    for kind in KINDS:
        for i, case in enumerate(CASES):
            got = [r[kind, i] for r in results]
            for on_part, on_whole, _, _ in got:
                assert len(on_part) == len(on_whole) > 1, (kind, case)
                empty = [j for j, b in enumerate(on_whole) if b is None]
                assert all(x.numel() == 0 for j in empty for layer in on_part[j]["triples"] for x in layer.values())
                assert same([b for j, b in enumerate(on_part) if j not in empty], [b for b in on_whole if b is not None]), (kind, case)
            assert sum(x.shape[0] for on_part, *_ in got for b in on_part for layer in b["triples"] for x in layer.values()) > 0
            if case[3] is EDGE_TIMES:  # the whole graph is not sorted by ets; a part without the hub is, one with it not
                assert not any(whole_sorted for *_, whole_sorted in got)
                parts_sorted = [part_sorted for *_, part_sorted, _ in got]
                assert any(parts_sorted) and not all(parts_sorted), (kind, case)  # the hub's owner's part is not
