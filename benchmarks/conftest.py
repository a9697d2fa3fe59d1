"""Fixtures of the pytest-benchmark suite: ``pytest benchmarks/`` (not part of the test suite).

The graph is ``synthetic_node_classification(num_nodes=200_000)`` (~5M edges, 100-dim
float32 features), a tenth of compare_graphbolt.py's, so the suite takes a few minutes.
Batches of 1024 shuffled training seeds, fanouts [15, 10, 5].
"""

from __future__ import annotations

import pytest

import graphpipe as gp

FANOUTS = [15, 10, 5]
BATCH_SIZE = 1024
IMPORTANCE_SAMPLING = {"labor0": 0, "laborstar": -1}


@pytest.fixture(scope="session")
def dataset() -> gp.datasets.NodeClassificationDataset:
    return gp.datasets.synthetic_node_classification(num_nodes=200_000, seed=0)


@pytest.fixture
def make_sampler(dataset):
    """``make_sampler(name, **options)``: ItemSampler -> sampler pipe, ``name`` one of
    ``"ns"`` (sample_neighbor), ``"labor0"``, ``"laborstar"`` (sample_layer_neighbor with
    importance_sampling 0 / -1; ``options`` go to it)."""

    def make(name: str, **options) -> gp.SubgraphSampler:
        source = gp.ItemSampler(dataset.train_set, BATCH_SIZE, shuffle=True, drop_last=True, seed=0)
        if name == "ns":
            return source.sample_neighbor(dataset.graph, FANOUTS, seed=0, **options)
        return source.sample_layer_neighbor(
            dataset.graph, FANOUTS, importance_sampling=IMPORTANCE_SAMPLING[name], seed=0, **options
        )

    return make
