"""Compact part graphs (an ``indptr`` row per owned vertex, ``CSCGraph.indptr_nodes``) sample
what the whole graph samples for the same seeds: graph methods and sampling stages, typed
and untyped, NS and LABOR, temporal, seed-edge exclusion; they save, load and pickle as
compact graphs; a part's graph stays its share of the whole graph's arrays whatever the
number of parts (the whole-graph indptr it had before grew with them)."""

import os
import pickle
import warnings

import pytest
import torch

import graphpipe as gp
from graphpipe.distributed import load_partition, partition

from test_cooperative import FANOUTS, REVERSE, summary
from test_partitioned import KINDS, attributed_graph, same

RANK, NUM_PARTS = 1, 3


@pytest.fixture(scope="module", params=KINDS)
def parts(request, tmp_path_factory):
    """``(kind, whole graph, part RANK's compact graph (not a registered part, so stages take
    it alone), {node type or None: its owned type-local ids})``."""
    kind, out = request.param, tmp_path_factory.mktemp(f"parts-{request.param}")
    whole = attributed_graph(kind)
    partition(whole, None, None, NUM_PARTS, out)
    part = load_partition(out, RANK)
    compact = gp.CSCGraph.load(out / f"part-{RANK}" / "graph.pt", validate=False)  # loaded, not mapped by load_partition
    assert compact.indptr.numel() == part.nodes.numel() + 1 < whole.total_num_nodes
    schema, owned = whole.schema, {}
    for t, (name, lo, hi) in enumerate(zip(schema.node_types, schema.node_type_offset, schema.node_type_offset[1:])):
        owned[None if kind == "untyped" else name] = part.nodes[(part.nodes >= lo) & (part.nodes < hi)] - lo
    return kind, whole, compact, owned


def seeds_of(owned):
    return owned[None] if None in owned else owned


def edges(subgraph):
    """``(indptrs, sources, edge ids)`` of a SampledSubgraph, by edge type when typed (tensors)."""
    csc = subgraph.sampled_csc if isinstance(subgraph.sampled_csc, dict) else {None: subgraph.sampled_csc}
    ids = subgraph.original_edge_ids if isinstance(subgraph.original_edge_ids, dict) else {None: subgraph.original_edge_ids}
    return {t: c.indptr for t, c in csc.items()}, {t: c.indices for t, c in csc.items()}, {t: e for t, e in ids.items() if e.numel()}


