"""UniformNegativeSampler: GraphBolt's link layout per edge type, typed and untyped graphs."""

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.batch.item_set import pairs_with_negatives
from sampling_checks import EDGE, KINDS, graph_and_edges, seed_items


def _edge_pairs(graph):
    src, dst = graph.edge_index()
    return torch.stack([src, dst], dim=1)


def _per_type(mb):
    """``{edge type: (seeds, labels, indexes, item_ids)}`` of a link batch (untyped: one entry)."""
    if not mb.is_heterogeneous:
        return {EDGE: (mb.seeds, mb.labels, mb.indexes, mb.item_ids)}
    return {t: (mb.seeds[t], mb.labels[t], mb.indexes[t], mb.item_ids[t]) for t in mb.seeds}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ratio", [1, 3])
@pytest.mark.parametrize("exclude", [False, True])
def test_layout_positives_then_negatives_with_aligned_labels_and_indexes(kind, ratio, exclude):
    """GraphBolt's layout per edge type; negatives keep their positive's source and draw
    destinations of the edge type's destination type; with ``exclude_existing_edges``
    none is an edge of that edge type, without it some are."""
    graph, edges = graph_and_edges(kind, seed=1)
    items = seed_items(kind, edges, "link", count=1000)
    item_set = gp.ItemSet(items[EDGE], names="seeds") if kind == "untyped" else gp.HeteroItemSet(items)
    pipe = gp.ItemSampler(item_set, 64, shuffle=True, seed=0).sample_uniform_negative(graph, ratio, exclude_existing_edges=exclude, seed=1)
    schema = graph.schema
    hits, positives = 0, 0
    for mb in pipe:
        for etype, (seeds, labels, indexes, item_ids) in _per_type(mb).items():
            p = item_ids.numel()
            positives += p
            assert seeds.shape == (p * (1 + ratio), 2) and seeds.dtype == torch.int64
            assert torch.equal(seeds[:p], items[etype][item_ids])
            assert labels.dtype == torch.float32 and bool((labels[:p] == 1).all()) and not bool(labels[p:].any())
            assert torch.equal(indexes, torch.cat([torch.arange(p), torch.arange(p).repeat_interleave(ratio)]))
            # Every negative keeps the source of the positive its index names.
            assert torch.equal(seeds[p:, 0], seeds[indexes[p:], 0])
            dst_type = schema.node_type_id[parse_edge_type(etype)[2]]
            negatives = seeds[p:, 1]
            count = schema.node_type_offset[dst_type + 1] - schema.node_type_offset[dst_type]
            assert int(negatives.min()) >= 0 and int(negatives.max()) < count
            existing = set(zip(*(e.tolist() for e in edges[etype])))
            hits += sum(pair in existing for pair in map(tuple, seeds[p:].tolist()))
    assert positives == sum(pairs.size(0) for pairs in items.values())  # the epoch's every positive
    assert (hits == 0) if exclude else (hits > 0)


def test_user_labels_are_kept_and_negatives_get_zeros(graph_builder):
    graph = graph_builder(100, 20, seed=2)
    pairs = _edge_pairs(graph)[:50]
    ratings = torch.arange(1, 51, dtype=torch.float32)
    pipe = gp.ItemSampler(gp.ItemSet((pairs, ratings), names=("seeds", "labels")), 10).sample_uniform_negative(graph, 2, seed=0)
    mb = next(iter(pipe))
    assert torch.equal(mb.labels, torch.cat([ratings[:10], torch.zeros(20)]))


def test_deterministic_under_seed_and_batch_index(graph_builder):
    graph = graph_builder(200, 30, seed=3)
    items = gp.ItemSet(_edge_pairs(graph), names="seeds")

    def run(seed):
        pipe = gp.ItemSampler(items, 50, shuffle=True, seed=0).sample_uniform_negative(graph, 2, seed=seed)
        return [mb.seeds for mb in pipe]

    first, again, other = run(5), run(5), run(6)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))
    # Each epoch draws new negatives for the same positives (the batch index changes).
    pipe = gp.ItemSampler(items, 50, shuffle=False).sample_uniform_negative(graph, 2, seed=5)
    epoch0, epoch1 = next(pipe.stream(0)), next(pipe.stream(1))
    assert torch.equal(epoch0.seeds[:50], epoch1.seeds[:50]) and not torch.equal(epoch0.seeds, epoch1.seeds)


def test_ranks_of_a_distributed_sampler_draw_their_own_negatives(graph_builder):
    graph = graph_builder(200, 30, seed=4)
    items = gp.ItemSet(_edge_pairs(graph), names="seeds")
    ranks = [
        gp.DistributedItemSampler(items, 20, shuffle=True, seed=0, rank=r, world_size=2).sample_uniform_negative(
            graph, 1, seed=3
        )
        for r in range(2)
    ]
    batches = [next(iter(pipe)) for pipe in ranks]
    assert batches[0].batch_index == batches[1].batch_index
    assert not bool(torch.isin(batches[0].item_ids, batches[1].item_ids).any())
    # Same key, different pairs: the negative destinations are not the same sequence.
    assert not torch.equal(batches[0].seeds[20:, 1], batches[1].seeds[20:, 1])


