import numpy as np
import pytest
import torch

from graphpipe import CSCFormat, CSCGraph, FeatureStore, ItemSampler, ItemSet, MiniBatch, SampledSubgraph
from graphpipe.pipes import FeatureFetcher

NUM_NODES, NUM_EDGES = 30, 60


def _store():
    g = torch.Generator().manual_seed(0)
    return FeatureStore(
        {"feat": torch.randn(NUM_NODES, 4, generator=g), "deg": np.arange(NUM_NODES, dtype=np.int64)},
        {"w": torch.rand(NUM_EDGES, generator=g), "type": torch.randint(0, 3, (NUM_EDGES, 2), generator=g)},
    )


def _layer(src, dst_count, edge_ids, indptr):
    src = torch.tensor(src)
    return SampledSubgraph(
        sampled_csc=CSCFormat(torch.tensor(indptr), torch.zeros(len(edge_ids), dtype=torch.int64)),
        original_row_node_ids=src,
        original_column_node_ids=src[:dst_count],
        original_edge_ids=torch.tensor(edge_ids),
    )


def _two_layer_batch():
    # seeds [7, 3] <- layer 1 sources [7, 3, 12, 0] <- layer 0 sources [7, 3, 12, 0, 29]
    top = _layer([7, 3, 12, 0], 2, [5, 40, 41], [0, 1, 3])
    bottom = _layer([7, 3, 12, 0, 29], 4, [5, 6, 40, 59, 1], [0, 2, 3, 4, 5])
    return MiniBatch(
        seeds=torch.tensor([7, 3]),
        sampled_subgraphs=[bottom, top],
        input_nodes=bottom.original_row_node_ids,
        node_features={"kept": torch.ones(5)},
        batch_index=4,
    )


def test_node_features_of_input_nodes_and_edge_features_per_layer():
    store = _store()
    fetcher = FeatureFetcher([], store, node_feature_keys=["feat", "deg"], edge_feature_keys=["w", "type"])
    mb = _two_layer_batch()
    out = fetcher.fetch(mb)
    table = store["feat"].data
    assert torch.equal(out.node_features["feat"], table[[7, 3, 12, 0, 29]])
    assert out.node_features["deg"].tolist() == [7, 3, 12, 0, 29]
    assert torch.equal(out.node_features["kept"], torch.ones(5))
    assert len(out.edge_features) == 2
    for layer, subgraph in zip(out.edge_features, out.sampled_subgraphs):
        eids = subgraph.original_edge_ids
        assert torch.equal(layer["w"], store["edge", "w"].data[eids])
        assert torch.equal(layer["type"], store["edge", "type"].data[eids])
    assert out.edge_features[1]["type"].shape == (3, 2)
    # The input batch is left as it was, and the rest of the batch is carried over.
    assert list(mb.node_features) == ["kept"] and mb.edge_features == []
    assert out.batch_index == 4 and out.sampled_subgraphs is mb.sampled_subgraphs


def test_after_sample_neighbor_rows_belong_to_the_sampled_nodes_and_edges():
    g = torch.Generator().manual_seed(2)
    coo_src, dst = torch.randint(0, 100, (2, 400), generator=g)
    graph = CSCGraph.from_coo(coo_src, dst, num_nodes=100)
    # Each row holds its own id, so a fetched row says which node or edge it came from.
    store = FeatureStore({"id": torch.arange(100).repeat(2, 1).t().contiguous()}, {"eid": np.arange(400)})
    pipe = ItemSampler(ItemSet(100), batch_size=32, shuffle=True, seed=0).sample_neighbor(graph, [3, 2], seed=1)
    pipe = pipe.fetch_feature(store, node_feature_keys=["id"], edge_feature_keys=["eid"])
    for mb in pipe:
        assert torch.equal(mb.node_features["id"], mb.input_nodes.repeat(2, 1).t())
        assert len(mb.edge_features) == 2
        for layer, subgraph in zip(mb.edge_features, mb.sampled_subgraphs):
            eids = layer["eid"]
            assert torch.equal(eids, subgraph.original_edge_ids)
            src = subgraph.original_row_node_ids[subgraph.sampled_csc.indices]
            assert torch.equal(coo_src[eids], src)  # edge ids are positions in the COO the graph was built from


