"""Uniform negative sampling for link prediction: corrupted destinations per positive pair.

For every positive pair ``(u, v)`` (an edge ``u -> v`` to predict), draw ``k`` negative
destinations ``v'`` uniformly from all nodes, giving the negative pairs ``(u, v')``:
GraphBolt's ``sample_uniform_negative`` (its negatives keep the source), which is also
the per-source protocol of ogbl-citation2's evaluation and the draws of PyG's
``neg_sampling="triplet"``. With ``exclude_edges``, a draw that is an edge ``u -> v'``
of the graph is redrawn, so every negative is a non-edge.

Randomness is counter-based (:mod:`graphpipe.ops.random`): negative ``j`` of pair ``i``,
``(u, v)``, is ``floor(n * uniform(vkey, j + k * attempt))`` with ``vkey =
hash2(hash2(hash2(key, i), u), v)``, for the first ``attempt = 0, 1, ...`` that is not an
edge. So a batch's negatives depend on the key and the pairs only, not on the thread
count or the worker; a pair repeated in a batch gets independent negatives (the
position), and ranks of a ``DistributedItemSampler``, which share a batch's key, draw
independent negatives for their different pairs (the endpoints).
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from graphpipe._internal.checks import check_int, check_node_pairs
from graphpipe.ops import torch_random
from graphpipe.ops.edge_lookup import has_source
from graphpipe.ops.random import hash2, uniform
from graphpipe.ops.selection import max_output_edges

__all__ = ["MAX_ATTEMPTS", "check_negative_ratio", "sample_uniform_negatives"]

# Draws per negative before giving up on a source that points at (nearly) every node:
# a source whose out-edges cover a fraction f of the nodes fails with probability f**1000.
MAX_ATTEMPTS = 1000
# Bytes a batch holds per negative: the draw, its seed pair and its index (int64), its label.
_BYTES_PER_NEGATIVE = 40


def check_negative_ratio(negative_ratio, num_pairs: int, where: str) -> int:
    """``negative_ratio`` as an int ``>= 1`` whose ``num_pairs * negative_ratio`` negatives
    fit in the machine's memory; a ValueError naming ``negative_ratio`` otherwise."""
    negative_ratio = check_int(negative_ratio, "negative_ratio", where, minimum=1)
    most = max_output_edges(_BYTES_PER_NEGATIVE)
    if num_pairs * negative_ratio > most:
        raise ValueError(
            f"{where}: `negative_ratio`={negative_ratio}: {num_pairs * negative_ratio} negatives for {num_pairs} "
            f"positive pair(s) would not fit in the machine's memory (at most {most}, {_BYTES_PER_NEGATIVE} bytes "
            f"each); use a smaller negative_ratio or batch_size"
        )
    return negative_ratio


@numba.njit(inline="always", nogil=True, cache=True)
def _uniform_node(vkey, counter, num_nodes):
    """A uniform node id in ``[0, num_nodes)`` from 53 random bits (bias below n / 2**53)."""
    return min(np.int64(uniform(vkey, counter) * num_nodes), num_nodes - 1)


@numba.njit(parallel=True, nogil=True, cache=True)
def _uniform_negatives(src, dst, num_nodes, k, key, indptr, indices, exclude_edges, sorted_indices, out):
    """``out[i, j]`` = negative ``j`` of pair ``i``; -1 where ``MAX_ATTEMPTS`` draws all hit
    edges (the caller raises)."""
    failed = 0
    for i in numba.prange(src.size):
        u = src[i]
        vkey = hash2(hash2(hash2(key, i), u), dst[i])
        for j in range(k):
            attempt = 0
            v = _uniform_node(vkey, j, num_nodes)
            while exclude_edges and has_source(indices, np.int64(indptr[v]), np.int64(indptr[v + 1]), u, sorted_indices):
                attempt += 1
                if attempt == MAX_ATTEMPTS:
                    v = -1
                    failed += 1
                    break
                v = _uniform_node(vkey, j + k * attempt, num_nodes)
            out[i, j] = v
    return failed


