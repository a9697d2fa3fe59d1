"""Sampling-only benchmarks: one batch through the three-layer loop (per-layer sampling
and unique-and-compact), as ``SubgraphSampler.sample_subgraphs`` does in a pipe."""

from __future__ import annotations

import statistics

import pytest

from common import batch_shape, consecutive_overlap, endless
from conftest import BATCH_SIZE


@pytest.mark.parametrize("name", ["ns", "labor0", "laborstar"])
def test_sampling(benchmark, make_sampler, name):
    sampler = make_sampler(name)
    batches = endless(sampler.source)
    minibatch = benchmark.pedantic(
        sampler.sample_subgraphs, setup=lambda: ((next(batches),), {}), rounds=30, warmup_rounds=3
    )
    shape = batch_shape(minibatch)
    benchmark.extra_info.update(shape)
    assert shape["input_nodes"] > BATCH_SIZE


@pytest.mark.parametrize("kappa", [1, 4, 32, 256])
def test_labor_batch_dependency(benchmark, make_sampler, kappa):
    """LABOR-0 with ``batch_dependency=kappa`` on consecutive batches: extra_info has the
    input nodes per batch and the fraction shared with the previous batch's."""
    sampler = make_sampler("labor0", batch_dependency=kappa)
    batches = endless(sampler.source)
    input_nodes = []

    def sample(minibatch):
        minibatch = sampler.sample_subgraphs(minibatch)
        input_nodes.append(minibatch.input_nodes)
        return minibatch

    benchmark.pedantic(sample, setup=lambda: ((next(batches),), {}), rounds=20, warmup_rounds=2)
    benchmark.extra_info["input_nodes"] = statistics.median(nodes.numel() for nodes in input_nodes)
    benchmark.extra_info["previous_batch_overlap"] = consecutive_overlap(input_nodes)
