"""Uniform negative sampling for link prediction: corrupted destinations per positive pair.

Each positive pair ``(u, v)`` gets ``k`` negative destinations ``v'`` drawn uniformly from
all nodes (a typed graph: from the edge type's destination type), keeping the source:
GraphBolt's ``sample_uniform_negative``, ogbl-citation2's protocol, PyG's
``neg_sampling="triplet"``. With ``exclude_edges`` a draw that is an edge ``u -> v'`` is
redrawn. Negative ``j`` of pair ``i`` is ``floor(n * uniform(vkey, j + k * attempt))``,
``vkey = hash2(hash2(hash2(key, i), u), v)``, for the first ``attempt`` that is not an edge:
independent of threads and workers, and independent for repeated pairs and across ranks.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numba
import numpy as np
import torch

from graphpipe._internal.checks import check_int, check_node_pairs
from graphpipe.ops import torch_random
from graphpipe.ops.edge_lookup import has_source, in_edge_range
from graphpipe.ops.random import hash2, uniform
from graphpipe.ops.selection import check_key, max_output_edges

__all__ = ["sample_random_pairs", "MAX_ATTEMPTS", "check_negative_ratio", "sample_uniform_negatives"]

# Draws per negative before giving up: a source with edges to a fraction f of the nodes
# fails with probability f**1000.
MAX_ATTEMPTS = 1000
# Binary temporal negatives: draws before the rows still without a valid node are checked
# for having none at all (a scan of the candidates' times, paid only then).
_FALLBACK_AFTER = 8
# A node time that constrains nothing (graphpipe.ops.temporal.UNTIMED).
_UNTIMED = np.iinfo(np.int64).min
# The CSC arrays of a graph without edges: the kernel's graph when no draw is checked against one.
_NO_GRAPH = (np.zeros(1, np.int64), np.zeros(0, np.int64))
# Bytes a batch holds per negative: the draw, its seed pair and its index (int64), its label.
_BYTES_PER_NEGATIVE = 40


def check_negative_ratio(negative_ratio, num_pairs: int, where: str) -> int:
    """``negative_ratio`` as an int ``>= 1`` whose negatives fit in memory, else a ValueError."""
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
def _uniform_node(vkey, counter, first, count):
    """A uniform node id in ``[first, first + count)`` from 53 random bits (bias below count / 2**53)."""
    return first + min(np.int64(uniform(vkey, counter) * count), count - 1)


@numba.njit(inline="always", nogil=True, cache=True)
def _too_late(node_time, v, latest, i):
    """Whether node ``v``'s time is later than ``latest[i]`` (an untimed node never is)."""
    return node_time.size > 0 and node_time[v] != _UNTIMED and node_time[v] > latest[i]


@numba.njit(inline="always", nogil=True, cache=True)
def _is_edge(indptr, indices, type_per_edge, edge_type, u, v, sorted_indices):
    start, end = in_edge_range(indptr, type_per_edge, v, edge_type)
    return has_source(indices, start, end, u, sorted_indices)


