"""graphpipe.ops.typed_sampling: the (node, edge type) segments of a typed graph and
one-call sampling of a layer's segments with a fanout per segment."""

import pytest
import torch

from graphpipe.ops import EdgeExclusion, sample_neighbors
from graphpipe.ops.labor import Variates, sample_labor
from graphpipe.ops.typed_sampling import sample_segments, typed_segments_of_nodes
from hetero_graphs import hetero_graph


@pytest.fixture(scope="module")
def graph():
    return hetero_graph(seed=2)[0]


def segments(graph, nodes, edge_types):
    """``(bounds, key_ids, pairs)`` of one group: every node with every edge type, in
    ``typed_segments_of_nodes``' order (edge type, then node); ``pairs`` = ``(nodes, types)``
    of the segments."""
    bounds, key_ids = typed_segments_of_nodes(graph.indptr, graph.type_per_edge, [(nodes, edge_types)], len(graph.edge_types))
    types = torch.tensor(sorted(edge_types), dtype=torch.int64)
    return bounds, key_ids, (nodes.repeat(types.numel()), types.repeat_interleave(nodes.numel()))


def all_segments(graph):
    return segments(graph, torch.arange(graph.total_num_nodes), list(range(len(graph.edge_types))))


def test_segments_are_the_in_edges_of_that_type(graph):
    bounds, key_ids, (nodes, types) = all_segments(graph)
    assert bounds.dtype == graph.indptr.dtype and key_ids.dtype == torch.int64 and bounds.numel() == 2 * nodes.numel()
    per_edge = graph.type_per_edge.to(torch.int64)
    for i, (v, t) in enumerate(zip(nodes.tolist(), types.tolist())):
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        positions = [e for e in range(lo, hi) if int(per_edge[e]) == t]
        assert list(range(int(bounds[2 * i]), int(bounds[2 * i + 1]))) == positions, (v, t)
    assert torch.equal(key_ids, nodes * len(graph.edge_types) + types)
    assert int((bounds[1::2] - bounds[0::2]).sum()) == graph.total_num_edges


def test_node_groups_give_each_edge_types_segments_in_type_order(graph):
    offsets = graph.node_type_offset.tolist()
    groups, per_type = {}, []
    for t, name in enumerate(graph.edge_types):
        dst_type = graph.node_type_to_id[name.split(":")[2]]
        nodes = torch.arange(offsets[dst_type + 1] - 1, offsets[dst_type] - 1, -1)  # descending: a group's order is kept
        groups.setdefault(dst_type, (nodes, []))[1].append(t)
        per_type.append(segments(graph, nodes, [t]))
    bounds, key_ids = typed_segments_of_nodes(graph.indptr, graph.type_per_edge, list(groups.values()), len(graph.edge_types))
    assert len(groups) < len(graph.edge_types)  # some group has several edge types
    assert torch.equal(bounds, torch.cat([b for b, _, _ in per_type]))
    assert torch.equal(key_ids, torch.cat([k for _, k, _ in per_type]))


def test_a_bad_destination_is_reported(graph):
    bad_indptr = graph.indptr.clone()
    bad_indptr[3] = graph.total_num_edges + 5
    with pytest.raises(ValueError, match="typed_segments"):
        typed_segments_of_nodes(bad_indptr, graph.type_per_edge, [(torch.tensor([3]), [0])], len(graph.edge_types))


def neighbor_segments(graph, key=7, replace=False):
    def sample(bounds, segments, fanout, key_ids, exclude):
        return sample_neighbors(bounds, graph.indices, segments, fanout, key=key, replace=replace, key_ids=key_ids, exclude=exclude)

    return sample


@pytest.mark.parametrize("fanouts", [[2, 2, 2, 2], [3, 0, -1, 1], [1, 1, 5, 5]])
def test_segments_with_their_own_fanouts(graph, fanouts):
    sampled_types = [t for t, f in enumerate(fanouts) if f != 0]
    bounds, key_ids, (nodes, types) = segments(graph, torch.arange(graph.total_num_nodes), sampled_types)
    segment_fanouts = torch.tensor(fanouts)[types]
    sample = sample_segments(bounds, key_ids, segment_fanouts, neighbor_segments(graph))
    assert sample.indptr.numel() == nodes.numel() + 1
    counts = sample.indptr.diff()
    degree = bounds[1::2] - bounds[0::2]
    expected = torch.where(segment_fanouts == -1, degree, torch.minimum(degree, segment_fanouts))
    assert torch.equal(counts, expected)
    owner = torch.repeat_interleave(torch.arange(nodes.numel()), counts)
    e = sample.edge_ids
    assert bool(((e >= bounds[0::2][owner]) & (e < bounds[1::2][owner])).all())  # each edge in its segment
    assert torch.equal(sample.indices, graph.indices[e].to(torch.int64))
    assert torch.unique(e).numel() == e.numel()


