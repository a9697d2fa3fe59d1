"""The Triton kernels (on a GPU, or in Triton's interpreter on CPU): the NS kernels draw
the numba kernels' edges, edge for edge, and the GPU path uses them for uniform layers; the
cache's lookup copies exactly the cached rows and flags the others."""

import os

import pytest
import torch
from test_gpu_sampling import random_graph

from graphpipe.ops import derive_key, gpu_sampling, sample_neighbors

has_cuda = torch.cuda.is_available()
try:
    from graphpipe.ops import cache_lookup, triton_sampling
except ImportError:  # CPU builds of torch do not ship triton
    cache_lookup = triton_sampling = None
pytestmark = pytest.mark.skipif(
    triton_sampling is None or not (has_cuda or os.environ.get("TRITON_INTERPRET") == "1"),
    reason="needs Triton with CUDA, or TRITON_INTERPRET=1 to run the kernels on CPU",
)
device = "cuda" if has_cuda else "cpu"


def total_or_raise(bad, total):
    assert int(bad) == 0
    return int(total)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_same_edges_as_the_numba_kernels(index_dtype):
    graph = random_graph(num_nodes=300, max_deg=90, seed=7)
    indptr, indices = graph.indptr.to(index_dtype), graph.indices.to(index_dtype)
    nodes = torch.randperm(300, generator=torch.Generator().manual_seed(8))[:200]
    for fanout in (1, 2, 5, 15, 64):
        for seed in range(2):
            key = derive_key(seed, fanout)
            want = sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=key)
            got = triton_sampling.sample_uniform_triton(
                indptr.to(device), indices.to(device), nodes.to(device), fanout, key, total_or_raise
            )
            for name, x, y in zip(("indptr", "indices", "edge_ids"), got[:3], want[:3]):
                assert torch.equal(x.cpu(), y), (fanout, seed, name)


def test_bad_ranges_reach_the_check():
    graph = random_graph(num_nodes=50, seed=1)
    indptr = graph.indptr.clone()
    indptr[10] = indptr[11] + 1  # node 10's range decreases
    seen = []
    triton_sampling.sample_uniform_triton(
        indptr.to(device), graph.indices.to(device), torch.arange(50, device=device), 4, 1,
        lambda bad, total: seen.append(int(bad)) or 0,
    )
    assert seen == [1]  # node 10 (node 9 reads a longer range, still inside the edges)


@pytest.mark.skipif(not has_cuda, reason="the dispatch needs CUDA ids")
def test_the_gpu_path_uses_the_kernels_for_uniform_layers(monkeypatch):
    calls = []
    fused = triton_sampling.sample_uniform_triton
    monkeypatch.setattr(triton_sampling, "sample_uniform_triton", lambda *a: calls.append(a) or fused(*a))
    graph = random_graph(num_nodes=300, max_deg=90, seed=7).to("cuda")
    gpu_sampling.sample_neighbors_torch(graph.indptr, graph.indices, torch.arange(300, device="cuda"), 5, key=3)
    assert len(calls) == 1


@pytest.mark.parametrize("dtype, row_shape", [(torch.float32, (100,)), (torch.bfloat16, (3,)), (torch.int64, ())])
def test_cache_lookup_copies_the_hits_and_flags_the_misses(dtype, row_shape):
    gen = torch.Generator().manual_seed(0)
    num_rows, capacity = 500, 120
    table = (torch.randn((num_rows,) + row_shape, generator=gen) * 100).to(dtype)
    cached_rows = torch.randperm(num_rows, generator=gen)[:capacity]
    slot_of_row = torch.full((num_rows + 1,), -1, dtype=torch.int32)
    slot_of_row[cached_rows] = torch.arange(capacity, dtype=torch.int32)
    ids = torch.randint(0, num_rows, (777,), generator=gen)
    out = torch.zeros((777,) + row_shape, dtype=dtype)
    referenced = torch.zeros(capacity + 1, dtype=torch.int32)
    miss, num_misses = cache_lookup.read_hits(
        ids.to(device), slot_of_row.to(device), table[cached_rows].to(device), out := out.to(device), referenced := referenced.to(device)
    )
    want_miss = slot_of_row[ids] < 0
    assert torch.equal(miss.cpu(), want_miss) and num_misses == int(want_miss.sum()) > 0
    hit = ~want_miss
    assert torch.equal(out.cpu()[hit], table[ids[hit]]) and not out.cpu()[want_miss].any()
    assert torch.equal(referenced.cpu()[:capacity], torch.isin(torch.arange(capacity), slot_of_row[ids[hit]].long()).int())
