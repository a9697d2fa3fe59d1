"""graphpipe.ops.typed_sampling: the (node, edge type) segments of a typed graph and
one-call sampling of a layer's segments with a fanout per segment."""

import pytest
import torch

from graphpipe.ops import sample_neighbors
from graphpipe.ops.labor import Variates, sample_labor
from graphpipe.ops.typed_sampling import sample_typed_layer, typed_segments
from hetero_graphs import hetero_graph


@pytest.fixture(scope="module")
def graph():
    return hetero_graph(seed=2)[0]


def all_segments(graph):
    """Every (global node, edge type id) pair, as int64 tensors."""
    num_types = len(graph.edge_types)
    nodes = torch.arange(graph.num_nodes).repeat_interleave(num_types)
    types = torch.arange(num_types).repeat(graph.num_nodes)
    return nodes, types


def test_segments_are_the_in_edges_of_that_type(graph):
    nodes, types = all_segments(graph)
    bounds, key_ids = typed_segments(graph.indptr, graph.type_per_edge, nodes, types, len(graph.edge_types))
    assert bounds.dtype == graph.indptr.dtype and key_ids.dtype == torch.int64 and bounds.numel() == 2 * nodes.numel()
    per_edge = graph.type_per_edge.to(torch.int64)
    for i, (v, t) in enumerate(zip(nodes.tolist(), types.tolist())):
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        positions = [e for e in range(lo, hi) if int(per_edge[e]) == t]
        assert list(range(int(bounds[2 * i]), int(bounds[2 * i + 1]))) == positions, (v, t)
    assert torch.equal(key_ids, nodes * len(graph.edge_types) + types)
    assert int((bounds[1::2] - bounds[0::2]).sum()) == graph.num_edges


def test_segments_of_node_groups_equal_the_pairs_in_edge_type_order(graph):
    from graphpipe.ops.typed_sampling import typed_segments_of_nodes

    offsets = graph.node_type_offset.tolist()
    groups, pairs = {}, []
    for t, name in enumerate(graph.edge_types):
        dst_type = name.split(":")[2]
        first, last = offsets[graph.node_type_to_id[dst_type]], offsets[graph.node_type_to_id[dst_type] + 1]
        nodes = torch.arange(last - 1, first - 1, -1)  # descending: the order of a group's nodes is kept
        groups.setdefault(dst_type, (nodes, []))[1].append(t)
        pairs.append((nodes, torch.full_like(nodes, t)))
    bounds, key_ids = typed_segments_of_nodes(graph.indptr, graph.type_per_edge, list(groups.values()), len(graph.edge_types))
    nodes, types = torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
    expected = typed_segments(graph.indptr, graph.type_per_edge, nodes, types, len(graph.edge_types))
    assert torch.equal(bounds, expected[0]) and torch.equal(key_ids, expected[1])
    bad_indptr = graph.indptr.clone()
    bad_indptr[offsets[1]] = graph.num_edges + 5
    with pytest.raises(ValueError, match="typed_segments"):
        typed_segments_of_nodes(bad_indptr, graph.type_per_edge, list(groups.values()), len(graph.edge_types))


def test_a_bad_destination_is_reported(graph):
    bad_indptr = graph.indptr.clone()
    bad_indptr[3] = graph.num_edges + 5
    with pytest.raises(ValueError, match="typed_segments"):
        typed_segments(bad_indptr, graph.type_per_edge, torch.tensor([3]), torch.tensor([0]), len(graph.edge_types))


def neighbor_segments(graph, key=7, replace=False):
    def sample(bounds, segments, key_ids, fanout):
        return sample_neighbors(bounds, graph.indices, segments, fanout, key=key, replace=replace, key_ids=key_ids)

    return sample


