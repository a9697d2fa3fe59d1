"""Typed (heterogeneous) MiniBatches as PyG ``HeteroData`` and DGL heterograph blocks.

:meth:`MiniBatch.to_pyg` and :attr:`MiniBatch.blocks` call these for typed batches (see
:class:`~graphpipe.MiniBatch` for the typed layout: every id type-local, fields keyed by
node type, edge type ``"src:rel:dst"``, or ``(type, feature name)``).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import torch

from .csc_graph import parse_edge_type
from .minibatch import MiniBatch, SampledSubgraph, _add_hop, _feature_key, _frontier_in_edges

__all__ = ["to_hetero_data", "hetero_blocks"]


def to_hetero_data(
    minibatch: MiniBatch,
    node_feature_key: Optional[str] = None,
    edge_feature_key: Optional[str] = None,
    label_key: Optional[str] = None,
):
    """A typed node batch as the ``torch_geometric.data.HeteroData`` PyG's heterogeneous
    ``NeighborLoader`` returns.

    NeighborLoader's subgraph, per type: a node's in-edges (of every edge type) are the
    ones sampled for it at the hop where it is first reached. Per node type, nodes are in
    hop order: the seeds of that type first, then the nodes of that type first reached
    at hop 1, 2, ... (ascending type-local ids within a hop); per edge type, edges are
    grouped by hop (hop ``k``: the in-edges of the nodes first reached at hop ``k - 1``,
    sampled in layer ``sampled_subgraphs[L - k]``). So ``trim_to_layer(layer,
    data.num_sampled_nodes_dict, data.num_sampled_edges_dict, data.x_dict,
    data.edge_index_dict)`` trims a layer's finished hops, as with NeighborLoader.
    ``layout="pyg"`` batches are that subgraph as sampled; ``layout="block"`` batches are
    pruned to it (for neighbor sampling and LABOR-0 the result equals that of a ``"pyg"``
    batch with the same seed).

    Fields, every id type-local:

    * node type ``t``: ``n_id`` ``[N_t]`` int64 ids in hop order, ``num_nodes``,
      ``num_sampled_nodes`` (``L + 1`` ints; hop 0: the seeds of ``t``), ``x`` (node
      feature ``(t, node_feature_key)``; by default the only fetched feature name other
      than the label feature) where ``t`` has it; on each seed type ``batch_size`` (its
      number of seeds, the first ``n_id``), ``input_id`` (``item_ids[t]``) and ``y``.
      ``y`` is the node feature ``(t, label_key)`` (one row per node; by default the
      feature named ``"y"`` if there is one) on every type that has it; with no label
      feature, ``labels[t]`` (seeds only) on each seed type.
    * edge type ``(src, rel, dst)``: ``edge_index`` ``[2, E]`` int64 (row 0: local ids
      of ``src`` nodes, row 1: of ``dst`` nodes), ``e_id`` ``[E]`` ids within the edge
      type, ``num_sampled_edges`` (``L`` ints), ``edge_weight`` when the sampler weights
      edges (LABOR) and ``edge_attr`` (edge feature ``(etype, edge_feature_key)``, or
      the only name fetched) when edge features were fetched.

    Every node type and edge type of the graph is present, maybe empty.

    Raises:
        NotImplementedError: the batch's seeds are node pairs (link prediction).
        ValueError / KeyError: ambiguous or unknown feature keys; layers that do not chain.
    """
    from torch_geometric.data import HeteroData

    if minibatch.is_link_batch:
        raise NotImplementedError(
            "MiniBatch.to_pyg(): typed node-pair batches (heterogeneous link prediction, LinkNeighborLoader's "
            "HeteroData) are not supported yet; typed node batches are"
        )
    layers = minibatch.sampled_subgraphs
    if any(a.num_dst_nodes != b.num_src_nodes for a, b in zip(layers, layers[1:])):
        raise ValueError(
            "MiniBatch.to_pyg(): the layers do not chain (per node type, layer i's destinations must be layer i + 1's "
            "sources, as graphpipe's samplers make them)"
        )
    node_names = _feature_names(minibatch.node_features, "node_features")
    if label_key is None:
        label_key = "y" if "y" in node_names else None
    else:
        _feature_key(node_names, label_key, "label_key")
    node_key = _feature_key(
        node_names if node_feature_key is not None else node_names - {label_key}, node_feature_key, "node_feature_key"
    )
    edge_names = set()
    for layer_features in minibatch.edge_features:
        edge_names |= _feature_names(layer_features, "edge_features")
    # Several edge features and no choice: no edge_attr (they may be fetched for other uses).
    edge_key = None if edge_feature_key is None and len(edge_names) > 1 else _feature_key(
        edge_names, edge_feature_key, "edge_feature_key"
    )

    hops = _typed_hops_as_sampled(layers) if minibatch.layout == "pyg" else _typed_pruned_hops(layers)
    data = HeteroData()
    for node_type, n_id in hops.n_id.items():
        store = data[node_type]
        store.n_id = n_id
        store.num_nodes = n_id.numel()
        store.num_sampled_nodes = hops.num_sampled_nodes[node_type]
    num_layers = len(layers)
    for etype, hop_edges in hops.edges.items():
        store = data[parse_edge_type(etype)]
        edge_index, edge_ids, edge_weights, edge_attr = [], [], [], []
        for hop, (local_edges, positions) in enumerate(hop_edges, start=1):
            layer = num_layers - hop
            sg = layers[layer]
            edge_index.append(local_edges)
            edge_ids.append(sg.original_edge_ids[etype][positions])
            if sg.edge_weights is not None:
                edge_weights.append(sg.edge_weights[etype][positions])
            if edge_key is not None and (etype, edge_key) in minibatch.edge_features[layer]:
                edge_attr.append(minibatch.edge_features[layer][(etype, edge_key)][positions])
        store.edge_index = torch.cat(edge_index, dim=1)
        store.e_id = torch.cat(edge_ids)
        store.num_sampled_edges = [e.size(1) for e in edge_index]
        if edge_weights:
            store.edge_weight = torch.cat(edge_weights)
        if len(edge_attr) == num_layers:
            store.edge_attr = torch.cat(edge_attr)
    for node_type, seeds in minibatch.seeds.items():
        data[node_type].batch_size = seeds.shape[0]
        if minibatch.item_ids is not None and node_type in minibatch.item_ids:
            data[node_type].input_id = minibatch.item_ids[node_type]

    def rows(node_type: str, feature: torch.Tensor) -> torch.Tensor:
        kept = None if hops.rows is None else hops.rows[node_type]
        return feature if kept is None else feature[kept.to(feature.device)]

    for (node_type, name), feature in minibatch.node_features.items():
        if name == label_key:
            data[node_type].y = rows(node_type, feature)
        if name == node_key:
            data[node_type].x = rows(node_type, feature)
    if label_key is None and minibatch.labels is not None:
        for node_type, labels in minibatch.labels.items():
            data[node_type].y = labels
    return data


class _TypedHops(NamedTuple):
    """NeighborLoader's subgraph of a typed batch, per type (see ``_PygHops``).

    ``n_id[t]``: ``[N_t]`` type-local ids in hop order; ``rows[t]``: the rows of
    ``input_nodes[t]`` they are (None: ``input_nodes`` itself); ``num_sampled_nodes[t]``:
    ``L + 1`` counts; ``edges[etype][k - 1]``: hop ``k``'s ``[2, E]`` local (source,
    target) ids and the positions of those edges in layer ``L - k`` of that edge type.
    """

    n_id: Dict[str, torch.Tensor]
    rows: Optional[Dict[str, torch.Tensor]]
    num_sampled_nodes: Dict[str, List[int]]
    edges: Dict[str, List[tuple]]


def _typed_hops_as_sampled(layers: List[SampledSubgraph]) -> _TypedHops:
    """A ``layout="pyg"`` batch: per type, every layer's sources are a prefix of
    ``input_nodes`` and its edges go to the nodes the previous layer added, so local ids
    are already NeighborLoader's."""
    hop_layers = list(reversed(layers))  # hop 1 first
    first = hop_layers[0].num_dst_nodes
    counts = {
        node_type: [first[node_type]] + [sg.num_src_nodes[node_type] - sg.num_dst_nodes[node_type] for sg in hop_layers]
        for node_type in first
    }
    edge_indexes = [sg.edge_index() for sg in hop_layers]
    return _TypedHops(
        n_id=layers[0].original_row_node_ids,
        rows=None,
        num_sampled_nodes=counts,
        edges={etype: [(e[etype], slice(None)) for e in edge_indexes] for etype in layers[0].sampled_csc},
    )


