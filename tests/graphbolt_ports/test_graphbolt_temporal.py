"""GraphBolt's temporal sampling tests, run against graphpipe.

Ported from ``dmlc/dgl`` (``3d16000b41``):
``tests/python/pytorch/graphbolt/impl/test_fused_csc_sampling_graph.py``
(``test_temporal_sample_neighbors_homo``, ``test_temporal_sample_neighbors_hetero``) and every
temporal case (``SamplerType.Temporal`` / ``TemporalLayer``) of
``tests/python/pytorch/graphbolt/test_subgraph_sampler.py``, keeping GraphBolt's
parametrisation over its two temporal samplers, both built as GraphBolt builds them
(``node_timestamp_attr_name="timestamp", edge_timestamp_attr_name="timestamp"``).

Mapping: GraphBolt's ``gb.fused_csc_sampling_graph(indptr, indices, ...)`` is
``gb.CSCGraph(...)`` with the same arguments; its ``from_dglgraph(dgl.graph((src, dst)))``
is ``CSCGraph.from_coo(src, dst)`` and ``gb_test_utils.rand_csc_graph`` /
``random_hetero_graph`` are rewritten below without scipy and DGL. GraphBolt sets
timestamps by assigning ``graph.node_attributes``; graphpipe's graphs are read-only, so
:func:`with_timestamps` builds a copy that has them. ``gb.exclude_seed_edges`` as a
``transform`` is GraphBolt's stage form ``sampler.exclude_seed_edges()``. GraphBolt's graph
has ``temporal_sample_layer_neighbors``; graphpipe's has ``temporal_sample_neighbors`` only,
so LABOR runs as a one-layer ``TemporalLayerNeighborSampler`` read back in graph ids
(:func:`graph_sampler`). GraphBolt's assertions are kept; where one is changed a comment
says why. Beyond upstream, by brute force: GraphBolt's fault graphpipe does not copy
(homogeneous link seeds filtered against another pair's time), windows (untested
upstream: the graph method's ``seeds_pre_time_window``, the datapipes' ``time_window``),
one fanout on a typed graph, and what GraphBolt's link tests cannot see (the nodes
``compacted_seeds`` index, the seed edges ``exclude_seed_edges`` leaves out).
"""

import dataclasses
from functools import partial

import pytest
import torch

import graphpipe as gb

# GraphBolt's one-element tensor fanouts on typed graphs warn (graphpipe: per edge type;
# tests/pipes/test_sampling.py); the typed cases here count no node's edges across types.
pytestmark = pytest.mark.filterwarnings("ignore:.*is a one-element tensor")
TEMPORAL = ["Temporal", "TemporalLayer"]  # GraphBolt's SamplerType.Temporal / TemporalLayer


def _get_sampler(sampler_type, node_timestamp_attr_name="timestamp", edge_timestamp_attr_name="timestamp"):
    """GraphBolt's ``_get_sampler`` for its temporal sampler types."""
    sampler = gb.TemporalNeighborSampler if sampler_type == "Temporal" else gb.TemporalLayerNeighborSampler
    return partial(
        sampler, node_timestamp_attr_name=node_timestamp_attr_name, edge_timestamp_attr_name=edge_timestamp_attr_name
    )


def timestamp_names(use_node_timestamp, use_edge_timestamp):
    """The samplers' ``node_timestamp_attr_name`` and ``edge_timestamp_attr_name``: "timestamp" or None."""
    return {
        "node_timestamp_attr_name": "timestamp" if use_node_timestamp else None,
        "edge_timestamp_attr_name": "timestamp" if use_edge_timestamp else None,
    }


def with_timestamps(graph, node_timestamp=None, edge_timestamp=None):
    """GraphBolt's ``graph.node_attributes = {"timestamp": node_timestamp}`` (and
    ``edge_attributes``): a copy of the read-only ``graph`` with those attributes."""
    changes = {}
    if node_timestamp is not None:
        changes["node_attributes"] = {"timestamp": node_timestamp}
    if edge_timestamp is not None:
        changes["edge_attributes"] = {"timestamp": edge_timestamp}
    return dataclasses.replace(graph, **changes)


def with_zero_timestamps(graph):
    """The ``without_deduplication`` tests' graphs: every node and edge at time 0."""
    return with_timestamps(
        graph,
        torch.zeros(graph.total_num_nodes, dtype=torch.int64),
        torch.zeros(graph.total_num_edges, dtype=torch.int64),
    )


def with_arange_timestamps(graph):
    """GraphBolt's ``torch.arange`` node (by id) and edge (by CSC position) timestamps."""
    return with_timestamps(graph, torch.arange(graph.total_num_nodes), torch.arange(graph.total_num_edges))


def rand_csc_graph(N, density, bidirection_edge=False, seed=0):
    """``gb_test_utils.rand_csc_graph``: each of the ``N * N`` (source, destination)
    pairs an edge with probability ``density``, then symmetrised (scipy's ``adj + adj.T``)."""
    adj = torch.rand(N, N, generator=torch.Generator().manual_seed(seed)) < density
    if bidirection_edge:
        adj = adj | adj.T
    src, dst = adj.nonzero(as_tuple=True)  # scipy's CSC: column = destination, row = source
    return gb.CSCGraph.from_coo(src, dst, num_nodes=N)


