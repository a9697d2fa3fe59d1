"""A destination id given more than once (a seed repeated in a batch) is compacted to its
first position, on every path of unique_and_compact and for every numba thread count:
the batch never depends on thread timing."""

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.ops import unique_and_compact
from graphpipe.ops.gpu_sampling import unique_and_compact_torch


def _model(dst, src):
    """Plain Python: destinations in order (repeats kept), then the other sources once
    each, ascending; a source's local id is the first position of its id."""
    dst, src = dst.tolist(), src.tolist()
    unique = dst + sorted(set(src) - set(dst))
    local = {}
    for i, x in enumerate(unique):
        local.setdefault(x, i)
    return unique, [local[x] for x in src]


# (id range, distinct destinations, sources): the dense table kernel, the serial hash
# kernel (sparse, few ids) and the parallel ranges kernel (sparse, from 64k ids).
PATHS = [(5000, 2000, 6000), (10**12, 300, 3000), (10**12, 20_000, 70_000)]


@pytest.mark.parametrize("id_range, num_distinct, num_src", PATHS)
def test_repeated_destinations_take_their_first_position(id_range, num_distinct, num_src, numba_threads):
    rng = np.random.default_rng(num_src)
    ids = torch.from_numpy(rng.choice(id_range, size=num_distinct, replace=False))
    # Every id twice, the halves aligned: on two threads each pair's positions were written
    # at the same moment. Then a few more repeats at random positions.
    dst = torch.cat([ids, ids, ids[rng.integers(0, num_distinct, size=50)]])
    src = torch.from_numpy(rng.integers(0, id_range, size=num_src))
    src[::2] = dst[rng.integers(0, dst.numel(), size=src[::2].numel())]  # sources that are destinations
    want_unique, want_local = _model(dst, src)
    for threads in (1, 2, 1, 2, 2, 2):
        with numba_threads(threads):
            for unique, local in (unique_and_compact(dst, src), unique_and_compact(dst, src, num_nodes=id_range)):
                assert unique.tolist() == want_unique
                assert local.tolist() == want_local
    unique, local = unique_and_compact_torch(dst, src)  # the GPU path's ops
    assert unique.tolist() == want_unique
    assert local.tolist() == want_local


@pytest.mark.parametrize("sampler, options", [("sample_neighbor", {}), ("sample_layer_neighbor", {"importance_sampling": 2})])
def test_a_batch_of_repeated_seeds_is_the_same_for_every_thread_count(sampler, options, graph_builder, numba_threads):
    graph = graph_builder(num_nodes=3000, max_degree=30, seed=4)
    # Oversampled items: every seed appears twice in its batch, at aligned positions.
    seeds = torch.arange(0, 3000, 7)
    items = gp.ItemSet(torch.stack([seeds, seeds]).reshape(-1), names="seeds")

    def batches():
        pipe = getattr(gp.ItemSampler(items, batch_size=len(items), shuffle=False), sampler)(graph, [5, 5], seed=3, **options)
        return [
            [(s.sampled_csc.indptr, s.sampled_csc.indices, s.original_row_node_ids) for s in mb.sampled_subgraphs]
            for mb in pipe
        ]

    runs = []
    for threads in (1, 2, 2, 1, 2, 2):
        with numba_threads(threads):
            runs.append(batches())
    for run in runs[1:]:
        for layers, want in zip(run, runs[0]):
            for got, expected in zip(layers, want):
                assert all(torch.equal(a, b) for a, b in zip(got, expected))
    # The seeds' in-edges from a repeated seed point at its first position.
    (indptr, indices, row_ids) = runs[0][0][-1]
    first = {}
    for i, x in enumerate(row_ids.tolist()):
        first.setdefault(x, i)
    assert all(first[int(row_ids[j])] == int(j) for j in indices)
