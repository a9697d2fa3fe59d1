"""NeighborSampler: uniform or weighted neighbor sampling, GraphBolt's ``sample_neighbor``."""

from __future__ import annotations

from functools import partial
from typing import Callable, Dict, Optional, Sequence

from graphpipe._internal.checks import check_bool
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.graph.checks import check_edge_weights
from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.ops import LayerSample
from graphpipe.ops.compile import compile_sample_neighbors, dtype_only
from graphpipe.ops.neighbor_sampling import FanoutTooLarge, sample_neighbors_trusted
from graphpipe.pipes.base import Pipe, functional_pipe
from graphpipe.pipes.subgraph_sampler import GraphBoltTemporal, SubgraphSampler, edge_arrays

__all__ = ["NeighborSampler", "TemporalNeighborSampler"]


@functional_pipe("sample_neighbor")
class NeighborSampler(SubgraphSampler):
    """Sample a fixed number of in-neighbours per node, layer by layer from the seeds.

    ``fanouts[i]`` is the fanout of GNN layer ``i``: the LAST entry applies to the seeds,
    and ``sampled_subgraphs[0]`` is the layer nearest the input features (see
    :class:`~graphpipe.MiniBatch`).

    A node with ``d`` in-edges gets ``min(d, fanout)`` distinct in-edges (every subset
    equally likely), or exactly ``fanout`` independent draws with ``replace=True`` (none
    when ``d == 0``); ``-1`` takes all in-edges. With ``weights`` the draws are
    proportional to that edge attribute and zero-weight edges are never taken (without
    replacement: successive sampling by weight). A node's sample depends only on the
    seed, the batch index, the layer and the node.

    Args:
        source: a pipe of MiniBatches with ``seeds`` (e.g. an ``ItemSampler``).
        graph: the :class:`~graphpipe.CSCGraph` to sample from (typed or not).
        fanouts: one entry per GNN layer: an int ``>= 1``, ``0`` (no edge in that layer,
            as PyG's) or ``-1`` (all in-edges); on a typed graph an int for every edge
            type, a dict edge type -> int or a list in edge type id order (0: none of that
            type).
        replace: sample with replacement.
        weights: name of a 1-D finite, non-negative float (or bool mask) edge
            attribute of ``graph`` to sample by, or None for uniform sampling.
        prob_name: GraphBolt's name for ``weights`` (pass one of them).
        **options: keyword arguments of :class:`SubgraphSampler`: ``seed``,
            ``cooperative``, ``layout`` (``"block"`` or ``"pyg"``), ``disjoint`` (PyG's:
            one subtree per seed, ``layout="pyg"``, node seeds, CPU) and, for node-pair
            seeds, ``exclude_seed_edges``, ``include_reverse_edges``,
            ``reverse_edge_ids`` (untyped) or ``reverse_etypes_mapping`` (typed); temporal
            sampling: ``time_attr`` or ``node_timestamp_attr_name`` /
            ``edge_timestamp_attr_name``, ``comparison``, ``time_window``,
            ``temporal_strategy``; ``deduplicate``; GraphBolt's ``overlap_fetch`` and
            ``asynchronous`` (accepted, no-ops: see SubgraphSampler).

    Example::

        pipe = ItemSampler(train_set, 1024, shuffle=True).sample_neighbor(graph, [15, 10, 5], layout="pyg")
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
        **options,
    ):
        self.replace = check_bool(replace, "replace", type(self).__name__)
        self.weights = weights_or_prob_name(weights, prob_name, type(self).__name__)
        super().__init__(source, graph, fanouts, **options)

    def check_sampler_options(self) -> None:
        """``weights`` and ``replace`` against the mode (see SubgraphSampler)."""
        name = type(self).__name__
        self.probs = None if self.weights is None else check_edge_weights(self.graph, self.weights, name)
        last = self.time_filter is not None and self.time_filter.strategy == "last"
        if last and self.replace:
            raise ValueError(
                f"{name}: temporal_strategy='last' takes the fanout most recent distinct neighbours, so it draws "
                f"nothing with replacement; pass replace=False or temporal_strategy='uniform'"
            )
        if last and self.weights is not None:
            raise ValueError(
                f"{name}: temporal_strategy='last' takes the most recent neighbours, so it draws nothing "
                f"by `weights`; pass weights=None or temporal_strategy='uniform'"
            )

    def sample_segments(
        self, indptr, nodes, fanout, key_ids, exclude, layer: int, minibatch: MiniBatch, candidates=None
    ) -> LayerSample:
        """The in-edge ranges of ``nodes`` sampled with ``fanout``, skipping those
        ``exclude`` names (see :meth:`SubgraphSampler.sample_segments`)."""
        indices, probs = edge_arrays(self.graph.indices, self.probs, candidates)
        try:
            key = self.layer_key(minibatch.batch_index, layer)
            return sample_neighbors_trusted(indptr, indices, nodes, fanout, key, self.replace, probs, exclude, key_ids)
        except FanoutTooLarge as error:
            raise ValueError(f"{type(self).__name__}: `fanouts[{layer}]` is too large: {error}") from error

    def state_options(self) -> Dict[str, object]:
        """Pipe protocol: the fanouts and ``replace``."""
        return {**super().state_options(), "replace": self.replace}

    def uniform_draw_key(self, batch_index: int, layer: int) -> Optional[int]:
        """Unweighted, without replacement: the layer's key (see SubgraphSampler)."""
        return self.layer_key(batch_index, layer) if self.probs is None and not self.replace else None

    def compile_task(self) -> Callable[[], None]:
        """A picklable call that compiles (or loads from numba's cache) the CPU kernels of
        ``sample_layer`` for this graph's dtypes, these fanouts and options
        (:func:`graphpipe.loading.compile.compile_kernels`)."""
        fanouts = [f for layer in self.edge_type_fanouts for f in layer if f != 0]
        indptr, indices, probs = (dtype_only(t) for t in (self.graph.indptr, self.graph.indices, self.probs))
        return partial(compile_sample_neighbors, indptr, indices, fanouts, replace=self.replace, probs=probs)


def weights_or_prob_name(weights: Optional[str], prob_name: Optional[str], name: str) -> Optional[str]:
    """The sampler's ``weights``: given as such or as ``prob_name`` (GraphBolt's name)."""
    if weights is not None and prob_name is not None:
        raise ValueError(f"{name}: pass `weights` or `prob_name` (GraphBolt's name for it), not both")
    return prob_name if weights is None else weights


@functional_pipe("temporal_sample_neighbor")
class TemporalNeighborSampler(GraphBoltTemporal, NeighborSampler):
    """GraphBolt's ``temporal_sample_neighbor(graph, fanouts, replace, prob_name,
    node_timestamp_attr_name, edge_timestamp_attr_name)``: :class:`NeighborSampler`
    sampling only neighbours earlier than their root seed's ``timestamp`` (node and edge
    times, whichever are named) at every hop, in GraphBolt's layout (block layers without
    deduplication: every sampled edge a new row). Options of :class:`SubgraphSampler`:
    ``comparison="<="``, ``time_window``, ``temporal_strategy="last"``, ``layout="pyg"``
    (whose node seeds default to PyG's ``"<="``: neighbours at or before the seed's time)."""
