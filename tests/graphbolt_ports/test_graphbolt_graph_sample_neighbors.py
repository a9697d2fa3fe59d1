"""GraphBolt's graph-level ``FusedCSCSamplingGraph.sample_neighbors``, as
``CSCGraph.sample_neighbors``, run against graphpipe.

Ported from ``dmlc/dgl`` ``tests/python/pytorch/graphbolt/impl/test_fused_csc_sampling_graph.py``:
``test_sample_neighbors_homo``, ``test_sample_neighbors_hetero``,
``test_sample_neighbors_hetero_single_fanout``, ``test_sample_neighbors_fanouts``,
``test_sample_neighbors_replace``, ``test_sample_neighbors_return_eids_homo`` / ``_hetero``,
``test_sample_neighbors_probs``, each also for ``sample_layer_neighbors`` (LABOR-0; upstream
runs them with ``labor=True`` too, without replacement). GraphBolt's assertions are kept; GPU
and pinned-memory cases are not ported. Beyond upstream: the sampled edges exist, one fanout
on a typed graph is shared by a node's in-edges of every type, and LABOR's own property: a
source is kept for every destination of the same in-degree or for none.
"""

import pytest
import torch

from graphpipe import CSCGraph, SampledSubgraph

METHODS = ["sample_neighbors", "sample_layer_neighbors"]
HOMO_INDPTR = torch.LongTensor([0, 3, 5, 7, 9, 12])
HOMO_INDICES = torch.LongTensor([0, 1, 4, 2, 3, 0, 1, 1, 2, 0, 3, 4])


def hetero_graph(**extra):
    """``"n1:e1:n2": [0, 0, 1, 1, 1] -> [0, 2, 0, 1, 2]``, ``"n2:e2:n1": [0, 0, 1, 2] -> [0, 1, 1, 0]``."""
    return CSCGraph(
        torch.LongTensor([0, 2, 4, 6, 7, 9]),
        torch.LongTensor([2, 4, 2, 3, 0, 1, 1, 0, 1]),
        node_type_offset=torch.LongTensor([0, 2, 5]),
        type_per_edge=torch.LongTensor([1, 1, 1, 1, 0, 0, 0, 0, 0]),
        node_type_to_id={"n1": 0, "n2": 1},
        edge_type_to_id={"n1:e1:n2": 0, "n2:e2:n1": 1},
        **extra,
    )


def _edges_exist(graph, indptr, indices, seeds):
    """Every sampled (source, seed) pair is an edge of a homogeneous ``graph``."""
    src, dst = graph.edge_index()
    edges = set(zip(src.tolist(), dst.tolist()))
    for j, seed in enumerate(seeds.tolist()):
        assert all((int(s), seed) in edges for s in indices[indptr[j] : indptr[j + 1]])