def test_seeds_only_batches_get_seed_features_through_the_pipe():
    store = _store()
    labels = torch.arange(NUM_NODES) % 3
    items = ItemSet((torch.arange(NUM_NODES), labels), names=("seeds", "labels"))
    pipe = ItemSampler(items, batch_size=8, shuffle=True, seed=1).fetch_feature(store, node_feature_keys=["feat"])
    assert isinstance(pipe, FeatureFetcher) and len(pipe) == 4
    seen = []
    for mb in pipe:
        assert torch.equal(mb.node_features["feat"], store["feat"].data[mb.seeds])
        assert torch.equal(mb.labels, labels[mb.seeds])
        seen += mb.seeds.tolist()
    assert sorted(seen) == list(range(NUM_NODES))


def test_memmap_features(tmp_path):
    table = np.random.default_rng(1).standard_normal((NUM_NODES, 3)).astype(np.float16)
    np.save(tmp_path / "x.npy", table)
    fetcher = FeatureFetcher([], FeatureStore({"x": str(tmp_path / "x.npy")}), ["x"])
    out = fetcher.fetch(_two_layer_batch())
    assert out.node_features["x"].dtype == torch.float16
    assert np.array_equal(out.node_features["x"].numpy(), table[[7, 3, 12, 0, 29]])


def test_unknown_keys_fail_at_construction():
    store = _store()
    with pytest.raises(KeyError, match=r"unknown node feature\(s\) \['fet'\]; known node features: \['feat', 'deg'\]"):
        FeatureFetcher([], store, node_feature_keys=["feat", "fet"])
    with pytest.raises(KeyError, match=r"unknown edge feature\(s\) \['feat'\]; known edge features: \['w', 'type'\]"):
        FeatureFetcher([], store, edge_feature_keys=["feat"])
    with pytest.raises(TypeError, match=r"`node_feature_keys` must be a list of names, got the string 'feat'"):
        FeatureFetcher([], store, node_feature_keys="feat")
    with pytest.raises(TypeError, match=r"`features` must be a graphpipe.FeatureStore, got dict"):
        FeatureFetcher([], {"feat": torch.zeros(3)}, node_feature_keys=["feat"])


def test_batches_missing_what_is_asked_for():
    store = _store()
    with pytest.raises(ValueError, match=r"edge features need `sampled_subgraphs`"):
        FeatureFetcher([], store, edge_feature_keys=["w"]).fetch(MiniBatch(seeds=torch.tensor([1])))
    with pytest.raises(ValueError, match=r"neither `input_nodes` nor `seeds`"):
        FeatureFetcher([], store, node_feature_keys=["feat"]).fetch(MiniBatch())


def _sampled_chain():
    g = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=g)
    graph = CSCGraph.from_coo(src, dst, num_nodes=NUM_NODES)
    return ItemSampler(ItemSet(NUM_NODES), batch_size=8, seed=0).sample_neighbor(graph, [3, 2], seed=1)


@pytest.mark.parametrize(
    "node, edge, match",
    [
        ({"feat": torch.zeros(NUM_NODES - 5, 2)}, {}, r"node feature 'feat' has 25 rows, .* has 30 nodes"),
        ({}, {"w": torch.zeros(NUM_NODES)}, r"edge feature 'w' has 30 rows, .* has 60 edges"),
    ],
)
def test_tables_of_the_wrong_size_fail_at_construction(node, edge, match):
    store = FeatureStore(node, edge)
    # found through the sampler upstream, also when other stages sit in between
    for chain in (_sampled_chain(), _sampled_chain().transform(lambda mb: mb)):
        with pytest.raises(ValueError, match=r"FeatureFetcher: " + match):
            chain.fetch_feature(store, node_feature_keys=list(node), edge_feature_keys=list(edge))


