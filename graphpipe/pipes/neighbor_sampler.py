"""NeighborSampler: uniform or weighted neighbor sampling, GraphBolt's ``sample_neighbor``."""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Sequence

import torch

from ..csc_graph import CSCGraph
from ..minibatch import MiniBatch
from ..ops import LayerSample, sample_neighbors
from ..ops.edge_lookup import EdgeExclusion
from ..ops.compile import compile_sample_neighbors, dtype_only
from ..ops.neighbor_sampling import FanoutTooLarge
from ..validation import check_edge_weights
from .base import Pipe, functional_pipe
from .subgraph_sampler import SubgraphSampler

__all__ = ["NeighborSampler"]


@functional_pipe("sample_neighbor")
class NeighborSampler(SubgraphSampler):
    """Sample a fixed number of in-neighbours per node, layer by layer from the seeds.

    ``fanouts[i]`` is the fanout of GNN layer ``i``, so the LAST entry applies to the
    seeds and ``sampled_subgraphs[0]`` is the layer nearest the input features. With
    ``fanouts=[15, 10, 5]``::

        input_nodes ──[subgraphs[0], fanout 15]──> h1 ──[subgraphs[1], 10]──> h2 ──[subgraphs[2], 5]──> seeds
                           ^ sampled last                                              ^ sampled first

    Every layer's destinations are a prefix of its sources, and layer ``l``'s
    destinations are layer ``l + 1``'s sources.

    A node with ``d`` in-edges gets ``min(d, fanout)`` distinct in-edges (every subset
    equally likely), or exactly ``fanout`` independent draws with ``replace=True`` (none
    when ``d == 0``); ``-1`` takes all in-edges. With ``weights`` the draws are
    proportional to that edge attribute and zero-weight edges are never taken (without
    replacement: successive sampling by weight). A node's sample depends only on the
    seed, the batch index, the layer and the node, not on the rest of the batch.

    Args:
        source: a pipe of MiniBatches with ``seeds`` (e.g. an ``ItemSampler``).
        graph: the :class:`~graphpipe.CSCGraph` to sample from.
        fanouts: one int per GNN layer, ``>= 1`` or ``-1`` (all in-edges).
        replace: sample with replacement.
        weights: name of a 1-D finite, non-negative float (or bool mask) edge
            attribute of ``graph`` to sample by, or None for uniform sampling.
        seed: seed of the random keys (see :class:`SubgraphSampler`).
        cooperative: sample one batch together across ranks (see :class:`SubgraphSampler`).
        layout: ``"block"`` (default: GraphBolt/DGL blocks, every layer samples all its
            destinations) or ``"pyg"`` (PyG's ``NeighborLoader``: a node's neighbours are
            sampled once, at the hop where it is first reached; less work; for
            ``MiniBatch.to_pyg()``, not for ``blocks``). See :class:`SubgraphSampler`.
        exclude_seed_edges: with node-pair seeds (link prediction), sample no edge
            ``u -> v`` of a pair ``(u, v)``; a destination then draws its fanout among
            its other in-edges (see :class:`SubgraphSampler`).
        include_reverse_edges: also exclude the seed edges' reverse edges.
        reverse_edge_ids: ``[num_edges]`` user edge id -> user edge id of its reverse
            (DGL's ``reverse_eids``); without it the reverse of ``(u, v)`` is every edge
            ``v -> u``.

    Example::

        pipe = ItemSampler(train_set, 1024, shuffle=True).sample_neighbor(graph, [15, 10, 5])
        pyg_pipe = ItemSampler(train_set, 1024, shuffle=True).sample_neighbor(graph, [15, 10, 5], layout="pyg")
    """

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        fanouts: Sequence[int],
        replace: bool = False,
        weights: Optional[str] = None,
        seed: Optional[int] = None,
        cooperative: bool = False,
        layout: str = "block",
        exclude_seed_edges: bool = False,
        include_reverse_edges: bool = False,
        reverse_edge_ids: Optional[torch.Tensor] = None,
    ):
        super().__init__(
            source, graph, fanouts, seed=seed, cooperative=cooperative, layout=layout,
            exclude_seed_edges=exclude_seed_edges, include_reverse_edges=include_reverse_edges,
            reverse_edge_ids=reverse_edge_ids,
        )  # fmt: skip
        self.replace = bool(replace)
        self.weights = weights
        self.probs = None if weights is None else check_edge_weights(graph, weights, type(self).__name__)

    def sample_layer(
        self, nodes: torch.Tensor, layer: int, minibatch: MiniBatch, exclude: Optional[EdgeExclusion] = None
    ) -> LayerSample:
        """In-edges of ``nodes`` (``[num_dst]`` int64) sampled with ``fanouts[layer]``,
        skipping those ``exclude`` names."""
        try:
            return sample_neighbors(
                self.graph.indptr,
                self.graph.indices,
                nodes,
                self.fanouts[layer],
                key=self.layer_key(minibatch.batch_index, layer),
                replace=self.replace,
                probs=self.probs,
                exclude=exclude,
            )
        except FanoutTooLarge as error:
            raise ValueError(f"{type(self).__name__}: `fanouts[{layer}]` is too large: {error}") from error

    def sample_segments(
        self, bounds: torch.Tensor, segments: torch.Tensor, key_ids: torch.Tensor, fanout: int, layer: int, minibatch: MiniBatch
    ) -> LayerSample:
        """Typed graphs: the segments' in-edges, each keyed by its node and edge type."""
        try:
            return sample_neighbors(
                bounds, self.graph.indices, segments, fanout, key=self.layer_key(minibatch.batch_index, layer),
                replace=self.replace, probs=self.probs, key_ids=key_ids,
            )  # fmt: skip
        except FanoutTooLarge as error:
            raise ValueError(f"{type(self).__name__}: `fanouts[{layer}]` is too large: {error}") from error

    def compile_task(self) -> Callable[[], None]:
        """A picklable call that compiles (or loads from numba's cache) the CPU kernels of
        ``sample_layer`` for this graph's dtypes, these fanouts and options
        (:func:`graphpipe.pipes.compile.compile_kernels`)."""
        fanouts = [f for layer in getattr(self, "edge_type_fanouts", [self.fanouts]) for f in layer if f != 0]
        indptr, indices, probs = (dtype_only(t) for t in (self.graph.indptr, self.graph.indices, self.probs))
        return partial(compile_sample_neighbors, indptr, indices, fanouts, replace=self.replace, probs=probs)
