"""The capability table, walked cell by cell: {untyped, typed} x {node, link, hyperlink} x
{independent, cooperative, disjoint, temporal} x {CPU, GPU} x {block, pyg}. A supported cell yields batches
the brute-force checker accepts (edges exist with their type, fanouts respected, no seed
edge sampled, compacted seeds map back to the seeds, typed ids in range per type); an
unsupported one raises :class:`UnsupportedCombination` naming its reason. Cooperative cells
run on two gloo ranks; GPU cells need CUDA."""

import itertools
import re
from dataclasses import fields, replace

import pytest
import torch

import graphpipe as gp
from dist_harness import run_ranks, values
from graphpipe.pipes.capabilities import DIMENSIONS, SUPPORT, UNSUPPORTED, UnsupportedCombination, capability_table, check_supported
from graphpipe import SampledSubgraph
from graphpipe.graph.edge_types import parse_edge_type
from temporal_checks import FANOUTS as TEMPORAL_FANOUTS, USES, check_temporal_batch, timed_graph
from temporal_checks import items as temporal_items
from sampling_checks import EDGE, NODE, check_batch, check_disjoint_batch, check_layers, graph_and_edges, sampled_edges, seed_edge_ids, seed_items, typed_view

FANOUTS = [3, 2]


def cell_id(cell):
    return "-".join(cell)


def cells(mode, supported=None):
    """The table's cells of ``mode`` (only the supported or unsupported ones when asked),
    GPU cells marked ``cuda`` so that the GPU machine's ``pytest -m cuda`` runs them."""
    chosen = [c for c in SUPPORT if c[2] == mode and (supported is None or (SUPPORT[c] is None) == supported)]
    return [pytest.param(c, id=cell_id(c), marks=pytest.mark.cuda if c[3] == "GPU" else ()) for c in chosen]


def item_set(kind, edges, task):
    """The cell's items: node ids, node pairs that are edges (per edge type when typed), or
    hyperlinks of 3 nodes (an untyped graph's; keyed by an edge type when typed)."""
    if task == "hyperlink":
        triples = torch.randint(0, 30, (40, 3), generator=torch.Generator().manual_seed(0))
        return gp.ItemSet(triples, names="seeds") if kind == "untyped" else gp.HeteroItemSet({"paper:cites:paper": triples})
    seeds = seed_items(kind, edges, task)
    if kind == "untyped":
        return gp.ItemSet(seeds[NODE if task == "node" else EDGE], names="seeds")
    return gp.HeteroItemSet({t: gp.ItemSet(ids, names="seeds") for t, ids in seeds.items()})


def cell_pipe(cell, graph, edges, source=None):
    """The cell's pipe: items (link: with negatives) -> neighbor sampler (link: excluding the
    seed edges); ``source`` replaces the ItemSampler (cooperative cells)."""
    kind, task, mode, device, layout = cell
    pipe = source or gp.ItemSampler(item_set(kind, edges, task), 8, shuffle=True, seed=0)
    if device == "GPU":
        pipe = pipe.copy_to("cuda")
    if task == "link":
        pipe = pipe.sample_uniform_negative(graph, 1, seed=1)
    return pipe.sample_neighbor(
        graph, FANOUTS, seed=2, layout=layout, cooperative=mode == "cooperative", disjoint=mode == "disjoint",
        exclude_seed_edges=task == "link",
    )


def test_the_table_covers_every_cell_once_and_names_its_reasons():
    assert len(SUPPORT) == 2 * 3 * 4 * 2 * 2
    reasons = {reason for _, reason in UNSUPPORTED}
    assert set(SUPPORT.values()) - {None} == reasons  # every rule decides some cell
    table = capability_table().splitlines()
    columns = list(itertools.product(DIMENSIONS["device"], DIMENSIONS["layout"]))
    rows = [line for line in table if line.startswith("| ") and not line.startswith("| graph")]
    assert len(rows) == 24
    numbered = {line.split(". ", 1)[0]: line.split(". ", 1)[1] for line in table if line[:1].isdigit()}
    assert len(numbered) == len(reasons)
    for row in rows:
        graph, task, mode, *cells = [part.strip() for part in row.strip("|").split("|")]
        for (device, layout), text in zip(columns, cells):
            reason = SUPPORT[(graph, task, mode, device, layout)]
            if reason is None:
                assert text == "yes"
            else:
                number = text[len("no (") : -1]
                assert numbered[number].rstrip(".").lower() == reason.lower()


def test_check_supported_decides_with_what_is_known():
    check_supported("here", graph="typed", task="node", mode="independent", device="CPU", layout="pyg")
    check_supported("here", graph="typed")  # some typed cell is supported
    with pytest.raises(UnsupportedCombination, match=r"here: graph=typed, device=GPU is not supported: typed graphs are sampled on the CPU"):
        check_supported("here", graph="typed", device="GPU")
    with pytest.raises(UnsupportedCombination, match=r"mode=cooperative, layout=pyg is not supported"):
        check_supported("here", mode="cooperative", layout="pyg")
    assert issubclass(UnsupportedCombination, NotImplementedError)