@pytest.mark.parametrize("indptr_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("indices_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("method", METHODS)
def test_sample_neighbors_homo(indptr_dtype, indices_dtype, method):
    if method == "sample_layer_neighbors" and (indptr_dtype, indices_dtype) == (torch.int32, torch.int64):
        pytest.skip("a LABOR kernel signature no other test compiles (suite time); LABOR's dtypes are the pipes' tests'")
    graph = CSCGraph(HOMO_INDPTR.to(indptr_dtype), HOMO_INDICES.to(indices_dtype))
    nodes = torch.tensor([1, 3, 4], dtype=indices_dtype)
    subgraph = getattr(graph, method)(nodes, fanouts=torch.LongTensor([2]))
    assert isinstance(subgraph, SampledSubgraph)
    assert subgraph.sampled_csc.indptr.size(0) == 4
    assert subgraph.sampled_csc.indices.size(0) == 6 == len(subgraph.original_edge_ids)
    assert subgraph.original_column_node_ids is None
    assert subgraph.original_row_node_ids is None
    _edges_exist(graph, subgraph.sampled_csc.indptr, subgraph.sampled_csc.indices, nodes)


@pytest.mark.parametrize("method", METHODS)
def test_sample_neighbors_hetero(method):
    graph = hetero_graph()
    subgraph = getattr(graph, method)({"n1": torch.tensor([0]), "n2": torch.tensor([0])}, torch.tensor([-1, -1]))
    expected = {"n1:e1:n2": ([0, 2], [0, 1]), "n2:e2:n1": ([0, 2], [0, 2])}
    assert len(subgraph.sampled_csc) == 2
    for etype, (indptr, indices) in expected.items():
        assert subgraph.sampled_csc[etype].indptr.tolist() == indptr
        assert subgraph.sampled_csc[etype].indices.sort()[0].tolist() == indices
        assert len(indices) == len(subgraph.original_edge_ids[etype])
    assert subgraph.original_column_node_ids is None and subgraph.original_row_node_ids is None
    # Sample on a single node type.
    subgraph = getattr(graph, method)({"n1": torch.tensor([0])}, torch.tensor([-1, -1]))
    assert subgraph.sampled_csc["n1:e1:n2"].indptr.tolist() == [0]
    assert subgraph.sampled_csc["n1:e1:n2"].indices.numel() == 0
    assert subgraph.sampled_csc["n2:e2:n1"].indptr.tolist() == [0, 2]
    assert subgraph.sampled_csc["n2:e2:n1"].indices.sort()[0].tolist() == [0, 2]


@pytest.mark.parametrize("method", METHODS)
def test_sample_neighbors_hetero_single_fanout(method):
    g = torch.Generator().manual_seed(0)
    u, i = torch.randint(20, (1000,), generator=g), torch.randint(10, (1000,), generator=g)
    graph = CSCGraph.from_hetero_edges({"u:w:i": (u, i), "i:b:u": (i, u)}, {"u": 20, "i": 10})
    for _ in range(11):
        nodes = {"u": torch.randint(10, (100,), generator=g)}
        subgraph = getattr(graph, method)(nodes, fanouts=torch.tensor([-1]))
        assert subgraph.sampled_csc["i:b:u"].indptr.numel() == 101
    # One fanout is shared by all of a node's in-edge types (GraphBolt's rule): 3 in total.
    subgraph = getattr(graph, method)({"u": torch.arange(20), "i": torch.arange(10)}, torch.tensor([3]))
    for etype, seeds in (("i:b:u", 20), ("u:w:i", 10)):
        assert subgraph.sampled_csc[etype].indptr.diff().tolist() == [3] * seeds  # every node has > 3 in-edges


@pytest.mark.parametrize(
    "fanouts, expected_sampled_num1, expected_sampled_num2",
    [([0], 0, 0), ([1], 1, 1), ([2], 2, 2), ([4], 2, 2), ([-1], 2, 2), ([0, 0], 0, 0), ([1, 0], 1, 0), ([0, 1], 0, 1),
     ([1, 1], 1, 1), ([2, 1], 2, 1), ([-1, -1], 2, 2)],
)  # fmt: skip
@pytest.mark.parametrize("method", METHODS)
def test_sample_neighbors_fanouts(fanouts, expected_sampled_num1, expected_sampled_num2, method):
    subgraph = getattr(hetero_graph(), method)({"n1": torch.tensor([0]), "n2": torch.tensor([0])}, torch.LongTensor(fanouts))
    assert subgraph.sampled_csc["n1:e1:n2"].indices.numel() == expected_sampled_num1
    assert subgraph.sampled_csc["n1:e1:n2"].indptr.size(0) == 2
    assert subgraph.sampled_csc["n2:e2:n1"].indices.numel() == expected_sampled_num2
    assert subgraph.sampled_csc["n2:e2:n1"].indptr.size(0) == 2


@pytest.mark.parametrize("replace, expected_sampled_num1, expected_sampled_num2", [(False, 2, 2), (True, 4, 4)])
def test_sample_neighbors_replace(replace, expected_sampled_num1, expected_sampled_num2):
    nodes = {"n1": torch.LongTensor([0]), "n2": torch.LongTensor([0])}
    subgraph = hetero_graph().sample_neighbors(nodes, torch.LongTensor([4]), replace=replace)
    assert subgraph.sampled_csc["n1:e1:n2"].indices.numel() == expected_sampled_num1
    assert subgraph.sampled_csc["n1:e1:n2"].indptr.size(0) == 2
    assert subgraph.sampled_csc["n2:e2:n1"].indices.numel() == expected_sampled_num2
    assert subgraph.sampled_csc["n2:e2:n1"].indptr.size(0) == 2


@pytest.mark.parametrize("method", METHODS)
def test_sample_neighbors_return_eids_homo(method):
    original = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    graph = CSCGraph(HOMO_INDPTR, HOMO_INDICES, original_edge_ids=original)
    subgraph = getattr(graph, method)(torch.LongTensor([1, 3, 4]), fanouts=torch.LongTensor([-1]))
    expected = original[torch.tensor([3, 4, 7, 8, 9, 10, 11])]
    assert torch.equal(torch.sort(expected)[0], torch.sort(subgraph.original_edge_ids)[0])
    assert subgraph.original_column_node_ids is None and subgraph.original_row_node_ids is None


@pytest.mark.parametrize("method", METHODS)
def test_sample_neighbors_return_eids_hetero(method):
    g = torch.Generator().manual_seed(2)
    original = torch.cat([torch.randperm(4, generator=g), torch.randperm(5, generator=g)])
    graph = hetero_graph(original_edge_ids=original)
    subgraph = getattr(graph, method)({"n1": torch.LongTensor([0]), "n2": torch.LongTensor([0])}, torch.tensor([-1, -1]))
    expected = {"n2:e2:n1": original[torch.tensor([0, 1])], "n1:e1:n2": original[torch.tensor([4, 5])]}
    for etype, ids in expected.items():
        assert torch.equal(subgraph.original_edge_ids[etype].sort()[0], ids.sort()[0])


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("probs_name", ["weight", "mask"])
def test_sample_neighbors_probs(replace, probs_name):
    edge_attributes = {
        "weight": torch.FloatTensor([2.5, 0, 8.4, 0, 0.4, 1.2, 2.5, 0, 8.4, 0.5, 0.4, 1.2]),
        "mask": torch.BoolTensor([1, 0, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1]),
    }
    graph = CSCGraph(HOMO_INDPTR, HOMO_INDICES, edge_attributes=edge_attributes)
    subgraph = graph.sample_neighbors(torch.LongTensor([1, 3, 4]), fanouts=torch.tensor([2]), replace=replace, probs_name=probs_name)
    assert subgraph.sampled_csc.indptr.size(0) == 4
    assert subgraph.sampled_csc.indices.size(0) == (6 if replace else 4)
    assert bool(edge_attributes[probs_name][subgraph.original_edge_ids].bool().all())  # never a zero-weight edge
    if not replace:  # LABOR: the same, without replacement
        subgraph = graph.sample_layer_neighbors(torch.LongTensor([1, 3, 4]), fanouts=torch.tensor([2]), probs_name=probs_name)
        assert subgraph.sampled_csc.indices.size(0) == 4 and subgraph.edge_weights.shape == (4,)
        assert bool(edge_attributes[probs_name][subgraph.original_edge_ids].bool().all())


def test_draws_follow_torch_manual_seed_and_bad_arguments_are_named():
    graph = CSCGraph(HOMO_INDPTR, HOMO_INDICES)
    nodes = torch.LongTensor([0, 4])
    torch.manual_seed(5)
    first = graph.sample_neighbors(nodes, 2).original_edge_ids
    torch.manual_seed(5)
    assert torch.equal(graph.sample_neighbors(nodes, [2]).original_edge_ids, first)
    with pytest.raises(ValueError, match=r"`fanouts` must be a 1-D tensor of 1 ints"):
        graph.sample_neighbors(nodes, torch.tensor([2, 2]))
    with pytest.raises(ValueError, match=r"`fanouts` must hold ints >= 0 or -1"):
        graph.sample_neighbors(nodes, torch.tensor([-2]))
    with pytest.raises(KeyError, match=r"`probs_name`='p' is not an edge attribute"):
        graph.sample_neighbors(nodes, 2, probs_name="p")
    with pytest.raises(TypeError, match=r"the graph is homogeneous, so `seeds` must be a tensor"):
        graph.sample_neighbors({"n1": nodes}, 2)
    with pytest.raises(ValueError, match=r"`fanouts` must be a 1-D tensor of 1 or 2 \(one per edge type\) ints"):
        hetero_graph().sample_neighbors({"n1": torch.tensor([0])}, [1, 1, 1])


def test_layer_neighbors_keep_a_source_for_all_its_destinations_or_none():
    """LABOR-0 (GraphBolt's ``sample_layer_neighbors``): one uniform per source decides for
    every destination, so destinations with the same in-neighbours (and so the same
    in-degree) get the same sources; each gets ``min(fanout, in-degree)`` distinct ones,
    every source equally often (chi-square), and ``edge_weights`` are LABOR's."""
    num_src, num_dst, fanout, draws = 12, 5, 4, 3000
    src = torch.arange(num_src).repeat(num_dst)
    dst = num_src + torch.arange(num_dst).repeat_interleave(num_src)  # complete bipartite: same neighbours
    graph = CSCGraph.from_coo(src, dst, num_nodes=num_src + num_dst)
    seeds = torch.arange(num_src, num_src + num_dst)
    torch.manual_seed(3)
    counts = torch.zeros(num_src)
    for _ in range(draws):
        layer = graph.sample_layer_neighbors(seeds, torch.tensor([fanout]))
        indptr, indices = layer.sampled_csc.indptr, layer.sampled_csc.indices
        assert indptr.diff().tolist() == [fanout] * num_dst
        picks = [sorted(indices[indptr[j] : indptr[j + 1]].tolist()) for j in range(num_dst)]
        assert all(p == picks[0] for p in picks) and len(set(picks[0])) == fanout  # shared, no duplicates
        counts[picks[0]] += 1
    expected = draws * fanout / num_src
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 31.3  # 11 degrees of freedom, p = 0.001
    assert layer.edge_weights.dtype == torch.float32 and layer.edge_weights.shape == indices.shape
    sums = torch.zeros(num_dst).index_add_(0, torch.repeat_interleave(torch.arange(num_dst), indptr.diff()), layer.edge_weights)
    assert torch.allclose(sums, torch.ones(num_dst))  # Horvitz-Thompson weights of a mean: 1 per destination
    other = graph.sample_neighbors(seeds, torch.tensor([fanout]))  # NS draws per destination
    assert len({tuple(sorted(other.sampled_csc.indices[i * fanout : (i + 1) * fanout].tolist())) for i in range(num_dst)}) > 1
    torch.manual_seed(7)
    first = graph.sample_layer_neighbors(seeds, [fanout]).original_edge_ids
    torch.manual_seed(7)
    assert torch.equal(graph.sample_layer_neighbors(seeds, [fanout]).original_edge_ids, first)
    with pytest.raises(ValueError, match=r"CSCGraph.sample_layer_neighbors: LABOR samples without replacement; `replace` must be False"):
        graph.sample_layer_neighbors(seeds, [fanout], replace=True)