def test_pairs_with_negatives_builds_graphbolts_layout():
    seeds, labels, indexes = pairs_with_negatives(torch.tensor([[0, 1], [2, 3]]), None, torch.tensor([[5, 6], [7, 8]]))
    assert seeds.tolist() == [[0, 1], [2, 3], [0, 5], [0, 6], [2, 7], [2, 8]]
    assert labels.tolist() == [True, True, False, False, False, False]
    assert indexes.tolist() == [0, 1, 0, 0, 1, 1]


def test_bad_arguments_raise_clear_errors(graph_builder):
    graph = graph_builder(50, 10, seed=5)
    pairs = _edge_pairs(graph)[:20]
    source = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 5)
    for ratio in (0, -2, 0.5, "1"):
        with pytest.raises(ValueError, match="UniformNegativeSampler: `negative_ratio` must be an int >= 1"):
            source.sample_uniform_negative(graph, ratio)
    for ratio in (0, -1.5, float("inf"), "1", True):
        with pytest.raises(ValueError, match=r"UniformNegativeSampler \(neg_sampling='binary'\): `negative_ratio` must be a finite number > 0.0"):
            source.sample_uniform_negative(graph, ratio, neg_sampling="binary")
    for ratio in (np.int64(2), torch.tensor(2), 2):  # was: numpy and tensor integers refused as "not a number"
        assert source.sample_uniform_negative(graph, ratio, neg_sampling="binary").negative_ratio == 2
    with pytest.raises(ValueError, match="`comparison` applies to temporal negatives; name the node times"):
        source.sample_uniform_negative(graph, 1, comparison="<=")  # was: accepted and ignored
    with pytest.raises(TypeError, match="`graph` must be a graphpipe.CSCGraph"):
        source.sample_uniform_negative(graph.indptr, 1)
    with pytest.raises(TypeError, match="`exclude_existing_edges` must be a bool"):
        source.sample_uniform_negative(graph, 1, exclude_existing_edges="yes")
    nodes = gp.ItemSampler(gp.ItemSet(torch.arange(10), names="seeds"), 5).sample_uniform_negative(graph, 1)
    with pytest.raises(ValueError, match=r"`seeds` must be node pairs of shape \[N, 2\].*got \(5,\)"):
        next(iter(nodes))
    out_of_range = gp.ItemSampler(gp.ItemSet(torch.tensor([[0, 50]]), names="seeds"), 5).sample_uniform_negative(graph, 1)
    with pytest.raises(ValueError, match=r"UniformNegativeSampler: `seeds` holds node id 50, out of range"):
        next(iter(out_of_range))
    queries = gp.ItemSet((pairs, torch.ones(20), torch.arange(20)), names=("seeds", "labels", "indexes"))
    with pytest.raises(ValueError, match="already has `indexes`"):
        next(iter(gp.ItemSampler(queries, 5).sample_uniform_negative(graph, 1)))


@pytest.mark.parametrize("neg_sampling", ["triplet", "binary"])
def test_untyped_pairs_on_a_typed_graph_are_refused_naming_the_typed_form(neg_sampling):
    graph, edges = graph_and_edges("typed", seed=1)
    pairs = seed_items("typed", edges, "link")["author:writes:paper"]
    pipe = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 5).sample_uniform_negative(graph, 1, neg_sampling=neg_sampling)
    with pytest.raises(ValueError, match=r"the graph is typed, so the MiniBatch's `seeds` must be typed pairs: a dict edge "
                                         r"type 'src:relation:dst' -> \[N, 2\] \(a HeteroItemSet\), got a tensor of shape \(5, 2\)"):
        next(iter(pipe))


@pytest.mark.parametrize("neg_sampling", ["triplet", "binary"])
@pytest.mark.parametrize("ratio", [10**12, 2**63])
def test_a_ratio_too_large_for_memory_is_refused_when_the_pipe_is_built(graph_builder, ratio, neg_sampling):
    graph = graph_builder(50, 10, seed=5)
    source = gp.ItemSampler(gp.ItemSet(_edge_pairs(graph)[:20], names="seeds"), 5)
    with pytest.raises(ValueError, match=rf"UniformNegativeSampler: `negative_ratio`={ratio}: .*would not fit in the machine's memory"):
        source.sample_uniform_negative(graph, ratio, neg_sampling=neg_sampling)


