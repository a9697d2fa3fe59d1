"""GraphBolt's heterogeneous sampling tests, run against graphpipe.

Ported from ``dmlc/dgl``: ``tests/python/pytorch/graphbolt/impl/test_fused_csc_sampling_graph.py``
(``test_sample_neighbors_hetero``, ``test_sample_neighbors_fanouts``,
``test_sample_neighbors_replace``, ``test_sample_neighbors_return_eids_hetero``, ``test_from_dglgraph_heterogeneous``,
``test_sample_neighbors_hetero_pick_number``) and
``tests/python/pytorch/graphbolt/test_subgraph_sampler.py`` (``test_SubgraphSampler_Node_Hetero``,
``test_SubgraphSampler_unique_csc_format_Hetero_Node``,
``test_SubgraphSampler_Hetero_multifanout_per_layer``).

The graphs are GraphBolt's, built with ``CSCGraph(indptr, indices, node_type_offset=...,
type_per_edge=..., node_type_to_id=..., edge_type_to_id=...)``. GraphBolt's one-layer
``graph.sample_neighbors(nodes, fanouts)`` becomes a one-layer sampler (``fanouts=[f]``)
on a batch with those seeds; its subgraph's type-local source ids are our
``original_row_node_ids[src_type][indices]``. GraphBolt's assertions are kept (exact
outputs where its result is deterministic: every fanout ``-1`` or ``>=`` the degree;
sizes otherwise); what they cannot see (edges exist, ids type-local) is checked too.
Not ported: GPU, pinned memory, link prediction (node pairs) on
heterogeneous graphs and ``deduplicate=False`` (graphpipe has none of these).
"""

import pytest
import torch

from graphpipe import CSCGraph, HeteroItemSet, ItemSampler, ItemSet, LayerNeighborSampler, MiniBatch, NeighborSampler
from graphpipe.graph.edge_types import parse_edge_type

SAMPLERS = {False: NeighborSampler, True: LayerNeighborSampler}
# GraphBolt's one-element tensor fanouts on typed graphs warn (graphpipe: per edge type);
# in these graphs every node has in-edges of one type, where the two meanings agree.
pytestmark = pytest.mark.filterwarnings("ignore:.*is a one-element tensor")


def fused_graph(indptr_dtype=torch.int64, indices_dtype=torch.int64, **extra):
    """GraphBolt's ``test_sample_neighbors_hetero`` graph::

        "n1:e1:n2": [0, 0, 1, 1, 1], [0, 2, 0, 1, 2]
        "n2:e2:n1": [0, 0, 1, 2], [0, 1, 1, 0]
    """
    return CSCGraph(
        torch.tensor([0, 2, 4, 6, 7, 9], dtype=indptr_dtype),
        torch.tensor([2, 4, 2, 3, 0, 1, 1, 0, 1], dtype=indices_dtype),
        node_type_offset=torch.tensor([0, 2, 5]),
        type_per_edge=torch.tensor([1, 1, 1, 1, 0, 0, 0, 0, 0], dtype=indices_dtype),
        node_type_to_id={"n1": 0, "n2": 1},
        edge_type_to_id={"n1:e1:n2": 0, "n2:e2:n1": 1},
        **extra,
    )


def subgraph_sampler_graph():
    """``test_subgraph_sampler.get_hetero_graph``: every node has 2 in-edges."""
    return CSCGraph(
        torch.LongTensor([0, 2, 4, 6, 8, 10]),
        torch.LongTensor([2, 4, 2, 3, 0, 1, 1, 0, 0, 1]),
        node_type_offset=torch.LongTensor([0, 2, 5]),
        type_per_edge=torch.LongTensor([1, 1, 1, 1, 0, 0, 0, 0, 0, 0]),
        node_type_to_id={"n1": 0, "n2": 1},
        edge_type_to_id={"n1:e1:n2": 0, "n2:e2:n1": 1},
    )


def sample_one_layer(graph, nodes, fanouts, labor=False, **options):
    """GraphBolt's ``graph.sample_neighbors(nodes, fanouts)`` (or ``sample_layer_neighbors``)."""
    sampler = SAMPLERS[labor](None, graph, [fanouts], seed=0, **options)
    return sampler.sample_subgraphs(MiniBatch(seeds=nodes)).sampled_subgraphs[0]


