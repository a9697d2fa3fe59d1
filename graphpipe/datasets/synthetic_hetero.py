"""A synthetic heterogeneous dataset shaped like ogbn-mag, generated offline in seconds.

ogbn-mag (Hu et al., 2020) is a slice of the Microsoft Academic Graph: papers, authors,
institutions and fields of study, with "author writes paper", "paper cites paper",
"paper has topic field" and "author affiliated with institution" edges; the task is a
paper's venue. :func:`synthetic_mag` draws a graph of the same node and edge types, in
the same proportions per paper, at any size, with labels that a relational GNN reads
from the structure far better than an MLP reads them from a paper's own features.

How it is drawn (every step a counter-based random stream of the seed, as in
:mod:`graphpipe.datasets.synthetic`, so the dataset is a function of its arguments alone,
the same for any thread count):

* every node of every type gets a *community* in ``[0, num_classes)`` (for papers: the
  label) and a power-law *activity* weight ``u ** (-1 / (degree_exponent - 1))``, ``u``
  uniform in (0, 1);
* each relation draws its edges from one end, the *anchor* (the paper of writes, cites
  and has_topic, the author of affiliated_with): anchor ``v`` gets ``activity[v]`` times
  the relation's edges per unit of activity, rounded up or down at random, and each of
  its edges ends at a node of the other type drawn in proportion to activity, among
  the nodes of ``v``'s community with probability ``homophily``, else among all (a
  Chung-Lu graph with planted communities). Degrees follow the activities, so they are
  power-law on both ends, and most edges join nodes of one community;
* repeated edges (and self citations) are dropped, citations are made symmetric (one
  edge type ``paper:cites:paper`` holding both directions, as PyG's ``ToUndirected``
  makes it), and every other relation gets its reverse (``rev_writes``,
  ``rev_has_topic``, ``rev_affiliated_with``), so every node type receives messages;
* every node's features are ``mean[community] + feature_noise * noise`` (class means
  ``N(0, I / feature_dim)`` shared by all types, noise of unit variance per dimension,
  roughly Gaussian): weak alone, but a paper's authors, fields and cited papers mostly
  share its community, so averaging over them (what a relational GNN does) removes
  much of the noise.

The graph is built straight into the typed CSC layout (:meth:`CSCGraph.from_hetero_edges`
would produce the same graph from the per-type edge lists in the order of
``original_edge_ids``, but sorts all edges at once, which at ogbn-mag scale and beyond
costs more time and memory than the rest of the generation).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import numba
import numpy as np
import torch

from graphpipe.graph.csc_graph import CSCGraph, smallest_index_dtype
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import HeteroItemSet, ItemSet
from graphpipe.ops.random import hash2, uniform, uniform_bits
from graphpipe.loading.compile import CompileJob
from graphpipe._internal.checks import check_int, check_number
from graphpipe.datasets.synthetic import (
    _alias_tables,
    _compact_segments,
    _gaussian_rows,
    _key,
    _sort_unique_segments,
    _undirected_csc,
    _uniforms,
    check_noise_and_split,
)

__all__ = ["HeteroNodeClassificationDataset", "synthetic_mag"]

# ogbn-mag's counts per paper (736,389 papers; 1,134,649 authors, 8,740 institutions,
# 59,965 fields of study; 7,145,660 writes, 5,416,271 cites, 7,505,078 has_topic and
# 1,043,998 affiliated_with edges).
_MAG_PAPERS = 736_389
_NODES_PER_PAPER = {"author": 1_134_649 / _MAG_PAPERS, "institution": 8_740 / _MAG_PAPERS,
                    "field_of_study": 59_965 / _MAG_PAPERS}
# relation: (source type, target type, anchor end, edges drawn per paper)
_RELATIONS = {
    "writes": ("author", "paper", "target", 7_145_660 / _MAG_PAPERS),
    "cites": ("paper", "paper", "source", 5_416_271 / _MAG_PAPERS),
    "has_topic": ("paper", "field_of_study", "source", 7_505_078 / _MAG_PAPERS),
    "affiliated_with": ("author", "institution", "source", 1_043_998 / _MAG_PAPERS),
}
_NODE_TYPES = ("author", "field_of_study", "institution", "paper")  # sorted: their type ids

# Random streams of one seed: communities and activities per node type, edges per
# relation, then features and the split (numbers apart from synthetic.py's 0..6).
# Compiling the generator's kernels, once per install, on 2 cores, for the notice (with an
# empty numba cache: 5.8 s on a quiet machine).
MAG_FIRST_RUN = "5-10 s"
_STREAM_BASE = 100
_COMMUNITY = {t: _STREAM_BASE + i for i, t in enumerate(_NODE_TYPES)}
_ACTIVITY = {t: _STREAM_BASE + 10 + i for i, t in enumerate(_NODE_TYPES)}
_FEATURES = {t: _STREAM_BASE + 20 + i for i, t in enumerate(_NODE_TYPES)}
_DEGREES = {r: _STREAM_BASE + 30 + i for i, r in enumerate(_RELATIONS)}
_EDGES = {r: _STREAM_BASE + 40 + i for i, r in enumerate(_RELATIONS)}
_MEANS, _SPLIT = _STREAM_BASE + 50, _STREAM_BASE + 51


@dataclass
class HeteroNodeClassificationDataset:
    """Node classification on a typed graph: :class:`NodeClassificationDataset` with one
    node type as the target.

    Attributes:
        name: a short name, e.g. ``"synthetic_mag"``.
        graph: the typed graph (``graph.is_heterogeneous``), type-local ids per node type.
        node_features: ``(node type, name)`` -> ``[num_nodes of that type, dim]`` tensor,
            e.g. ``("paper", "feat")``.
        train_set, validation_set, test_set: :class:`~graphpipe.HeteroItemSet` s of the
            target type only, fields ``("seeds", "labels")``, both ``[n]`` int64.
        num_classes: labels are in ``[0, num_classes)``.
        labels: ``{target_type: [num_nodes of that type] int64}``.
        target_type: the node type whose nodes are classified, e.g. ``"paper"``.
    """

    name: str
    graph: CSCGraph
    node_features: Dict[Tuple[str, str], torch.Tensor]
    train_set: HeteroItemSet
    validation_set: HeteroItemSet
    test_set: HeteroItemSet
    num_classes: int
    labels: Dict[str, torch.Tensor]
    target_type: str

    @functools.cached_property
    def features(self) -> FeatureStore:
        """The typed :class:`~graphpipe.FeatureStore` over :attr:`node_features` (no
        copy): ``features["node", "paper", "feat"]``, and what ``fetch_feature`` takes."""
        return FeatureStore(node_features=self.node_features)

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={n:,}" for t, n in self.graph.num_nodes_per_type.items())
        features = ", ".join(f"{t}/{n}: {tuple(v.shape[1:])}" for (t, n), v in self.node_features.items())
        return (
            f"HeteroNodeClassificationDataset(name='{self.name}', target_type='{self.target_type}', "
            f"nodes=({nodes}), num_edges={self.graph.total_num_edges:,}, edge_types={len(self.graph.edge_types)}, "
            f"features=({features}), num_classes={self.num_classes}, train={len(self.train_set)}, "
            f"validation={len(self.validation_set)}, test={len(self.test_set)})"
        )


def synthetic_mag(
    num_papers: int = _MAG_PAPERS,
    num_classes: int = 16,
    feature_dim: int = 128,
    homophily: float = 0.6,
    feature_noise: float = 1.0,
    degree_exponent: float = 2.5,
    split: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> HeteroNodeClassificationDataset:
    """A deterministic ogbn-mag-like typed graph with structure-dependent paper labels.

    Node types ``author``, ``field_of_study``, ``institution``, ``paper`` (ids in that
    order) in ogbn-mag's proportions: per paper 1.54 authors, 0.0814 fields and 0.0119
    institutions (at least one of each). Edge types, with ogbn-mag's edges drawn per
    paper before repeats are dropped: ``author:writes:paper`` (9.70),
    ``paper:cites:paper`` (7.36, then both directions), ``paper:has_topic:field_of_study``
    (10.19), ``author:affiliated_with:institution`` (1.42), and the reverses
    ``paper:rev_writes:author``, ``field_of_study:rev_has_topic:paper``,
    ``institution:rev_affiliated_with:author``. See the module docstring for how edges,
    labels and features are drawn.

    With the defaults, labels are hard to read from a paper's own features and easy from
    its neighbourhood: on 10,000 papers a 2-layer MLP on paper features reached 22%
    validation accuracy, a 2-layer full-graph R-GCN (mean aggregation per edge type) 98%.

    2M papers give 5.27M nodes, 113M edges and 2.7 GB of features; generating them took
    24 s on two cores (27 CPU-seconds, 60 s wall when other jobs shared the cores), more
    than half of it the kernel's page faults for the 4.5 GB the process writes. Numba compiles the kernels
    on the first call in a fresh install (about 15 s, cached on disk).

    Args:
        num_papers: number of papers; the other types scale with it.
        num_classes: number of paper labels (and communities of every type).
        feature_dim: length of every node type's feature vectors.
        homophily: fraction of each relation's edges drawn inside the anchor's community;
            about ``homophily + (1 - homophily) / num_classes`` of the edges join nodes
            of one community.
        feature_noise: standard deviation of the per-dimension noise of the features
            (class means are about 1.4 apart); larger makes a paper's own features less
            informative.
        degree_exponent: ``gamma`` of the power-law activities (expected degrees follow
            ``P(k) ~ k ** -gamma``), > 2.
        split: fractions ``(train, validation, test)`` of the papers, summing to at most 1.
        seed: the dataset is a deterministic function of all arguments, seed included.

    Returns:
        A :class:`HeteroNodeClassificationDataset` named ``"synthetic_mag"`` with
        ``target_type="paper"``: ``graph`` with int32 ``indices`` (global ids; int64
        past 2**31 - 1 nodes), each destination's in-edges grouped by edge type and
        sorted by source within a type; ``node_features[(t, "feat")]`` ``[n_t,
        feature_dim]`` float32 for every node type; ``labels["paper"]`` ``[num_papers]``
        int64; item sets of papers with sorted seed ids.
    """
    where = "synthetic_mag"
    num_papers = check_int(num_papers, "num_papers", where, minimum=2)
    num_classes = check_int(num_classes, "num_classes", where, minimum=2)
    feature_dim = check_int(feature_dim, "feature_dim", where, minimum=1)
    check_number(homophily, "homophily", where, 0.0, 1.0)
    check_number(degree_exponent, "degree_exponent", where, 2.0, low_open=True)  # > 2: a finite mean degree
    seed = check_int(seed, "seed", where)
    split = check_noise_and_split(feature_noise, split, where)
    sizes = [int(f * num_papers) for f in split]
    if min(sizes) < 1:
        raise ValueError(f"{where}: `split` {split!r} leaves an empty set among {num_papers} papers; use more papers")
    # The kernels first, on a tiny graph: compiling them takes long once (a notice says so).
    tiny = functools.partial(_generate, 64, 2, 4, 0.5, 1.0, 2.5, [51, 6, 6], 0)
    CompileJob([(where, tiny)], background=False, first_run=MAG_FIRST_RUN, kernel=_draw_other_ends).wait()
    return _generate(num_papers, num_classes, feature_dim, homophily, feature_noise, degree_exponent, sizes, seed)


def _generate(num_papers, num_classes, feature_dim, homophily, feature_noise, degree_exponent, sizes, seed):
    """:func:`synthetic_mag`'s dataset, for checked arguments (``sizes``: papers per split)."""
    num_nodes = {"paper": num_papers}
    num_nodes.update({t: max(1, round(rate * num_papers)) for t, rate in _NODES_PER_PAPER.items()})
    nodes = {t: _Nodes(num_nodes[t], num_classes, degree_exponent, seed, t) for t in _NODE_TYPES}

    # Per edge type: its edges grouped by target, (indptr over the target type, sources).
    relations: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
    for relation, (src_type, dst_type, anchor_end, per_paper) in _RELATIONS.items():
        anchor_type, other_type = (dst_type, src_type) if anchor_end == "target" else (src_type, dst_type)
        by_anchor = _draw_edges(
            seed, relation, homophily, nodes[anchor_type], nodes[other_type], per_paper * num_papers
        )
        if src_type == dst_type:
            indptr, ends = by_anchor
            starts = np.repeat(np.arange(num_nodes[src_type], dtype=ends.dtype), np.diff(indptr))
            relations[f"{src_type}:{relation}:{dst_type}"] = _undirected_csc(starts, ends, num_nodes[src_type])
            continue
        by_anchor = _distinct_in_segments(*by_anchor)
        by_other = _transpose_csc(*by_anchor, num_nodes[other_type])
        forward, backward = (by_anchor, by_other) if anchor_end == "target" else (by_other, by_anchor)
        relations[f"{src_type}:{relation}:{dst_type}"] = forward
        relations[f"{dst_type}:rev_{relation}:{src_type}"] = backward
    graph = _typed_csc(relations, num_nodes)
    del relations

    means = np.empty((num_classes, feature_dim), dtype=np.float32)
    zero = np.zeros((1, feature_dim), dtype=np.float32)
    _gaussian_rows(_key(seed, _MEANS), zero, np.zeros(num_classes, np.int64), feature_dim**-0.5, means)
    features = {}
    for node_type in _NODE_TYPES:
        features[node_type] = np.empty((num_nodes[node_type], feature_dim), dtype=np.float32)
        _near_gaussian_rows(_key(seed, _FEATURES[node_type]), means, nodes[node_type].communities, feature_noise,
                            features[node_type])
    labels = nodes["paper"].communities.astype(np.int64)

    labels = torch.from_numpy(labels)
    order = np.argsort(_uniforms(_key(seed, _SPLIT), num_papers), kind="stable")
    bounds = np.cumsum([0] + sizes)
    train_set, validation_set, test_set = (
        HeteroItemSet({"paper": ItemSet((seeds, labels[seeds]), names=("seeds", "labels"))})
        for seeds in (torch.from_numpy(np.sort(order[lo:hi])) for lo, hi in zip(bounds[:-1], bounds[1:]))
    )
    return HeteroNodeClassificationDataset(
        name="synthetic_mag",
        graph=graph,
        node_features={(t, "feat"): torch.from_numpy(features[t]) for t in _NODE_TYPES},
        train_set=train_set,
        validation_set=validation_set,
        test_set=test_set,
        num_classes=num_classes,
        labels={"paper": labels},
        target_type="paper",
    )


