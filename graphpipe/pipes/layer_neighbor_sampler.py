"""LayerNeighborSampler: LABOR sampling, GraphBolt's ``sample_layer_neighbor``."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from concurrent.futures import Future
from functools import partial
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from graphpipe._internal.checks import check_bool, check_importance_sampling, check_int
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.graph.checks import check_edge_weights
from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.ops import LayerSample, derive_key
from graphpipe.ops.compile import compile_sample_labor, dtype_only
from graphpipe.ops.edge_lookup import drop_excluded
from graphpipe.ops.labor import Variates, sample_labor_trusted, vertex_normals
from graphpipe.pipes.base import Pipe, functional_pipe
from graphpipe.pipes.capabilities import UnsupportedCombination
from graphpipe.pipes.neighbor_sampler import weights_or_prob_name
from graphpipe.pipes.subgraph_sampler import GraphBoltTemporal, SubgraphSampler, edge_arrays

__all__ = ["LayerNeighborSampler"]


@functional_pipe("sample_layer_neighbor")
class LayerNeighborSampler(SubgraphSampler):
    """LABOR: layer-neighbor sampling (Balın & Çatalyürek, NeurIPS 2023).

    Same layer order and output as :class:`~graphpipe.pipes.neighbor_sampler.NeighborSampler`,
    plus ``sampled_subgraphs[i].edge_weights`` (float32): Horvitz-Thompson weights such
    that ``Σ_e w_e h_src(e)`` per destination is an unbiased estimate of the mean of its
    in-neighbours' ``h`` (weighted: of the ``weights``-weighted mean). Use them in place
    of the ``1 / num_sampled`` of a mean aggregation; ``to_pyg()`` gives them as
    ``edge_weight`` and ``blocks`` as ``edata["edge_weights"]``.

    Every vertex ``t`` draws one uniform ``r_t`` per layer, shared by all destinations
    that have it as a neighbour, so shared neighbours are picked together and far fewer
    distinct vertices are sampled than with neighbor sampling. Rules per mode are in
    :mod:`graphpipe.ops.labor`.

    Args:
        source: a pipe of MiniBatches with ``seeds``.
        graph: the :class:`~graphpipe.CSCGraph` (typed or not).
        fanouts: one entry per GNN layer, ``>= 1``, 0 (no edge in that layer) or -1
            (typed graphs: per edge type, as for ``sample_neighbor``).
        replace: GraphBolt's argument: must be False (LABOR samples without replacement).
        weights: name of a finite, non-negative float (or bool mask) edge attribute: weighted LABOR-0.
        prob_name: GraphBolt's name for ``weights`` (pass one of them). The arguments
            after ``fanouts, replace, weights`` (GraphBolt's positional order) are keyword-only.
        importance_sampling: 0 = LABOR-0 (exactly ``min(fanout, d)`` neighbours, a drop-in
            for neighbor sampling); ``k > 0`` = LABOR-k (k fixed-point iterations);
            -1 = LABOR-* (until converged). Importance sampling samples fewer vertices at
            the same variance; per-destination counts are then random.
        layer_dependency: use the same variates in every layer of a batch.
        batch_dependency: κ >= 1. With κ > 1 the variates of batch ``j`` are
            ``Φ(cos(πr/2)·N(s0, t) + sin(πr/2)·N(s1, t))`` with ``r = (j mod κ) / κ`` and
            seeds ``s0, s1`` that move on every κ batches (``s0 ← s1``): each batch is
            exactly uniform while consecutive batches sample overlapping vertex sets
            (dependent minibatching: higher cache hit rates).
        **options: keyword arguments of :class:`~graphpipe.pipes.subgraph_sampler.SubgraphSampler`,
            as for ``sample_neighbor``; ``cooperative=True`` takes LABOR-0 only. With
            ``layout="pyg"`` and ``importance_sampling != 0`` a layer's vertex
            probabilities are computed over the nodes that layer samples, so the two
            layouts then differ in more than the re-sampled edges. Seed-edge exclusion
            drops the excluded edges after sampling (the variates are shared between
            destinations), so those destinations may get fewer than ``fanout`` edges,
            their ``edge_weights`` rescaled to estimate the mean over the in-edges left.
    """

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        fanouts: Sequence[int],
        replace: bool = False,
        weights: Optional[str] = None,
        *,
        prob_name: Optional[str] = None,
        importance_sampling: int = 0,
        layer_dependency: bool = False,
        batch_dependency: int = 1,
        **options,
    ):
        name = type(self).__name__
        self.weights = weights_or_prob_name(weights, prob_name, name)
        # Set before the base's checks, which read them (hot-vertex reuse refuses joint layers).
        self.importance_sampling = check_importance_sampling(importance_sampling, name)
        self.samples_layer_jointly = self.importance_sampling != 0
        if check_bool(replace, "replace", name):
            raise ValueError(f"{name}: LABOR samples without replacement; pass replace=False (GraphBolt's argument)")
        self.layer_dependency = check_bool(layer_dependency, "layer_dependency", name)
        self.batch_dependency = check_int(batch_dependency, "batch_dependency", name, minimum=1)
        super().__init__(source, graph, fanouts, **options)
        self._normals = _NormalsCache(graph.total_num_nodes, capacity=3 * (1 if self.layer_dependency else len(self.fanouts)))

    def check_sampler_options(self) -> None:
        """LABOR's options against the mode (see SubgraphSampler); reads ``weights``."""
        name, importance_sampling = type(self).__name__, self.importance_sampling
        if self.weights is not None and importance_sampling != 0:
            raise ValueError(f"{name}: `weights` works with importance_sampling=0 only, got {importance_sampling}")
        if self.time_filter is not None and self.time_filter.strategy == "last":
            raise ValueError(
                f"{name}: temporal_strategy='last' takes the fanout most recent in-edges, which is not LABOR sampling "
                f"(no variates, no edge_weights); use temporal_sample_neighbor(..., temporal_strategy='last'), or "
                f"temporal_strategy='uniform' here"
            )
        if self.disjoint and self.time_filter is not None:
            raise UnsupportedCombination(
                f"{name}: temporal sampling in the pyg layout grows one subtree per seed (PyG's), which LABOR does not "
                f"support (a source's variate is shared by every destination); use layout='block' (GraphBolt's "
                f"temporal layout) or sample_neighbor"
            )
        if self.disjoint:
            raise UnsupportedCombination(
                f"{name}: disjoint=True is not supported by LABOR: each source's variate is shared by every "
                f"destination, so subtrees would not sample independently; use sample_neighbor(..., disjoint=True)"
            )
        if (self.graph.indptr.is_cuda or self.graph.indices.is_cuda) and (self.weights is not None or importance_sampling != 0):
            raise UnsupportedCombination(
                f"{name}: on a GPU only unweighted LABOR-0 is implemented; keep the graph in host memory (pinned with "
                f"graph.pin_memory_() for GPU sampling of LABOR-0) for `weights` or importance_sampling != 0"
            )
        if self.cooperative and importance_sampling != 0:
            raise UnsupportedCombination(
                f"{name}: cooperative=True supports importance_sampling=0 (LABOR-0) only: LABOR-k/LABOR-* need vertex "
                f"probabilities over the whole global batch"
            )
        if self.on_part and self.time_filter is not None and importance_sampling != 0:
            raise UnsupportedCombination(
                f"{name}: temporal LABOR-k over a part of a partitioned dataset is not supported (the owners would send "
                f"every in-edge valid at each row's time); pass importance_sampling=0, or load the whole graph"
            )
        self.probs = None if self.weights is None else check_edge_weights(self.graph, self.weights, name)

    def variates(self, batch_index: int, layer: int) -> Variates:
        """The keys of the per-vertex uniforms of one layer of one batch."""
        layer_part = () if self.layer_dependency else (layer,)
        kappa = self.batch_dependency
        if kappa == 1:
            return Variates(derive_key(self.seed, batch_index, *layer_part))
        period, step = divmod(batch_index, kappa)
        angle = math.pi * (step / kappa) / 2
        k0, k1 = (derive_key(self.seed, period + i, *layer_part) for i in (0, 1))  # this period's and the next's
        return Variates(k0, k1, c0=math.cos(angle), c1=math.sin(angle), dependent=True, normals=self._normals)

    def sample_segments(
        self, indptr, nodes, fanout, key_ids, exclude, layer: int, minibatch: MiniBatch, candidates=None, indices=None
    ) -> LayerSample:
        """LABOR over the in-edge ranges of ``nodes`` with ``fanout``, then drop those
        ``exclude`` names. A source node has one variate per layer whatever the edge type
        (``key_ids`` is not needed); on a typed graph LABOR-k's vertex probabilities are
        solved over the segments of one call (all edge types of a layer when they share a
        fanout). ``indices``: the sources to read instead of the graph's (LABOR-k over a
        part: the neighbourhoods the owners sent)."""
        indices, probs = edge_arrays(self.graph.indices if indices is None else indices, self.probs, candidates)
        variates = self.variates(minibatch.batch_index, layer)
        sample = sample_labor_trusted(indptr, indices, nodes, fanout, variates, self.importance_sampling, probs, self.graph.total_num_nodes)
        return sample if exclude is None else drop_excluded(sample, exclude, nodes, indptr, probs)

    def state_options(self) -> Dict[str, object]:
        """Pipe protocol: the fanouts and the LABOR options."""
        labor = {"importance_sampling": self.importance_sampling, "layer_dependency": self.layer_dependency}
        return {**super().state_options(), **labor, "batch_dependency": self.batch_dependency}

    def compile_task(self) -> Callable[[], None]:
        """A picklable call that compiles (or loads from numba's cache) the CPU kernels of
        ``sample_layer`` for this graph's dtypes and these options: the variates of
        ``batch_dependency > 1`` take other kernels
        (:func:`graphpipe.loading.compile.compile_kernels`)."""
        indptr, indices, probs = (dtype_only(t) for t in (self.graph.indptr, self.graph.indices, self.probs))
        return partial(
            compile_sample_labor, indptr, indices, importance_sampling=self.importance_sampling,
            dependent=self.batch_dependency > 1, probs=probs,
        )  # fmt: skip


class _NormalsCache:
    """``key -> N(key, ·)`` over all vertices (float64, 8 bytes per node), kept for the
    last ``capacity`` keys: with ``batch_dependency = κ`` a layer's keys stay the same for
    κ batches, and across a period boundary a layer needs three, hence 3 per layer that
    has its own keys. Thread-safe: the first caller of a key computes its table, the
    others wait.
    """

    def __init__(self, num_nodes: int, capacity: int):
        self.num_nodes = num_nodes
        self.capacity = capacity
        self._tables: "OrderedDict[int, Future]" = OrderedDict()
        self._lock = threading.Lock()

    def __reduce__(self):  # worker processes get an empty cache (and a new lock)
        return _NormalsCache, (self.num_nodes, self.capacity)

    def __call__(self, key: int) -> np.ndarray:
        with self._lock:
            entry = self._tables.get(key)
            owner = entry is None
            if owner:
                entry = self._tables[key] = Future()
                while len(self._tables) > self.capacity:
                    self._tables.popitem(last=False)
            else:
                self._tables.move_to_end(key)
        if owner:  # compute outside the lock: other keys stay available meanwhile
            try:
                entry.set_result(vertex_normals(np.uint64(key), self.num_nodes))
            except BaseException as error:
                entry.set_exception(error)
                with self._lock:
                    if self._tables.get(key) is entry:
                        del self._tables[key]
                raise
        return entry.result()


@functional_pipe("temporal_sample_layer_neighbor")
class TemporalLayerNeighborSampler(GraphBoltTemporal, LayerNeighborSampler):
    """GraphBolt's ``temporal_sample_layer_neighbor``: :class:`LayerNeighborSampler`
    (LABOR) among the neighbours valid for the root seed's time, as
    :class:`~graphpipe.pipes.neighbor_sampler.TemporalNeighborSampler` (block layout
    without deduplication)."""