@numba.njit(parallel=True, nogil=True, cache=True)
def _uniform_negatives(src, dst, first, count, k, key, indptr, indices, type_per_edge, edge_type, exclude_edges, sorted_indices, node_time, latest, out):
    """``out[i, j]`` = negative ``j`` of pair ``i``, -1 where ``MAX_ATTEMPTS`` draws hit edges
    (of ``edge_type``, any if negative) or nodes later than ``latest[i]``; returns the
    count of those."""
    failed = 0
    for i in numba.prange(src.size):
        u = src[i]
        vkey = hash2(hash2(hash2(key, i), u), dst[i])
        for j in range(k):
            attempt = 0
            v = _uniform_node(vkey, j, first, count)
            while _too_late(node_time, v, latest, i) or (exclude_edges and _is_edge(indptr, indices, type_per_edge, edge_type, u, v, sorted_indices)):
                attempt += 1
                if attempt == MAX_ATTEMPTS:
                    v = -1
                    failed += 1
                    break
                v = _uniform_node(vkey, j + k * attempt, first, count)
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
    candidates: Optional[Tuple[int, int]] = None,
    type_per_edge: Optional[torch.Tensor] = None,
    edge_type: int = -1,
    node_time: Optional[torch.Tensor] = None,
    latest: Optional[torch.Tensor] = None,
    where: str = "sample_uniform_negatives",
) -> torch.Tensor:
    """``negative_ratio`` uniform negative destinations for each positive pair.

    Args:
        pairs: ``[N, 2]`` integer ``(source, destination)`` ids in ``[0, num_nodes)``.
        num_nodes: the graph's number of nodes.
        negative_ratio: negatives per pair, ``>= 1``.
        key: a 64-bit key (an int in ``[0, 2**64)``), e.g. ``derive_key(seed, batch_index)``.
        indptr, indices: the graph's CSC arrays in host memory, for ``exclude_edges``.
        exclude_edges: redraw a negative ``v'`` while ``u -> v'`` is an edge of the graph.
        sorted_indices: :func:`~graphpipe.ops.edge_lookup.in_neighbours_sorted` of the graph.
        candidates: ``(first, count)``: draw from the ids ``[first, first + count)`` (a typed
            graph's destination type), default all nodes.
        type_per_edge, edge_type: a typed graph's edge type ids and the pairs' edge type:
            ``exclude_edges`` then avoids edges of that type only.
        node_time, latest: ``[num_nodes]``, ``[N]`` int64: a draw later than ``latest[i]``
            is redrawn, as an edge with ``exclude_edges`` (UNTIMED nodes: never); if none is
            that early (a dataset's first events), the earliest one, as PyG's ``neg_sample``.
        where: the caller's name, for error messages.

    Returns:
        ``[N, negative_ratio]`` int64 negative destinations on ``pairs``' device: row
        ``i`` holds the negatives of pair ``i``, whose source they keep.

    Raises:
        ValueError: bad arguments (naming them), or no valid draw in ``MAX_ATTEMPTS``.
    """
    num_nodes = check_int(num_nodes, "num_nodes", where, minimum=1)
    key = check_key(key, where)
    first, count = (0, num_nodes) if candidates is None else candidates
    if not 0 <= first < first + count <= num_nodes:
        raise ValueError(f"{where}: `candidates` {candidates!r} must be a non-empty range of ids below {num_nodes}")
    pairs = check_node_pairs(pairs, num_nodes, "pairs", where)
    negative_ratio = check_negative_ratio(negative_ratio, pairs.shape[0], where)
    if exclude_edges:
        if indptr is None or indices is None:
            raise ValueError(f"{where}: `exclude_edges=True` needs the graph's `indptr` and `indices`")
        if indptr.is_cuda or indices.is_cuda:
            raise NotImplementedError(f"{where}: `exclude_edges=True` needs the graph in host memory (CPU or pinned)")
        if indptr.numel() - 1 != num_nodes:
            raise ValueError(f"{where}: `indptr` has {indptr.numel() - 1} nodes, `num_nodes` is {num_nodes}")
    elif pairs.is_cuda and node_time is None:
        return first + _uniform_negatives_torch(pairs, count, negative_ratio, key)
    host = pairs.cpu()  # one copy of CUDA pairs, not one per column
    src, dst = (host[:, j].contiguous().numpy() for j in (0, 1))
    arrays = tuple(t.contiguous().numpy() for t in (indptr, indices)) if exclude_edges else _NO_GRAPH
    types = np.zeros(0, np.uint8) if type_per_edge is None else type_per_edge.contiguous().numpy()
    times = (np.zeros(0, np.int64), np.zeros(0, np.int64)) if node_time is None else (node_time.numpy(), latest.cpu().numpy())
    out = np.empty((src.size, negative_ratio), np.int64)
    failed = _uniform_negatives(
        src, dst, first, count, negative_ratio, np.uint64(key), *arrays, types, int(edge_type), bool(exclude_edges),
        bool(sorted_indices), *times, out,
    )  # fmt: skip
    if failed and node_time is not None:  # PyG's fallback where no candidate is early enough
        node, time = _earliest(times[0], first, count)
        out[(out < 0) & (time > times[1])[:, None]] = node
    if failed and (out < 0).any():
        row = int(np.flatnonzero((out < 0).any(axis=1))[0])
        raise ValueError(
            f"{where}: found no negative destination for source node {int(src[row])} in {MAX_ATTEMPTS} draws: "
            f"(nearly) every one of the {count} candidate nodes is its neighbour (edge exclusion) or later "
            f"than the pair's time (temporal negatives)"
        )
    return torch.from_numpy(out).to(pairs.device)


