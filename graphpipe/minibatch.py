"""MiniBatch and SampledSubgraph: what flows through a pipe, with public fields only."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Dict, List, NamedTuple, Optional, Union

import torch

from .ops import unique_and_compact

__all__ = ["MiniBatch", "SampledSubgraph", "CSCFormat", "LAYOUTS"]

# The values of ``MiniBatch.layout`` (and of the samplers' ``layout`` argument).
LAYOUTS = ("block", "pyg")


@dataclass
class CSCFormat:
    """A CSC adjacency over local ids: ``indices[indptr[j]:indptr[j+1]]`` are the
    sources of destination ``j``. ``indptr``: ``[num_dst + 1]`` int64;
    ``indices``: ``[num_edges]`` int64 local source ids."""

    indptr: torch.Tensor
    indices: torch.Tensor

    def __repr__(self) -> str:
        return _fields_repr(self)


@dataclass
class SampledSubgraph:
    """One sampled GNN layer (a "block"), compacted to local ids.

    Destination nodes are a prefix of the source nodes: local id ``j < num_dst_nodes``
    is the same node as a destination and as a source, so ``h[:num_dst_nodes]`` of the
    layer's input is the destinations' own representation.

    Attributes:
        sampled_csc: local CSC, ``indptr`` ``[num_dst + 1]`` int64 and ``indices``
            ``[num_edges]`` int64 in ``[0, num_src)``.
        original_row_node_ids: ``[num_src]`` int64 global ids of the source nodes.
        original_column_node_ids: ``[num_dst]`` int64 global ids of the destination
            nodes (equal to ``original_row_node_ids[:num_dst]``).
        original_edge_ids: ``[num_edges]`` int64 ids of the sampled edges: the positions
            of the edges in the ``edge_index`` / COO lists the graph was built from
            (``CSCGraph.map_edge_ids`` of their CSC positions), so edge features in the
            user's order are indexed by them.
        edge_weights: ``[num_edges]`` float32 or None. Samplers that weight edges (LABOR)
            set it so that ``sum_e w_e * h_src(e)`` per destination is an unbiased
            estimate of the full-neighbourhood mean.
    """

    sampled_csc: CSCFormat
    original_row_node_ids: torch.Tensor
    original_column_node_ids: torch.Tensor
    original_edge_ids: torch.Tensor
    edge_weights: Optional[torch.Tensor] = None

    def __repr__(self) -> str:
        """Fields with the shapes and dtypes of their tensors, not their values."""
        return _fields_repr(self)

    @property
    def is_heterogeneous(self) -> bool:
        """Whether the fields are dicts by node type / edge type (a typed graph's layer)."""
        return isinstance(self.sampled_csc, dict)

    @property
    def num_src_nodes(self) -> Union[int, Dict[str, int]]:
        """The number of source nodes (per node type for a typed layer)."""
        return _numel(self.original_row_node_ids)

    @property
    def num_dst_nodes(self) -> Union[int, Dict[str, int]]:
        """The number of destination nodes (per node type for a typed layer)."""
        return _numel(self.original_column_node_ids)

    @property
    def num_edges(self) -> Union[int, Dict[str, int]]:
        """The number of sampled edges (per edge type for a typed layer)."""
        if self.is_heterogeneous:
            return {etype: csc.indices.numel() for etype, csc in self.sampled_csc.items()}
        return self.sampled_csc.indices.numel()

    def edge_index(self) -> Union[torch.Tensor, Dict[str, torch.Tensor]]:
        """``[2, num_edges]`` int64 local (source, destination) ids, CSC order; for a
        typed layer ``{edge type: [2, num_edges_of_type]}``, sources local to the source
        type's ``original_row_node_ids`` and destinations to the destination type's
        ``original_column_node_ids``."""
        if self.is_heterogeneous:
            return {etype: _csc_edge_index(csc) for etype, csc in self.sampled_csc.items()}
        return _csc_edge_index(self.sampled_csc)


@dataclass
class MiniBatch:
    """One training step's data, filled stage by stage.

    Layer ``i`` of ``sampled_subgraphs`` feeds GNN layer ``i``: ``sampled_subgraphs[0]``
    is nearest the input features, ``sampled_subgraphs[-1]`` has the seeds as its
    destinations::

        input_nodes ──[sampled_subgraphs[0]]──> ... ──[sampled_subgraphs[-1]]──> seeds
        (features)      GNN layer 0                     GNN layer L-1           (outputs)

    Link prediction (GraphBolt's layout): ``seeds`` are ``[num_pairs, 2]`` node pairs
    ``(source, destination)``, positives then the negatives a negative sampler appended,
    with ``labels`` and ``indexes`` aligned to them; the samplers sample from the pairs'
    distinct endpoints (the destinations of the last layer) and set ``compacted_seeds``,
    the pairs in those local ids, so ``h[compacted_seeds[:, 0]]`` and
    ``h[compacted_seeds[:, 1]]`` are the two ends' outputs.

    Attributes:
        seeds: ``[batch_size]`` int64 node ids whose outputs are trained, or
            ``[batch_size, 2]`` node pairs (link prediction). A typed batch (see below) has a dict.
        labels: ``[batch_size, ...]`` labels of the seeds, or None. For node pairs from a
            negative sampler: bool, True for positives (or the positives' own labels
            followed by zeros).
        sampled_subgraphs: one :class:`SampledSubgraph` per GNN layer, input first.
        input_nodes: ``[num_input]`` int64 global ids of the first layer's sources
            (seeds first, then nodes first reached at hop 1, 2, ...): row ``k`` of every
            node feature belongs to ``input_nodes[k]``.
        node_features: key -> ``[num_input, ...]`` features of ``input_nodes``.
        edge_features: one dict per layer, key -> ``[num_edges_of_layer, ...]``.
        batch_index: position of this batch in the sampler's stream (counts across
            epochs). Samplers derive their random variates from it and their seed, so a
            batch's sample does not depend on which thread or process produced it.
        layout: how ``sampled_subgraphs`` were sampled (the sampler's ``layout``):
            ``"block"`` (GraphBolt/DGL: layer ``i`` samples the in-edges of all its
            destinations) or ``"pyg"`` (PyG's ``NeighborLoader``: each node's in-edges
            are sampled once, in the layer of the hop where it is first reached; the
            other destinations of a layer have no in-edges). :attr:`blocks` needs
            ``"block"``; :meth:`to_pyg` takes either (``"pyg"`` is the fast path).
        indexes: ``[batch_size]`` int64, node pairs only: the query each pair belongs to
            (a positive and its negatives share one; GraphBolt's ``indexes``), for
            ranking metrics such as MRR. A negative sampler sets ``arange(P)`` for the
            ``P`` positives and each negative its positive's index; an ItemSet may give
            them (e.g. fixed evaluation negatives).
        compacted_seeds: ``[batch_size, 2]`` int64, node pairs only (``[batch_size, k]``
            for GraphBolt's hyperlinks), set by the samplers: ``seeds`` in local ids,
            positions in ``sampled_subgraphs[-1].original_column_node_ids`` (the pairs'
            distinct endpoints, ascending, which are also the first ``input_nodes``).
        item_ids: ``[num_items]`` int64 positions in the ItemSet of the items this batch
            was cut from (set by the item samplers; PyG's ``input_id``). A negative
            sampler leaves it alone, so it counts the positives of a link batch.

    Typed batches (from a :class:`~graphpipe.HeteroItemSet` on a typed graph) hold dicts,
    every id type-local: ``seeds``, ``labels`` and ``item_ids`` by node type (only the
    types in the batch), ``input_nodes`` by node type (every type of the graph),
    ``sampled_subgraphs`` of typed :class:`SampledSubgraph` layers, ``node_features``
    keyed by ``(node type, name)`` with rows of ``input_nodes[node type]`` and
    ``edge_features`` by ``(edge type, name)``. :attr:`blocks` gives DGL heterograph
    blocks and :meth:`to_pyg` a PyG ``HeteroData``.
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

    def __repr__(self) -> str:
        """One field a line, tensors as ``dtype[shape]`` (``int64[1024]``), not values."""
        return _fields_repr(self, multiline=True)

    @property
    def num_layers(self) -> int:
        return len(self.sampled_subgraphs or ())

    @property
    def is_heterogeneous(self) -> bool:
        """Whether the batch is typed: ``seeds`` is a dict of node type -> ids."""
        return isinstance(self.seeds, dict)

    @property
    def batch_size(self) -> int:
        """The number of seeds: nodes, or node pairs for link prediction (summed over
        the node types of a typed batch)."""
        if self.seeds is None:
            return 0
        if self.is_heterogeneous:
            return sum(ids.shape[0] for ids in self.seeds.values())
        return self.seeds.shape[0]

    @property
    def is_link_batch(self) -> bool:
        """Whether the seeds are node pairs (``[batch_size, 2]``: link prediction) or
        hyperlinks (``[batch_size, k]``); for a typed batch, whether any type's seeds are."""
        if self.seeds is None:
            return False
        if self.is_heterogeneous:
            return any(ids.dim() == 2 for ids in self.seeds.values())
        return self.seeds.dim() == 2

    # ------------------------------------------------------------------ moves
    def to(self, device, non_blocking: bool = False) -> "MiniBatch":
        """A MiniBatch with every tensor moved to ``device``."""
        return _apply(self, lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "MiniBatch":
        """A MiniBatch with every CPU tensor in page-locked memory (no-op without CUDA)."""
        if not torch.cuda.is_available():
            return self
        return _apply(self, lambda t: t.pin_memory() if t.device.type == "cpu" else t)

    # ------------------------------------------------------------------ DGL
    @property
    def blocks(self):
        """The sampled layers as DGL message-flow graphs (``dgl.create_block``), input first.

        Same as GraphBolt's ``MiniBatch.blocks``: block ``i`` feeds GNN layer ``i``, its
        ``srcdata[dgl.NID]``/``dstdata[dgl.NID]`` hold global node ids,
        ``edata[dgl.EID]`` the graph's edge ids and, when the sampler set them,
        ``edata["edge_weights"]`` the estimator weights. Needs ``dgl`` (imported lazily)
        and a batch sampled with ``layout="block"``.

        Typed batches give heterograph blocks, as GraphBolt's: canonical edge types
        ``(src, rel, dst)``, ``srcnodes[ntype].data[dgl.NID]`` /
        ``dstnodes[ntype].data[dgl.NID]`` type-local node ids and
        ``edges[etype].data[dgl.EID]`` type-local edge ids.
        """
        if self.layout != "block":
            raise ValueError(
                f"MiniBatch.blocks: the batch was sampled with layout={self.layout!r} (PyG's NeighborLoader: a "
                f"node's in-edges are sampled only at the hop where it is first reached), so its layers leave "
                f"earlier destinations without in-edges and a block-based model would compute wrong outputs; "
                f"sample with layout='block' (the default) for blocks, or use to_pyg()"
            )
        try:
            import dgl
        except ImportError as err:
            raise ImportError("MiniBatch.blocks needs DGL: pip install dgl") from err
        if not self.sampled_subgraphs:
            raise ValueError("MiniBatch.blocks: the batch has no sampled_subgraphs; add a sampler stage")
        if self.sampled_subgraphs[0].is_heterogeneous:
            from .hetero_minibatch import hetero_blocks

            return hetero_blocks(self.sampled_subgraphs)
        blocks = []
        for sg in self.sampled_subgraphs:
            csc = sg.sampled_csc
            edge_order = torch.arange(sg.num_edges, device=csc.indices.device)
            block = dgl.create_block(
                ("csc", (csc.indptr, csc.indices, edge_order)),
                num_src_nodes=sg.num_src_nodes,
                num_dst_nodes=sg.num_dst_nodes,
            )
            block.srcdata[dgl.NID] = sg.original_row_node_ids
            block.dstdata[dgl.NID] = sg.original_column_node_ids
            block.edata[dgl.EID] = sg.original_edge_ids
            if sg.edge_weights is not None:
                block.edata["edge_weights"] = sg.edge_weights
            blocks.append(block)
        return blocks

    # ------------------------------------------------------------------ PyG
    def to_pyg(
        self,
        node_feature_key: Optional[str] = None,
        edge_feature_key: Optional[str] = None,
        label_key: Optional[str] = None,
        neg_sampling: str = "binary",
    ):
        """The batch as the ``torch_geometric.data.Data`` PyG's ``NeighborLoader`` (node
        seeds) or ``LinkNeighborLoader`` (node pairs) returns.

        NeighborLoader's subgraph: a node's in-edges are the ones sampled for it at the
        hop where it is first reached, and every node is reached from the seeds. Nodes
        are in hop order (the ``batch_size`` seeds first, then the nodes first reached at
        hop 1, 2, ..., ascending ids within a hop); edges are grouped by hop (hop ``k``:
        the in-edges of the nodes first reached at hop ``k - 1``, sampled in layer
        ``sampled_subgraphs[L - k]``), so ``num_sampled_nodes`` / ``num_sampled_edges``
        drive PyG's ``trim_to_layer``.

        * ``layout="pyg"`` batches are that subgraph as sampled: ``n_id`` is
          ``input_nodes`` and ``x`` the fetched rows, no copy.
        * ``layout="block"`` batches (the slower path) also hold in-edges re-sampled for
          nodes reached at earlier hops, and the nodes only those edges reach: they are
          dropped and the rest renumbered as above (a pass over the kept edges, a sort
          of each hop's new nodes and a gather of the feature rows). The result equals
          that of a ``"pyg"`` batch with the same seed for neighbor sampling and LABOR-0.

        Fields: ``x`` (node feature ``node_feature_key``; by default the only fetched
        node feature other than the label feature), ``edge_index`` ``[2, E]`` int64 local
        (source, target), ``y``, ``n_id`` (global node ids), ``e_id`` (the user's edge
        ids: columns of the ``edge_index`` the graph was built from), ``input_id`` (the
        seeds' positions in the ItemSet, ``item_ids``), ``batch_size``,
        ``num_sampled_nodes`` (``L + 1`` ints), ``num_sampled_edges`` (``L`` ints) and,
        when the sampler produced them, ``edge_weight``; with fetched edge features,
        ``edge_attr`` ``[E, ...]`` in ``edge_index`` order: the edge feature
        ``edge_feature_key``, or the only one fetched (several and no key: none).

        ``y``, as NeighborLoader's: one row per node, ``y[:batch_size]`` the seeds',
        when node labels were fetched as a node feature: ``label_key``, by default the
        node feature ``"y"`` if there is one. Otherwise ``y`` is ``labels`` (seeds only).

        Typed batches give a ``HeteroData`` with NeighborLoader's heterogeneous fields:
        see :func:`graphpipe.hetero_minibatch.to_hetero_data` (feature keys are names,
        looked up per node / edge type). Typed node pairs are not supported yet.

        Node pairs (link prediction), as ``LinkNeighborLoader``: the first
        ``num_sampled_nodes[0]`` nodes are the pairs' distinct endpoints (ascending, as
        LinkNeighborLoader orders them), ``input_id`` is ``item_ids`` (the positive
        pairs' positions in the ItemSet), there is no ``batch_size`` and no ``y`` from
        ``labels``, and ``neg_sampling`` picks the pairs' fields:

        * ``"binary"``: ``edge_label_index`` ``[2, num_pairs]`` (``compacted_seeds``
          transposed: local ids), ``edge_label`` (``labels``; bool labels as float
          1.0/0.0, as LinkNeighborLoader makes them).
        * ``"triplet"`` (batches from ``sample_uniform_negative``): ``src_index`` and
          ``dst_pos_index`` ``[P]``, ``dst_neg_index`` ``[P, k]`` (``[P]`` when
          ``k == 1``), local ids of each positive's source, destination and negative
          destinations.
        """
        try:
            from torch_geometric.data import Data
        except ImportError as err:
            raise ImportError(
                "MiniBatch.to_pyg() needs PyTorch Geometric: pip install 'graphpipe-gnn[pyg]' (or pip install torch_geometric)"
            ) from err
        if not self.sampled_subgraphs:
            raise ValueError("MiniBatch.to_pyg(): the batch has no sampled_subgraphs; add a sampler stage")
        if neg_sampling not in ("binary", "triplet"):
            raise ValueError(f"MiniBatch.to_pyg(): `neg_sampling` must be 'binary' or 'triplet', got {neg_sampling!r}")
        if neg_sampling == "triplet" and not self.is_link_batch:
            raise ValueError("MiniBatch.to_pyg(): neg_sampling='triplet' needs node-pair seeds (link prediction)")
        if self.sampled_subgraphs[0].is_heterogeneous:
            from .hetero_minibatch import to_hetero_data

            return to_hetero_data(self, node_feature_key, edge_feature_key, label_key)
        node_keys = set(self.node_features)
        if label_key is None:
            label_key = "y" if "y" in node_keys else None
        else:
            _feature_key(node_keys, label_key, "label_key")
        # The label feature is never picked as x by default.
        node_key = _feature_key(
            node_keys if node_feature_key is not None else node_keys - {label_key}, node_feature_key, "node_feature_key"
        )
        edge_keys = {key for layer in self.edge_features for key in layer}
        # Several edge features and no choice: no edge_attr (they may be fetched for other uses).
        edge_key = None if edge_feature_key is None and len(edge_keys) > 1 else _feature_key(
            edge_keys, edge_feature_key, "edge_feature_key"
        )
        layers = self.sampled_subgraphs
        if any(a.num_dst_nodes != b.num_src_nodes for a, b in zip(layers, layers[1:])):
            raise ValueError(
                "MiniBatch.to_pyg(): the layers do not chain (layer i's destinations must be layer i + 1's "
                "sources, as graphpipe's samplers make them; cooperative batches hold one rank's share only)"
            )
        hops = _hops_as_sampled(self) if self.layout == "pyg" else _pruned_hops(self)
        edge_index, edge_ids, edge_weights, edge_attr = [], [], [], []
        for hop, (local_edges, positions) in enumerate(hops.edges, start=1):
            layer = self.num_layers - hop
            sg = self.sampled_subgraphs[layer]
            edge_index.append(local_edges)
            edge_ids.append(sg.original_edge_ids[positions])
            if sg.edge_weights is not None:
                edge_weights.append(sg.edge_weights[positions])
            if edge_key is not None:
                edge_attr.append(self.edge_features[layer][edge_key][positions])
        data = Data(
            edge_index=torch.cat(edge_index, dim=1),
            n_id=hops.n_id,
            e_id=torch.cat(edge_ids),
            num_sampled_nodes=hops.num_sampled_nodes,
            num_sampled_edges=[e.size(1) for e in edge_index],
        )
        data.num_nodes = hops.n_id.numel()
        if self.item_ids is not None:
            data.input_id = self.item_ids
        if self.is_link_batch:
            _add_link_fields(data, self, neg_sampling)
        else:
            data.batch_size = hops.num_sampled_nodes[0]
        if edge_weights:
            data.edge_weight = torch.cat(edge_weights)
        if edge_attr:
            data.edge_attr = torch.cat(edge_attr)

        def rows(feature: torch.Tensor) -> torch.Tensor:
            return feature if hops.rows is None else feature[hops.rows.to(feature.device)]

        if label_key is not None:
            data.y = rows(self.node_features[label_key])
        elif self.labels is not None and not self.is_link_batch:
            data.y = self.labels
        if node_key is not None:
            data.x = rows(self.node_features[node_key])
        return data


def _add_link_fields(data, minibatch: MiniBatch, neg_sampling: str) -> None:
    """LinkNeighborLoader's fields of a node-pair batch (see :meth:`MiniBatch.to_pyg`)."""
    pairs = minibatch.compacted_seeds
    if pairs is None:
        raise ValueError(
            "MiniBatch.to_pyg(): the node-pair batch has no compacted_seeds; sample it with a graphpipe sampler "
            "(sample_neighbor / sample_layer_neighbor), which sets them"
        )
    if pairs.size(1) != 2:
        raise ValueError(
            f"MiniBatch.to_pyg(): the seeds are hyperlinks of {pairs.size(1)} nodes each (GraphBolt's [N, k] "
            f"items), which PyG's loaders have no form for; to_pyg() takes node seeds or node pairs [N, 2]"
        )
    if neg_sampling == "binary":
        data.edge_label_index = pairs.t().contiguous()
        labels = minibatch.labels
        if labels is not None:
            data.edge_label = labels.to(torch.float32) if labels.dtype == torch.bool else labels
        return
    num_pairs = pairs.size(0)
    indexes = minibatch.indexes
    num_positives = 0 if indexes is None or indexes.numel() == 0 else int(indexes.max()) + 1
    k = (num_pairs - num_positives) // max(num_positives, 1)
    queries = torch.arange(num_positives, device=pairs.device)
    expected = torch.cat([queries, queries.repeat_interleave(k)]) if num_positives else None
    seeds = minibatch.seeds
    if (
        num_positives == 0
        or k < 1
        or num_positives * (1 + k) != num_pairs
        or not torch.equal(indexes.to(torch.int64), expected)
        or not torch.equal(seeds[num_positives:, 0], seeds[:num_positives, 0].repeat_interleave(k))
    ):
        raise ValueError(
            "MiniBatch.to_pyg(neg_sampling='triplet') needs the layout of sample_uniform_negative: P positive pairs, "
            "then k negatives per positive with its source, grouped by `indexes` (arange(P), then each repeated k "
            "times)"
        )
    data.src_index = pairs[:num_positives, 0]
    data.dst_pos_index = pairs[:num_positives, 1]
    data.dst_neg_index = pairs[num_positives:, 1].reshape(num_positives, k).squeeze(-1)


class _PygHops(NamedTuple):
    """NeighborLoader's subgraph of a batch, as :meth:`MiniBatch.to_pyg` assembles it.

    ``n_id``: ``[N]`` global ids in hop order; ``rows``: ``[N]`` rows of ``input_nodes``
    (and of the node features) they are, or None when they are ``input_nodes`` itself;
    ``num_sampled_nodes``: ``L + 1`` nodes per hop; ``edges[k - 1]``: hop ``k``'s
    ``[2, E_k]`` local (source, target) ids and the positions of those edges in layer
    ``L - k`` (a slice or an int64 index).
    """

    n_id: torch.Tensor
    rows: Optional[torch.Tensor]
    num_sampled_nodes: List[int]
    edges: List[tuple]


def _hops_as_sampled(minibatch: MiniBatch) -> _PygHops:
    """A ``layout="pyg"`` batch: every layer's edges go to the nodes its previous layer
    added, and each layer's sources are a prefix of ``input_nodes``, so local ids are
    already NeighborLoader's."""
    layers = list(reversed(minibatch.sampled_subgraphs))  # hop 1 first
    counts = [layers[0].num_dst_nodes] + [sg.num_src_nodes - sg.num_dst_nodes for sg in layers]
    return _PygHops(
        n_id=minibatch.sampled_subgraphs[0].original_row_node_ids,
        rows=None,
        num_sampled_nodes=counts,
        edges=[(sg.edge_index(), slice(None)) for sg in layers],
    )


def _pruned_hops(minibatch: MiniBatch) -> _PygHops:
    """A ``layout="block"`` batch pruned to NeighborLoader's subgraph: hop ``k`` keeps the
    in-edges of the nodes first reached at hop ``k - 1`` (in layer ``L - k``) and adds
    their new sources, ordered by id within the hop as a ``"pyg"`` sampler orders them.

    Works on block-local ids: every layer's sources are a prefix of ``input_nodes`` and
    its destinations a prefix of its sources, so a node has the same local id, its
    position in ``input_nodes``, in every layer; no id lookups are needed.
    """
    layers = list(reversed(minibatch.sampled_subgraphs))  # hop 1 first
    input_nodes = minibatch.sampled_subgraphs[0].original_row_node_ids
    known = torch.arange(layers[0].num_dst_nodes, device=input_nodes.device)  # kept nodes, hop order
    counts, edges = [known.numel()], []
    frontier_start = 0
    for sg in layers:
        positions, targets = _frontier_in_edges(sg.sampled_csc, known, frontier_start)
        frontier_start = known.numel()
        known, local_sources = _add_hop(known, sg.sampled_csc.indices[positions], input_nodes)
        edges.append((torch.stack([local_sources, targets]), positions))
        counts.append(known.numel() - frontier_start)
    return _PygHops(n_id=input_nodes[known], rows=known, num_sampled_nodes=counts, edges=edges)


def _frontier_in_edges(csc: CSCFormat, known: torch.Tensor, frontier_start: int):
    """The in-edges in ``csc`` of the frontier ``known[frontier_start:]`` (block-local
    ids of the nodes first reached at the previous hop): ``(positions, targets)``, their
    ``[E]`` int64 positions in ``csc`` and the ``[E]`` int64 positions in ``known`` of
    their destinations."""
    frontier = known[frontier_start:]
    degrees = csc.indptr[frontier + 1] - csc.indptr[frontier]
    positions = _ranges(csc.indptr[frontier], degrees)
    targets = torch.repeat_interleave(
        torch.arange(frontier_start, known.numel(), device=known.device), degrees, output_size=positions.numel()
    )
    return positions, targets


def _add_hop(known: torch.Tensor, sources: torch.Tensor, input_nodes: torch.Tensor):
    """Append a hop's new nodes to ``known`` (block-local ids, hop order).

    ``sources``: ``[E]`` block-local ids of the hop's kept edges' sources;
    ``input_nodes``: the ids they index, by which the new nodes are ordered (as a
    ``"pyg"`` sampler orders them). Returns ``(known, local_sources)``: ``known`` with
    the new nodes appended, and ``[E]`` int64 positions of ``sources`` in it.
    """
    num_known = known.numel()
    grown, local_sources = unique_and_compact(known, sources, max(input_nodes.numel(), 1))
    # The new nodes come in block-local order; renumber them by id.
    new = grown[num_known:]
    order = torch.argsort(input_nodes[new])
    relabel = torch.arange(grown.numel(), device=grown.device)
    relabel[num_known + order] = relabel[num_known:].clone()
    return torch.cat([known, new[order]]), relabel[local_sources]


def _numel(ids):
    """``ids.numel()``, or ``{key: ids[key].numel()}`` for a dict of tensors."""
    if isinstance(ids, dict):
        return {key: value.numel() for key, value in ids.items()}
    return ids.numel()


def _csc_edge_index(csc: CSCFormat) -> torch.Tensor:
    """``[2, num_edges]`` int64 local (source, destination) ids of ``csc``, CSC order."""
    indptr = csc.indptr
    dst = torch.repeat_interleave(
        torch.arange(indptr.numel() - 1, device=indptr.device),
        indptr[1:] - indptr[:-1],
        output_size=csc.indices.numel(),
    )
    return torch.stack([csc.indices, dst])


def _ranges(starts: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``cat([arange(s, s + c) for s, c in zip(starts, counts)])`` as int64."""
    total = int(counts.sum())
    offsets = torch.cumsum(counts, 0) - counts
    shift = torch.repeat_interleave(starts.to(torch.int64) - offsets, counts, output_size=total)
    return torch.arange(total, device=starts.device) + shift


def _feature_key(known, key: Optional[str], argument: str) -> Optional[str]:
    """The feature ``to_pyg`` puts in ``x`` / ``edge_attr``: ``key``, or the only one known
    (``None`` if none is known and none was asked for)."""
    if key is None:
        if len(known) > 1:
            raise ValueError(f"MiniBatch.to_pyg(): several features {sorted(known)}; pass {argument}= to choose one")
        return next(iter(known), None)
    if key not in known:
        raise KeyError(f"MiniBatch.to_pyg(): unknown {argument} '{key}'; known keys: {sorted(known)}")
    return key


def _apply(obj, fn):
    """Apply ``fn`` to every tensor inside a (nested) MiniBatch / SampledSubgraph."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (MiniBatch, SampledSubgraph, CSCFormat)):
        return replace(obj, **{f.name: _apply(getattr(obj, f.name), fn) for f in fields(obj)})
    if isinstance(obj, dict):
        return {k: _apply(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_apply(v, fn) for v in obj]
    return obj


def _summary(value, indent: str = "") -> str:
    """``value`` for a repr, tensors as ``dtype[shape]`` (and ``@device`` off the CPU)."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        device = "" if value.device.type == "cpu" else f"@{value.device}"
        return f"{dtype}[{', '.join(map(str, value.shape))}]{device}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_summary(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list) and len(value) > 0:
        inner = indent + "    "
        return "[\n" + "".join(f"{inner}{_summary(item, inner)},\n" for item in value) + indent + "]"
    return repr(value)


def _fields_repr(obj, multiline: bool = False) -> str:
    """``Type(field=summary, ...)`` over the dataclass fields of ``obj`` (any added later
    included), one a line when ``multiline``."""
    indent = "    " if multiline else ""
    parts = [f"{f.name}={_summary(getattr(obj, f.name), indent)}" for f in fields(obj)]
    if multiline:
        return f"{type(obj).__name__}(\n" + "".join(f"{indent}{part},\n" for part in parts) + ")"
    return f"{type(obj).__name__}({', '.join(parts)})"