def test_graph_methods_sample_as_the_whole_graph(parts):
    """sample_neighbors (one fanout, per edge type) and temporal_sample_neighbors of owned
    seeds give the whole graph's subgraph; a seed the part does not own is refused."""
    kind, whole, compact, owned = parts
    seeds = seeds_of(owned)
    times = {t: torch.full((ids.numel(),), 1000 + 4 * whole.total_num_edges // 3) for t, ids in owned.items()}
    fanouts = [2] if kind == "untyped" else [[2], [2, 1, 3, 0, 1]]
    calls = [(lambda g, f=f: g.sample_neighbors(seeds, f)) for f in fanouts]
    calls.append(lambda g: g.temporal_sample_neighbors(seeds, seeds_of(times), [2], edge_timestamp_attr_name="ts"))
    for call in calls:
        torch.manual_seed(5)
        expected = call(whole)
        torch.manual_seed(5)
        got = call(compact)
        assert same(edges(got), edges(expected)) and len(edges(got)[2]) > 0
    other = torch.tensor([int(torch.nonzero(~torch.isin(torch.arange(whole.total_num_nodes), compact.indptr_nodes))[0])])
    if kind == "typed":
        t = int(torch.searchsorted(torch.tensor(whole.schema.node_type_offset[1:]), other, right=True))
        other = {whole.node_types[t]: other - whole.schema.node_type_offset[t]}
    with pytest.raises(ValueError, match="CSCGraph.sample_neighbors: node .* has no in-edges in this graph: it is compact"):
        compact.sample_neighbors(other, [2])


def pairs_of(kind, compact, owned):
    """Link seeds whose endpoints the part owns: edges of its (typed: two link types), and
    pairs of owned nodes that may not be edges."""
    src, dst = compact.edge_index()
    mine = torch.isin(src, compact.indptr_nodes[:-1])
    if kind == "untyped":
        return torch.cat([torch.stack([src[mine], dst[mine]], 1)[:10], owned[None][:12].view(-1, 2)])
    schema, pairs = compact.schema, {}
    for etype in REVERSE:
        s, _, d = etype.split(":")
        t = mine & (compact.type_per_edge.long() == schema.edge_type_id[etype])
        local = torch.stack([src[t] - schema.node_type_offset[schema.node_type_id[s]], dst[t] - schema.node_type_offset[schema.node_type_id[d]]], 1)
        n = min(owned[s].numel(), owned[d].numel(), 6)
        pairs[etype] = torch.cat([local[:8], torch.stack([owned[s][:n], owned[d][:n]], 1)])
    return pairs


CASES = [  # (stage, options, task)
    ("sample_neighbor", {}, "node"),
    ("sample_layer_neighbor", {}, "node"),
    ("sample_layer_neighbor", {"importance_sampling": 1}, "node"),
    ("sample_neighbor", {"layout": "pyg", "disjoint": True}, "node"),
    ("sample_neighbor", {"edge_timestamp_attr_name": "ts"}, "node"),
    ("sample_neighbor", {"exclude_seed_edges": True, "include_reverse_edges": True}, "link"),
    ("sample_layer_neighbor", {"exclude_seed_edges": True, "include_reverse_edges": True}, "link"),
    ("sample_neighbor", {"exclude_seed_edges": True, "edge_timestamp_attr_name": "ts"}, "link"),
]


@pytest.mark.parametrize("stage, options, task", CASES)
def test_stages_sample_as_the_whole_graph(parts, stage, options, task):
    """One layer (every destination owned) of each stage over the compact graph: the
    batches of the whole graph, bit for bit (edge weights included)."""
    kind, whole, compact, owned = parts
    seeds = seeds_of(owned) if task == "node" else pairs_of(kind, compact, owned)
    if kind == "typed" and options.get("include_reverse_edges"):
        options = {**options, "reverse_etypes_mapping": REVERSE}

    def item_set(ids):
        names = ("seeds", "timestamp") if "edge_timestamp_attr_name" in options else "seeds"
        fields = (ids, torch.full((ids.size(0),), 1000 + 4 * whole.total_num_edges // 3)) if names != "seeds" else ids
        return gp.ItemSet(fields, names=names)

    items = item_set(seeds) if kind == "untyped" else gp.HeteroItemSet({t: item_set(ids) for t, ids in seeds.items() if ids.numel()})
    batches = []
    for graph in (whole, compact):
        sampler = getattr(gp.ItemSampler(items, batch_size=5), stage)(graph, FANOUTS[kind][:1], seed=7, **options)
        batches.append([{**summary(mb), "weights": [sg.edge_weights for sg in mb.as_typed().sampled_subgraphs]} for mb in sampler])
    assert len(batches[0]) > 1 and same(batches[1], batches[0])


def test_compact_graphs_save_load_and_pickle(parts, tmp_path):
    """A compact graph round-trips through save/load (graph file version 3; mapped or
    not) and pickling; a graph without ``indptr_nodes`` is still written as version 2."""
    kind, whole, compact, owned = parts
    compact.save(tmp_path / "compact.pt")
    whole.save(tmp_path / "whole.pt")
    assert torch.load(tmp_path / "compact.pt", weights_only=True)["version"] == 3
    assert torch.load(tmp_path / "whole.pt", weights_only=True)["version"] == 2
    for loaded in (gp.CSCGraph.load(tmp_path / "compact.pt", mmap=True), pickle.loads(pickle.dumps(compact))):
        assert torch.equal(loaded.indptr_nodes, compact.indptr_nodes) and torch.equal(loaded.indptr, compact.indptr)
        assert loaded.total_num_nodes == whole.total_num_nodes and torch.equal(loaded.in_degrees(), compact.in_degrees())
    with pytest.raises(ValueError, match="`indptr_nodes` must be a \\[len\\(indptr\\)\\]"):
        gp.CSCGraph(whole.indptr, whole.indices, indptr_nodes=torch.arange(3))
    with pytest.raises(ValueError, match="`indptr_nodes` must rise strictly"):
        gp.CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), indptr_nodes=torch.tensor([2, 1, 5]))


def test_part_graph_bytes_do_not_grow_with_the_number_of_parts(tmp_path):
    """The parts' graph files of 8 and 64 parts hold the whole graph's arrays once (plus a
    few KB of headers a part): no whole-graph indptr per part (4 bytes per node of the
    whole graph on every rank, 64x at 64 parts)."""
    num_nodes = 40_000
    g = torch.Generator().manual_seed(0)
    graph = gp.CSCGraph.from_coo(torch.randint(0, num_nodes, (4 * num_nodes,), generator=g),
                                 torch.randint(0, num_nodes, (4 * num_nodes,), generator=g), num_nodes=num_nodes)  # fmt: skip
    arrays = sum(t.nbytes for t in (graph.indptr, graph.indices, graph.original_edge_ids))
    for num_parts in (8, 64):
        partition(graph, None, None, num_parts, tmp_path / str(num_parts))
        sizes = [os.path.getsize(tmp_path / str(num_parts) / f"part-{r}" / "graph.pt") for r in range(num_parts)]
        ids = 8 * num_nodes  # indptr_nodes: the owned ids, once over the parts
        assert sum(sizes) <= arrays + ids + num_parts * (16 << 10), (num_parts, sum(sizes), arrays)
        assert max(sizes) < 1.5 * (arrays + ids) / num_parts + (16 << 10), (num_parts, max(sizes))


def test_a_part_holding_every_node_reads_rows_by_node_id():
    """One part (P = 1) holds every node: its rows are the node ids, so the per-layer row
    search is skipped (it cost a third of a batch's sampling time there)."""
    graph = gp.CSCGraph.from_coo(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), num_nodes=4)
    whole_part = gp.CSCGraph(graph.indptr, graph.indices, indptr_nodes=torch.arange(5))
    nodes = torch.tensor([3, 1])
    assert whole_part.in_edge_rows(nodes, "test") is nodes and whole_part.held_rows(nodes)[0] is nodes
    half = gp.CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 2]), indptr_nodes=torch.tensor([1, 3, 4]))
    assert half.in_edge_rows(nodes, "test").tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"test: node 2 has no in-edges in this graph: it is compact"):
        half.in_edge_rows(torch.tensor([2]), "test")