def source_ids(subgraph, etype):
    """The type-local source ids of the edges of ``etype``, per CSC position."""
    return subgraph.original_row_node_ids[parse_edge_type(etype)[0]][subgraph.sampled_csc[etype].indices]


def typed_coo(graph):
    """``{etype: (src, dst, type-local edge id)}`` of every edge, in type-local node ids."""
    offsets = graph.node_type_offset
    src, dst = graph.edge_index()
    per_edge = graph.type_per_edge.to(torch.int64)
    out = {}
    for etype, t in graph.edge_type_to_id.items():
        s, _, d = parse_edge_type(etype)
        mask = per_edge == t
        out[etype] = (
            src[mask] - offsets[graph.node_type_to_id[s]],
            dst[mask] - offsets[graph.node_type_to_id[d]],
            graph.map_edge_ids(torch.nonzero(mask).flatten()),
        )
    return out


def assert_edges_exist(graph, subgraph):
    """Every sampled edge is the graph's edge of that type and type-local edge id."""
    coo = typed_coo(graph)
    for etype, csc in subgraph.sampled_csc.items():
        d = parse_edge_type(etype)[2]
        columns = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
        src, dst = source_ids(subgraph, etype), subgraph.original_column_node_ids[d][columns]
        eids = subgraph.original_edge_ids[etype]
        position = torch.empty_like(coo[etype][2])
        position[coo[etype][2]] = torch.arange(position.numel())  # type-local id -> row of coo
        assert torch.equal(coo[etype][0][position[eids]], src), etype
        assert torch.equal(coo[etype][1][position[eids]], dst), etype


# GraphBolt runs every (indptr, indices) dtype pair; int32 offsets with int64 node ids (more
# than 2**31 nodes but fewer edges) never come out of smallest_index_dtype, and each pair
# compiles its own kernels (10 s on a cold cache), so that pair is left out.
@pytest.mark.parametrize(
    "indptr_dtype, indices_dtype", [(torch.int32, torch.int32), (torch.int64, torch.int32), (torch.int64, torch.int64)]
)
@pytest.mark.parametrize("labor", [False, True])
def test_sample_neighbors_hetero(indptr_dtype, indices_dtype, labor):
    graph = fused_graph(indptr_dtype, indices_dtype)
    # Sample on both node types.
    nodes = {"n1": torch.tensor([0], dtype=indices_dtype), "n2": torch.tensor([0], dtype=indices_dtype)}
    subgraph = sample_one_layer(graph, nodes, torch.tensor([-1, -1]), labor)
    expected = {"n1:e1:n2": ([0, 2], [0, 1]), "n2:e2:n1": ([0, 2], [0, 2])}
    assert len(subgraph.sampled_csc) == 2
    for etype, (indptr, indices) in expected.items():
        assert subgraph.sampled_csc[etype].indptr.tolist() == indptr
        assert source_ids(subgraph, etype).sort().values.tolist() == indices
        assert len(indices) == len(subgraph.original_edge_ids[etype])
    assert_edges_exist(graph, subgraph)

    # Sample on a single node type: no n2 destinations, so "n1:e1:n2" has indptr [0].
    subgraph = sample_one_layer(graph, {"n1": torch.tensor([0], dtype=indices_dtype)}, torch.tensor([-1, -1]), labor)
    expected = {"n1:e1:n2": ([0], []), "n2:e2:n1": ([0, 2], [0, 2])}
    for etype, (indptr, indices) in expected.items():
        assert subgraph.sampled_csc[etype].indptr.tolist() == indptr
        assert source_ids(subgraph, etype).sort().values.tolist() == indices
        assert len(indices) == len(subgraph.original_edge_ids[etype])
    assert_edges_exist(graph, subgraph)


