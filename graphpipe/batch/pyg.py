"""MiniBatches as PyTorch Geometric ``Data`` / ``HeteroData``, laid out as PyG's
``NeighborLoader`` and ``LinkNeighborLoader`` return them (:meth:`MiniBatch.to_pyg`)."""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import torch

from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph
from graphpipe.ops import unique_and_compact

__all__ = ["to_pyg", "to_hetero_data"]


def to_pyg(
    minibatch,
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
    see :func:`graphpipe.batch.pyg.to_hetero_data` (feature keys are names,
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
    if not minibatch.sampled_subgraphs:
        raise ValueError("MiniBatch.to_pyg(): the batch has no sampled_subgraphs; add a sampler stage")
    if neg_sampling not in ("binary", "triplet"):
        raise ValueError(f"MiniBatch.to_pyg(): `neg_sampling` must be 'binary' or 'triplet', got {neg_sampling!r}")
    if neg_sampling == "triplet" and not minibatch.is_link_batch:
        raise ValueError("MiniBatch.to_pyg(): neg_sampling='triplet' needs node-pair seeds (link prediction)")
    if minibatch.sampled_subgraphs[0].is_heterogeneous:
                return to_hetero_data(minibatch, node_feature_key, edge_feature_key, label_key)
    node_keys = set(minibatch.node_features)
    if label_key is None:
        label_key = "y" if "y" in node_keys else None
    else:
        _feature_key(node_keys, label_key, "label_key")
    # The label feature is never picked as x by default.
    node_key = _feature_key(
        node_keys if node_feature_key is not None else node_keys - {label_key}, node_feature_key, "node_feature_key"
    )
    edge_keys = {key for layer in minibatch.edge_features for key in layer}
    # Several edge features and no choice: no edge_attr (they may be fetched for other uses).
    edge_key = None if edge_feature_key is None and len(edge_keys) > 1 else _feature_key(
        edge_keys, edge_feature_key, "edge_feature_key"
    )
    layers = minibatch.sampled_subgraphs
    if any(a.num_dst_nodes != b.num_src_nodes for a, b in zip(layers, layers[1:])):
        raise ValueError(
            "MiniBatch.to_pyg(): the layers do not chain (layer i's destinations must be layer i + 1's "
            "sources, as graphpipe's samplers make them; cooperative batches hold one rank's share only)"
        )
    hops = _hops_as_sampled(minibatch) if minibatch.layout == "pyg" else _pruned_hops(minibatch)
    edge_index, edge_ids, edge_weights, edge_attr = [], [], [], []
    for hop, (local_edges, positions) in enumerate(hops.edges, start=1):
        layer = minibatch.num_layers - hop
        sg = minibatch.sampled_subgraphs[layer]
        edge_index.append(local_edges)
        edge_ids.append(sg.original_edge_ids[positions])
        if sg.edge_weights is not None:
            edge_weights.append(sg.edge_weights[positions])
        if edge_key is not None:
            edge_attr.append(minibatch.edge_features[layer][edge_key][positions])
    data = Data(
        edge_index=torch.cat(edge_index, dim=1),
        n_id=hops.n_id,
        e_id=torch.cat(edge_ids),
        num_sampled_nodes=hops.num_sampled_nodes,
        num_sampled_edges=[e.size(1) for e in edge_index],
    )
    data.num_nodes = hops.n_id.numel()
    if minibatch.item_ids is not None:
        data.input_id = minibatch.item_ids
    if minibatch.is_link_batch:
        _add_link_fields(data, minibatch, neg_sampling)
    else:
        data.batch_size = hops.num_sampled_nodes[0]
    if edge_weights:
        data.edge_weight = torch.cat(edge_weights)
    if edge_attr:
        data.edge_attr = torch.cat(edge_attr)

    def rows(feature: torch.Tensor) -> torch.Tensor:
        return feature if hops.rows is None else feature[hops.rows.to(feature.device)]

    if label_key is not None:
        data.y = rows(minibatch.node_features[label_key])
    elif minibatch.labels is not None and not minibatch.is_link_batch:
        data.y = minibatch.labels
    if node_key is not None:
        data.x = rows(minibatch.node_features[node_key])
    return data


def _add_link_fields(data, minibatch, neg_sampling: str) -> None:
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


def _hops_as_sampled(minibatch) -> _PygHops:
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


def _pruned_hops(minibatch) -> _PygHops:
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


def to_hetero_data(
    minibatch,
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
