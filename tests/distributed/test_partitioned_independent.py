"""Independent (data-parallel) batches over a partitioned dataset: each rank samples its own
batch over its part, the owners sampling the in-edges and reading the rows it lacks
(graphpipe.distributed.remote), and gets, bit for bit, what one process samples and
fetches for that batch over the whole dataset.

One process group per number of ranks: each rank body runs every case (kind x sampler x
task) and compares with the same batches sampled over the whole dataset in that rank, on
the ordinary one-process path (no collective); the comparisons run here.
"""

from functools import partial

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import load_item_sets, load_partition, partition
from graphpipe.pipes.capabilities import UnsupportedCombination

from dist_harness import run_ranks, values
from test_cooperative import FANOUTS, REVERSE, items, link_items, summary
from test_partitioned import EDGE_FEATURE_TYPES, KINDS, attributed_graph, full_store, same

# (sampler, task, layout): NS and LABOR-0, node and link batches; NS node batches also in the pyg layout;
# LABOR-1 (a layer drawn jointly, at the requester) in both layouts.
CASES = [
    ("neighbor", "node", "block"), ("labor", "node", "block"), ("neighbor", "node", "pyg"),
    ("neighbor", "link", "block"), ("labor", "link", "block"), ("labor-1", "link", "block"), ("labor-1", "node", "pyg"),
]  # fmt: skip
from_part = gp.DistributedItemSampler.from_part
OPTIONS = {"shuffle": True, "seed": 3, "drop_uneven_inputs": True}
SIZES = {"node": 7, "link": 6}  # items per rank and batch
# Node items partitioned: 42 (untyped: the first 42 of 300 nodes, typed: 21 papers and 21 authors), so
# that with 3 ranks each still gets 2 global batches of 3 x 7 (with 1 rank: 6), with edges sampled by other
# ranks (both asserted below); more batches only repeat the comparison (100 items cost ~a third of the time).
NODE_ITEMS = 42


