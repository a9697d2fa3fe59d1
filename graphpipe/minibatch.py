"""MiniBatch and SampledSubgraph: what flows through a pipe, with public fields only."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Dict, List, Optional

import torch

__all__ = ["MiniBatch", "SampledSubgraph", "CSCFormat"]


@dataclass
class CSCFormat:
    """A CSC adjacency over local ids: ``indices[indptr[j]:indptr[j+1]]`` are the
    sources of destination ``j``. ``indptr``: ``[num_dst + 1]`` int64;
    ``indices``: ``[num_edges]`` int64 local source ids."""

    indptr: torch.Tensor
    indices: torch.Tensor


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

    @property
    def num_src_nodes(self) -> int:
        return self.original_row_node_ids.numel()

    @property
    def num_dst_nodes(self) -> int:
        return self.original_column_node_ids.numel()

    @property
    def num_edges(self) -> int:
        return self.sampled_csc.indices.numel()

    def edge_index(self) -> torch.Tensor:
        """``[2, num_edges]`` int64 local (source, destination) ids, CSC order."""
        indptr = self.sampled_csc.indptr
        dst = torch.repeat_interleave(
            torch.arange(indptr.numel() - 1, device=indptr.device),
            indptr[1:] - indptr[:-1],
            output_size=self.num_edges,
        )
        return torch.stack([self.sampled_csc.indices, dst])


@dataclass
class MiniBatch:
    """One training step's data, filled stage by stage.

    Layer ``i`` of ``sampled_subgraphs`` feeds GNN layer ``i``: ``sampled_subgraphs[0]``
    is nearest the input features, ``sampled_subgraphs[-1]`` has the seeds as its
    destinations::

        input_nodes ──[sampled_subgraphs[0]]──> ... ──[sampled_subgraphs[-1]]──> seeds
        (features)      GNN layer 0                     GNN layer L-1           (outputs)

    Attributes:
        seeds: ``[batch_size]`` int64 node ids whose outputs are trained.
        labels: ``[batch_size, ...]`` labels of the seeds, or None.
        sampled_subgraphs: one :class:`SampledSubgraph` per GNN layer, input first.
        input_nodes: ``[num_input]`` int64 global ids of the first layer's sources
            (seeds first, then nodes first reached at hop 1, 2, ...): row ``k`` of every
            node feature belongs to ``input_nodes[k]``.
        node_features: key -> ``[num_input, ...]`` features of ``input_nodes``.
        edge_features: one dict per layer, key -> ``[num_edges_of_layer, ...]``.
        batch_index: position of this batch in the sampler's stream (counts across
            epochs). Samplers derive their random variates from it and their seed, so a
            batch's sample does not depend on which thread or process produced it.
    """

    seeds: Optional[torch.Tensor] = None
    labels: Optional[torch.Tensor] = None
    sampled_subgraphs: Optional[List[SampledSubgraph]] = None
    input_nodes: Optional[torch.Tensor] = None
    node_features: Dict[str, torch.Tensor] = field(default_factory=dict)
    edge_features: List[Dict[str, torch.Tensor]] = field(default_factory=list)
    batch_index: int = 0

    @property
    def num_layers(self) -> int:
        return len(self.sampled_subgraphs or ())

    @property
    def batch_size(self) -> int:
        return 0 if self.seeds is None else self.seeds.numel()

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
        ``edata["edge_weights"]`` the estimator weights. Needs ``dgl`` (imported lazily).
        """
        try:
            import dgl
        except ImportError as err:
            raise ImportError("MiniBatch.blocks needs DGL: pip install dgl") from err
        if not self.sampled_subgraphs:
            raise ValueError("MiniBatch.blocks: the batch has no sampled_subgraphs; add a sampler stage")
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
    def to_pyg(self, node_feature_key: Optional[str] = None, edge_feature_key: Optional[str] = None):
        """A ``torch_geometric.data.Data`` laid out as PyG's ``NeighborLoader`` returns.

        Nodes are in hop order (seeds are the first ``batch_size`` rows), edges are grouped
        by hop, and ``num_sampled_nodes`` / ``num_sampled_edges`` allow PyG's
        ``trim_to_layer``. Hop ``k`` holds the edges of ``sampled_subgraphs[L - k]`` whose
        destination was first reached at hop ``k - 1``: each node aggregates the neighbours
        sampled for it at the depth where it first appears, as in ``NeighborLoader``.

        Fields: ``x`` (the node feature ``node_feature_key``; optional if there is exactly
        one), ``edge_index`` ``[2, E]`` local (source, target), ``y``, ``n_id``, ``e_id``,
        ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges`` and, when the sampler
        produced them, ``edge_weight``; with fetched edge features, ``edge_attr``
        ``[E, ...]`` in ``edge_index`` order: the edge feature ``edge_feature_key``, or the
        only one fetched (with several and no key, no ``edge_attr``).
        """
        try:
            from torch_geometric.data import Data
        except ImportError as err:
            raise ImportError(
                "MiniBatch.to_pyg() needs PyTorch Geometric: pip install 'graphpipe[pyg]'"
            ) from err
        if not self.sampled_subgraphs:
            raise ValueError("MiniBatch.to_pyg(): the batch has no sampled_subgraphs; add a sampler stage")
        num_layers = self.num_layers
        # Number of nodes known after hop k: dst count of layer L-1-k (k=0: seeds).
        hop_bounds = [self.sampled_subgraphs[num_layers - 1].num_dst_nodes]
        hop_bounds += [sg.num_src_nodes for sg in reversed(self.sampled_subgraphs)]
        edge_keys = {key for layer in self.edge_features for key in layer}
        # Several edge features and no choice: no edge_attr (they may be fetched for other uses).
        edge_key = None if edge_feature_key is None and len(edge_keys) > 1 else _feature_key(
            edge_keys, edge_feature_key, "edge_feature_key"
        )
        edge_index, edge_ids, edge_weights, edge_attr, num_edges = [], [], [], [], []
        for hop in range(1, num_layers + 1):
            sg = self.sampled_subgraphs[num_layers - hop]
            lo = 0 if hop == 1 else hop_bounds[hop - 2]
            hi = hop_bounds[hop - 1]
            indptr = sg.sampled_csc.indptr
            start, end = int(indptr[lo]), int(indptr[hi])
            ei = sg.edge_index()[:, start:end]
            edge_index.append(ei)
            edge_ids.append(sg.original_edge_ids[start:end])
            if sg.edge_weights is not None:
                edge_weights.append(sg.edge_weights[start:end])
            if edge_key is not None:
                edge_attr.append(self.edge_features[num_layers - hop][edge_key][start:end])
            num_edges.append(end - start)
        data = Data(
            edge_index=torch.cat(edge_index, dim=1),
            n_id=self.input_nodes,
            e_id=torch.cat(edge_ids),
            batch_size=hop_bounds[0],
            num_sampled_nodes=[hop_bounds[0]] + [b - a for a, b in zip(hop_bounds, hop_bounds[1:])],
            num_sampled_edges=num_edges,
        )
        data.num_nodes = hop_bounds[-1]
        if edge_weights:
            data.edge_weight = torch.cat(edge_weights)
        if edge_attr:
            data.edge_attr = torch.cat(edge_attr)
        if self.labels is not None:
            data.y = self.labels
        node_key = _feature_key(set(self.node_features), node_feature_key, "node_feature_key")
        if node_key is not None:
            data.x = self.node_features[node_key]
        return data


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