def test_an_exclusion_is_cut_per_run_of_fanouts(graph):
    """Excluded positions of segments in different runs are never sampled, and each
    segment draws min(fanout, in-edges left)."""
    bounds, key_ids, (nodes, types) = all_segments(graph)
    segment_fanouts = torch.where(types < 2, 1, 2)
    starts, ends = bounds[0::2], bounds[1::2]
    counts = torch.where(torch.arange(nodes.numel()) % 3 == 0, (ends - starts).clamp(max=2), 0)  # first positions of every third segment
    positions = torch.cat([torch.arange(int(s), int(s) + int(c)) for s, c in zip(starts, counts)])
    exclude = EdgeExclusion(torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]), positions)
    out = sample_segments(bounds, key_ids, segment_fanouts, neighbor_segments(graph), exclude)
    assert not bool(torch.isin(out.edge_ids, positions).any())
    assert torch.equal(out.indptr.diff(), torch.minimum(ends - starts - counts, segment_fanouts))


def test_a_segments_sample_depends_only_on_its_key(graph):
    """The same segment among different others, in another position: the same edges."""
    bounds, key_ids, (nodes, types) = all_segments(graph)
    sampler = neighbor_segments(graph, key=3)
    full = sample_segments(bounds, key_ids, torch.full((nodes.numel(),), 2), sampler)
    picked = torch.tensor([61, 5, 44])  # papers but 5 (an author: an empty segment)
    part_bounds, part_keys, _ = segments(graph, picked, [1])  # paper:cites:paper
    part = sample_segments(part_bounds, part_keys, torch.full((3,), 2), sampler)
    for j, v in enumerate(picked.tolist()):
        i = int(torch.nonzero((nodes == v) & (types == 1)))
        assert torch.equal(part.edge_ids[part.indptr[j] : part.indptr[j + 1]], full.edge_ids[full.indptr[i] : full.indptr[i + 1]])
    assert full.edge_ids.numel() > 0 and part.edge_ids.numel() > 0


def test_labor_runs_concatenate_their_weights(graph):
    bounds, key_ids, (nodes, types) = all_segments(graph)
    segment_fanouts = torch.where(types < 2, 1, 3)

    def sample(bounds, segments, fanout, key_ids, exclude):
        return sample_labor(bounds, graph.indices, segments, fanout, variates=Variates(11), num_nodes=graph.total_num_nodes)

    out = sample_segments(bounds, key_ids, segment_fanouts, sample)
    degree = (bounds[1::2] - bounds[0::2]).to(torch.float32)
    counts = out.indptr.diff()
    assert torch.equal(counts, torch.minimum(degree.to(torch.int64), segment_fanouts))
    owner = torch.repeat_interleave(torch.arange(nodes.numel()), counts)
    expected = 1.0 / torch.minimum(degree, segment_fanouts.to(torch.float32))[owner]
    assert out.edge_weights is not None and torch.allclose(out.edge_weights, expected)


def test_no_segments(graph):
    bounds, key_ids = typed_segments_of_nodes(graph.indptr, graph.type_per_edge, [], len(graph.edge_types))
    out = sample_segments(bounds, key_ids, torch.empty(0, dtype=torch.int64), neighbor_segments(graph))
    assert out.indptr.tolist() == [0] and out.indices.numel() == 0 and out.edge_ids.numel() == 0


def test_the_same_segments_on_one_and_two_threads(graph, numba_threads):
    bounds, key_ids, (nodes, _) = all_segments(graph)
    fanouts = torch.full((nodes.numel(),), 3)
    results = []
    for threads in (1, 2):
        with numba_threads(threads):
            results.append(sample_segments(bounds, key_ids, fanouts, neighbor_segments(graph, key=5)))
    assert torch.equal(results[0].indptr, results[1].indptr) and torch.equal(results[0].edge_ids, results[1].edge_ids)