@pytest.mark.parametrize("cell", cells("independent"))
def test_independent_cell(cell):
    kind, task, _, device, _ = cell
    graph, edges = graph_and_edges(kind)
    if device == "GPU" and kind == "untyped":
        graph = graph.pin_memory_()
    if SUPPORT[cell] is not None:
        with pytest.raises(UnsupportedCombination, match=re.escape(SUPPORT[cell])):
            next(iter(cell_pipe(cell, graph, edges)))
        return
    pipe = cell_pipe(cell, graph, edges)
    batches = 0
    for mb in itertools.islice(pipe, 3):
        mb = mb.to("cpu")
        excluded = seed_edge_ids(edges, typed_view(mb).seeds) if task == "link" else None
        check_batch(graph, edges, mb, pipe.edge_type_fanouts, excluded=excluded)
        batches += 1
    assert batches == 3


@pytest.mark.parametrize("cell", cells("disjoint"))
def test_disjoint_cell(cell):
    """A supported disjoint cell's subtrees pass the disjoint checker; the others raise."""
    kind = cell[0]
    graph, edges = graph_and_edges(kind)
    if SUPPORT[cell] is not None:
        with pytest.raises(UnsupportedCombination, match=re.escape(SUPPORT[cell])):
            next(iter(cell_pipe(cell, graph, edges)))
        return
    pytest.importorskip("torch_geometric")
    pipe = cell_pipe(cell, graph, edges)
    batches = list(itertools.islice(pipe, 2))
    assert len(batches) == 2
    for mb in batches:
        check_disjoint_batch(graph, edges, mb, pipe.edge_type_fanouts)


def test_one_column_seeds_are_not_hyperlinks():
    """``[N, 1]`` seeds are no hyperlinks (GraphBolt's: ``[N, k]`` with ``k >= 2`` are links):
    the capability check classifies them as the sampler does, so a disjoint sampler (whose
    hyperlink cell is unsupported) refuses them for their shape, not as hyperlinks."""
    graph, _ = graph_and_edges("untyped")
    sampler = gp.NeighborSampler(None, graph, FANOUTS, layout="pyg", disjoint=True)
    seeds = torch.arange(4).view(-1, 1)
    message = "2-D `seeds` must be node pairs [N, 2] or hyperlinks [N, k] with k >= 2, got shape (4, 1)"
    with pytest.raises(ValueError, match=re.escape(message)):
        sampler.sample_subgraphs(gp.MiniBatch(seeds=seeds))
    with pytest.raises(UnsupportedCombination, match="hyperlinks need disjoint=False"):  # a real hyperlink still is one
        sampler.sample_subgraphs(gp.MiniBatch(seeds=torch.arange(12).view(-1, 3)))


@pytest.mark.parametrize("cell", cells("cooperative", supported=False))
def test_unsupported_cooperative_cell(cell):
    """Refused when the sampler is built (no process group needed) or by its first batch."""
    kind = cell[0]
    graph, edges = graph_and_edges(kind)
    with pytest.raises(UnsupportedCombination, match=re.escape(SUPPORT[cell])):
        next(iter(cell_pipe(cell, graph, edges)))


SUPPORTED_COOPERATIVE = [c for c in SUPPORT if c[2] == "cooperative" and SUPPORT[c] is None]


def plain(minibatch):
    """A batch in the typed layout without its exchange plans (picklable)."""
    view = typed_view(minibatch)
    layers = [SampledSubgraph(*(getattr(sg, f.name) for f in fields(SampledSubgraph))) for sg in view.sampled_subgraphs]
    return replace(view, sampled_subgraphs=layers)


def cooperative_cells_rank(rank, world_size):
    """Every supported cooperative cell: ``(seeds as sampled, the batch)`` per batch."""
    out = {}
    for cell in SUPPORTED_COOPERATIVE:
        kind, task = cell[:2]
        graph, edges = graph_and_edges(kind)
        source = gp.DistributedItemSampler(item_set(kind, edges, task), 4, shuffle=True, seed=0, drop_uneven_inputs=True)
        out[cell] = [(mb.seeds, plain(mb)) for mb in gp.DataLoader(cell_pipe(cell, graph, edges, source))]
    return out


@pytest.fixture(scope="module")
def cooperative_batches(tmp_path_factory):
    """The supported cooperative cells' batches on two gloo ranks (one group for all)."""
    return values(run_ranks(cooperative_cells_rank, 2, tmp_path_factory.mktemp("cooperative")))


