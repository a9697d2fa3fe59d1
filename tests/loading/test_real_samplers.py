"""Rewritten chains with graphpipe's own samplers give the plain chain's batches."""

import pytest
import torch

import graphpipe as gp
from graphpipe.transforms import stages, thread_pool

from toy_pipes import assert_same_batches, live_graphpipe_threads


@pytest.fixture(scope="module")
def data():
    return gp.datasets.synthetic_node_classification(num_nodes=3000, avg_degree=8, feature_dim=8, seed=1)


def _chain(data, method):
    items = gp.ItemSampler(data.train_set, batch_size=64, shuffle=True, seed=5)
    return getattr(items, method)(data.graph, [4, 3], seed=9).fetch_feature(data.features, ["feat"])


@pytest.mark.parametrize("method", ["sample_neighbor", "sample_layer_neighbor"])
def test_default_rewrite_and_a_thread_pool_give_the_plain_batches(data, method):
    plain_pipe = _chain(data, method)
    plain = list(plain_pipe) + list(plain_pipe)
    loader = gp.DataLoader(_chain(data, method))
    assert_same_batches(plain, list(loader) + list(loader))
    sampler_type = type(plain_pipe.source)
    pooled = gp.DataLoader(_chain(data, method), transforms=[thread_pool(sampler_type, 3)])
    assert "pool of 3 threads" in pooled.explain()
    assert_same_batches(plain, list(pooled) + list(pooled))
    assert [type(s).__name__ for s in reversed(stages(loader.rewritten)) if not isinstance(s, gp.loading.Timed)][1:5] == [
        sampler_type.__name__, "FeatureFetcher", "ThreadPoolMap", "Prefetcher"
    ]
    assert live_graphpipe_threads() == []


def _link_chain(data):
    src, dst = data.graph.edge_index()
    pairs = torch.stack([src, dst], dim=1)[::7]
    items = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), batch_size=64, shuffle=True, seed=5)
    pipe = items.sample_uniform_negative(data.graph, 2, exclude_existing_edges=True, seed=3)
    pipe = pipe.sample_neighbor(data.graph, [4, 3], seed=9, exclude_seed_edges=True, include_reverse_edges=True)
    return pipe.fetch_feature(data.features, ["feat"])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_link_prediction_chain_gives_the_plain_batches_in_the_loader(data, num_workers):
    plain_pipe = _link_chain(data)
    plain = list(plain_pipe) + list(plain_pipe)
    loader = gp.DataLoader(_link_chain(data), num_workers=num_workers)
    batches = list(loader) + list(loader)
    assert_same_batches(plain, batches)
    for a, b in zip(plain, batches):
        assert torch.equal(a.indexes, b.indexes) and torch.equal(a.compacted_seeds, b.compacted_seeds)
        assert torch.equal(a.item_ids, b.item_ids)
    loader.close()
    assert live_graphpipe_threads() == []
