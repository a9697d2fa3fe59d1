"""A synthetic power-law node-classification dataset, generated offline in seconds.

The graph is R-MAT (Chakrabarti et al., 2004, with Graph500's parameters), so degrees are
power-law like in real web and social graphs. Every node belongs to one of
``num_classes`` planted communities (its label), and a fraction of the R-MAT edges is
rewired to end inside the community of their source, at a node drawn in proportion to
its R-MAT degree, so degrees stay power-law in expectation. Features are the class's
mean vector plus heavy Gaussian noise: one node's features say little about its label,
but averaging over a neighbourhood, where most nodes share the label, removes much of
the noise. A GNN therefore beats an MLP by a wide margin on it.

Randomness is counter-based (:mod:`graphpipe.ops.random`), so the dataset is a function
of its arguments alone: the same on every run, platform and numba thread count.
"""

from __future__ import annotations

from functools import partial
from typing import Iterator, Sequence, Tuple

import numba
import numpy as np
import torch

from graphpipe.graph.csc_graph import CSCGraph, smallest_index_dtype
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import ItemSet
from graphpipe.ops.random import derive_key, hash2, uniform, uniform_open
from graphpipe.loading.compile import CompileJob
from graphpipe._internal.checks import check_int, check_number
from graphpipe.datasets.base import NodeClassificationDataset

__all__ = ["rmat_edges", "synthetic_node_classification"]

# Independent random streams of one seed, one per generation step.
_RMAT, _RELABEL, _LABELS, _REWIRE, _SPLIT, _MEANS, _FEATURES = range(7)
# Compiling the generator's kernels, once per install, on 2 cores, for the notice (with an
# empty numba cache: 4.9-5.3 s on a quiet machine).
GENERATION_FIRST_RUN = "5-10 s"


