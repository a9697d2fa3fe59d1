"""MiniBatch and SampledSubgraph: what flows through a pipe, with public fields only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch

from graphpipe._internal.devices import device_or_cpu
from graphpipe._internal.reprs import fields_repr
from graphpipe.batch import dgl, pyg
from graphpipe.graph.sampled_subgraph import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, CSCFormat, SampledSubgraph, by_type, field_names, map_tensors

__all__ = ["MiniBatch", "SampledSubgraph", "CSCFormat", "LAYOUTS", "ReusedRows", "with_fields"]

# The values of ``MiniBatch.layout`` (and of the samplers' ``layout`` argument).
LAYOUTS = ("block", "pyg")


@dataclass(frozen=True)
class ReusedRows:
    """Bottom-layer rows a batch reuses (:class:`~graphpipe.HotReuse`): ``positions`` ``[H]``
    int64 rows of the bottom layer's destinations (hot, not expanded), ``rows`` ``[H, d]``
    their output, computed with the bottom module's weights of ``version`` (training steps)
    for super-batch ``super_index``, where they are rows ``hot_index`` ``[H]``."""

    positions: torch.Tensor
    rows: torch.Tensor
    version: int
    super_index: int
    hot_index: torch.Tensor

    def __repr__(self) -> str:
        return fields_repr(self)


@dataclass
class MiniBatch:
    """One training step's data, filled stage by stage.

    Layer ``i`` of ``sampled_subgraphs`` feeds GNN layer ``i``: ``sampled_subgraphs[0]``
    is nearest the input features, ``sampled_subgraphs[-1]`` has the seeds as its
    destinations::

        input_nodes ──[sampled_subgraphs[0]]──> ... ──[sampled_subgraphs[-1]]──> seeds
        (features)      GNN layer 0                     GNN layer L-1           (outputs)

    Attributes:
        seeds: ``[batch_size]`` node ids (the item set's integer dtype) whose outputs are trained, or
            ``[batch_size, 2]`` node pairs ``(source, destination)`` for link prediction
            (GraphBolt's layout: positives, then the negatives a negative sampler
            appended, ``labels`` and ``indexes`` aligned to them).
        labels: ``[batch_size, ...]`` labels of the seeds, or None. For node pairs from a
            negative sampler: float32 1.0 for positives and 0.0 for negatives (or the
            positives' own labels followed by zeros of their dtype).
        sampled_subgraphs: one :class:`SampledSubgraph` per GNN layer, input first.
        input_nodes: ``[num_input]`` int64 global ids of the first layer's sources
            (seeds first, then nodes first reached at hop 1, 2, ...): row ``k`` of every
            node feature belongs to ``input_nodes[k]``.
        node_features: key -> ``[num_input, ...]`` features of ``input_nodes``.
        edge_features: one dict per layer, key -> ``[num_edges_of_layer, ...]``.
        batch_index: position of this batch in the sampler's stream (counts across
            epochs). Samplers derive their random variates from it and their seed, so a
            batch's sample does not depend on which thread or process produced it.
        layout: the sampler's ``layout``: ``"block"`` (GraphBolt/DGL: layer ``i`` samples
            the in-edges of all its destinations) or ``"pyg"`` (PyG's ``NeighborLoader``:
            each node's in-edges are sampled once, at the hop where it is first reached).
            :attr:`blocks` needs ``"block"``; :meth:`to_pyg` takes either.
        indexes: ``[batch_size]`` int64, node pairs only: the query each pair belongs to
            (a positive and its negatives share one; GraphBolt's ``indexes``), for ranking
            metrics such as MRR.
        compacted_seeds: ``[batch_size, 2]`` int64, node pairs only (``[batch_size, k]``
            for GraphBolt's hyperlinks), set by the samplers: ``seeds`` in local ids,
            positions in ``sampled_subgraphs[-1].original_column_node_ids`` (the pairs'
            distinct endpoints, ascending, which are also the first ``input_nodes``;
            temporal: a row per endpoint, pair by pair, not deduplicated), so
            ``h[compacted_seeds[:, 0]]`` and ``h[compacted_seeds[:, 1]]`` are the two
            ends' outputs.
        item_ids: ``[num_items]`` int64 positions in the ItemSet of the items this batch
            was cut from (PyG's ``input_id``); a negative sampler leaves it alone, so it
            counts the positives of a link batch.
        input_id: ``[num_items]`` int64, node seeds only: the item set's own ``input_id``
            field, which ``to_pyg()`` reports instead of ``item_ids`` (``from_pyg``'s mask
            splits: the node ids, as PyG's ``input_id`` for a boolean mask); else None.
        subtree_ids: ``[num_input]`` int64, disjoint sampling only (``disjoint=True``, PyG's
            ``batch``): the position in ``seeds`` of the seed whose subtree each of
            ``input_nodes`` belongs to (a node reached from two seeds is in
            ``input_nodes`` twice); typed: per node type.
        timestamp: ``[batch_size]`` int64, temporal sampling: each seed's time (an ItemSet
            field named ``"timestamp"``; GraphBolt's), aligned with ``seeds`` (a negative
            gets its positive's); every sampled node and edge is valid for it.
        reused: hot-vertex reuse (``sample_neighbor(..., hot_reuse=...)``): the bottom
            layer's destinations it did not expand and their reused output (:class:`ReusedRows`).

    Typed batches (from a :class:`~graphpipe.HeteroItemSet` on a typed graph) hold dicts,
    every id type-local: ``seeds``, ``labels`` and ``item_ids`` by node type (only the
    types in the batch), ``input_nodes`` by node type (every type of the graph),
    ``sampled_subgraphs`` of typed :class:`SampledSubgraph` layers, ``node_features``
    keyed by ``(node type, name)`` with rows of ``input_nodes[node type]`` and
    ``edge_features`` by ``(edge type, name)``. Typed link batches key the seed fields
    by edge type ``"src:rel:dst"``: ``seeds`` ``[N, 2]`` (source of type ``src``,
    destination of type ``dst``), ``labels``, ``indexes`` ``[N]``, ``item_ids`` ``[P]``,
    and ``compacted_seeds`` ``[N, 2]``: column 0 in local ids of the last layer's
    destinations of type ``src``, column 1 of type ``dst`` (each type's destinations
    are its distinct endpoints over every edge type of the batch, ascending). An untyped
    batch is the one-type case of a typed one (:meth:`as_typed`).
    """

    seeds: Optional[torch.Tensor] = None
    labels: Optional[torch.Tensor] = None
    sampled_subgraphs: Optional[List[SampledSubgraph]] = None
    input_nodes: Optional[torch.Tensor] = None
    node_features: Dict[str, torch.Tensor] = field(default_factory=dict)
    edge_features: List[Dict[str, torch.Tensor]] = field(default_factory=list)
    batch_index: int = 0
    layout: str = "block"
    indexes: Optional[torch.Tensor] = None
    compacted_seeds: Optional[torch.Tensor] = None
    item_ids: Optional[torch.Tensor] = None
    input_id: Optional[torch.Tensor] = None
    subtree_ids: Optional[torch.Tensor] = None
    timestamp: Optional[torch.Tensor] = None
    reused: Optional[ReusedRows] = None

    def __repr__(self) -> str:
        """One field a line, tensors as ``dtype[shape]`` (``int64[1024]``), not values."""
        return fields_repr(self, multiline=True)

    @property
    def num_layers(self) -> int:
        """The sampled layers (GraphBolt's ``num_layers()`` is a method: here a property)."""
        return len(self.sampled_subgraphs or ())

    def node_ids(self):
        """GraphBolt's: ``input_nodes``, the nodes of every layer (typed: a dict by type)."""
        return self.input_nodes

    def edge_ids(self, layer_id: int):
        """GraphBolt's: layer ``layer_id``'s ``original_edge_ids`` (typed: a dict by edge type)."""
        if isinstance(layer_id, bool) or not isinstance(layer_id, int) or not -self.num_layers <= layer_id < self.num_layers:
            raise IndexError(f"MiniBatch.edge_ids: `layer_id` must be an int in [0, {self.num_layers}) (the batch's layers), got {layer_id!r}")
        return self.sampled_subgraphs[layer_id].original_edge_ids

    @property
    def is_heterogeneous(self) -> bool:
        """Whether the batch is typed: ``seeds`` is a dict by node type (edge type for
        node pairs)."""
        return isinstance(self.seeds, dict)

    @property
    def batch_size(self) -> int:
        """The number of seeds: nodes, or node pairs for link prediction (summed over
        the types of a typed batch)."""
        if self.seeds is None:
            return 0
        return sum(ids.shape[0] for ids in by_type(self.seeds, HOMO_NODE_TYPE).values())

    @property
    def is_link_batch(self) -> bool:
        """Whether the seeds are node pairs (``[batch_size, 2]``: link prediction) or
        hyperlinks (``[batch_size, k]``); for a typed batch, whether any type's seeds are,
        or whether it has ``compacted_seeds`` (a sampled typed link batch without pairs,
        ``seeds`` ``{}``: a rank's empty share of a global batch)."""
        if self.seeds is None:
            return False
        return self.compacted_seeds is not None or any(ids.dim() == 2 for ids in by_type(self.seeds, HOMO_NODE_TYPE).values())

    def as_typed(self) -> "MiniBatch":
        """The batch with every field by type: itself if typed; an untyped batch as the
        one-type case, sharing its tensors: node type ``"_N"``, edge type ``"_N:_E:_N"``
        (GraphBolt's), the seed fields keyed by ``"_N"`` (node seeds) or ``"_N:_E:_N"``
        (node pairs), feature keys ``("_N", name)`` / ``("_N:_E:_N", name)``."""
        if self.is_heterogeneous:
            return self
        seed_type = HOMO_EDGE_TYPE if self.is_link_batch else HOMO_NODE_TYPE

        def seed_field(value):
            return None if value is None else {seed_type: value}

        return MiniBatch(
            seeds=seed_field(self.seeds),
            labels=seed_field(self.labels),
            sampled_subgraphs=None if self.sampled_subgraphs is None else [sg.as_typed() for sg in self.sampled_subgraphs],
            input_nodes=None if self.input_nodes is None else {HOMO_NODE_TYPE: self.input_nodes},
            node_features={(HOMO_NODE_TYPE, key): value for key, value in self.node_features.items()},
            edge_features=[{(HOMO_EDGE_TYPE, key): value for key, value in layer.items()} for layer in self.edge_features],
            batch_index=self.batch_index,
            layout=self.layout,
            indexes=seed_field(self.indexes),
            compacted_seeds=seed_field(self.compacted_seeds),
            item_ids=seed_field(self.item_ids),
            input_id=seed_field(self.input_id),
            subtree_ids=None if self.subtree_ids is None else {HOMO_NODE_TYPE: self.subtree_ids},
            timestamp=seed_field(self.timestamp),
        )

    # ------------------------------------------- GraphBolt 2.1's names, read-only
    # Derived from the fields above whatever the items were named; node pairs in the
    # layout of :func:`_positives_and_negatives`; typed: dicts by edge type.
    @property
    def seed_nodes(self):
        """GraphBolt 2.1's name of ``seeds`` when they are nodes; None for node pairs."""
        return None if self.is_link_batch else self.seeds

    @property
    def node_pairs(self):
        """GraphBolt 2.1's positive pairs ``(sources, destinations)``, ``[P]`` each."""
        return _legacy_pairs(self, "node_pairs", self.seeds, lambda pos, neg: tuple(pos.unbind(1)))

    @property
    def negative_srcs(self):
        """GraphBolt 2.1's ``[P, k]`` sources of each positive's ``k`` negatives; None
        where every negative keeps its positive's source (``sample_uniform_negative``)."""
        return _legacy_pairs(self, "negative_srcs", self.seeds, lambda pos, neg: _negative_side(pos, neg, 0))

    @property
    def negative_dsts(self):
        """GraphBolt 2.1's ``[P, k]`` destinations of the negatives; None where every
        negative keeps its positive's destination, or without negatives."""
        return _legacy_pairs(self, "negative_dsts", self.seeds, lambda pos, neg: _negative_side(pos, neg, 1))

    @property
    def compacted_node_pairs(self):
        """:attr:`node_pairs` in local ids (those of ``compacted_seeds``)."""
        return _legacy_pairs(self, "compacted_node_pairs", self.compacted_seeds, lambda pos, neg: tuple(pos.unbind(1)))

    @property
    def compacted_negative_srcs(self):
        """:attr:`negative_srcs` in local ids."""
        return _legacy_pairs(self, "compacted_negative_srcs", self.compacted_seeds, lambda pos, neg: _negative_side(pos, neg, 0))

    @property
    def compacted_negative_dsts(self):
        """:attr:`negative_dsts` in local ids."""
        return _legacy_pairs(self, "compacted_negative_dsts", self.compacted_seeds, lambda pos, neg: _negative_side(pos, neg, 1))

    @property
    def positive_node_pairs(self):
        """GraphBolt 2.1's name of :attr:`compacted_node_pairs`."""
        return self.compacted_node_pairs

    @property
    def negative_node_pairs(self):
        """GraphBolt 2.1's local ``([P, k] sources, [P, k] destinations)`` of the negatives,
        both sides given; None without negatives."""
        return _legacy_pairs(
            self, "negative_node_pairs", self.compacted_seeds, lambda pos, neg: None if neg is None else tuple(neg.unbind(2))
        )

    @property
    def node_pairs_with_labels(self):
        """GraphBolt 2.1's ``((sources, destinations), labels)`` of every pair in local ids,
        positives then negatives (``compacted_seeds`` and ``labels``); None without labels."""
        if self.labels is None or self.compacted_seeds is None or not self.is_link_batch:
            return None
        pairs = {key: tuple(rows.unbind(1)) for key, rows in by_type(self.compacted_seeds, None).items()}
        return (pairs if self.is_heterogeneous else pairs[None]), self.labels

    # ------------------------------------------------------------------ moves
    def to(self, device, non_blocking: bool = False) -> "MiniBatch":
        """A MiniBatch with every tensor moved to ``device`` (without CUDA, a CUDA device
        warns once and the batch stays on the CPU, as ``copy_to``)."""
        device = device_or_cpu(device, "MiniBatch.to('cuda'): CUDA is not available; the batch stays on the CPU", "MiniBatch.to")
        return map_tensors(self, lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "MiniBatch":
        """A MiniBatch with every CPU tensor in page-locked memory (no-op without CUDA)."""
        if not torch.cuda.is_available():
            return self
        return map_tensors(self, lambda t: t.pin_memory() if t.device.type == "cpu" else t)

    @property
    def blocks(self):
        """The sampled layers as DGL message-flow graphs, input first (GraphBolt's
        ``MiniBatch.blocks``; see :func:`graphpipe.batch.dgl.blocks`). Needs ``dgl``."""
        return dgl.blocks(self)

    def to_pyg(
        self,
        node_feature_key: Optional[str] = None,
        edge_feature_key: Optional[str] = None,
        label_key: Optional[str] = None,
        neg_sampling: str = "binary",
    ):
        """The batch as the ``torch_geometric.data.Data`` (``HeteroData`` for a typed
        batch) PyG's ``NeighborLoader`` / ``LinkNeighborLoader`` return; see
        :func:`graphpipe.batch.pyg.to_pyg`."""
        return pyg.to_pyg(self, node_feature_key, edge_feature_key, label_key, neg_sampling)

    def to_pyg_data(self):
        """GraphBolt's ``to_pyg_data``: ``x``, ``edge_index`` (every layer's edges),
        ``y`` (the seeds' labels), ``batch_size`` and ``n_id`` as GraphBolt's gives them;
        see :func:`graphpipe.batch.pyg.to_pyg_data`."""
        return pyg.to_pyg_data(self)


def with_fields(minibatch: MiniBatch, **changes) -> MiniBatch:
    """A shallow copy of ``minibatch`` with the fields ``changes`` (``dataclasses.replace``
    without its per-call field walk), keeping the attributes a user's stage set on it
    (GraphBolt's stages change a MiniBatch in place, so such attributes stay)."""
    unknown = changes.keys() - field_names(type(minibatch))
    if unknown:
        raise TypeError(f"with_fields: {sorted(unknown)} are not fields of {type(minibatch).__name__}")
    new = object.__new__(type(minibatch))  # a MiniBatch keeps its fields and attributes in __dict__
    new.__dict__.update(minibatch.__dict__)
    new.__dict__.update(changes)
    return new


def _legacy_pairs(minibatch: MiniBatch, name: str, pairs, fn):
    """``fn(positives, negatives)`` of a link batch's ``pairs`` (``seeds`` or
    ``compacted_seeds``; typed: by edge type, None if every type's is), or None."""
    if pairs is None or not minibatch.is_link_batch:
        return None
    if not isinstance(pairs, dict):
        return fn(*_positives_and_negatives(minibatch, name, pairs, None))
    values = {key: fn(*_positives_and_negatives(minibatch, name, rows, key)) for key, rows in pairs.items()}
    return None if all(value is None for value in values.values()) else values


def _positives_and_negatives(minibatch: MiniBatch, name: str, pairs: torch.Tensor, key: Optional[str]):
    """The ``[P, 2]`` positives and ``[P, k, 2]`` negatives (None without) of ``[N, 2]``
    pairs in GraphBolt's layout: positives (the batch's items, ``item_ids``, else those
    ``indexes`` name), then ``k`` negatives per positive."""
    if pairs.dim() != 2 or pairs.size(1) != 2:
        raise ValueError(f"MiniBatch.{name}: GraphBolt 2.1's node pairs need [N, 2] seeds, got shape {tuple(pairs.shape)}")
    item_ids = None if minibatch.item_ids is None else by_type(minibatch.item_ids, key).get(key)
    indexes = None if minibatch.indexes is None else by_type(minibatch.indexes, key).get(key)
    num = pairs.size(0)
    positives = item_ids.numel() if item_ids is not None else int(indexes.max()) + 1 if indexes is not None and num else num
    if positives == num:
        return pairs, None
    if indexes is None or positives == 0 or (num - positives) % positives:
        raise ValueError(
            f"MiniBatch.{name}: GraphBolt 2.1's negatives are k per positive pair (sample_uniform_negative's layout, "
            f"neg_sampling='triplet'), got {num - positives} negative pairs for {positives} positives"
        )
    return pairs[:positives], pairs[positives:].view(positives, -1, 2)


def _negative_side(positives: torch.Tensor, negatives: Optional[torch.Tensor], side: int) -> Optional[torch.Tensor]:
    """The ``[P, k]`` ``side`` (0: sources, 1: destinations) of the negatives, or None if
    none, or if each is its positive's."""
    if negatives is None or bool((negatives[:, :, side] == positives[:, None, side]).all()):
        return None
    return negatives[:, :, side]