@pytest.mark.parametrize(
    "fanouts, expected_sampled_num1, expected_sampled_num2",
    [
        ([0], 0, 0),
        ([1], 1, 1),
        ([2], 2, 2),
        ([4], 2, 2),
        ([-1], 2, 2),
        ([0, 0], 0, 0),
        ([1, 0], 1, 0),
        ([0, 1], 0, 1),
        ([1, 1], 1, 1),
        ([2, 1], 2, 1),
        ([-1, -1], 2, 2),
    ],
)
@pytest.mark.parametrize("labor", [False, True])
def test_sample_neighbors_fanouts(fanouts, expected_sampled_num1, expected_sampled_num2, labor):
    graph = fused_graph()
    nodes = {"n1": torch.tensor([0]), "n2": torch.tensor([0])}
    subgraph = sample_one_layer(graph, nodes, torch.LongTensor(fanouts), labor)
    # GraphBolt skips the count check of a zero fanout; graphpipe returns the type empty.
    assert subgraph.sampled_csc["n1:e1:n2"].indices.numel() == expected_sampled_num1
    assert subgraph.sampled_csc["n1:e1:n2"].indptr.size(0) == 2
    assert subgraph.sampled_csc["n2:e2:n1"].indices.numel() == expected_sampled_num2
    assert subgraph.sampled_csc["n2:e2:n1"].indptr.size(0) == 2
    assert_edges_exist(graph, subgraph)


@pytest.mark.parametrize("replace, expected_sampled_num1, expected_sampled_num2", [(False, 2, 2), (True, 4, 4)])
def test_sample_neighbors_replace(replace, expected_sampled_num1, expected_sampled_num2):
    graph = fused_graph()
    nodes = {"n1": torch.LongTensor([0]), "n2": torch.LongTensor([0])}
    subgraph = sample_one_layer(graph, nodes, torch.LongTensor([4]), replace=replace)
    assert subgraph.sampled_csc["n1:e1:n2"].indices.numel() == expected_sampled_num1
    assert subgraph.sampled_csc["n1:e1:n2"].indptr.size(0) == 2
    assert subgraph.sampled_csc["n2:e2:n1"].indices.numel() == expected_sampled_num2
    assert subgraph.sampled_csc["n2:e2:n1"].indptr.size(0) == 2
    assert_edges_exist(graph, subgraph)


@pytest.mark.parametrize("labor", [False, True])
def test_sample_neighbors_return_eids_hetero(labor):
    """GraphBolt's ORIGINAL_EDGE_ID attribute is our ``original_edge_ids``: type-local ids."""
    generator = torch.Generator().manual_seed(0)
    original_edge_ids = torch.cat([torch.randperm(4, generator=generator), torch.randperm(5, generator=generator)])
    graph = fused_graph(original_edge_ids=original_edge_ids)
    nodes = {"n1": torch.LongTensor([0]), "n2": torch.LongTensor([0])}
    subgraph = sample_one_layer(graph, nodes, torch.tensor([-1, -1]), labor)
    expected = {"n2:e2:n1": original_edge_ids[[0, 1]], "n1:e1:n2": original_edge_ids[[4, 5]]}
    for etype, ids in expected.items():
        assert torch.equal(subgraph.original_edge_ids[etype].sort().values, ids.sort().values)
    assert_edges_exist(graph, subgraph)


@pytest.mark.parametrize("labor", [False, True])
def test_edge_ids_of_a_typed_graph_built_without_them_are_type_local(labor):
    """Not in GraphBolt (whose ids are then CSC positions): a typed graph given no
    ``original_edge_ids`` numbers each type's edges in CSC order, so ids index per-type
    edge features."""
    graph = fused_graph()
    assert graph.original_edge_ids.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 4]
    subgraph = sample_one_layer(graph, {"n1": torch.tensor([0, 1]), "n2": torch.tensor([0, 1, 2])}, [-1, -1], labor)
    assert subgraph.original_edge_ids["n1:e1:n2"].tolist() == [0, 1, 2, 3, 4]
    assert subgraph.original_edge_ids["n2:e2:n1"].tolist() == [0, 1, 2, 3]
    assert_edges_exist(graph, subgraph)


def pick_number_graph():
    """``test_sample_neighbors_hetero_pick_number``: node N0:0 has 3 in-edges of each type."""
    return CSCGraph(
        torch.LongTensor([0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]),
        torch.LongTensor([1, 2, 3, 4, 5, 6, 7, 8, 9]),
        edge_attributes={
            "mask": torch.BoolTensor([1, 1, 0, 1, 1, 1, 0, 0, 0]),
            "all": torch.BoolTensor([1, 1, 1, 1, 1, 1, 1, 1, 1]),
            "zero": torch.BoolTensor([0, 0, 0, 0, 0, 0, 0, 0, 0]),
        },
        node_type_offset=torch.LongTensor([0, 1, 4, 7, 10]),
        type_per_edge=torch.LongTensor([0, 0, 0, 1, 1, 1, 2, 2, 2]),
        node_type_to_id={"N0": 0, "N1": 1, "N2": 2, "N3": 3},
        edge_type_to_id={"N1:R0:N0": 0, "N2:R1:N0": 1, "N3:R2:N0": 2},
    )