def _typed_pruned_hops(layers: List[SampledSubgraph]) -> _TypedHops:
    """A ``layout="block"`` batch pruned to NeighborLoader's subgraph: hop ``k`` keeps,
    for every edge type ``src:rel:dst``, the in-edges of the ``dst`` nodes first reached
    at hop ``k - 1`` (in layer ``L - k``), and adds per node type the new sources from
    every edge type starting at it, ordered by id within the hop as a ``"pyg"`` sampler
    orders them.

    Works on block-local ids: per node type every layer's sources are a prefix of
    ``input_nodes`` and its destinations a prefix of its sources, so a node has the same
    local id (its position in ``input_nodes[type]``) in every layer.
    """
    hop_layers = list(reversed(layers))  # hop 1 first
    input_nodes = layers[0].original_row_node_ids
    ends = {etype: parse_edge_type(etype) for etype in layers[0].sampled_csc}
    known = {t: torch.arange(n, device=input_nodes[t].device) for t, n in hop_layers[0].num_dst_nodes.items()}
    counts = {t: [ids.numel()] for t, ids in known.items()}
    frontier_start = dict.fromkeys(known, 0)
    edges: Dict[str, List[tuple]] = {etype: [] for etype in ends}
    for sg in hop_layers:
        picked, sources = {}, {t: [] for t in known}
        for etype, (src, _, dst) in ends.items():
            picked[etype] = _frontier_in_edges(sg.sampled_csc[etype], known[dst], frontier_start[dst])
            sources[src].append(sg.sampled_csc[etype].indices[picked[etype][0]])
        local_sources = {}
        for node_type, pieces in sources.items():
            frontier_start[node_type] = known[node_type].numel()
            everything = torch.cat(pieces) if pieces else known[node_type].new_empty(0)
            known[node_type], local = _add_hop(known[node_type], everything, input_nodes[node_type])
            local_sources[node_type] = list(local.split([p.numel() for p in pieces]))
            counts[node_type].append(known[node_type].numel() - frontier_start[node_type])
        for etype, (src, _, _) in ends.items():
            positions, targets = picked[etype]
            edges[etype].append((torch.stack([local_sources[src].pop(0), targets]), positions))
    return _TypedHops(
        n_id={t: input_nodes[t][rows] for t, rows in known.items()},
        rows=known,
        num_sampled_nodes=counts,
        edges=edges,
    )