def test_rows_of_strided_node_ids_are_found_without_a_warning(parts):
    # Temporal part sampling passes a column of its frontier; searchsorted warned of the copy it made.
    compact = parts[2]
    held = compact.indptr_nodes[:-1]  # the node ids of its rows, then num_nodes
    nodes = torch.stack([held, held], dim=1)[:, 0]
    assert not nodes.is_contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, found = compact.held_rows(nodes)
    assert torch.equal(rows, torch.arange(held.numel())) and bool(found.all())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_compact_graph_on_the_gpu_is_refused_naming_the_cpu():
    half = gp.CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 2]), indptr_nodes=torch.tensor([1, 3, 4])).to("cuda")
    with pytest.raises(gp.UnsupportedCombination, match=r"a compact graph .* is sampled on the CPU"):
        gp.ItemSampler(gp.ItemSet(torch.tensor([1, 3]), names="seeds"), 2).sample_neighbor(half, [2])


def test_negatives_need_the_registered_part(parts):
    """Negatives that must not be edges cannot be checked on a compact graph alone (it
    lacks the others' in-edges): refused, pointing at load_partition's part."""
    kind, whole, compact, owned = parts
    pairs = pairs_of(kind, compact, owned)
    items = gp.ItemSet(pairs, names="seeds") if kind == "untyped" else gp.HeteroItemSet({t: gp.ItemSet(p, names="seeds") for t, p in pairs.items()})
    with pytest.raises(ValueError, match=r"holds the in-edges of only \d+ of its \d+ nodes .`indptr_nodes`"):
        gp.ItemSampler(items, batch_size=4).sample_uniform_negative(compact, 2, exclude_existing_edges=True)