@pytest.mark.parametrize("labor, replace", [(False, False), (False, True), (True, False)])  # LABOR refuses replace=True
@pytest.mark.parametrize(
    "fanouts, probs_name",
    [
        ([-1, -1, -1], "mask"),
        ([1, 1, 1], "mask"),
        ([2, 2, 2], "mask"),
        ([3, 3, 3], "mask"),
        ([4, 4, 4], "mask"),
        ([-1, 1, 3], "none"),
        ([2, -1, 4], "none"),
    ],
)
def test_sample_neighbors_hetero_pick_number(fanouts, replace, labor, probs_name):
    graph = pick_number_graph()
    etypes = graph.edge_type_to_id
    nodes = {"N0": torch.LongTensor([0]), "N1": torch.LongTensor([1])}
    weights = None if probs_name == "none" else probs_name
    subgraph = sample_one_layer(graph, nodes, torch.LongTensor(fanouts), labor, weights=weights, replace=replace)
    if probs_name == "none":
        for etype, pairs in subgraph.sampled_csc.items():
            assert pairs.indptr.size(0) == 2
            sampled_num = pairs.indices.size(0)
            fanout = fanouts[etypes[etype]]
            if fanout == -1:
                assert sampled_num == 3
            elif replace:
                assert sampled_num == fanout
            else:
                assert sampled_num == min(fanout, 3)
    else:
        fanout = fanouts[0]  # the same for every edge type
        valid = {0: 2, 1: 3, 2: 0}  # positive-mask in-edges per edge type
        for etype, pairs in subgraph.sampled_csc.items():
            assert pairs.indptr.size(0) == 2
            sampled_num = pairs.indices.size(0)
            m = valid[etypes[etype]]
            if m == 0:
                assert sampled_num == 0
            elif fanout == -1:
                assert sampled_num == m
            elif replace:
                assert sampled_num == fanout
            else:
                assert sampled_num == min(fanout, m)
            mask = graph.edge_attributes["mask"][graph.type_per_edge == etypes[etype]]
            assert bool(mask[subgraph.original_edge_ids[etype]].all())  # only unmasked edges
    assert_edges_exist(graph, subgraph)


@pytest.mark.parametrize("labor", [False, True])
def test_SubgraphSampler_Node_Hetero(labor):
    graph = subgraph_sampler_graph()
    itemset = HeteroItemSet({"n2": ItemSet(torch.arange(3), names="seeds")})
    item_sampler = ItemSampler(itemset, batch_size=2)
    num_layer = 2
    fanouts = [torch.LongTensor([2]) for _ in range(num_layer)]
    sampler_dp = SAMPLERS[labor](item_sampler, graph, fanouts)
    batches = list(sampler_dp)
    assert len(batches) == 2
    for minibatch in batches:
        assert len(minibatch.sampled_subgraphs) == num_layer


@pytest.mark.parametrize("labor", [False, True])
def test_SubgraphSampler_unique_csc_format_Hetero_Node(labor):
    graph = subgraph_sampler_graph()
    itemset = HeteroItemSet({"n2": ItemSet(torch.arange(2), names="seeds")})
    item_sampler = ItemSampler(itemset, batch_size=2)
    fanouts = [torch.LongTensor([2]) for _ in range(2)]
    datapipe = SAMPLERS[labor](item_sampler, graph, fanouts)
    csc_formats = [
        {"n1:e1:n2": ([0, 2, 4], [0, 1, 1, 0]), "n2:e2:n1": ([0, 2, 4], [0, 2, 0, 1])},
        {"n1:e1:n2": ([0, 2, 4], [0, 1, 1, 0]), "n2:e2:n1": ([0], [])},
    ]
    original_column_node_ids = [{"n1": [0, 1], "n2": [0, 1]}, {"n1": [], "n2": [0, 1]}]
    original_row_node_ids = [{"n1": [0, 1], "n2": [0, 1, 2]}, {"n1": [0, 1], "n2": [0, 1]}]
    batches = list(datapipe)
    assert len(batches) == 1
    for data in batches:
        for step, sampled_subgraph in enumerate(data.sampled_subgraphs):
            for ntype in ["n1", "n2"]:
                assert sampled_subgraph.original_row_node_ids[ntype].tolist() == original_row_node_ids[step][ntype]
                assert sampled_subgraph.original_column_node_ids[ntype].tolist() == original_column_node_ids[step][ntype]
            for etype in ["n1:e1:n2", "n2:e2:n1"]:
                assert sampled_subgraph.sampled_csc[etype].indices.tolist() == csc_formats[step][etype][1]
                assert sampled_subgraph.sampled_csc[etype].indptr.tolist() == csc_formats[step][etype][0]
            assert_edges_exist(graph, sampled_subgraph)
        assert {t: v.tolist() for t, v in data.input_nodes.items()} == original_row_node_ids[0]