def hetero_blocks(layers: List[SampledSubgraph]) -> list:
    """DGL heterograph blocks of typed layers (see :attr:`MiniBatch.blocks`), input first."""
    import dgl

    blocks = []
    for sg in layers:
        graph_data, canonical = {}, {}
        for etype, csc in sg.sampled_csc.items():
            canonical[etype] = parse_edge_type(etype)
            edge_order = torch.arange(csc.indices.numel(), device=csc.indices.device)
            graph_data[canonical[etype]] = ("csc", (csc.indptr, csc.indices, edge_order))
        block = dgl.create_block(graph_data, num_src_nodes=sg.num_src_nodes, num_dst_nodes=sg.num_dst_nodes)
        for node_type, ids in sg.original_row_node_ids.items():
            block.srcnodes[node_type].data[dgl.NID] = ids
        for node_type, ids in sg.original_column_node_ids.items():
            block.dstnodes[node_type].data[dgl.NID] = ids
        for etype, ids in sg.original_edge_ids.items():
            block.edges[canonical[etype]].data[dgl.EID] = ids
            if sg.edge_weights is not None:
                block.edges[canonical[etype]].data["edge_weights"] = sg.edge_weights[etype]
        blocks.append(block)
    return blocks


def _feature_names(features: dict, argument: str) -> set:
    """The feature names of typed feature keys ``(type, name)``."""
    names = set()
    for key in features:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(
                f"MiniBatch.to_pyg(): a typed batch needs `{argument}` keyed by (type, name) tuples, got key {key!r}"
            )
        names.add(key[1])
    return names