def merged(seeds_per_rank):
    """The global batch's seeds from the ranks' (a tensor, or a dict by type)."""
    if isinstance(seeds_per_rank[0], torch.Tensor):
        return torch.cat(seeds_per_rank)
    keys = {key for seeds in seeds_per_rank for key in seeds}
    return {key: torch.cat([seeds[key] for seeds in seeds_per_rank if key in seeds]) for key in keys}


def check_compacted_seeds(mb) -> None:
    """Link seeds stay on their rank: ``compacted_seeds`` index its pairs' distinct
    endpoints per node type, ascending (the rows of the exchange after the last layer)."""
    columns = []  # (edge type, column, its node type)
    for etype, pairs in mb.seeds.items():
        src, _, dst = parse_edge_type(etype)
        columns += [(etype, c, dst if c else src) for c in range(pairs.shape[1])]
    endpoints = {}
    for etype, c, node_type in columns:
        endpoints.setdefault(node_type, []).append(mb.seeds[etype][:, c])
    endpoints = {t: torch.unique(torch.cat(ids)) for t, ids in endpoints.items()}
    for etype, c, node_type in columns:
        assert torch.equal(endpoints[node_type][mb.compacted_seeds[etype][:, c]], mb.seeds[etype][:, c])


@pytest.mark.parametrize("cell", SUPPORTED_COOPERATIVE, ids=cell_id)
def test_supported_cooperative_cell(cell, cooperative_batches):
    """Each rank's layers pass the checker (the global batch's seed edges excluded), and
    together they hold exactly what one process samples for the global batch."""
    kind, task, _, device, layout = cell
    assert device == "CPU"  # cooperative sampling runs on the CPU
    graph, edges = graph_and_edges(kind)
    reference = cell_pipe((kind, task, "independent", device, layout), graph, edges)
    per_rank = [results[cell] for results in cooperative_batches]
    assert len(per_rank[0]) == len(per_rank[1]) > 0
    for batches in zip(*per_rank):
        mbs = [mb for _, mb in batches]
        global_batch = gp.MiniBatch(seeds=merged([seeds for seeds, _ in batches]), batch_index=mbs[0].batch_index)
        expected = typed_view(reference.sample_subgraphs(global_batch))
        excluded = seed_edge_ids(edges, expected.seeds) if task == "link" else None
        check_batch(graph, edges, expected, reference.edge_type_fanouts, excluded=excluded)
        for mb in mbs:
            check_layers(graph, edges, mb, reference.edge_type_fanouts, excluded)
            if task != "node":
                check_compacted_seeds(mb)
        for layer, expected_edges in enumerate(sampled_edges(expected, layer) for layer in range(len(FANOUTS))):
            for etype, (src, dst, eids, _) in expected_edges.items():
                union = torch.cat([torch.stack(sampled_edges(mb, layer)[etype][:3], 1) for mb in mbs])
                assert union.shape[0] == eids.numel() and as_set(union) == as_set(torch.stack([src, dst, eids], 1))


def as_set(rows):
    return {tuple(row) for row in rows.tolist()}


@pytest.mark.parametrize("cell", cells("temporal"))
def test_temporal_cell(cell):
    """A supported temporal cell's batches pass the brute-force temporal checker (every
    edge valid for its root seed's time, counts among the valid); the others raise."""
    kind, task, _, device, layout = cell
    graph, edges, node_time, edge_time = timed_graph(kind, sort=False)
    gen = torch.Generator().manual_seed(3)
    if task == "hyperlink":
        triples = torch.randint(0, 30, (20, 3), generator=gen)
        item_set = gp.ItemSet((triples, torch.randint(20, 100, (20,), generator=gen)), names=("seeds", "timestamp"))
        if kind == "typed":
            item_set = gp.HeteroItemSet({"paper:cites:paper": item_set})
    else:
        item_set = temporal_items(kind, edges, task, gen, layout)

    def build():
        pipe = gp.ItemSampler(item_set, 8, seed=0)
        if device == "GPU":
            pipe = pipe.copy_to("cuda")
        return pipe.sample_neighbor(graph, TEMPORAL_FANOUTS, layout=layout, seed=2, **USES["both"])

    if SUPPORT[cell] is not None:
        with pytest.raises(UnsupportedCombination, match=re.escape(SUPPORT[cell])):
            next(iter(build()))
        return
    pipe = build()
    comparison = "<=" if layout == "pyg" and task == "node" else "<"  # the default: PyG's for node seeds, leak-free for links
    cfg = dict(uses=("node", "edge"), layout=layout, comparison=comparison, window=None, strategy="uniform", fanouts=TEMPORAL_FANOUTS)
    batches = list(itertools.islice(pipe, 2))
    assert len(batches) == 2
    for mb in batches:
        if task == "hyperlink":  # GraphBolt's row-major rows, each its hyperlink's time
            assert torch.equal(mb.compacted_seeds, torch.arange(mb.seeds.numel()).view(mb.seeds.shape))
            continue
        assert check_temporal_batch(graph, edges, node_time, edge_time, mb, cfg) > 0
