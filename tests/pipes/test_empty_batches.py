"""Empty link batches: a rank's share of a global link batch may hold no pair
(``DistributedItemSampler.from_part``); typed, its fields are ``{}``, which only the item
set's task tells from an empty node batch. Such a batch goes through every link stage
(negatives, sampling with seed-edge exclusion, fetching) as a valid empty link batch."""

import pytest
import torch

import graphpipe as gp
from graphpipe.batch.minibatch import MiniBatch
from sampling_checks import KINDS
from test_link_sampling import REVERSE_TYPES, link_graph, link_items


class EmptyShares(gp.ItemSampler):
    """An ItemSampler whose batches hold none of its items: a rank's empty shares of the
    global batches, made as ``DistributedItemSampler.from_part`` makes a share
    (``item_set.batch`` of no rows: ``{}`` fields when typed, ``[0, 2]`` seeds untyped)."""

    def stream(self, epoch, start=0):
        for batch in super().stream(epoch, start):
            yield MiniBatch(**self.item_set.batch(torch.empty(0, dtype=torch.int64)), batch_index=batch.batch_index)


def features(kind, graph):
    """``(store, node keys, edge keys)``: a node feature of every node type, an edge feature."""
    if kind == "untyped":
        store = gp.FeatureStore({"feat": torch.randn(graph.total_num_nodes, 3)}, {"ew": torch.randn(graph.total_num_edges, 2)})
        return store, ["feat"], ["ew"]
    etype = "author:writes:paper"
    nodes = {(t, "feat"): torch.randn(n, 3) for t, n in graph.num_nodes.items()}
    store = gp.FeatureStore(nodes, {(etype, "ew"): torch.randn(graph.num_edges[etype], 2)})
    return store, {t: ["feat"] for t in graph.num_nodes}, {etype: ["ew"]}


def by_type(value, key):
    return value if isinstance(value, dict) else {key: value}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
@pytest.mark.parametrize("exclude", [True, False])
def test_an_empty_share_of_link_batches_is_an_empty_link_batch(kind, sampler, exclude):
    """``sample_uniform_negative(...).sample_neighbor(..., exclude_seed_edges=True)
    .fetch_feature(...)`` (NS, LABOR; also without exclusion: the item set's task says
    ``{}`` is link seeds) of batches without pairs: no seeds, labels or indexes, every
    layer empty for every type, ``compacted_seeds`` ``{}`` or ``[0, 2]``, no feature rows;
    ``to_pyg()`` (binary and triplet) and ``as_typed()`` take them."""
    graph, edges, _ = link_graph(kind)
    store, keys, edge_keys = features(kind, graph)
    options = {"exclude_seed_edges": True, "include_reverse_edges": True} if exclude else {}
    if exclude and kind == "typed":
        options["reverse_etypes_mapping"] = REVERSE_TYPES
    pipe = EmptyShares(link_items(kind, edges), 8).sample_uniform_negative(graph, 2, exclude_existing_edges=exclude, seed=1)
    pipe = getattr(pipe, sampler)(graph, [3, 2], seed=2, **options).fetch_feature(store, keys, edge_feature_keys=edge_keys)
    batches = list(pipe)
    assert len(batches) == len(pipe) > 1
    for mb in batches:
        if kind == "typed":
            assert mb.seeds == {} and mb.labels == {} and mb.indexes == {} and mb.compacted_seeds == {}
        else:
            assert mb.seeds.shape == (0, 2) and mb.compacted_seeds.shape == (0, 2)
            assert mb.labels.dtype == torch.float32 and mb.labels.numel() == 0 and mb.indexes.numel() == 0
        assert mb.is_link_batch and mb.batch_size == 0 and mb.num_layers == 2
        for sg in mb.as_typed().sampled_subgraphs:
            assert set(sg.original_row_node_ids) == set(sg.original_column_node_ids) == set(graph.node_types if kind == "typed" else ["_N"])
            assert all(ids.numel() == 0 for ids in [*sg.original_row_node_ids.values(), *sg.original_column_node_ids.values()])
            assert all(csc.indptr.tolist() == [0] and csc.indices.numel() == 0 for csc in sg.sampled_csc.values())
            assert all(ids.numel() == 0 for ids in sg.original_edge_ids.values())
            if sampler == "sample_layer_neighbor":
                assert all(w.dtype == torch.float32 and w.numel() == 0 for w in sg.edge_weights.values())
        assert all(ids.numel() == 0 for ids in by_type(mb.input_nodes, "_N").values())
        assert len(mb.node_features) == len(keys if kind == "untyped" else graph.node_types)
        assert all(rows.shape == (0, 3) for rows in mb.node_features.values())
        assert all(rows.shape == (0, 2) for layer in mb.edge_features for rows in layer.values())
        for neg_sampling in ("binary", "triplet"):
            data = mb.to_pyg(neg_sampling=neg_sampling)
            assert sum(store.num_nodes for store in data.node_stores) == 0
            assert sum(store.edge_index.size(1) for store in data.edge_stores) == 0
        if kind == "untyped":
            assert data.src_index.numel() == data.dst_pos_index.numel() == data.dst_neg_index.numel() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_typed_share_of_node_batches_stays_a_node_batch(kind):
    """The other reading of ``{}``: an empty share of node batches has no ``compacted_seeds``."""
    graph, _, _ = link_graph(kind)
    items = gp.ItemSet(torch.arange(10), names="seeds")
    items = gp.HeteroItemSet({"paper": items}) if kind == "typed" else items
    batches = list(EmptyShares(items, 4).sample_neighbor(graph, [3, 2], seed=2))
    assert len(batches) == 3  # 10 items in batches of 4, every share empty
    for mb in batches:
        assert mb.compacted_seeds is None and not mb.is_link_batch
        assert all(ids.numel() == 0 for ids in by_type(mb.input_nodes, "_N").values())


@pytest.mark.parametrize("kind", KINDS)
def test_blocks_of_an_empty_link_batch(kind):
    """DGL blocks of an empty link batch: empty blocks of every type (DGL's environment only)."""
    dgl = pytest.importorskip("dgl")
    graph, edges, _ = link_graph(kind)
    pipe = EmptyShares(link_items(kind, edges), 8).sample_uniform_negative(graph, 2, seed=1)
    mb = next(iter(pipe.sample_neighbor(graph, [3, 2], seed=2, exclude_seed_edges=True)))
    for block in mb.blocks:
        assert block.num_src_nodes() == block.num_dst_nodes() == block.num_edges() == 0
        assert set(block.srctypes) == set(graph.node_types if kind == "typed" else ["_N"])
        assert all(block.srcnodes[t].data[dgl.NID].numel() == 0 for t in block.srctypes)
