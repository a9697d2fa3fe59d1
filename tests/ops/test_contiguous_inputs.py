"""Kernels take contiguous arrays: a strided view of ids (a column of ``[N, 2]`` pairs)
is made contiguous before a kernel call, so it does not compile the kernel once more for
numba's non-contiguous layout ("A"), a few seconds per kernel on a user's first batch."""

import numba
import torch

from graphpipe.ops import temporal, typed_sampling
from hetero_graphs import hetero_graph


def _layouts(kernel) -> set:
    return {arg.layout for signature in kernel.signatures for arg in signature if isinstance(arg, numba.types.Array)}


def test_typed_segments_of_a_pair_column():
    graph = hetero_graph(seed=2)[0]
    nodes = torch.arange(graph.total_num_nodes)
    pairs = torch.stack([nodes, nodes], dim=1)
    num_types = len(graph.edge_types)
    strided = typed_sampling.typed_segments_of_nodes(graph.indptr, graph.type_per_edge, [(pairs[:, 1], [0])], num_types)
    plain = typed_sampling.typed_segments_of_nodes(graph.indptr, graph.type_per_edge, [(nodes, [0])], num_types)
    assert all(torch.equal(a, b) for a, b in zip(strided, plain))
    assert _layouts(typed_sampling._segments_of_nodes) == {"C"}


def test_temporal_draws_with_strided_key_ids():
    indptr = torch.tensor([0, 40, 40], dtype=torch.int64)
    indices = torch.zeros(40, dtype=torch.int64)
    times = torch.arange(40).numpy()
    arrays = temporal.TimeArrays(indices.numpy(), times[:2], times, torch.arange(40).numpy())
    bounds = torch.stack([indptr[:-1], indptr[1:]], dim=1).reshape(-1)
    lo, hi = torch.full((2,), temporal.UNTIMED), torch.full((2,), 100)
    key_ids = torch.arange(4).view(2, 2)[:, 1]
    assert not key_ids.is_contiguous()
    strided = temporal.valid_candidates(bounds, lo, hi, arrays, draws=(5, key_ids, torch.full((2,), 2)))
    plain = temporal.valid_candidates(bounds, lo, hi, arrays, draws=(5, key_ids.contiguous(), torch.full((2,), 2)))
    assert all(torch.equal(a, b) for a, b in zip(strided, plain))
    assert _layouts(temporal._count_drawn) == {"C"}