@pytest.mark.parametrize("labor", [False, True])
def test_SubgraphSampler_Hetero_multifanout_per_layer(labor):
    graph = subgraph_sampler_graph()
    itemset = HeteroItemSet({
        "n1": ItemSet(torch.tensor([0]), names="seeds"),
        "n2": ItemSet(torch.tensor([1]), names="seeds"),
    })  # fmt: skip
    item_sampler = ItemSampler(itemset, batch_size=2)
    # The number of edges to be sampled for each edge types of each node.
    fanouts = [torch.LongTensor([2, 1]) for _ in range(2)]
    sampler_dp = SAMPLERS[labor](item_sampler, graph, fanouts)
    indices_len = [{"n1:e1:n2": 4, "n2:e2:n1": 2}, {"n1:e1:n2": 2, "n2:e2:n1": 1}]
    batches = list(sampler_dp)
    assert len(batches) == 1
    for minibatch in batches:
        for step, sampled_subgraph in enumerate(minibatch.sampled_subgraphs):
            assert len(sampled_subgraph.sampled_csc["n1:e1:n2"].indices) == indices_len[step]["n1:e1:n2"]
            assert len(sampled_subgraph.sampled_csc["n2:e2:n1"].indices) == indices_len[step]["n2:e2:n1"]
            assert_edges_exist(graph, sampled_subgraph)


def test_from_dglgraph_heterogeneous():
    """GraphBolt's ``from_dglgraph`` of a DGL heterograph, here ``CSCGraph.from_hetero_edges``
    of the same edge lists (DGL's node counts: max id + 1 per type): the same type ids,
    offsets and ``type_per_edge``, and ``original_edge_ids`` map back to the input edges."""
    edges = {
        ("author", "writes", "paper"): ([1, 2, 3, 4, 5, 2], [1, 2, 3, 4, 5, 4]),
        ("author", "affiliated_with", "institution"): ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
        ("paper", "has_topic", "field"): ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
        ("paper", "cites", "paper"): ([2, 3, 4, 5, 6, 1], [1, 2, 3, 4, 5, 4]),
    }
    graph = CSCGraph.from_hetero_edges(edges, {"author": 6, "field": 6, "institution": 6, "paper": 7})
    assert graph.total_num_nodes == 25 and graph.total_num_edges == 22
    assert torch.equal(graph.node_type_offset, torch.tensor([0, 6, 12, 18, 25]))
    assert graph.type_per_edge.tolist() == [3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 1, 2, 1, 2, 1, 2, 1, 1, 2, 2, 1, 2]
    assert dict(graph.node_type_to_id) == {"author": 0, "field": 1, "institution": 2, "paper": 3}
    assert dict(graph.edge_type_to_id) == {
        "author:affiliated_with:institution": 0,
        "author:writes:paper": 1,
        "paper:cites:paper": 2,
        "paper:has_topic:field": 3,
    }
    reverse_node_id = torch.cat([torch.arange(n) for n in graph.node_type_offset.diff().tolist()])
    rows = reverse_node_id[graph.indices.to(torch.int64)]
    columns = reverse_node_id[torch.arange(graph.total_num_nodes).repeat_interleave(graph.indptr.diff().to(torch.int64))]
    by_name = {":".join(t): pair for t, pair in edges.items()}
    for e in range(graph.total_num_edges):
        src, dst = by_name[graph.edge_types[int(graph.type_per_edge[e])]]
        original = int(graph.original_edge_ids[e])
        assert (src[original], dst[original]) == (int(rows[e]), int(columns[e]))