def _earliest(node_time, first: int, count: int):
    """``(id, time)`` of the earliest of the candidates ``[first, first + count)`` (the
    first on ties), a negative for pairs no candidate precedes (PyG's fallback);
    ``node_time`` a numpy array or a tensor."""
    span = node_time[first : first + count]
    i = int(span.argmin())
    return first + i, span[i]


def _uniform_negatives_torch(pairs: torch.Tensor, num_nodes: int, negative_ratio: int, key: int) -> torch.Tensor:
    """The first draws of :func:`_uniform_negatives` (no exclusion) in torch ops, bit for bit."""
    positions = torch.arange(pairs.size(0), device=pairs.device)
    vkeys = torch_random.hash2(torch_random.hash2(torch_random.hash2(key, positions), pairs[:, 0]), pairs[:, 1])
    draws = torch.arange(negative_ratio, device=pairs.device)
    u = torch_random.uniform(vkeys.unsqueeze(1), draws.unsqueeze(0))
    return torch.clamp((u * num_nodes).to(torch.int64), max=num_nodes - 1)


def sample_random_pairs(
    num_pairs: int,
    sources: Tuple[int, int],
    destinations: Tuple[int, int],
    key: int,
    device=None,
    node_time: Optional[torch.Tensor] = None,
    latest: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``[num_pairs, 2]`` int64 node pairs whose source is uniform over ``sources`` and
    destination uniform over ``destinations`` (each ``(first id, count)``), all independent:
    PyG's ``LinkNeighborLoader`` binary negatives. Pair ``j`` draws ``uniform(hash2(key,
    j), 0)`` and ``(.., 1)``, so a batch's pairs depend only on ``key``. Temporal:
    ``node_time`` (``[num_nodes]`` int64) and ``latest`` (``[num_pairs]``): an end later
    than its pair's ``latest`` is redrawn (draw ``2 * attempt + column``); where no node of
    the range is that early, the earliest one (PyG's fallback)."""
    rows = torch.arange(num_pairs, device=device)
    vkeys = torch_random.hash2(int(key), rows)
    columns = []
    for column, (first, count) in enumerate((sources, destinations)):
        nodes = torch.empty_like(rows)
        todo = rows
        for attempt in range(MAX_ATTEMPTS):
            if attempt == _FALLBACK_AFTER:  # PyG's fallback for the rows no node of the range precedes
                node, time = _earliest(node_time, first, count)  # read only when draws keep failing (rare)
                never = time > latest[todo]
                nodes[todo[never]] = node
                todo = todo[~never]
                if todo.numel() == 0:
                    break
            u = torch_random.uniform(vkeys[todo], torch.full_like(todo, 2 * attempt + column))
            nodes[todo] = first + torch.clamp((u * count).to(torch.int64), max=count - 1)
            if node_time is None:
                break
            t = node_time[nodes[todo]]
            todo = todo[(t != _UNTIMED) & (t > latest[todo])]
            if todo.numel() == 0:
                break
        else:
            raise ValueError(
                f"sample_random_pairs: found no node of ids [{first}, {first + count}) not later than time "
                f"{int(latest[todo[0]])} in {MAX_ATTEMPTS} draws"
            )
        columns.append(nodes)
    return torch.stack(columns, dim=1)
