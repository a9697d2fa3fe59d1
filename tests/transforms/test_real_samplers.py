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
    assert [type(s).__name__ for s in reversed(stages(loader.rewritten))][1:4] == [
        sampler_type.__name__, "ThreadPoolMap", "Prefetcher"
    ]
    assert live_graphpipe_threads() == []