def test_tables_with_more_rows_than_the_graph_are_accepted_and_reads_stay_checked():
    """GraphBolt and PyG accept padded tables (or nodes added later): only the ids read
    must be in range."""
    node_table = torch.arange(NUM_NODES + 10).repeat(2, 1).t().contiguous()
    store = FeatureStore({"id": node_table}, {"eid": torch.arange(NUM_EDGES + 3)})
    pipe = _sampled_chain().fetch_feature(store, node_feature_keys=["id"], edge_feature_keys=["eid"])
    for mb in pipe:
        assert torch.equal(mb.node_features["id"], node_table[mb.input_nodes])
        for layer, subgraph in zip(mb.edge_features, mb.sampled_subgraphs):
            assert torch.equal(layer["eid"], subgraph.original_edge_ids)
    with pytest.raises(ValueError, match=r"node feature 'id' \(40 rows\): `seeds` holds node id 45, out of range"):
        pipe.fetch(MiniBatch(seeds=torch.tensor([3, 45])))


def test_an_out_of_range_edge_id_is_named_as_one_at_fetch_time():
    store = _store()
    batch = _two_layer_batch()
    batch.sampled_subgraphs[0].original_edge_ids[1] = NUM_EDGES + 10
    fetcher = FeatureFetcher([], store, edge_feature_keys=["w"])
    with pytest.raises(ValueError, match=r"edge feature 'w' \(60 rows\): `sampled_subgraphs\[0\]\.original_edge_ids` "
                       r"holds edge id 70, out of range: valid ids are 0..59 \(num_edges=60\)"):
        fetcher.fetch(batch)
    node_batch = MiniBatch(seeds=torch.tensor([1, NUM_NODES]))
    with pytest.raises(ValueError, match=r"node feature 'feat' \(30 rows\): `seeds` holds node id 30"):
        FeatureFetcher([], store, node_feature_keys=["feat"]).fetch(node_batch)


def _fetch_seeds(fetcher, seeds):
    return fetcher.fetch(MiniBatch(seeds=torch.tensor(seeds)))


def test_rows_a_batch_still_holds_are_never_overwritten():
    """The fetcher reuses its output blocks (no fresh memory to fault in every batch), but
    only blocks no tensor uses any more: batches, or views of them, that the loop keeps
    keep their rows while later batches are fetched."""
    store = _store()
    fetcher = FeatureFetcher([], store, ["feat", "deg"])
    table = store["node", "feat"].data
    kept = [_fetch_seeds(fetcher, [i, (i + 7) % NUM_NODES]) for i in range(12)]
    view = _fetch_seeds(fetcher, [1, 2, 3]).node_features["feat"][1:]  # only a view survives
    for _ in range(12):
        _fetch_seeds(fetcher, [4, 5, 6])
    for i, minibatch in enumerate(kept):
        assert torch.equal(minibatch.node_features["feat"], table[[i, (i + 7) % NUM_NODES]])
        assert minibatch.node_features["deg"].tolist() == [i, (i + 7) % NUM_NODES]
    assert torch.equal(view, table[[2, 3]])


def test_a_released_block_is_reused():
    fetcher = FeatureFetcher([], _store(), ["feat"])
    first = _fetch_seeds(fetcher, [1, 2, 3]).node_features["feat"]
    address = first.data_ptr()
    del first
    again = _fetch_seeds(fetcher, [4, 5]).node_features["feat"]
    assert again.data_ptr() == address
    assert torch.equal(again, _store()["node", "feat"].data[[4, 5]])


def test_a_pickled_fetcher_shares_no_blocks():
    import pickle

    fetcher = FeatureFetcher([], _store(), ["feat"])
    held = _fetch_seeds(fetcher, [1, 2]).node_features["feat"]
    copy = pickle.loads(pickle.dumps(fetcher))
    assert copy._blocks is not fetcher._blocks
    assert torch.equal(_fetch_seeds(copy, [3, 4]).node_features["feat"], _store()["node", "feat"].data[[3, 4]])
    assert torch.equal(held, _store()["node", "feat"].data[[1, 2]])
