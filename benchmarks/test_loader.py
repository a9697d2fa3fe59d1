"""Feature fetching alone, and whole epochs of ``gp.DataLoader`` with the default
transforms (stages overlapped) and without (``transforms=[]``, the plain chain)."""

from __future__ import annotations

import itertools

import pytest

import graphpipe as gp
from conftest import BATCH_SIZE


@pytest.mark.parametrize("name", ["ns", "labor0"])
def test_fetch_feature(benchmark, dataset, make_sampler, name):
    """``fetch_feature`` on already sampled batches (8 of them, in turn)."""
    fetcher = make_sampler(name).fetch_feature(dataset.features, node_feature_keys=["feat"])
    sampled = itertools.cycle(list(itertools.islice(fetcher.source, 8)))
    minibatch = benchmark.pedantic(fetcher.fetch, setup=lambda: ((next(sampled),), {}), rounds=30, warmup_rounds=3)
    assert minibatch.node_features["feat"].shape == (minibatch.input_nodes.numel(), 100)


@pytest.mark.parametrize("transforms", ["default", "plain"])
@pytest.mark.parametrize("name", ["ns", "labor0"])
def test_loader_epoch(benchmark, dataset, make_sampler, name, transforms):
    """One epoch (all training seeds) of ItemSampler -> sampler -> fetch_feature."""
    pipe = make_sampler(name).fetch_feature(dataset.features, node_feature_keys=["feat"])
    loader = gp.DataLoader(pipe, transforms=None if transforms == "default" else [])
    batches = benchmark.pedantic(lambda: sum(1 for _ in loader), rounds=3, warmup_rounds=1)
    loader.close()
    assert batches == len(dataset.train_set) // BATCH_SIZE
    benchmark.extra_info["batches"] = batches
    benchmark.extra_info["it_per_s"] = batches / benchmark.stats.stats.median