def node_items(kind):
    """The first ``NODE_ITEMS`` of ``items(kind)`` (typed: half papers, half authors)."""
    if kind == "untyped":
        return items(kind, NODE_ITEMS)
    cut = lambda s, n: gp.ItemSet((s.field("seeds")[:n], s.field("labels")[:n]), names=("seeds", "labels"))  # noqa: E731
    return gp.HeteroItemSet({t: cut(s, NODE_ITEMS // 2) for t, s in items(kind).item_sets.items()})


def pipe_of(kind, case, graph, store, source, edge_rows=True):
    """``source``'s batches sampled from ``graph`` (7 nodes per rank, 6 pairs with 2
    negatives each that are not edges, seed edges and their reverses excluded), node and
    edge rows fetched (node rows only without ``edge_rows``)."""
    sampler, task, layout = case
    options = {"seed": 7, "layout": layout}
    if task == "link":
        source = source.sample_uniform_negative(graph, 2, exclude_existing_edges=True, seed=1)
        options.update(exclude_seed_edges=True, include_reverse_edges=True, **({"reverse_etypes_mapping": REVERSE} if kind == "typed" else {}))
    if sampler != "neighbor":
        options["importance_sampling"] = int(sampler == "labor-1")
    sample = source.sample_neighbor if sampler == "neighbor" else source.sample_layer_neighbor
    keys = ["feat"] if kind == "untyped" else {"paper": ["feat"], "author": ["feat"], "venue": ["feat"]}
    edge_keys = ["ew"] if kind == "untyped" else {t: ["ew"] for t in EDGE_FEATURE_TYPES}
    return sample(graph, FANOUTS[kind], **options).fetch_feature(store, keys, edge_feature_keys=edge_keys if edge_rows else None)


def record(mb):
    """``summary`` plus the pairs' ``indexes``, the edge rows and LABOR's edge weights, per layer (typed view)."""
    view = mb.as_typed()
    return {
        **summary(mb), "layout": mb.layout, "indexes": view.indexes, "edge_feat": [dict(layer) for layer in view.edge_features],
        "weights": [sg.edge_weights for sg in view.sampled_subgraphs],
    }  # fmt: skip


def remote_edges(mb, part):
    """Sampled edges whose destination this part does not own (sampled by another rank)."""
    view, schema = mb.as_typed(), part.graph.schema
    count = 0
    for sg in view.sampled_subgraphs:
        for etype, csc in sg.sampled_csc.items():
            dst_type = etype.split(":")[2]
            dst = torch.repeat_interleave(sg.original_column_node_ids[dst_type], csc.indptr.diff())
            count += int((part.partition.owner(dst + schema.node_type_offset[schema.node_type_id[dst_type]]) != part.rank).sum())
    return count


def independent_rank(rank, world_size, out_dirs):
    """Per (kind, case): ``(batches over the part, the same batches over the whole dataset,
    edges sampled by other ranks)``; also (kind, "one item per rank"): shares of one of 12
    items, so that some ranks' batches are empty; (kind, "whole item set"): every rank holding
    every item (the part's partition given); (kind, "one pair per rank"): link shares of
    one of 24 pairs, so that some ranks' link batches are empty (NS and LABOR-1; these with more
    than one rank: one rank's shares are never empty)."""
    out = {}
    for kind in KINDS:
        part = load_partition(out_dirs[kind], rank, num_parts=world_size)
        graph = attributed_graph(kind)
        whole = graph, full_store(graph, kind)
        node_ns = ("neighbor", "node", "block")
        for case in CASES:
            out[kind, case] = both(kind, case, part, whole, partial(from_part, part, case[1], SIZES[case[1]], **OPTIONS))
        if world_size == 1:
            continue
        out[kind, "one item per rank"] = both(kind, node_ns, part, whole, partial(from_part, part, "few", 1, **OPTIONS))
        link_ns = ("neighbor", "link", "block")
        out[kind, "one pair per rank"] = both(kind, link_ns, part, whole, partial(from_part, part, "few links", 1, **OPTIONS))
        link_labor_1 = ("labor-1", "link", "block")  # a layer drawn at the requester, also from an empty frontier
        out[kind, "one pair per rank, LABOR-1"] = both(kind, link_labor_1, part, whole, partial(from_part, part, "few links", 1, **OPTIONS))
        every_item = load_item_sets(out_dirs[kind])["node"]
        source = partial(gp.DistributedItemSampler, every_item, SIZES["node"], partition=part.partition, **OPTIONS)
        out[kind, "whole item set"] = both(kind, node_ns, part, whole, source, edge_rows=False)
        # A last global batch of 1 item: without drop_uneven_inputs, refused on every rank.
        uneven = gp.DistributedItemSampler(items(kind, 2 * world_size + 1), 2, partition=part.partition)
        with pytest.raises(ValueError, match="some ranks get fewer batches .* pass drop_uneven_inputs=True"):
            next(iter(gp.DataLoader(pipe_of(kind, node_ns, part.graph, part.features, uneven))))
    return out


def both(kind, case, part, whole, make_source, edge_rows=True):
    """``(records over the part, over the whole dataset, remote edges)`` of the batches of
    two sources ``make_source()`` (the same batches)."""
    on_part = list(gp.DataLoader(pipe_of(kind, case, part.graph, part.features, make_source(), edge_rows)))
    on_whole = [record(mb) for mb in gp.DataLoader(pipe_of(kind, case, *whole, make_source(), edge_rows))]  # no collective
    return [record(mb) for mb in on_part], on_whole, sum(remote_edges(mb, part) for mb in on_part)


def few_links(kind):
    """24 of ``link_items``' pairs (typed: 12 of each edge type)."""
    cut = lambda item_set, n: gp.ItemSet(item_set.field("seeds")[:n], names="seeds")  # noqa: E731
    every = link_items(kind)
    return cut(every, 24) if kind == "untyped" else gp.HeteroItemSet({t: cut(s, 12) for t, s in every.item_sets.items()})


def partitioned(tmp_path, world_size, method):
    out_dirs = {}
    for kind in KINDS:
        graph = attributed_graph(kind)
        out_dirs[kind] = str(tmp_path / f"{kind}-{world_size}")
        splits = {"node": node_items(kind), "link": link_items(kind), "few": items(kind, 12), "few links": few_links(kind)}
        partition(graph, full_store(graph, kind), splits, world_size, out_dirs[kind], method=method)
    return out_dirs


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
@pytest.mark.usefixtures("kernels_for_child_processes")
# 1 rank: a part holding the whole graph; 2 ranks: hash owners; 3: METIS owners, more than two ranks.
@pytest.mark.parametrize("world_size, method", [(1, "hash"), (2, "hash"), (3, "metis")])
def test_independent_batches_on_parts_equal_one_process(world_size, method, tmp_path):
    """Each rank maps only its part; its own node and link batches (NS, LABOR-0, LABOR-1;
    block and pyg layouts; seed edges excluded) equal, bit for bit, those one process samples and
    fetches over the whole dataset: items, every layer's edges (user edge ids), LABOR's
    weights, node and edge feature rows; a rank's empty share of a node or link batch
    (typed link share: ``seeds`` ``{}``) is an empty batch, and the rank still answers."""
    if method == "metis":
        pytest.importorskip("pymetis")
    out_dirs = partitioned(tmp_path, world_size, method)
    results = values(run_ranks(independent_rank, world_size, tmp_path, args=(out_dirs,)))
    for kind in KINDS:
        few = ["one item per rank", "one pair per rank", "one pair per rank, LABOR-1"]
        for case in CASES if world_size == 1 else [*CASES, *few, "whole item set"]:
            got = [r[kind, case] for r in results]
            for on_part, on_whole, _ in got:
                assert len(on_part) == len(on_whole) > 1, (kind, case)
                assert same(on_part, on_whole), (kind, case)
            assert sum(len(b["item_ids"]) for on_part, _, _ in got for b in on_part) > 0
            if world_size > 1:  # the owners did sample for others
                assert sum(remote for _, _, remote in got) > 0, (kind, case)
        for case in few if world_size > 1 else ():
            batches = [b for r in results for b in r[kind, case][0]]
            sizes = [sum(ids.numel() for ids in b["item_ids"].values()) for b in batches]
            if world_size > 1:  # ranks with an empty share still answered the others
                assert 0 in sizes and sum(sizes) > 0, (kind, case)
            for b, size in zip(batches, sizes):  # an empty share is an empty batch
                assert size or all(x.numel() == 0 for layer in b["triples"] for x in layer.values()), (kind, case)


@pytest.mark.parametrize("kind", KINDS)
def test_what_parts_refuse(kind, tmp_path):
    """Temporal, disjoint and ``deduplicate=False`` batches over a part are taken
    (test_partitioned_temporal), cooperative temporal ones and LABOR-k are refused with
    UnsupportedCombination naming what to do; a part graph without a
    DistributedItemSampler upstream is refused as before."""
    graph = attributed_graph(kind)
    partition(graph, None, {"node": items(kind)}, 2, tmp_path)
    part = load_partition(tmp_path, 0)
    source = gp.DistributedItemSampler.from_part(part, "node", 4, rank=0, world_size=2)
    fanouts = FANOUTS[kind]
    for options in ({"time_attr": "ts"}, {"layout": "pyg", "disjoint": True}, {"deduplicate": False}):
        assert source.sample_neighbor(part.graph, fanouts, **options).collective  # independent batches over a part
    with pytest.raises(UnsupportedCombination, match="temporal sampling filters every hop .* pass cooperative=False"):
        source.sample_neighbor(part.graph, fanouts, time_attr="ts", cooperative=True)
    assert source.sample_layer_neighbor(part.graph, fanouts, importance_sampling=1).collective  # LABOR-k over a part
    with pytest.raises(UnsupportedCombination, match="temporal LABOR-k over a part .* pass importance_sampling=0"):
        source.sample_layer_neighbor(part.graph, fanouts, importance_sampling=1, time_attr="ts")
    assert source.sample_neighbor(part.graph, fanouts).collective  # independent batches over a part: collective
    with pytest.raises(ValueError, match="put DistributedItemSampler.from_part.* or pass cooperative=True"):
        gp.ItemSampler(part.item_sets["node"], 4).sample_neighbor(part.graph, fanouts)
    assert source.sample_uniform_negative(part.graph, 2, exclude_existing_edges=True).collective
    with pytest.raises(ValueError, match="the graph is part 0 of .* put DistributedItemSampler.from_part"):
        gp.ItemSampler(part.item_sets["node"], 4).sample_uniform_negative(part.graph, 2, exclude_existing_edges=True)


@pytest.mark.parametrize("cooperative", [False, True])
def test_reverse_edge_ids_on_a_part_are_refused(cooperative, tmp_path):
    """An untyped part graph lacks the reverses of the edges whose destinations other ranks
    own, so ``reverse_edge_ids`` (as an argument or in the ``exclude_seed_edges`` stage)
    is refused naming what to do instead; ``include_reverse_edges=True`` without them (every
    ``v -> u``) is taken."""
    graph = attributed_graph("untyped")
    partition(graph, None, {"link": link_items("untyped")}, 2, tmp_path)
    part = load_partition(tmp_path, 0)
    source = gp.DistributedItemSampler.from_part(part, "link", 4, rank=0, world_size=2)
    reverse = torch.arange(graph.total_num_edges)  # the whole graph's: refused before they are read
    match = (
        r"NeighborSampler: `reverse_edge_ids` maps every edge of the whole graph .* part 0 of the partitioned dataset "
        r".* pass include_reverse_edges=True without reverse_edge_ids .* or load the whole graph"
    )
    options = {"cooperative": cooperative, "exclude_seed_edges": True}
    with pytest.raises(UnsupportedCombination, match=match):
        source.sample_neighbor(part.graph, FANOUTS["untyped"], **options, include_reverse_edges=True, reverse_edge_ids=reverse)
    sampler = source.sample_neighbor(part.graph, FANOUTS["untyped"], **options)
    with pytest.raises(UnsupportedCombination, match=match):
        sampler.exclude_seed_edges(include_reverse_edges=True, reverse_edge_ids=reverse)
    assert sampler.exclude_seed_edges(include_reverse_edges=True).reverse_edge_types == (0,)


@pytest.mark.parametrize("kind", KINDS)
def test_the_link_cases_redraw_negatives_that_are_edges(kind):
    """The link cases above draw negatives that are edges (redrawn at their owners over parts)."""
    graph, drawn = attributed_graph(kind), []
    for exclude in (False, True):
        source = gp.ItemSampler(link_items(kind), SIZES["link"], shuffle=True, seed=3)
        drawn.append([record_seeds(mb.seeds) for mb in source.sample_uniform_negative(graph, 2, exclude_existing_edges=exclude, seed=1)])
    assert not same(*drawn)


def record_seeds(seeds):
    return seeds if isinstance(seeds, torch.Tensor) else dict(seeds)


ONE_TYPE_FANOUTS = [{"user:follows:user": 2, "user:likes:user": 0, "user:blocks:user": 3}, 2]


def one_node_type_graph():
    """A typed graph of one node type and three edge types (a layer's segments are per
    edge type, not per destination, although every destination is of the one type)."""
    gen = torch.Generator().manual_seed(5)
    edges = {etype: torch.randint(0, 40, (2, 120), generator=gen) for etype in ONE_TYPE_FANOUTS[0]}
    return gp.CSCGraph.from_hetero_edges(edges, {"user": 40})


def one_node_type_rank(rank, world_size, out_dir):
    """``(batches over the part, the same batches over the whole graph)``: NS and LABOR-1
    node batches (an edge type of fanout 0 in the bottom layer)."""
    part, graph = load_partition(out_dir, rank, num_parts=world_size), one_node_type_graph()
    out = []
    for options in ({}, {"importance_sampling": 1}):
        def run(g):
            source = from_part(part, "node", 5, **OPTIONS)
            sample = source.sample_layer_neighbor if options else source.sample_neighbor
            return [summary(mb) for mb in gp.DataLoader(sample(g, ONE_TYPE_FANOUTS, seed=7, **options))]
        out.append((run(part.graph), run(graph)))
    return out


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
@pytest.mark.usefixtures("kernels_for_child_processes")
def test_a_typed_graph_of_one_node_type_on_parts_equals_one_process(tmp_path):
    """Over parts, a typed graph of one node type is laid out by its edge types' segments
    (as with several node types): its batches equal one process's."""
    items = gp.HeteroItemSet({"user": gp.ItemSet(torch.arange(30), names="seeds")})
    partition(one_node_type_graph(), None, {"node": items}, 2, tmp_path / "parts")
    results = values(run_ranks(one_node_type_rank, 2, tmp_path, args=(str(tmp_path / "parts"),)))
    for on_part, on_whole in (pair for r in results for pair in r):
        assert len(on_part) == len(on_whole) > 1
        assert same(on_part, on_whole)