class _Nodes:
    """The nodes of one type: communities, power-law activities, and alias tables to draw
    a node in proportion to its activity among all nodes or within one community.

    An alias table is ``[n, 2]`` int64, one 16-byte row per slot (one cache line read
    per draw, which the generation is bound by): the probability of keeping the slot
    times 2**53, then ``(node id of the slot << 32) | node id of its alias``.
    """

    def __init__(self, n: int, num_classes: int, degree_exponent: float, seed: int, node_type: str):
        self.communities = np.minimum(
            (_uniforms(_key(seed, _COMMUNITY[node_type]), n) * num_classes).astype(np.int32), num_classes - 1
        )
        u = 1.0 - _uniforms(_key(seed, _ACTIVITY[node_type]), n)  # in (0, 1]
        self.activity = u ** (-1.0 / (degree_exponent - 1.0))
        self.all_table = _alias_table(self.activity, np.array([0, n]), np.arange(n, dtype=np.int64))
        by_class = np.argsort(self.communities, kind="stable")
        self.class_ptr = np.searchsorted(self.communities[by_class], np.arange(num_classes + 1))
        self.class_table = _alias_table(self.activity[by_class], self.class_ptr, by_class)


def _alias_table(weights: np.ndarray, segment_ptr: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The packed alias tables (see :class:`_Nodes`) of the segments ``segment_ptr`` of
    ``weights``, whose slots are the nodes ``ids`` (int64, each < 2**31)."""
    prob = np.empty(weights.size)
    alias = np.empty(weights.size, dtype=np.int64)
    _alias_tables(weights, segment_ptr, prob, alias)
    table = np.empty((weights.size, 2), dtype=np.int64)
    table[:, 0] = (prob * 2.0**53).astype(np.int64)
    table[:, 1] = (ids << 32) | ids[alias]
    return table


def _draw_edges(seed: int, relation: str, homophily: float, anchors: _Nodes, others: _Nodes, num_edges: float):
    """About ``num_edges`` edges of ``relation`` grouped by anchor: ``indptr`` ``[num
    anchors + 1]`` int64 and the other end of each edge, int32.

    Anchor ``v`` gets ``num_edges * activity[v] / total activity`` edges, rounded up or
    down at random (so its degree follows its activity and the edges come out grouped by
    it); each edge's other end is drawn as the module docstring says."""
    expected = anchors.activity * (num_edges / anchors.activity.sum())
    counts = np.floor(expected).astype(np.int64)
    counts += _uniforms(_key(seed, _DEGREES[relation]), counts.size) < expected - counts
    indptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    ends = np.empty(indptr[-1], dtype=np.int32)
    _draw_other_ends(_key(seed, _EDGES[relation]), homophily, indptr, anchors.communities, others.class_ptr,
                     others.class_table, others.all_table, ends)
    return indptr, ends


def _distinct_in_segments(indptr: np.ndarray, indices: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` with each segment sorted and its repeats dropped."""
    kept = np.empty(indptr.size - 1, dtype=np.int64)
    _sort_unique_segments(indptr, indices, kept)
    new_indptr = np.zeros(indptr.size, dtype=np.int64)
    np.cumsum(kept, out=new_indptr[1:])
    out = np.empty(new_indptr[-1], dtype=indices.dtype)
    _compact_segments(indptr, indices, new_indptr, out)
    return new_indptr, out


def _transpose_csc(indptr: np.ndarray, indices: np.ndarray, num_sources: int) -> Tuple[np.ndarray, np.ndarray]:
    """The reverse edges of a CSC (``indptr`` int64, ``indices`` the sources) grouped by
    their new target (the old source): ``[num_sources + 1]`` int64 indptr and the old
    targets, sorted within each segment because the old targets are visited in order."""
    counts = np.bincount(indices, minlength=num_sources)
    new_indptr = np.zeros(num_sources + 1, dtype=np.int64)
    np.cumsum(counts, out=new_indptr[1:])
    out = np.empty(indices.size, dtype=indices.dtype)
    _transpose_kernel(indptr, indices, new_indptr[:-1].copy(), out)
    return new_indptr, out


def _typed_csc(relations: Dict[str, Tuple[np.ndarray, np.ndarray]], num_nodes: Dict[str, int]) -> CSCGraph:
    """One typed CSC of per-edge-type CSCs (type-local ids): what
    ``CSCGraph.from_hetero_edges`` makes of each type's edges listed in CSC order."""
    node_type_to_id = {t: i for i, t in enumerate(sorted(num_nodes))}
    offsets = np.zeros(len(num_nodes) + 1, dtype=np.int64)
    np.cumsum([num_nodes[t] for t in sorted(num_nodes)], out=offsets[1:])
    edge_types = sorted(relations)
    degrees = np.zeros(offsets[-1], dtype=np.int64)
    for edge_type in edge_types:
        dst_offset = offsets[node_type_to_id[edge_type.split(":")[2]]]
        rel_indptr = relations[edge_type][0]
        degrees[dst_offset : dst_offset + rel_indptr.size - 1] += np.diff(rel_indptr)
    indptr = np.zeros(offsets[-1] + 1, dtype=np.int64)
    np.cumsum(degrees, out=indptr[1:])
    num_edges = int(indptr[-1])
    index_dtype = np.int32 if offsets[-1] <= 2**31 else np.int64
    indices = np.empty(num_edges, dtype=index_dtype)
    type_per_edge = np.empty(num_edges, dtype=np.uint8)
    max_type_edges = max(relations[t][1].size for t in edge_types)
    edge_ids = np.empty(num_edges, dtype=np.int32 if max_type_edges <= 2**31 else np.int64)
    fill = indptr[:-1].copy()
    # Edge types in id order, so each destination's in-edges come out grouped by type id.
    for type_id, edge_type in enumerate(edge_types):
        src_type, _, dst_type = edge_type.split(":")
        rel_indptr, rel_indices = relations[edge_type]
        _place_edge_type(rel_indptr, rel_indices, offsets[node_type_to_id[src_type]],
                         offsets[node_type_to_id[dst_type]], type_id, fill, indices, type_per_edge, edge_ids)
    # Checked up to indptr only: the O(num_edges) checks of the constructor (edge types
    # ascending per destination, endpoint types, type-local edge ids a permutation) hold
    # by construction and would take longer than the whole generation (the tests run them).
    return CSCGraph._build(
        torch.from_numpy(indptr).to(smallest_index_dtype(num_edges)),
        torch.from_numpy(indices),
        original_edge_ids=torch.from_numpy(edge_ids),
        level="indptr",
        typed=dict(
            node_type_offset=torch.from_numpy(offsets),
            type_per_edge=torch.from_numpy(type_per_edge),
            node_type_to_id=node_type_to_id,
            edge_type_to_id={t: i for i, t in enumerate(edge_types)},
        ),
    )


# ---------------------------------------------------------------------------- kernels


@numba.njit(inline="always", nogil=True, cache=True)
def _alias_draw(table, lo, size, key, counter):
    """A node drawn from the packed alias table's segment ``[lo, lo + size)`` with the
    variates ``counter`` and ``counter + 1``."""
    j = lo + min(np.int64(uniform(key, counter) * size), size - 1)
    ids = table[j, 1]
    return ids >> 32 if uniform_bits(key, counter + 1) < table[j, 0] else ids & 0xFFFFFFFF


@numba.njit(parallel=True, nogil=True, cache=True)
def _draw_other_ends(key, homophily, indptr, anchor_communities, class_ptr, class_table, all_table, out):
    # Edge e uses the variates uniform(key, 3e + k), k = 0, 1, 2: the first picks the
    # anchor's community or the whole type, the others draw the node.
    num_others = all_table.shape[0]
    for v in numba.prange(indptr.size - 1):
        community = anchor_communities[v]
        lo = class_ptr[community]
        size = class_ptr[community + 1] - lo
        for e in range(indptr[v], indptr[v + 1]):
            if size > 0 and uniform(key, 3 * e) < homophily:
                out[e] = _alias_draw(class_table, lo, size, key, 3 * e + 1)
            else:
                out[e] = _alias_draw(all_table, 0, num_others, key, 3 * e + 1)


@numba.njit(nogil=True, cache=True)
def _transpose_kernel(indptr, indices, fill, out):
    # Serial counting sort by source, targets visited in ascending order.
    for v in range(indptr.size - 1):
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            out[fill[u]] = v
            fill[u] += 1


@numba.njit(parallel=True, nogil=True, cache=True)
def _near_gaussian_rows(key, base, rows, scale, out):
    # out[v] = base[rows[v]] + scale * noise, each noise entry the centred sum of the four
    # 16-bit uniforms of one hash (Irwin-Hall, unit variance after scaling by sqrt(3)):
    # roughly Gaussian, bounded at 3.46 standard deviations, and several times cheaper
    # than synthetic.py's Box-Muller (a log, a sqrt and a cos per pair of entries), which
    # would take most of the generation time at 128 dimensions.
    dim = out.shape[1]
    unit = scale * np.sqrt(3.0) / 65536.0
    for v in numba.prange(out.shape[0]):
        row = rows[v]
        for k in range(dim):
            bits = hash2(key, v * dim + k)
            total = np.int64(0)
            for _ in range(4):
                total += np.int64(bits & np.uint64(0xFFFF))
                bits >>= np.uint64(16)
            out[v, k] = base[row, k] + np.float32((total - 131070) * unit)


@numba.njit(parallel=True, nogil=True, cache=True)
def _place_edge_type(rel_indptr, rel_indices, src_offset, dst_offset, type_id, fill, indices, type_per_edge, edge_ids):
    # Append one edge type's in-edges of every destination at fill[destination]; an
    # edge's id within its type is its position in the per-type CSC.
    for v in numba.prange(rel_indptr.size - 1):
        start = fill[dst_offset + v]
        lo = rel_indptr[v]
        count = rel_indptr[v + 1] - lo
        for i in range(count):
            indices[start + i] = rel_indices[lo + i] + src_offset
            type_per_edge[start + i] = type_id
            edge_ids[start + i] = lo + i
        fill[dst_offset + v] = start + count