def sample_uniform_negatives(
    pairs: torch.Tensor,
    num_nodes: int,
    negative_ratio: int,
    *,
    key: int,
    indptr: torch.Tensor = None,
    indices: torch.Tensor = None,
    exclude_edges: bool = False,
    sorted_indices: bool = False,
) -> torch.Tensor:
    """``negative_ratio`` uniform negative destinations for each positive pair.

    Args:
        pairs: ``[N, 2]`` integer ``(source, destination)`` ids in ``[0, num_nodes)``.
        num_nodes: the number of nodes negatives are drawn from.
        negative_ratio: negatives per pair, ``>= 1``.
        key: a 64-bit key (an int in ``[0, 2**64)``), e.g. ``derive_key(seed, batch_index)``.
        indptr, indices: the graph's CSC arrays in host memory; needed with ``exclude_edges``.
        exclude_edges: redraw a negative ``v'`` while ``u -> v'`` is an edge of the graph.
        sorted_indices: every node's sources are sorted (edges are then found by binary
            search; :func:`~graphpipe.ops.edge_lookup.in_neighbours_sorted`).

    Returns:
        ``[N, negative_ratio]`` int64 negative destinations on ``pairs``' device: row
        ``i`` holds the negatives of pair ``i``, whose source they keep.

    Raises:
        ValueError: bad arguments (naming them; a ``negative_ratio`` whose negatives would
            not fit in memory), or, with ``exclude_edges``, a source
            with edges to nearly every node (no non-edge found in ``MAX_ATTEMPTS`` draws).
    """
    where = "sample_uniform_negatives"
    num_nodes = check_int(num_nodes, "num_nodes", where, minimum=1)
    negative_ratio = check_int(negative_ratio, "negative_ratio", where, minimum=1)
    if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= key < 2**64:
        raise ValueError(f"{where}: `key` must be an int in [0, 2**64), got {key!r}")
    pairs = check_node_pairs(pairs, num_nodes, "pairs", where)
    check_negative_ratio(negative_ratio, pairs.shape[0], where)
    if exclude_edges:
        if indptr is None or indices is None:
            raise ValueError(f"{where}: `exclude_edges=True` needs the graph's `indptr` and `indices`")
        if indptr.is_cuda or indices.is_cuda:
            raise NotImplementedError(f"{where}: `exclude_edges=True` needs the graph in host memory (CPU or pinned)")
        if indptr.numel() - 1 != num_nodes:
            raise ValueError(f"{where}: `indptr` has {indptr.numel() - 1} nodes, `num_nodes` is {num_nodes}")
    elif pairs.is_cuda:
        return _uniform_negatives_torch(pairs, num_nodes, negative_ratio, int(key))
    device = pairs.device
    host = pairs.cpu()
    src, dst = host[:, 0].contiguous().numpy(), host[:, 1].contiguous().numpy()
    if exclude_edges:
        arrays = (indptr.contiguous().numpy(), indices.contiguous().numpy())
    else:
        arrays = (np.zeros(1, np.int64), np.zeros(0, np.int64))
    out = np.empty((src.size, negative_ratio), np.int64)
    failed = _uniform_negatives(
        src, dst, num_nodes, negative_ratio, np.uint64(key), *arrays, bool(exclude_edges), bool(sorted_indices), out
    )
    if failed:
        row = int(np.flatnonzero((out < 0).any(axis=1))[0])
        raise ValueError(
            f"{where}: found no negative destination for source node {int(src[row])} in {MAX_ATTEMPTS} draws: "
            f"it has edges to (nearly) every one of the {num_nodes} nodes, so with `exclude_edges=True` it has "
            f"no non-edges to sample"
        )
    return torch.from_numpy(out).to(device)


def _uniform_negatives_torch(pairs: torch.Tensor, num_nodes: int, negative_ratio: int, key: int) -> torch.Tensor:
    """The first draws of :func:`_uniform_negatives` (no exclusion) in torch ops, bit for bit."""
    positions = torch.arange(pairs.size(0), device=pairs.device)
    vkeys = torch_random.hash2(torch_random.hash2(torch_random.hash2(key, positions), pairs[:, 0]), pairs[:, 1])
    draws = torch.arange(negative_ratio, device=pairs.device)
    u = torch_random.uniform(vkeys.unsqueeze(1), draws.unsqueeze(0))
    return torch.clamp((u * num_nodes).to(torch.int64), max=num_nodes - 1)