@pytest.mark.parametrize("fanouts", [[2, 2, 2, 2], [3, 0, -1, 1], [1, 1, 5, 5]])
def test_segments_with_their_own_fanouts(graph, fanouts):
    nodes, types = all_segments(graph)
    keep = torch.tensor(fanouts)[types] != 0
    nodes, types = nodes[keep], types[keep]
    segment_fanouts = torch.tensor(fanouts)[types]
    order = torch.argsort(types, stable=True)  # callers order the segments by edge type
    nodes, types, segment_fanouts = nodes[order], types[order], segment_fanouts[order]
    sample = sample_typed_layer(
        graph.indptr, graph.type_per_edge, len(graph.edge_types), nodes, types, segment_fanouts, neighbor_segments(graph)
    )
    assert sample.indptr.numel() == nodes.numel() + 1
    counts = sample.indptr.diff()
    bounds, _ = typed_segments(graph.indptr, graph.type_per_edge, nodes, types, len(graph.edge_types))
    degree = bounds[1::2] - bounds[0::2]
    expected = torch.where(segment_fanouts == -1, degree, torch.minimum(degree, segment_fanouts))
    assert torch.equal(counts, expected)
    owner = torch.repeat_interleave(torch.arange(nodes.numel()), counts)
    e = sample.edge_ids
    assert bool(((e >= bounds[0::2][owner]) & (e < bounds[1::2][owner])).all())  # each edge in its segment
    assert torch.equal(sample.indices, graph.indices[e].to(torch.int64))
    assert torch.unique(e).numel() == e.numel()


def test_a_segments_sample_depends_only_on_its_key(graph):
    """The same segment among different others, in another position: the same edges."""
    nodes, types = all_segments(graph)
    sampler = neighbor_segments(graph, key=3)
    fanouts = torch.full((nodes.numel(),), 2)
    full = sample_typed_layer(graph.indptr, graph.type_per_edge, len(graph.edge_types), nodes, types, fanouts, sampler)
    pick = torch.tensor([100, 5, 61])
    part = sample_typed_layer(
        graph.indptr, graph.type_per_edge, len(graph.edge_types), nodes[pick], types[pick], fanouts[pick], sampler
    )
    for j, i in enumerate(pick.tolist()):
        assert torch.equal(part.edge_ids[part.indptr[j] : part.indptr[j + 1]], full.edge_ids[full.indptr[i] : full.indptr[i + 1]])


def test_labor_runs_concatenate_their_weights(graph):
    nodes, types = all_segments(graph)
    segment_fanouts = torch.where(types < 2, 1, 3)

    def sample(bounds, segments, key_ids, fanout):
        return sample_labor(bounds, graph.indices, segments, fanout, variates=Variates(11), num_nodes=graph.num_nodes)

    order = torch.argsort(types, stable=True)
    nodes, types, segment_fanouts = nodes[order], types[order], segment_fanouts[order]
    out = sample_typed_layer(graph.indptr, graph.type_per_edge, len(graph.edge_types), nodes, types, segment_fanouts, sample)
    bounds, _ = typed_segments(graph.indptr, graph.type_per_edge, nodes, types, len(graph.edge_types))
    degree = (bounds[1::2] - bounds[0::2]).to(torch.float32)
    counts = out.indptr.diff()
    assert torch.equal(counts, torch.minimum(degree.to(torch.int64), segment_fanouts))
    owner = torch.repeat_interleave(torch.arange(nodes.numel()), counts)
    expected = 1.0 / torch.minimum(degree, segment_fanouts.to(torch.float32))[owner]
    assert out.edge_weights is not None and torch.allclose(out.edge_weights, expected)


def test_no_segments(graph):
    empty = torch.empty(0, dtype=torch.int64)
    out = sample_typed_layer(graph.indptr, graph.type_per_edge, len(graph.edge_types), empty, empty, empty, neighbor_segments(graph))
    assert out.indptr.tolist() == [0] and out.indices.numel() == 0 and out.edge_ids.numel() == 0


def test_the_same_segments_on_one_and_two_threads(graph, numba_threads):
    nodes, types = all_segments(graph)
    fanouts = torch.full((nodes.numel(),), 3)
    results = []
    for threads in (1, 2):
        with numba_threads(threads):
            out = sample_typed_layer(
                graph.indptr, graph.type_per_edge, len(graph.edge_types), nodes, types, fanouts, neighbor_segments(graph, key=5)
            )
        results.append(out)
    assert torch.equal(results[0].indptr, results[1].indptr) and torch.equal(results[0].edge_ids, results[1].edge_ids)