def random_hetero_graph(num_nodes, num_edges, num_ntypes, num_etypes, node_attributes, edge_attributes):
    """``gb_test_utils.random_hetero_graph`` (node type ``n0`` takes the remainder; edge
    types ``n0:e0:n0``, ``n0:e1:n1``, ...; ``num_edges // num_etypes`` random edges each)
    with GraphBolt's ``node_attributes`` (by global id) and ``edge_attributes`` (by CSC position)."""
    ntypes = {f"n{i}": num_nodes // num_ntypes for i in range(num_ntypes)}
    ntypes["n0"] += num_nodes % num_ntypes
    names = [f"n{i}" for i in range(num_ntypes)]
    etypes = [(s, d) for s in names for d in names][:num_etypes]
    edges = {}
    for step, (s, d) in enumerate(etypes):
        num_e = num_edges // num_etypes + (0 if step != 0 else num_edges % num_etypes)
        edges[f"{s}:e{step}:{d}"] = (torch.randint(0, ntypes[s], (num_e,)), torch.randint(0, ntypes[d], (num_e,)))
    graph = gb.CSCGraph.from_hetero_edges(edges, ntypes)
    return dataclasses.replace(graph, node_attributes=node_attributes, edge_attributes=edge_attributes)


def get_hetero_graph():
    # COO graph:
    # [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    # [2, 4, 2, 3, 0, 1, 1, 0, 0, 1]
    # [1, 1, 1, 1, 0, 0, 0, 0, 0] - > edge type.
    # num_nodes = 5, num_n1 = 2, num_n2 = 3
    return gb.CSCGraph(
        torch.LongTensor([0, 2, 4, 6, 8, 10]),
        torch.LongTensor([2, 4, 2, 3, 0, 1, 1, 0, 0, 1]),
        node_type_offset=torch.LongTensor([0, 2, 5]),
        type_per_edge=torch.LongTensor([1, 1, 1, 1, 0, 0, 0, 0, 0, 0]),
        node_type_to_id={"n1": 0, "n2": 1},
        edge_type_to_id={"n1:e1:n2": 0, "n2:e2:n1": 1},
    )


def dedup_test_graph():
    """``gb.from_dglgraph(dgl.graph(([5, 0, 1, 5, 6, 7, 2, 2, 4], [0, 1, 2, 2, 2, 2, 3, 4, 4])), True)``."""
    return gb.CSCGraph.from_coo(torch.tensor([5, 0, 1, 5, 6, 7, 2, 2, 4]), torch.tensor([0, 1, 2, 2, 2, 2, 3, 4, 4]), num_nodes=8)


def graph_sampler(graph, labor):
    """GraphBolt's ``graph.temporal_sample_neighbors`` (``labor=False``) or
    ``graph.temporal_sample_layer_neighbors``: the latter as one layer of
    ``TemporalLayerNeighborSampler`` (seeded from torch's generator, as the graph method)
    on a batch of ``seeds`` and ``seeds_timestamp``, its sources mapped back to (type-local)
    graph ids so the subgraph reads as GraphBolt's uncompacted one."""
    if not labor:
        return graph.temporal_sample_neighbors

    def sample(seeds, seeds_timestamp, fanouts, replace=False, seeds_pre_time_window=None, probs_name=None,
               node_timestamp_attr_name=None, edge_timestamp_attr_name=None):  # fmt: skip
        sampler = gb.TemporalLayerNeighborSampler(
            None, graph, [fanouts], replace=replace, prob_name=probs_name,
            node_timestamp_attr_name=node_timestamp_attr_name, edge_timestamp_attr_name=edge_timestamp_attr_name,
            time_window=seeds_pre_time_window, seed=int(torch.randint(0, 2**62, ())),
        )  # fmt: skip
        subgraph = sampler.sample_subgraphs(gb.MiniBatch(seeds=seeds, timestamp=seeds_timestamp)).sampled_subgraphs[0]
        if not graph.is_heterogeneous:
            csc = gb.CSCFormat(subgraph.sampled_csc.indptr, subgraph.original_row_node_ids[subgraph.sampled_csc.indices])
        else:
            csc = {
                etype: gb.CSCFormat(c.indptr, subgraph.original_row_node_ids[gb.etype_str_to_tuple(etype)[0]][c.indices])
                for etype, c in subgraph.sampled_csc.items()
            }
        return gb.SampledSubgraph(csc, None, None, subgraph.original_edge_ids)

    return sample


def refused(sampler, seeds, seeds_timestamp, fanouts, replace, labor, names):
    """Where graphpipe refuses what GraphBolt samples, assert the error and return True:
    temporal sampling with no timestamp named (GraphBolt then samples every neighbour; in
    graphpipe that is ``sample_neighbors``, and a temporal call without times is taken for
    a mistake) and LABOR with ``replace=True`` (graphpipe's LABOR draws without replacement,
    as its non-temporal ``LayerNeighborSampler``; GraphBolt's draws ``fanout`` with)."""
    if not any(names.values()):
        with pytest.raises(ValueError, match=r"name the timestamps: node_timestamp_attr_name and/or edge_timestamp_attr_name"):
            sampler(seeds, seeds_timestamp, fanouts, replace=replace, **names)
        return True
    if labor and replace:
        with pytest.raises(ValueError, match=r"LABOR samples without replacement; pass replace=False"):
            sampler(seeds, seeds_timestamp, fanouts, replace=replace, **names)
        return True
    return False


# ---------------------------------------------------------------- test_fused_csc_sampling_graph.py

# GraphBolt runs every (indptr, indices) dtype pair; int32 offsets with int64 node ids
# never come out of smallest_index_dtype and compile their own kernels, so that pair is
# left out (as in test_graphbolt_hetero_sampling.py).
DTYPES = [(torch.int32, torch.int32), (torch.int64, torch.int32), (torch.int64, torch.int64)]
# GraphBolt's (use_node_timestamp, use_edge_timestamp) cases; ``sort`` (not upstream) runs
# those with a timestamp again on ``graph.sort_by_time(...)``, graphpipe's time-sorted
# neighbourhoods (a binary search per destination instead of a scan).
TIMESTAMP_CASES = [(node, edge, sort) for node in (False, True) for edge in (False, True) for sort in (False, True) if node or edge or not sort]


@pytest.mark.parametrize("indptr_dtype, indices_dtype", DTYPES)
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("labor", [False, True])
@pytest.mark.parametrize("use_node_timestamp, use_edge_timestamp, sort", TIMESTAMP_CASES)
def test_temporal_sample_neighbors_homo(indptr_dtype, indices_dtype, replace, labor, use_node_timestamp, use_edge_timestamp, sort):
    """Original graph in COO:
    1   0   1   0   1
    1   0   1   1   0
    0   1   0   1   0
    0   1   0   0   1
    1   0   0   0   1
    """
    torch.manual_seed(0)
    # Initialize data.
    total_num_nodes = 5
    total_num_edges = 12
    indptr = torch.tensor([0, 3, 5, 7, 9, 12], dtype=indptr_dtype)
    indices = torch.tensor([0, 1, 4, 2, 3, 0, 1, 1, 2, 0, 3, 4], dtype=indices_dtype)
    assert indptr[-1] == total_num_edges
    assert indptr[-1] == len(indices)
    assert len(indptr) == total_num_nodes + 1

    # Construct the graph.
    graph = gb.CSCGraph(indptr, indices)

    # Generate subgraph via sample neighbors.
    fanouts = torch.LongTensor([2])
    seed_list = [1, 3, 4]
    seed_timestamp = torch.randint(0, 100, (len(seed_list),), dtype=torch.int64)
    if use_node_timestamp:
        node_timestamp = torch.randint(0, 100, (total_num_nodes,), dtype=torch.int64)
        graph = with_timestamps(graph, node_timestamp=node_timestamp)
    if use_edge_timestamp:
        edge_timestamp = torch.randint(0, 100, (total_num_edges,), dtype=torch.int64)
        graph = with_timestamps(graph, edge_timestamp=edge_timestamp)
    names = timestamp_names(use_node_timestamp, use_edge_timestamp)
    if sort:
        graph = graph.sort_by_time(**names)
    sampler = graph_sampler(graph, labor)
    if refused(sampler, torch.tensor(seed_list), seed_timestamp, fanouts, replace, labor, names):
        return

    # GraphBolt raises an AssertionError for nodes of another dtype than the graph's
    # indices; graphpipe takes any integer dtype, so the same draw must come out.
    other = torch.tensor(seed_list, dtype=(torch.int64 if indices_dtype == torch.int32 else torch.int32))
    nodes = torch.tensor(seed_list, dtype=indices_dtype)
    torch.manual_seed(1)
    expected = sampler(nodes, seed_timestamp, fanouts, replace=replace, **names)
    torch.manual_seed(1)
    subgraph = sampler(other, seed_timestamp, fanouts, replace=replace, **names)
    assert torch.equal(subgraph.sampled_csc.indptr, expected.sampled_csc.indptr)
    assert torch.equal(subgraph.original_edge_ids, expected.original_edge_ids)

    def _get_available_neighbors():
        available_neighbors = []
        for i, seed in enumerate(seed_list):
            neighbors = []
            start = indptr[seed].item()
            end = indptr[seed + 1].item()
            for j in range(start, end):
                neighbor = indices[j].item()
                if use_node_timestamp and (node_timestamp[neighbor] >= seed_timestamp[i]).item():
                    continue
                if use_edge_timestamp and (edge_timestamp[j] >= seed_timestamp[i]).item():
                    continue
                neighbors.append(neighbor)
            available_neighbors.append(neighbors)
        return available_neighbors

    subgraph = sampler(nodes, seed_timestamp, fanouts, replace=replace, **names)
    sampled_count = torch.diff(subgraph.sampled_csc.indptr).tolist()
    available_neighbors = _get_available_neighbors()
    assert len(available_neighbors) == len(sampled_count)
    for i, count in enumerate(sampled_count):
        if not replace:
            expect_count = min(fanouts[0], len(available_neighbors[i]))
        else:
            expect_count = fanouts[0] if len(available_neighbors[i]) > 0 else 0
        assert count == expect_count
    sampled_neighbors = torch.split(subgraph.sampled_csc.indices, sampled_count)
    for i, neighbors in enumerate(sampled_neighbors):
        assert set(neighbors.tolist()).issubset(set(available_neighbors[i]))


@pytest.mark.parametrize("indptr_dtype, indices_dtype", DTYPES)
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("labor", [False, True])
@pytest.mark.parametrize("use_node_timestamp, use_edge_timestamp, sort", TIMESTAMP_CASES)
def test_temporal_sample_neighbors_hetero(indptr_dtype, indices_dtype, replace, labor, use_node_timestamp, use_edge_timestamp, sort):
    """Original graph in COO:
    "n1:e1:n2":[0, 0, 1, 1, 1], [0, 2, 0, 1, 2]
    "n2:e2:n1":[0, 0, 1, 2], [0, 1, 1 ,0]
    0   0   1   0   1
    0   0   1   1   1
    1   1   0   0   0
    0   1   0   0   0
    1   0   0   0   0
    """
    torch.manual_seed(0)
    # Initialize data.
    ntypes = {"n1": 0, "n2": 1}
    etypes = {"n1:e1:n2": 0, "n2:e2:n1": 1}
    ntypes_to_offset = {"n1": 0, "n2": 2}
    total_num_nodes = 5
    total_num_edges = 9
    indptr = torch.tensor([0, 2, 4, 6, 7, 9], dtype=indptr_dtype)
    indices = torch.tensor([2, 4, 2, 3, 0, 1, 1, 0, 1], dtype=indices_dtype)
    type_per_edge = torch.LongTensor([1, 1, 1, 1, 0, 0, 0, 0, 0])
    node_type_offset = torch.LongTensor([0, 2, 5])
    assert indptr[-1] == total_num_edges
    assert indptr[-1] == len(indices)

    # Construct the graph.
    graph = gb.CSCGraph(
        indptr,
        indices,
        node_type_offset=node_type_offset,
        type_per_edge=type_per_edge,
        node_type_to_id=ntypes,
        edge_type_to_id=etypes,
    )

    # Generate subgraph via sample neighbors.
    fanouts = torch.LongTensor([-1, -1])
    seeds = {
        "n1": torch.tensor([0], dtype=indices_dtype),
        "n2": torch.tensor([0], dtype=indices_dtype),
    }
    per_etype_destination_nodes = {
        "n1:e1:n2": torch.tensor([1], dtype=indices_dtype),
        "n2:e2:n1": torch.tensor([0], dtype=indices_dtype),
    }

    seed_timestamp = {
        "n1": torch.randint(0, 100, (1,), dtype=torch.int64),
        "n2": torch.randint(0, 100, (1,), dtype=torch.int64),
    }
    if use_node_timestamp:
        node_timestamp = torch.randint(0, 100, (total_num_nodes,), dtype=torch.int64)
        graph = with_timestamps(graph, node_timestamp=node_timestamp)
    if use_edge_timestamp:
        edge_timestamp = torch.randint(0, 100, (total_num_edges,), dtype=torch.int64)
        graph = with_timestamps(graph, edge_timestamp=edge_timestamp)
    names = timestamp_names(use_node_timestamp, use_edge_timestamp)
    if sort:
        graph = graph.sort_by_time(**names)
    sampler = graph_sampler(graph, labor)
    if refused(sampler, seeds, seed_timestamp, fanouts, replace, labor, names):
        return

    subgraph = sampler(seeds, seed_timestamp, fanouts, replace=replace, **names)

    def _to_homo():
        ret_seeds, ret_timestamps = [], []
        for ntype, nodes in seeds.items():
            ntype_id = ntypes[ntype]
            offset = node_type_offset[ntype_id]
            ret_seeds.append(nodes + offset)
            ret_timestamps.append(seed_timestamp[ntype])
        return torch.cat(ret_seeds), torch.cat(ret_timestamps)

    homo_seeds, homo_seed_timestamp = _to_homo()

    def _get_available_neighbors():
        available_neighbors = []
        for i, seed in enumerate(homo_seeds):
            neighbors = []
            start = indptr[seed].item()
            end = indptr[seed + 1].item()
            for j in range(start, end):
                neighbor = indices[j].item()
                if use_node_timestamp and (node_timestamp[neighbor] >= homo_seed_timestamp[i]).item():
                    continue
                if use_edge_timestamp and (edge_timestamp[j] >= homo_seed_timestamp[i]).item():
                    continue
                neighbors.append(neighbor)
            available_neighbors.append(neighbors)
        return available_neighbors

    available_neighbors = _get_available_neighbors()
    sampled_count = [0] * homo_seeds.numel()
    sampled_neighbors = [[] for _ in range(homo_seeds.numel())]
    for etype, csc in subgraph.sampled_csc.items():
        stype, _, _ = gb.etype_str_to_tuple(etype)
        ntype_offset = ntypes_to_offset[stype]
        dest_nodes = per_etype_destination_nodes[etype]
        for i in range(dest_nodes.numel()):
            l = csc.indptr[i]
            r = csc.indptr[i + 1]
            seed_offset = dest_nodes[i].item()
            sampled_neighbors[seed_offset].extend((csc.indices[l:r] + ntype_offset).tolist())
            sampled_count[seed_offset] += r - l

    for i, count in enumerate(sampled_count):
        assert count == len(available_neighbors[i])
        assert set(sampled_neighbors[i]).issubset(set(available_neighbors[i]))


# ---------------------------------------------------------------- test_subgraph_sampler.py


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Node(sampler_type):
    graph = with_arange_timestamps(rand_csc_graph(20, 0.15, bidirection_edge=True))
    items = (torch.arange(10), torch.arange(10))
    names = ("seeds", "timestamp")
    itemset = gb.ItemSet(items, names=names)
    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    sampler_dp = sampler(item_sampler, graph, fanouts)
    assert len(list(sampler_dp)) == 5


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Link(sampler_type):
    graph = with_arange_timestamps(rand_csc_graph(20, 0.15, bidirection_edge=True))
    items = (torch.arange(20).reshape(-1, 2), torch.arange(10))
    names = ("seeds", "timestamp")
    itemset = gb.ItemSet(items, names=names)
    datapipe = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(datapipe, graph, fanouts)
    datapipe = datapipe.exclude_seed_edges()
    assert len(list(datapipe)) == 5
    for data in datapipe:
        assert torch.equal(data.compacted_seeds, torch.tensor([[0, 1], [2, 3]]))


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Link_With_Negative(sampler_type):
    graph = with_arange_timestamps(rand_csc_graph(20, 0.15, bidirection_edge=True))
    items = (torch.arange(20).reshape(-1, 2), torch.arange(10))
    names = ("seeds", "timestamp")
    itemset = gb.ItemSet(items, names=names)
    datapipe = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    datapipe = gb.UniformNegativeSampler(datapipe, graph, 1)
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(datapipe, graph, fanouts)
    datapipe = datapipe.exclude_seed_edges()
    assert len(list(datapipe)) == 5


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_HyperLink(sampler_type):
    graph = with_arange_timestamps(rand_csc_graph(20, 0.15, bidirection_edge=True))
    items = (torch.arange(20).reshape(-1, 5), torch.arange(4))
    names = ("seeds", "timestamp")
    itemset = gb.ItemSet(items, names=names)
    datapipe = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(datapipe, graph, fanouts)
    assert len(list(datapipe)) == 2
    for data in datapipe:
        assert torch.equal(data.compacted_seeds, torch.tensor([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]))


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Node_Hetero(sampler_type):
    graph = with_arange_timestamps(get_hetero_graph())
    items = (torch.arange(3), torch.randint(0, 10, (3,)))
    names = ("seeds", "timestamp")
    itemset = gb.HeteroItemSet({"n2": gb.ItemSet(items, names=names)})
    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    sampler_dp = sampler(item_sampler, graph, fanouts)
    assert len(list(sampler_dp)) == 2
    for minibatch in sampler_dp:
        assert len(minibatch.sampled_subgraphs) == num_layer


def hetero_link_itemset(first_etype="n1:e1:n2", second_etype="n2:e2:n1"):
    """The items of GraphBolt's ``test_SubgraphSampler_Link_Hetero*`` tests, with times."""
    first_items = torch.LongTensor([[0, 0, 1, 1], [0, 2, 0, 1]]).T
    second_items = torch.LongTensor([[0, 0, 1, 1, 2, 2], [0, 1, 1, 0, 0, 1]]).T
    names = ("seeds", "timestamp")
    return gb.HeteroItemSet({
        first_etype: gb.ItemSet((first_items, torch.randint(0, 10, (4,))), names=names),
        second_etype: gb.ItemSet((second_items, torch.randint(0, 10, (6,))), names=names),
    })  # fmt: skip


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Link_Hetero(sampler_type):
    graph = with_arange_timestamps(get_hetero_graph())
    datapipe = gb.ItemSampler(hetero_link_itemset(), batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(datapipe, graph, fanouts)
    datapipe = datapipe.exclude_seed_edges()
    assert len(list(datapipe)) == 5
    for data in datapipe:
        for compacted_seeds in data.compacted_seeds.values():
            assert torch.equal(compacted_seeds, torch.tensor([[0, 0], [1, 1]]))


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Link_Hetero_With_Negative(sampler_type):
    graph = with_arange_timestamps(get_hetero_graph())
    datapipe = gb.ItemSampler(hetero_link_itemset(), batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    datapipe = gb.UniformNegativeSampler(datapipe, graph, 1)
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(datapipe, graph, fanouts)
    datapipe = datapipe.exclude_seed_edges()
    assert len(list(datapipe)) == 5


# GraphBolt samples seed pairs keyed by edge types the graph lacks ("e11", "e22": only
# their node types are used) and checks that 5 batches come out; graphpipe refuses such
# keys with an error naming the key and the graph's edge types when the sampler is built,
# so these assert that.
@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Link_Hetero_Unknown_Etype(sampler_type):
    graph = with_arange_timestamps(get_hetero_graph())
    # "e11" and "e22" are not valid edge types.
    datapipe = gb.ItemSampler(hetero_link_itemset("n1:e11:n2", "n2:e22:n1"), batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    with pytest.raises(ValueError, match=r"every key one of the graph's edge types .*got key 'n1:e11:n2'"):
        sampler(datapipe, graph, fanouts)  # when the sampler is built


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Link_Hetero_With_Negative_Unknown_Etype(sampler_type):
    graph = with_arange_timestamps(get_hetero_graph())
    # "e11" and "e22" are not valid edge types.
    datapipe = gb.ItemSampler(hetero_link_itemset("n1:e11:n2", "n2:e22:n1"), batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    datapipe = gb.UniformNegativeSampler(datapipe, graph, 1)
    sampler = _get_sampler(sampler_type)
    with pytest.raises(ValueError, match=r"every key one of the graph's edge types .*got key 'n1:e11:n2'"):
        sampler(datapipe, graph, fanouts)  # when the sampler is built


# GraphBolt samples hyperlinks on typed graphs (here "n2:n1:n2:n1:n2", expecting
# compacted_seeds [[0, 0, 2, 2, 4], [1, 1, 3, 3, 5]]: per node type, column after column);
# graphpipe samples hyperlinks on untyped graphs only (its capability table), so the
# typed hyperlink tests assert the refusal: of a key that is no edge type when the item set
# is built (before any sampler, so one case for both), of "n2:n1:n2" hyperlinks ([N, 3]
# seeds) by the item sampler.
def test_SubgraphSampler_HyperLink_Hetero():
    items = (torch.LongTensor([[2, 0, 1, 1, 2], [0, 1, 1, 0, 0]]), torch.randint(0, 10, (2,)))
    names = ("seeds", "timestamp")
    with pytest.raises(ValueError, match=r"an edge type must be 'src_type:relation:dst_type'.*got 'n2:n1:n2:n1:n2'"):
        gb.HeteroItemSet({"n2:n1:n2:n1:n2": gb.ItemSet(items, names=names)})


@pytest.mark.parametrize("sampler_type", TEMPORAL)
@pytest.mark.parametrize("replace", [False, True])
def test_SubgraphSampler_Random_Hetero_Graph(sampler_type, replace):
    num_nodes = 5
    num_edges = 9
    num_ntypes = 3
    num_etypes = 3
    node_attributes = {"timestamp": torch.randint(0, 10, (num_nodes,))}
    edge_attributes = {
        "A1": torch.randn(num_edges),
        "A2": torch.randn(num_edges),
        "timestamp": torch.randint(0, 10, (num_edges,)),
    }
    graph = random_hetero_graph(num_nodes, num_edges, num_ntypes, num_etypes, node_attributes, edge_attributes)
    names = ("seeds", "timestamp")
    itemset = gb.HeteroItemSet({
        "n2": gb.ItemSet((torch.tensor([0]), torch.randint(0, 10, (1,))), names=names),
        "n1": gb.ItemSet((torch.tensor([0]), torch.randint(0, 10, (1,))), names=names),
    })  # fmt: skip

    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    if sampler_type == "TemporalLayer" and replace:
        # graphpipe's LABOR draws without replacement (see refused()).
        with pytest.raises(ValueError, match=r"LABOR samples without replacement; pass replace=False"):
            sampler(item_sampler, graph, fanouts, replace=replace)
        return

    sampler_dp = sampler(item_sampler, graph, fanouts, replace=replace)

    (data,) = sampler_dp  # one batch
    for sampledsubgraph in data.sampled_subgraphs:
        for value in sampledsubgraph.sampled_csc.values():
            assert torch.equal(torch.ge(value.indices, torch.zeros(len(value.indices))), torch.ones(len(value.indices)))
            assert torch.equal(torch.ge(value.indptr, torch.zeros(len(value.indptr))), torch.ones(len(value.indptr)))
        for value in sampledsubgraph.original_column_node_ids.values():
            assert torch.equal(torch.ge(value, torch.zeros(len(value))), torch.ones(len(value)))
        for value in sampledsubgraph.original_row_node_ids.values():
            assert torch.equal(torch.ge(value, torch.zeros(len(value))), torch.ones(len(value)))


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_without_deduplication_Homo_Node(sampler_type):
    graph = with_zero_timestamps(dedup_test_graph())
    seed_nodes = torch.LongTensor([0, 3, 4])
    items = (seed_nodes, torch.randint(1, 10, (3,)))
    names = ("seeds", "timestamp")

    itemset = gb.ItemSet(items, names=names)
    item_sampler = gb.ItemSampler(itemset, batch_size=len(seed_nodes))
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]

    sampler = _get_sampler(sampler_type)
    datapipe = sampler(item_sampler, graph, fanouts)

    length = [17, 7]
    compacted_indices = [(torch.arange(0, 10) + 7), (torch.arange(0, 4) + 3)]
    indptr = [torch.tensor([0, 1, 2, 4, 4, 6, 8, 10]), torch.tensor([0, 1, 2, 4])]
    seeds = [torch.tensor([0, 2, 2, 3, 4, 4, 5]), torch.tensor([0, 3, 4])]
    _assert_homo_values(datapipe, length, compacted_indices, indptr, seeds)


def _assert_homo_values(datapipe, length, compacted_indices, indptr, seeds):
    (data,) = datapipe  # one batch
    for step, sampled_subgraph in enumerate(data.sampled_subgraphs):
        assert len(sampled_subgraph.original_row_node_ids) == length[step]
        assert torch.equal(sampled_subgraph.sampled_csc.indices, compacted_indices[step])
        assert torch.equal(sampled_subgraph.sampled_csc.indptr, indptr[step])
        assert torch.equal(torch.sort(sampled_subgraph.original_column_node_ids)[0], seeds[step])


def _assert_hetero_values(datapipe, original_row_node_ids, original_column_node_ids, csc_formats):
    (data,) = datapipe  # one batch
    for step, sampled_subgraph in enumerate(data.sampled_subgraphs):
        for ntype in ["n1", "n2"]:
            assert torch.equal(sampled_subgraph.original_row_node_ids[ntype], original_row_node_ids[step][ntype])
            assert torch.equal(sampled_subgraph.original_column_node_ids[ntype], original_column_node_ids[step][ntype])
        for etype in ["n1:e1:n2", "n2:e2:n1"]:
            assert torch.equal(sampled_subgraph.sampled_csc[etype].indices, csc_formats[step][etype].indices)
            assert torch.equal(sampled_subgraph.sampled_csc[etype].indptr, csc_formats[step][etype].indptr)


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_without_deduplication_Hetero_Node(sampler_type):
    graph = with_zero_timestamps(get_hetero_graph())
    items = (torch.arange(2), torch.randint(1, 10, (2,)))
    names = ("seeds", "timestamp")
    itemset = gb.HeteroItemSet({"n2": gb.ItemSet(items, names=names)})
    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(item_sampler, graph, fanouts)
    csc_formats = [
        {
            "n1:e1:n2": gb.CSCFormat(indptr=torch.tensor([0, 2, 4]), indices=torch.tensor([4, 5, 6, 7])),
            "n2:e2:n1": gb.CSCFormat(indptr=torch.tensor([0, 2, 4, 6, 8]), indices=torch.tensor([2, 3, 4, 5, 6, 7, 8, 9])),
        },
        {
            "n1:e1:n2": gb.CSCFormat(indptr=torch.tensor([0, 2, 4]), indices=torch.tensor([0, 1, 2, 3])),
            "n2:e2:n1": gb.CSCFormat(indptr=torch.tensor([0]), indices=torch.tensor([], dtype=torch.int64)),
        },
    ]
    original_column_node_ids = [
        {"n1": torch.tensor([0, 1, 1, 0]), "n2": torch.tensor([0, 1])},
        {"n1": torch.tensor([], dtype=torch.int64), "n2": torch.tensor([0, 1])},
    ]
    original_row_node_ids = [
        {"n1": torch.tensor([0, 1, 1, 0, 0, 1, 1, 0]), "n2": torch.tensor([0, 1, 0, 2, 0, 1, 0, 1, 0, 2])},
        {"n1": torch.tensor([0, 1, 1, 0]), "n2": torch.tensor([0, 1])},
    ]
    _assert_hetero_values(datapipe, original_row_node_ids, original_column_node_ids, csc_formats)


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_Hetero_multifanout_per_layer(sampler_type):
    graph = with_arange_timestamps(get_hetero_graph())
    names = ("seeds", "timestamp")
    # All edges can be sampled.
    items_n1 = (torch.tensor([0]), torch.tensor([10]))
    items_n2 = (torch.tensor([1]), torch.tensor([10]))
    itemset = gb.HeteroItemSet({"n1": gb.ItemSet(items=items_n1, names=names), "n2": gb.ItemSet(items=items_n2, names=names)})
    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    # The number of edges to be sampled for each edge types of each node.
    fanouts = [torch.LongTensor([2, 1]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    sampler_dp = sampler(item_sampler, graph, fanouts)
    indices_len = [{"n1:e1:n2": 4, "n2:e2:n1": 3}, {"n1:e1:n2": 2, "n2:e2:n1": 1}]
    (minibatch,) = sampler_dp  # one batch
    for step, sampled_subgraph in enumerate(minibatch.sampled_subgraphs):
        assert len(sampled_subgraph.sampled_csc["n1:e1:n2"].indices) == indices_len[step]["n1:e1:n2"]
        assert len(sampled_subgraph.sampled_csc["n2:e2:n1"].indices) == indices_len[step]["n2:e2:n1"]


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_without_deduplication_Homo_Link(sampler_type):
    graph = with_zero_timestamps(dedup_test_graph())
    seed_nodes = torch.LongTensor([[0, 1], [3, 5]])
    items = (seed_nodes, torch.randint(1, 10, (2,)))
    names = ("seeds", "timestamp")

    itemset = gb.ItemSet(items, names=names)
    item_sampler = gb.ItemSampler(itemset, batch_size=4)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]

    sampler = _get_sampler(sampler_type)
    datapipe = sampler(item_sampler, graph, fanouts)

    length = [13, 7]
    compacted_indices = [(torch.arange(0, 6) + 7), (torch.arange(0, 3) + 4)]
    indptr = [torch.tensor([0, 1, 2, 3, 3, 3, 4, 6]), torch.tensor([0, 1, 2, 3, 3])]
    seeds = [torch.tensor([0, 0, 1, 2, 3, 5, 5]), torch.tensor([0, 1, 3, 5])]
    _assert_homo_values(datapipe, length, compacted_indices, indptr, seeds)


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_without_deduplication_Hetero_Link(sampler_type):
    graph = with_zero_timestamps(get_hetero_graph())
    items = (torch.arange(2).view(1, 2), torch.randint(1, 10, (1,)))
    names = ("seeds", "timestamp")
    itemset = gb.HeteroItemSet({"n1:e1:n2": gb.ItemSet(items, names=names)})
    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler = _get_sampler(sampler_type)
    datapipe = sampler(item_sampler, graph, fanouts)
    csc_formats = [
        {
            "n1:e1:n2": gb.CSCFormat(indptr=torch.tensor([0, 2, 4, 6]), indices=torch.tensor([3, 4, 5, 6, 7, 8])),
            "n2:e2:n1": gb.CSCFormat(indptr=torch.tensor([0, 2, 4, 6]), indices=torch.tensor([3, 4, 5, 6, 7, 8])),
        },
        {
            "n1:e1:n2": gb.CSCFormat(indptr=torch.tensor([0, 2]), indices=torch.tensor([1, 2])),
            "n2:e2:n1": gb.CSCFormat(indptr=torch.tensor([0, 2]), indices=torch.tensor([1, 2], dtype=torch.int64)),
        },
    ]
    original_column_node_ids = [
        {"n1": torch.tensor([0, 1, 0]), "n2": torch.tensor([1, 0, 2])},
        {"n1": torch.tensor([0]), "n2": torch.tensor([1])},
    ]
    original_row_node_ids = [
        {"n1": torch.tensor([0, 1, 0, 1, 0, 0, 1, 0, 1]), "n2": torch.tensor([1, 0, 2, 0, 2, 0, 1, 0, 2])},
        {"n1": torch.tensor([0, 1, 0]), "n2": torch.tensor([1, 0, 2])},
    ]
    _assert_hetero_values(datapipe, original_row_node_ids, original_column_node_ids, csc_formats)


@pytest.mark.parametrize("sampler_type", TEMPORAL)
def test_SubgraphSampler_without_deduplication_Homo_HyperLink(sampler_type):
    graph = with_zero_timestamps(dedup_test_graph())
    items = (torch.LongTensor([[0, 1, 4], [3, 5, 6]]), torch.randint(1, 10, (2,)))
    names = ("seeds", "timestamp")

    itemset = gb.ItemSet(items, names=names)
    item_sampler = gb.ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]

    sampler = _get_sampler(sampler_type)
    datapipe = sampler(item_sampler, graph, fanouts)

    length = [23, 11]
    compacted_indices = [(torch.arange(0, 12) + 11), (torch.arange(0, 5) + 6)]
    indptr = [torch.tensor([0, 1, 2, 4, 5, 5, 5, 5, 6, 8, 10, 12]), torch.tensor([0, 1, 2, 4, 5, 5, 5])]
    seeds = [torch.tensor([0, 0, 1, 2, 2, 3, 4, 4, 5, 5, 6]), torch.tensor([0, 1, 3, 4, 5, 6])]
    _assert_homo_values(datapipe, length, compacted_indices, indptr, seeds)


# Typed hyperlinks: refused by graphpipe (see test_SubgraphSampler_HyperLink_Hetero), here by
# the item sampler, before any sampler (so one case for both).
def test_SubgraphSampler_without_deduplication_Hetero_HyperLink():
    items = (torch.arange(3).view(1, 3), torch.randint(1, 10, (1,)))
    names = ("seeds", "timestamp")
    itemset = gb.HeteroItemSet({"n2:n1:n2": gb.ItemSet(items, names=names)})
    with pytest.raises(gb.UnsupportedCombination, match=r"hyperlinks .* are sampled on untyped graphs only"):
        gb.ItemSampler(itemset, batch_size=2)


# ---------------------------------------------------------------- beyond upstream


def valid_positions(graph, destination, edge_type, t, names, window=None):
    """Brute force, GraphBolt's rule (``TemporalMask``): the CSC positions of the in-edges
    of global node ``destination`` (of edge type id ``edge_type`` on a typed graph) whose
    source's node time and edge time (those ``names`` names) are ``< t``, and ``> t - window``
    when a window is given (GraphBolt's code: an open window, its docs say ``[t - w, t]``)."""
    positions = torch.arange(int(graph.indptr[destination]), int(graph.indptr[destination + 1]))
    if graph.is_heterogeneous:
        positions = positions[graph.type_per_edge[positions].long() == edge_type]
    ok = torch.ones(positions.numel(), dtype=torch.bool)
    node_name, edge_name = names["node_timestamp_attr_name"], names["edge_timestamp_attr_name"]
    for ts in (
        None if node_name is None else graph.node_attributes[node_name][graph.indices[positions].long()],
        None if edge_name is None else graph.edge_attributes[edge_name][positions],
    ):  # fmt: skip
        if ts is not None:
            ok &= ts < t
            if window is not None:
                ok &= ts > t - window
    return positions[ok]


def assert_block_batch_is_temporal(graph, mb, root_times, fanout, names, window=None):
    """Every layer of a block-layout batch (GraphBolt's temporal layout: no deduplication)
    against brute force, typed or not. ``root_times``: the time of the root seed of each
    destination of the last layer (typed: per node type). Destination ``j`` with root time
    ``t`` gets ``min(fanout, |valid at t|)`` distinct valid in-edges (per edge type); they
    make new rows (typed: per source type, after its destinations, edge type by edge type),
    and the destinations of the layer below are these rows, each with its root's time."""
    typed = graph.is_heterogeneous
    etypes = graph.edge_types if typed else [None]
    offsets = graph.node_type_offset.tolist() if typed else [0]
    ends = graph.schema.edge_type_ends if typed else [(0, 0)]
    ntypes = graph.node_types if typed else [None]
    edge_ids = graph.map_edge_ids(torch.arange(graph.total_num_edges)).tolist()
    per_type = graph.type_per_edge.tolist() if typed else [0] * graph.total_num_edges
    position = {(t, i): p for p, (t, i) in enumerate(zip(per_type, edge_ids))}  # (edge type id, edge id) -> CSC position
    pick = (lambda d, key: d[key]) if typed else (lambda d, key: d)
    times = root_times if typed else {None: root_times}
    for subgraph in reversed(mb.sampled_subgraphs):
        rows = {t: [times[t]] for t in ntypes}
        next_row = {t: pick(subgraph.original_column_node_ids, t).numel() for t in ntypes}
        for e, etype in enumerate(etypes):
            csc, eids = pick(subgraph.sampled_csc, etype), pick(subgraph.original_edge_ids, etype)
            src, dst = (ntypes[ends[e][0]], ntypes[ends[e][1]])
            columns, sources = pick(subgraph.original_column_node_ids, dst), pick(subgraph.original_row_node_ids, src)
            assert torch.equal(csc.indices, torch.arange(next_row[src], next_row[src] + csc.indices.numel()))
            next_row[src] += csc.indices.numel()
            for j in range(columns.numel()):
                valid = valid_positions(graph, int(columns[j]) + offsets[ends[e][1]], e, int(times[dst][j]), names, window)
                a, b = int(csc.indptr[j]), int(csc.indptr[j + 1])
                sampled = [position[(e, i)] for i in eids[a:b].tolist()]
                assert len(sampled) == (valid.numel() if fanout == -1 else min(fanout, valid.numel()))
                assert len(set(sampled)) == len(sampled) and set(sampled) <= set(valid.tolist())
                assert (graph.indices[sampled].long() - offsets[ends[e][0]]).tolist() == sources[csc.indices[a:b]].tolist()
            rows[src].append(times[dst].repeat_interleave(csc.indptr.diff()))
        times = {t: torch.cat(rows[t]) for t in ntypes}


def random_temporal_coo(num_nodes, num_edges, max_time, seed):
    """A random graph with node and edge times in ``[0, max_time)``: ``(src, dst, node_ts, edge_ts)``."""
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(num_nodes, (2, num_edges), generator=g)
    node_ts = torch.randint(max_time, (num_nodes,), generator=g)
    edge_ts = torch.randint(max_time, (num_edges,), generator=g)
    return src, dst, node_ts, edge_ts


TIMESTAMPS = {"node": (True, False), "edge": (False, True), "both": (True, True)}


@pytest.mark.parametrize("sampler_type", TEMPORAL)
@pytest.mark.parametrize("timestamps", list(TIMESTAMPS))
@pytest.mark.parametrize("sort", [False, True])
def test_temporal_link_seeds_use_their_own_pairs_time(sampler_type, timestamps, sort):
    """GraphBolt's homogeneous link seeds pair the endpoints row-major
    (``seeds.view(-1)``: s0, d0, s1, d1, ...) with times column-major (t0..tN-1 twice), so
    most endpoints are filtered against another pair's time. Here pair ``i`` is at time
    ``10 * i`` and every edge of both its endpoints' subtrees, over two layers, is checked
    against ``10 * i``: counts ``min(k, valid)``, every edge valid."""
    num_nodes, num_pairs, k = 40, 12, 3
    src, dst, node_ts, edge_ts = random_temporal_coo(num_nodes, 600, 10 * num_pairs, seed=7)
    use_node, use_edge = TIMESTAMPS[timestamps]
    names = timestamp_names(use_node, use_edge)
    graph = gb.CSCGraph.from_coo(src, dst, num_nodes, edge_attributes={"timestamp": edge_ts}, node_attributes={"timestamp": node_ts})
    if sort:
        graph = graph.sort_by_time(**names)
    pairs = torch.randint(num_nodes, (num_pairs, 2), generator=torch.Generator().manual_seed(8))
    times = 10 * torch.arange(num_pairs)
    items = gb.ItemSet((pairs, times), names=("seeds", "timestamp"))
    pipe = _get_sampler(sampler_type, **names)(gb.ItemSampler(items, batch_size=num_pairs), graph, [k, k], seed=0)
    mb = next(iter(pipe))
    assert torch.equal(mb.compacted_seeds, torch.arange(2 * num_pairs).view(num_pairs, 2))
    assert torch.equal(mb.sampled_subgraphs[-1].original_column_node_ids, pairs.view(-1))
    assert_block_batch_is_temporal(graph, mb, times.repeat_interleave(2), k, names)


def window_graph(typed):
    """A random graph for the window test (times in ``[0, 20)``, node times by global id,
    edge times by CSC position), typed (``a``, ``b``; three edge types) or not."""
    g = torch.Generator().manual_seed(5)
    if typed:
        edges = {
            "a:x:b": torch.stack([torch.randint(8, (60,), generator=g), torch.randint(6, (60,), generator=g)]),
            "b:y:a": torch.stack([torch.randint(6, (60,), generator=g), torch.randint(8, (60,), generator=g)]),
            "a:z:a": torch.randint(8, (2, 60), generator=g),
        }
        graph = gb.CSCGraph.from_hetero_edges(edges, {"a": 8, "b": 6})
    else:
        graph = gb.CSCGraph.from_coo(*torch.randint(14, (2, 180), generator=g), num_nodes=14)
    node_ts = torch.randint(20, (graph.total_num_nodes,), generator=g)
    edge_ts = torch.randint(20, (graph.total_num_edges,), generator=g)
    return with_timestamps(graph, node_ts, edge_ts)


@pytest.mark.parametrize("sampler_type", TEMPORAL)
@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("timestamps", list(TIMESTAMPS))
@pytest.mark.parametrize("fanout", [-1, 2])
@pytest.mark.parametrize("window", [None, 4])
def test_temporal_sampler_every_hop_against_the_root(sampler_type, typed, timestamps, fanout, window):
    """The datapipes, typed and untyped, over two layers: every hop's edges are valid for
    the ROOT seed's time, also with ``time_window=w`` (the open window ``(t - w, t)``; GraphBolt
    has a window on its graph method only), and the counts are GraphBolt's."""
    graph = window_graph(typed)
    names = timestamp_names(*TIMESTAMPS[timestamps])
    g = torch.Generator().manual_seed(4)
    sets = {}
    for i, ntype in enumerate(graph.node_types if typed else [None]):
        n = graph.num_nodes_per_type[ntype] if typed else graph.total_num_nodes
        item_set = gb.ItemSet((torch.randint(n, (8,), generator=g), torch.randint(5, 22, (8,), generator=g)), names=("seeds", "timestamp"))
        sets[ntype] = item_set
    items = gb.HeteroItemSet(sets) if typed else sets[None]
    pipe = _get_sampler(sampler_type, **names)(gb.ItemSampler(items, batch_size=6), graph, [fanout, fanout], time_window=window)
    batches = list(pipe)
    assert len(batches) == (3 if typed else 2)
    for mb in batches:
        columns = mb.sampled_subgraphs[-1].original_column_node_ids
        if typed:
            assert all(torch.equal(columns[t], mb.seeds.get(t, columns[t][:0])) for t in graph.node_types)
            root_times = {t: mb.timestamp.get(t, torch.zeros(0, dtype=torch.int64)) for t in graph.node_types}
        else:
            assert torch.equal(columns, mb.seeds)
            root_times = mb.timestamp
        assert_block_batch_is_temporal(graph, mb, root_times, fanout, names, window)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("timestamps", list(TIMESTAMPS))
@pytest.mark.parametrize("fanout", [-1, 2])
@pytest.mark.parametrize("sort", [False, True])
def test_temporal_sample_neighbors_window(typed, timestamps, fanout, sort):
    """``graph.temporal_sample_neighbors(..., seeds_pre_time_window=w)`` (per seed, as
    GraphBolt's), which GraphBolt's tests never pass: valid iff every given timestamp is in
    the open window ``(t - w, t)`` (GraphBolt's code); ``w = 0`` leaves nothing. Checked in
    GraphBolt's style (counts and sampled neighbours per seed) against brute force."""
    graph = window_graph(typed)
    use_node, use_edge = TIMESTAMPS[timestamps]
    names = timestamp_names(use_node, use_edge)
    node_ts, edge_ts = graph.node_attributes["timestamp"], graph.edge_attributes["timestamp"]
    indptr, indices, type_per_edge = graph.indptr, graph.indices, graph.type_per_edge
    if sort:
        graph = graph.sort_by_time(**names)
    g = torch.Generator().manual_seed(6)
    offsets = graph.node_type_offset.tolist() if typed else [0, graph.total_num_nodes]
    ntypes = graph.node_types if typed else [None]
    seeds = {t: torch.randint(offsets[i + 1] - offsets[i], (6,), generator=g) for i, t in enumerate(ntypes)}
    seed_ts = {t: torch.randint(0, 22, (6,), generator=g) for t in ntypes}
    windows = {t: torch.tensor([0, 1, 3, 5, 8, 25]) for t in ntypes}
    fanouts = torch.LongTensor([fanout] * (len(graph.edge_types) if typed else 1))
    unwrap = (lambda d: d) if typed else (lambda d: d[None])
    torch.manual_seed(0)
    subgraph = graph.temporal_sample_neighbors(unwrap(seeds), unwrap(seed_ts), fanouts, seeds_pre_time_window=unwrap(windows), **names)
    # Brute force per seed (global ids), and what was sampled per seed (global ids).
    csc = subgraph.sampled_csc if typed else {None: subgraph.sampled_csc}
    for i, t in enumerate(ntypes):
        for n, (seed, ts, w) in enumerate(zip(seeds[t].tolist(), seed_ts[t].tolist(), windows[t].tolist())):
            v = offsets[i] + seed
            positions = torch.arange(int(indptr[v]), int(indptr[v + 1]))
            ok = torch.ones(positions.numel(), dtype=torch.bool)
            for times in (node_ts[indices[positions].long()] if use_node else None, edge_ts[positions] if use_edge else None):
                if times is not None:
                    ok &= (times < ts) & (times > ts - w)
            sampled = []
            for etype, c in csc.items():
                if etype is None or gb.etype_str_to_tuple(etype)[2] == t:
                    s = 0 if etype is None else graph.node_type_to_id[gb.etype_str_to_tuple(etype)[0]]
                    sampled += (c.indices[c.indptr[n] : c.indptr[n + 1]] + offsets[s]).tolist()
            valid = indices[positions[ok]].tolist()
            if fanout == -1:
                assert len(sampled) == len(valid)
            else:  # one fanout per edge type: at most 2 of each, all if fewer valid
                per_type = torch.bincount(type_per_edge[positions[ok]].long()) if typed else torch.tensor([len(valid)])
                assert len(sampled) == int(per_type.clamp(max=fanout).sum())
            assert set(sampled) <= set(valid)


def test_temporal_sample_neighbors_hetero_single_fanout():
    """GraphBolt's one fanout on a typed graph applies to a node's in-edges of all types
    together (``TemporalNumPick`` over the whole in-edge range, as ``sample_neighbors``;
    graphpipe's ``sample_neighbors`` does the same, test_graphbolt_graph_sample_neighbors.py):
    with every edge valid, 3 in total per node."""
    g = torch.Generator().manual_seed(0)
    u, i = torch.randint(20, (1000,), generator=g), torch.randint(10, (1000,), generator=g)
    graph = gb.CSCGraph.from_hetero_edges({"u:w:i": (u, i), "i:b:u": (i, u), "u:f:u": (u, u.roll(1))}, {"u": 20, "i": 10})
    graph = with_timestamps(graph, edge_timestamp=torch.zeros(graph.total_num_edges, dtype=torch.int64))
    seeds = {"u": torch.arange(20), "i": torch.arange(10)}
    times = {"u": torch.ones(20, dtype=torch.int64), "i": torch.ones(10, dtype=torch.int64)}
    subgraph = graph.temporal_sample_neighbors(seeds, times, torch.tensor([3]), edge_timestamp_attr_name="timestamp")
    per_node = {"u": torch.zeros(20, dtype=torch.int64), "i": torch.zeros(10, dtype=torch.int64)}
    for etype, csc in subgraph.sampled_csc.items():
        per_node[gb.etype_str_to_tuple(etype)[2]] += csc.indptr.diff()
    assert per_node["u"].tolist() == [3] * 20 and per_node["i"].tolist() == [3] * 10  # every node has > 3 in-edges



# graphpipe's (and GraphBolt's) exclude_seed_edges: no layer holds an edge u -> v of a seed
# pair (u, v), whichever row of the same nodes samples it (no deduplication: a node is many rows).
LINK_CASES = {  # graph kind -> (edge type, seed pairs): edges of the graph
    "untyped": (None, [[0, 1], [2, 1], [3, 0]]),
    "n1:e1:n2": ("n1:e1:n2", [[0, 0], [0, 2], [1, 0], [1, 1]]),
    "n2:e2:n1": ("n2:e2:n1", [[0, 0], [0, 1], [1, 1], [2, 0]]),
}


def link_case(kind):
    """A graph (all times 0) and a batch of seed pairs at time 5 of one edge type."""
    etype, pairs = LINK_CASES[kind]
    if etype is None:
        src, dst = torch.tensor([0, 1, 2, 1, 2, 0, 3, 3, 3]), torch.tensor([1, 0, 1, 2, 0, 2, 0, 1, 2])
        graph = with_zero_timestamps(gb.CSCGraph.from_coo(src, dst, 4))
    else:
        graph = with_zero_timestamps(get_hetero_graph())
    item_set = gb.ItemSet((torch.tensor(pairs), torch.full((len(pairs),), 5)), names=("seeds", "timestamp"))
    return graph, etype, pairs, item_set if etype is None else gb.HeteroItemSet({etype: item_set})


@pytest.mark.parametrize("sampler_type", TEMPORAL)
@pytest.mark.parametrize("kind", list(LINK_CASES))
def test_temporal_link_compacted_seeds_index_the_seeds(sampler_type, kind):
    """What GraphBolt's ``test_SubgraphSampler_Link*`` cannot see: ``compacted_seeds`` index
    the seeds' own nodes among the last layer's destinations (typed: column 0 in the
    source type's, column 1 in the destination type's)."""
    graph, etype, pairs, items = link_case(kind)
    mb = next(iter(_get_sampler(sampler_type)(gb.ItemSampler(items, batch_size=4), graph, [2, 2])))
    columns = mb.sampled_subgraphs[-1].original_column_node_ids
    if etype is None:
        assert columns[mb.compacted_seeds].tolist() == pairs
    else:
        src_type, _, dst_type = gb.etype_str_to_tuple(etype)
        compacted = mb.compacted_seeds[etype]
        assert torch.stack([columns[src_type][compacted[:, 0]], columns[dst_type][compacted[:, 1]]], dim=1).tolist() == pairs


@pytest.mark.parametrize("sampler_type", TEMPORAL)
@pytest.mark.parametrize("kind", list(LINK_CASES))
def test_temporal_link_seed_edges_are_excluded(sampler_type, kind):
    """What GraphBolt's tests with ``exclude_seed_edges`` cannot see: no layer holds a seed
    edge, and every other in-edge (all valid: times 0 < 5; fanout -1) of every
    destination row is sampled."""
    graph, etype, pairs, items = link_case(kind)
    mb = next(iter(_get_sampler(sampler_type)(gb.ItemSampler(items, batch_size=4), graph, [-1, -1]).exclude_seed_edges()))
    excluded = {tuple(p) for p in pairs}
    for subgraph in mb.sampled_subgraphs:
        if etype is None:
            layer = {None: (subgraph.sampled_csc, subgraph.original_row_node_ids, subgraph.original_column_node_ids)}
            every = {None: graph.sample_neighbors(subgraph.original_column_node_ids, [-1]).sampled_csc}
        else:
            layer = {}
            for t, csc in subgraph.sampled_csc.items():
                s, _, d = gb.etype_str_to_tuple(t)
                layer[t] = (csc, subgraph.original_row_node_ids[s], subgraph.original_column_node_ids[d])
            every = graph.sample_neighbors(subgraph.original_column_node_ids, [-1, -1]).sampled_csc  # type-local ids
        for t, (csc, rows, destinations) in layer.items():
            sampled = list(zip(rows[csc.indices].tolist(), destinations.repeat_interleave(csc.indptr.diff()).tolist()))
            edges = list(zip(every[t].indices.tolist(), destinations.repeat_interleave(every[t].indptr.diff()).tolist()))
            assert sorted(sampled) == sorted(e for e in edges if t != etype or e not in excluded), t