def rmat_edges(
    num_nodes: int,
    num_edges: int,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Draw ``num_edges`` directed R-MAT edges on ``num_nodes`` nodes.

    Each edge descends ``scale = ceil(log2(num_nodes))`` levels of the adjacency matrix,
    picking the top-left, top-right, bottom-left or bottom-right quadrant with
    probabilities ``a``, ``b``, ``c`` and ``d = 1 - a - b - c`` (defaults: Graph500's;
    resolved to multiples of 2^-16). The ``2^scale`` cells of each side are scaled onto
    ``[0, num_nodes)`` (``id * num_nodes >> scale``, so when ``num_nodes`` is not a power
    of two some nodes get two cells) and the node ids are randomly permuted, as Graph500
    does, so that hubs are not the smallest ids. Self loops and repeated edges are
    kept: this is the raw edge stream.

    Returns:
        ``(src, dst)``, two ``[num_edges]`` int32 tensors (``num_nodes <= 2**31``).
    """
    num_nodes, num_edges = _check_rmat("rmat_edges", num_nodes, num_edges, a, b, c, seed)
    chunks = _rmat_chunks(num_nodes, num_edges, max(num_edges, 1), a, b, c, seed)
    return next(chunks, (torch.empty(0, dtype=torch.int32), torch.empty(0, dtype=torch.int32)))


def rmat_edge_chunks(
    num_nodes: int,
    num_edges: int,
    chunk_edges: int,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    """:func:`rmat_edges` ``(num_nodes, num_edges, a, b, c, seed)`` in consecutive chunks
    of ``chunk_edges`` edges (the last may be shorter): their concatenation is exactly
    those edges, while memory holds one chunk and the node relabelling (4 bytes per
    node, drawn once). For edge lists larger than memory, written to disk chunk by chunk
    (``benchmarks/scale.py``)."""
    num_nodes, num_edges = _check_rmat("rmat_edge_chunks", num_nodes, num_edges, a, b, c, seed)
    chunk_edges = check_int(chunk_edges, "chunk_edges", "rmat_edge_chunks", minimum=1)
    return _rmat_chunks(num_nodes, num_edges, chunk_edges, a, b, c, seed)


def _check_rmat(where: str, num_nodes, num_edges, a, b, c, seed) -> Tuple[int, int]:
    """``(num_nodes, num_edges)`` as ints, after checking every argument."""
    check_int(seed, "seed", where)
    num_nodes = check_int(num_nodes, "num_nodes", where, minimum=1)
    num_edges = check_int(num_edges, "num_edges", where, minimum=0)
    a, b, c = (check_number(p, name, where, 0.0, 1.0) for name, p in (("a", a), ("b", b), ("c", c)))
    if a + b + c > 1.0 + 1e-12:
        raise ValueError(f"{where}: `a + b + c` must be <= 1 (d = 1 - a - b - c is the fourth quadrant), got {a + b + c!r}")
    if num_nodes > 2**31:
        raise ValueError(f"{where}: `num_nodes` must be <= 2**31 (int32 node ids), got {num_nodes}")
    return num_nodes, num_edges


def check_noise_and_split(feature_noise, split, where: str) -> Tuple[float, float, float]:
    """``split`` as three floats, after checking it and ``feature_noise`` (the arguments
    both synthetic datasets take)."""
    check_number(feature_noise, "feature_noise", where, 0.0)
    three = not isinstance(split, (str, bytes)) and isinstance(split, Sequence) and len(split) == 3
    if three:
        split = tuple(check_number(f, f"split[{i}]", where, 0.0, 1.0, low_open=True) for i, f in enumerate(split))
    if not three or sum(split) > 1.0 + 1e-9:
        raise ValueError(f"{where}: `split` must be three positive fractions (train, validation, test) summing to at most 1, got {split!r}")
    return split


def _rmat_chunks(num_nodes, num_edges, chunk_edges, a, b, c, seed):
    scale = max(int(num_nodes - 1).bit_length(), 1)
    relabel = np.argsort(_uniforms(_key(seed, _RELABEL), num_nodes), kind="stable").astype(np.int32)
    thresholds = [min(round(p * 2**16), 2**16) for p in (a, a + b, a + b + c)]
    for first in range(0, num_edges, chunk_edges):
        src = np.empty(min(chunk_edges, num_edges - first), dtype=relabel.dtype)
        dst = np.empty_like(src)
        _rmat_kernel(_key(seed, _RMAT), scale, num_nodes, *thresholds, relabel, first, src, dst)
        yield torch.from_numpy(src), torch.from_numpy(dst)


def synthetic_node_classification(
    num_nodes: int = 200_000,
    avg_degree: int = 30,
    num_classes: int = 10,
    feature_dim: int = 100,
    rewire_fraction: float = 0.6,
    feature_noise: float = 1.0,
    split: Sequence[float] = (0.1, 0.05, 0.1),
    seed: int = 0,
) -> NodeClassificationDataset:
    """A deterministic power-law graph with learnable, graph-correlated labels.

    Steps: draw ``num_nodes * avg_degree // 2`` R-MAT edges (:func:`rmat_edges`); give
    every node a uniformly random label in ``[0, num_classes)``; rewire the target of a
    ``rewire_fraction`` of the edges to a node of the source's class, chosen with
    probability proportional to its R-MAT degree; make the graph undirected (both
    directions of every edge), dropping self loops and repeated edges; draw features
    ``feat[v] = mean[label[v]] + feature_noise * N(0, I)`` with class means
    ``N(0, I / feature_dim)`` (unit length on average); split the non-isolated nodes at
    random into train / validation / test sets.

    With the defaults: 200,000 nodes, 4.9M directed edges (mean degree 25, maximum
    16,000; R-MAT leaves 38% of the nodes isolated), 12,468 / 6,234 / 12,468 train /
    validation / test nodes, edge homophily 0.59. On it an MLP on the features reaches
    about 32% validation accuracy and ``examples/node_classification.py``'s 3-layer
    GraphSAGE about 75% after 5 epochs. Generation takes about 0.7 s for the defaults
    and 10 s for 2M nodes (60M directed edges drawn) on two CPU cores, once numba has
    compiled the kernels (the first call in a fresh install, ~6 s, cached on disk).

    Args:
        num_nodes: number of nodes (ids ``0..num_nodes-1``).
        avg_degree: R-MAT edges drawn per node, counting both directions; the final
            mean degree is lower because R-MAT repeats many hub edges.
        num_classes: number of labels (planted communities).
        feature_dim: length of each node's feature vector.
        rewire_fraction: fraction of edges moved inside the source's community; the
            edge homophily is about ``rewire_fraction + (1 - rewire_fraction) / num_classes``.
        feature_noise: standard deviation of the per-dimension feature noise (class means
            are about 1.4 apart); larger values make the features alone less informative.
        split: fractions ``(train, validation, test)`` of the non-isolated nodes, summing
            to at most 1.
        seed: the dataset is a deterministic function of all arguments, seed included.

    Returns:
        A :class:`NodeClassificationDataset` named ``"synthetic"``: ``graph`` with int32
        ``indices`` (each node's neighbours sorted) and int32 ``indptr`` (int64 beyond
        2**31 - 1 edges); ``features["feat"]`` ``[num_nodes, feature_dim]`` float32;
        ``labels`` ``[num_nodes]`` int64; item sets with sorted seed ids.
    """
    where = "synthetic_node_classification"
    num_nodes = check_int(num_nodes, "num_nodes", where, minimum=2)
    avg_degree = check_int(avg_degree, "avg_degree", where, minimum=1)
    num_classes = check_int(num_classes, "num_classes", where, minimum=2)
    feature_dim = check_int(feature_dim, "feature_dim", where, minimum=1)
    check_number(rewire_fraction, "rewire_fraction", where, 0.0, 1.0)
    seed = check_int(seed, "seed", where)
    split = check_noise_and_split(feature_noise, split, where)

    # The kernels first, on a tiny graph: compiling them takes long once (a notice says so).
    tiny = partial(_generate, 256, 8, 2, 4, 0.5, 1.0, (0.3, 0.3, 0.3), 0)
    CompileJob([(where, tiny)], background=False, first_run=GENERATION_FIRST_RUN, kernel=_rmat_kernel).wait()
    return _generate(num_nodes, avg_degree, num_classes, feature_dim, rewire_fraction, feature_noise, split, seed)


def _generate(num_nodes, avg_degree, num_classes, feature_dim, rewire_fraction, feature_noise, split, seed):
    """:func:`synthetic_node_classification`'s dataset, for checked arguments."""
    where = "synthetic_node_classification"
    src, dst = rmat_edges(num_nodes, num_nodes * avg_degree // 2, seed=seed)
    src, dst = src.numpy(), dst.numpy()
    labels = np.minimum(
        (_uniforms(_key(seed, _LABELS), num_nodes) * num_classes).astype(np.int64), num_classes - 1
    )
    _rewire_into_communities(src, dst, labels, num_classes, rewire_fraction, _key(seed, _REWIRE))
    indptr, indices = _undirected_csc(src, dst, num_nodes)
    del src, dst
    graph = CSCGraph(torch.from_numpy(indptr).to(smallest_index_dtype(int(indptr[-1]))), torch.from_numpy(indices))

    means = np.empty((num_classes, feature_dim), dtype=np.float32)
    zero = np.zeros((1, feature_dim), dtype=np.float32)
    _gaussian_rows(_key(seed, _MEANS), zero, np.zeros(num_classes, np.int64), feature_dim**-0.5, means)
    feat = np.empty((num_nodes, feature_dim), dtype=np.float32)
    _gaussian_rows(_key(seed, _FEATURES), means, labels, feature_noise, feat)

    labels = torch.from_numpy(labels)
    connected = np.flatnonzero(np.diff(indptr) > 0)
    order = connected[np.argsort(_uniforms(_key(seed, _SPLIT), num_nodes)[connected], kind="stable")]
    sizes = [int(f * connected.size) for f in split]
    if min(sizes) < 1:
        raise ValueError(
            f"{where}: `split` {split!r} leaves an empty set among the {connected.size} "
            "non-isolated nodes; use more nodes or larger fractions"
        )
    bounds = np.cumsum([0] + sizes)
    train_set, validation_set, test_set = (
        _labelled_items(torch.from_numpy(np.sort(order[lo:hi]).astype(np.int64)), labels)
        for lo, hi in zip(bounds[:-1], bounds[1:])
    )
    return NodeClassificationDataset(
        name="synthetic",
        graph=graph,
        features=FeatureStore({"feat": torch.from_numpy(feat)}),
        train_set=train_set,
        validation_set=validation_set,
        test_set=test_set,
        num_classes=num_classes,
        labels=labels,
    )


def _labelled_items(seeds: torch.Tensor, labels: torch.Tensor) -> ItemSet:
    return ItemSet((seeds, labels[seeds]), names=("seeds", "labels"))


def _rewire_into_communities(src, dst, labels, num_classes: int, fraction: float, key: np.uint64) -> None:
    """Move ``dst[e]`` of a ``fraction`` of the edges into the class of ``src[e]``, in place.

    The new target is drawn in proportion to its degree in ``(src, dst)`` through one
    alias table per class (O(1) per edge), so degrees are preserved in expectation.
    """
    num_nodes = labels.size
    degree = np.bincount(src, minlength=num_nodes) + np.bincount(dst, minlength=num_nodes)
    by_class = np.argsort(labels, kind="stable").astype(src.dtype)
    class_ptr = np.searchsorted(labels[by_class], np.arange(num_classes + 1))
    prob = np.empty(num_nodes, dtype=np.float64)
    alias = np.empty(num_nodes, dtype=np.int64)
    _alias_tables(degree[by_class].astype(np.float64), class_ptr, prob, alias)
    class_degree = np.bincount(labels, weights=degree, minlength=num_classes)
    _rewire_kernel(key, fraction, src, dst, labels, by_class, class_ptr, class_degree, prob, alias)


def _key(seed: int, stream: int) -> np.uint64:
    """The 64-bit key of one generation step, as numba takes it."""
    return np.uint64(derive_key(seed, stream))


def _uniforms(key: np.uint64, n: int) -> np.ndarray:
    """``[n]`` float64: ``uniform(key, i)`` for ``i`` in ``0..n-1``."""
    out = np.empty(n, dtype=np.float64)
    _uniforms_kernel(key, out)
    return out


def _undirected_csc(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Tuple[np.ndarray, np.ndarray]:
    """CSC of the undirected simple graph of the edges ``src -> dst``.

    Both directions of every edge are stored; self loops and repeats are dropped and
    each node's neighbours are sorted. Returns ``indptr`` ``[num_nodes + 1]`` int64 and
    ``indices`` of ``src``'s dtype.
    """
    indptr, indices = _scatter_both_directions(src, dst, num_nodes)
    kept = np.empty(num_nodes, dtype=np.int64)
    _sort_unique_segments(indptr, indices, kept)
    new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(kept, out=new_indptr[1:])
    out = np.empty(new_indptr[-1], dtype=indices.dtype)
    _compact_segments(indptr, indices, new_indptr, out)
    return new_indptr, out


# ---------------------------------------------------------------------------- kernels


@numba.njit(parallel=True, nogil=True, cache=True)
def _uniforms_kernel(key, out):
    for i in numba.prange(out.size):
        out[i] = uniform(key, i)


@numba.njit(parallel=True, nogil=True, cache=True)
def _rmat_kernel(key, scale, num_nodes, ta, tab, tabc, relabel, first, src, dst):
    # Edge ``first + i`` of the stream goes to ``src[i]``, ``dst[i]``. Each level consumes
    # 16 bits of uniform(key, e * levels_per_edge + k)'s hash: the sample is a pure
    # function of the edge, the same for any thread count and chunking. Quadrant
    # choice is branch-free: with thresholds ta <= tab <= tabc on r in [0, 2^16),
    # the row bit is r >= tab and the column bit the parity of the three comparisons.
    hashes_per_edge = (scale + 3) // 4
    for i in numba.prange(src.size):
        e = first + i
        u = 0
        v = 0
        bits = np.uint64(0)
        for level in range(scale):
            if level % 4 == 0:
                bits = hash2(key, e * hashes_per_edge + level // 4)
            r = np.int64(bits & np.uint64(0xFFFF))
            bits >>= np.uint64(16)
            u = (u << 1) | np.int64(r >= tab)
            v = (v << 1) | (np.int64(r >= ta) ^ np.int64(r >= tab) ^ np.int64(r >= tabc))
        src[i] = relabel[(u * num_nodes) >> scale]
        dst[i] = relabel[(v * num_nodes) >> scale]


@numba.njit(parallel=True, nogil=True, cache=True)
def _alias_tables(weights, class_ptr, prob, alias):
    """Walker/Vose alias tables, one per class segment ``[class_ptr[c], class_ptr[c+1])``.

    Drawing ``j`` uniformly in a segment, then keeping ``j`` with probability ``prob[j]``
    or else taking ``alias[j]``, picks ``j`` with probability proportional to
    ``weights[j]`` (a segment whose weights are all 0 must not be drawn from).
    """
    for c in numba.prange(class_ptr.size - 1):
        lo = class_ptr[c]
        size = class_ptr[c + 1] - lo
        total = weights[lo : lo + size].sum()
        if total == 0.0:
            continue
        scaled = weights[lo : lo + size] * (size / total)
        small = np.empty(size, dtype=np.int64)
        large = np.empty(size, dtype=np.int64)
        num_small = 0
        num_large = 0
        for i in range(size):
            if scaled[i] < 1.0:
                small[num_small] = i
                num_small += 1
            else:
                large[num_large] = i
                num_large += 1
        while num_small > 0 and num_large > 0:
            num_small -= 1
            i = small[num_small]
            j = large[num_large - 1]
            prob[lo + i] = scaled[i]
            alias[lo + i] = lo + j
            scaled[j] -= 1.0 - scaled[i]
            if scaled[j] < 1.0:
                num_large -= 1
                small[num_small] = j
                num_small += 1
        # Left-overs hold probability 1 up to rounding.
        for k in range(num_large):
            prob[lo + large[k]] = 1.0
            alias[lo + large[k]] = lo + large[k]
        for k in range(num_small):
            prob[lo + small[k]] = 1.0
            alias[lo + small[k]] = lo + small[k]


@numba.njit(parallel=True, nogil=True, cache=True)
def _rewire_kernel(key, fraction, src, dst, labels, by_class, class_ptr, class_degree, prob, alias):
    # Edge e uses the variates uniform(key, 3e + k), k = 0, 1, 2.
    for e in numba.prange(src.size):
        if uniform(key, 3 * e) >= fraction:
            continue
        c = labels[src[e]]
        if class_degree[c] == 0.0:
            continue
        lo = class_ptr[c]
        size = class_ptr[c + 1] - lo
        j = lo + min(np.int64(uniform(key, 3 * e + 1) * size), size - 1)
        if uniform(key, 3 * e + 2) >= prob[j]:
            j = alias[j]
        dst[e] = by_class[j]


@numba.njit(parallel=True, nogil=True, cache=True)
def _gaussian_rows(key, base, rows, scale, out):
    # out[v] = base[rows[v]] + scale * N(0, I). Box-Muller turns the pair of variates
    # uniform(key, 2p), uniform(key, 2p + 1) into the normals of entries 2k, 2k + 1 of
    # row v, p = v * ceil(dim / 2) + k.
    dim = out.shape[1]
    half = (dim + 1) // 2
    for v in numba.prange(out.shape[0]):
        row = rows[v]
        for k in range(half):
            p = v * half + k
            radius = scale * np.sqrt(-2.0 * np.log(uniform_open(key, 2 * p)))
            angle = 2.0 * np.pi * uniform(key, 2 * p + 1)
            out[v, 2 * k] = base[row, 2 * k] + radius * np.cos(angle)
            if 2 * k + 1 < dim:
                out[v, 2 * k + 1] = base[row, 2 * k + 1] + radius * np.sin(angle)


@numba.njit(nogil=True, cache=True)
def _scatter_both_directions(src, dst, num_nodes):
    # Serial: a counting sort by node, writing each non-loop edge in both directions.
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    for e in range(src.size):
        if src[e] != dst[e]:
            indptr[src[e] + 1] += 1
            indptr[dst[e] + 1] += 1
    for v in range(num_nodes):
        indptr[v + 1] += indptr[v]
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[-1], dtype=src.dtype)
    for e in range(src.size):
        u = src[e]
        v = dst[e]
        if u != v:
            indices[fill[v]] = u
            fill[v] += 1
            indices[fill[u]] = v
            fill[u] += 1
    return indptr, indices


@numba.njit(parallel=True, nogil=True, cache=True)
def _sort_unique_segments(indptr, indices, kept):
    # Sort each node's neighbours in place and move the distinct ones to the front.
    for v in numba.prange(kept.size):
        segment = indices[indptr[v] : indptr[v + 1]]
        segment.sort()
        k = 0
        for i in range(segment.size):
            if k == 0 or segment[i] != segment[k - 1]:
                segment[k] = segment[i]
                k += 1
        kept[v] = k


@numba.njit(parallel=True, nogil=True, cache=True)
def _compact_segments(indptr, indices, new_indptr, out):
    for v in numba.prange(new_indptr.size - 1):
        start = indptr[v]
        for i in range(new_indptr[v + 1] - new_indptr[v]):
            out[new_indptr[v] + i] = indices[start + i]