@pytest.mark.parametrize("neg_sampling", ["triplet", "binary"])
@pytest.mark.parametrize("kind", KINDS)
def test_int32_pairs_keep_their_dtype(kind, neg_sampling):
    """Item sets keep their dtype (GraphBolt's negatives too): int32 pairs stay int32."""
    graph, edges = graph_and_edges(kind, seed=1)
    items = {etype: pairs.to(torch.int32) for etype, pairs in seed_items(kind, edges, "link", count=50).items()}
    item_set = gp.ItemSet(items[EDGE], names="seeds") if kind == "untyped" else gp.HeteroItemSet(items)
    mb = next(iter(gp.ItemSampler(item_set, 16).sample_uniform_negative(graph, 2, seed=1, neg_sampling=neg_sampling)))
    seeds = mb.seeds if kind == "typed" else {EDGE: mb.seeds}
    assert sum(pairs.size(0) for pairs in seeds.values()) == 16 * 3
    assert all(pairs.dtype == torch.int32 for pairs in seeds.values())


@pytest.mark.parametrize("neg_sampling", ["triplet", "binary"])
@pytest.mark.parametrize("kind", KINDS)
def test_pairs_of_a_dtype_too_narrow_for_the_graph_get_int64_negatives(kind, neg_sampling):
    """Found in review: uint8 pairs on a graph of more than 256 nodes got negatives cast to
    uint8, wrapped (352 -> 96). They are widened to int64 and drawn as int64 pairs' are."""
    ring = torch.stack([torch.arange(1000), (torch.arange(1000) + 1) % 1000])
    if kind == "untyped":
        graph, etype = gp.CSCGraph.from_edge_index(ring, 1000), EDGE
    else:
        graph, etype = gp.CSCGraph.from_hetero_edges({"a:r:b": ring % 3}, {"a": 3, "b": 1000}), "a:r:b"
    pairs = torch.tensor([[0, 1], [1, 2], [2, 0]])
    batches = []
    for dtype in (torch.int64, torch.uint8):
        item_set = gp.ItemSet(pairs.to(dtype), names="seeds")
        item_set = item_set if kind == "untyped" else gp.HeteroItemSet({etype: item_set})
        mb = next(iter(gp.ItemSampler(item_set, 3).sample_uniform_negative(graph, 20, seed=1, neg_sampling=neg_sampling)))
        batches.append(mb.seeds if kind == "untyped" else mb.seeds[etype])
    wide, narrow = batches
    assert narrow.dtype == torch.int64 and torch.equal(narrow, wide)
    assert int(narrow.max()) > 255  # negatives uint8 cannot hold


def test_a_batch_whose_negatives_do_not_fit_is_refused_naming_the_ratio(graph_builder, monkeypatch):
    graph = graph_builder(50, 10, seed=5)
    monkeypatch.setattr("graphpipe.ops.negative_sampling.max_output_edges", lambda bytes_per_negative: 100)
    pipe = gp.ItemSampler(gp.ItemSet(_edge_pairs(graph)[:20], names="seeds"), 5).sample_uniform_negative(graph, 30)
    with pytest.raises(ValueError, match=r"`negative_ratio`=30: 150 negatives for 5 positive pair\(s\) would not fit"):
        next(iter(pipe))


def test_no_valid_negative_names_the_stage_and_the_reason():
    """Node 0's only non-neighbour (node 5) is later than the pairs' time, the others are
    its neighbours: the error names the stage and the two reasons a draw is refused, not
    the kernel or its arguments. (Where no node at all is early enough, the earliest one
    is taken, as PyG's: tests/pipes/test_temporal_sampling.py.)"""
    src, dst = torch.zeros(5, dtype=torch.int64), torch.arange(5)
    times = torch.tensor([0, 0, 0, 0, 0, 10])
    graph = gp.CSCGraph.from_coo(src, dst, 6, node_attributes={"nts": times})
    items = gp.ItemSet((torch.tensor([[0, 1]]), torch.tensor([5])), names=("seeds", "timestamp"))
    pipe = gp.ItemSampler(items, 1).sample_uniform_negative(graph, 1, node_timestamp_attr_name="nts", exclude_existing_edges=True)
    with pytest.raises(ValueError, match="^UniformNegativeSampler: found no negative destination") as raised:
        next(iter(pipe))
    message = str(raised.value)
    assert "(edge exclusion)" in message and "later than the pair's time (temporal negatives)" in message
    assert "sample_uniform_negatives" not in message and "exclude_edges" not in message and "node_time" not in message


@pytest.mark.parametrize("kind", KINDS)
def test_labels_not_one_per_pair_are_refused(kind):
    """Found in review: a hand-built batch of 2 pairs and 3 labels got 7 labels for 6 seeds."""
    graph, edges = graph_and_edges(kind)
    etype, pairs = next(iter(seed_items(kind, edges, "link", 2).items()))
    seeds, labels = (pairs, torch.ones(3)) if kind == "untyped" else ({etype: pairs}, {etype: torch.ones(3)})
    sampler = gp.UniformNegativeSampler(gp.ItemSampler(gp.ItemSet(torch.zeros(1, 2, dtype=torch.int64), names="seeds"), 1), graph, 2)
    with pytest.raises(ValueError, match=r"UniformNegativeSampler: the MiniBatch's `labels` must have a row per pair \(2\), got shape \(3,\)"):
        sampler.process(gp.MiniBatch(seeds=seeds, labels=labels))
