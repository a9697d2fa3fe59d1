"""MiniBatches as PyTorch Geometric ``Data`` / ``HeteroData``, laid out as PyG's
``NeighborLoader`` and ``LinkNeighborLoader`` return them (:meth:`MiniBatch.to_pyg`).

One code path: an untyped batch is the one-type case of a typed one
(:meth:`MiniBatch.as_typed`) whose node and edge stores are the ``Data`` itself. Edge
types are the batch's ``"src:rel:dst"`` keys, checked where they entered the library."""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import torch

from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph
from graphpipe.graph.sampling import negatives_layout
from graphpipe.ops import unique_and_compact

__all__ = ["to_pyg"]


def to_pyg(
    minibatch,
    node_feature_key: Optional[str] = None,
    edge_feature_key: Optional[str] = None,
    label_key: Optional[str] = None,
    neg_sampling: str = "binary",
):
    """The batch as the ``torch_geometric.data.Data`` (``HeteroData`` for a typed batch)
    PyG's ``NeighborLoader`` (node seeds) or ``LinkNeighborLoader`` (node pairs) returns.

    The subgraph is NeighborLoader's: a node's in-edges (of every edge type) are the ones
    sampled at the hop where it is first reached. Per node type, nodes are in hop order
    (seeds, then nodes first reached at hop 1, 2, ..., ascending within a hop); per edge
    type, edges are grouped by hop, so ``num_sampled_nodes`` / ``num_sampled_edges`` drive
    PyG's ``trim_to_layer``. A ``layout="pyg"`` batch is that subgraph as sampled (``n_id``
    is ``input_nodes``, ``x`` the fetched rows, no copy). A ``layout="block"`` batch also
    holds edges re-sampled for nodes reached earlier: they and the nodes only they reach
    are dropped and the rest renumbered (a pass over the edges, a sort per hop, a gather
    of rows); the result equals the ``"pyg"`` batch's under the same seed (NS, LABOR-0).
    A disjoint (or temporal ``"pyg"``) batch also gets ``batch`` per node type: each node's
    subtree (its seed's position; node pairs: its pair's); a temporal one ``seed_time`` on
    seed types or ``edge_label_time`` on seed edge types (binary): the items' ``timestamp``.

    Per node type (the ``Data`` itself when untyped): ``n_id`` (type-local ids when
    typed), ``num_nodes``, ``num_sampled_nodes`` (``L + 1`` ints), ``x`` (node feature
    ``node_feature_key``; default ``"x"``, else ``"feat"``, else the only fetched one but
    the labels), ``y`` (per node when labels were fetched as node feature ``label_key``,
    default ``"y"``; else ``labels``, seeds only) and every other fetched node feature by
    name (``time``, ``year``, masks), sliced by ``n_id`` as NeighborLoader does. Per edge
    type: ``edge_index`` ``[2, E]`` int64 local (source, target), ``e_id`` (the user's edge
    ids, within the edge type when typed), ``num_sampled_edges`` (``L`` ints),
    ``edge_weight`` (LABOR), every fetched edge feature by name, and ``edge_attr``
    ``[E, ...]``: edge feature ``edge_feature_key``, else ``"edge_attr"``, else the only
    one fetched but ``"edge_weight"``. Typed batches key features ``(type, name)`` and
    hold every node and edge type, maybe empty.

    Node seeds, as ``NeighborLoader``: on each seed type ``batch_size`` (its seeds are the
    first ``n_id``) and ``input_id`` (``input_id`` else ``item_ids``). Node pairs (link prediction), as ``LinkNeighborLoader``: the first ``num_sampled_nodes[0]`` nodes of
    each type are the pairs' distinct endpoints of that type (ascending, as LinkNeighborLoader's;
    temporal: the sources, then the destinations), no ``batch_size``, no ``y`` from ``labels``;
    on each seed edge type ``input_id`` (the positives'); ``neg_sampling`` picks the fields:

    * ``"binary"``: ``edge_label_index`` ``[2, num_pairs]`` on the edge type
      (``compacted_seeds`` transposed: local ids into the source and destination types'
      nodes), ``edge_label`` (``labels``; bool as float 1.0/0.0, as LinkNeighborLoader).
    * ``"triplet"`` (batches from ``sample_uniform_negative``): ``src_index`` ``[P]`` on
      the source node type, ``dst_pos_index`` ``[P]`` and ``dst_neg_index`` ``[P, k]``
      (``[P]`` when ``k == 1``) on the destination type: local ids of each positive's
      source, destination and negative destinations.

    Raises:
        ValueError / KeyError: ambiguous or unknown feature keys, a feature named as a field
            set otherwise (``x`` beside another chosen, LABOR's ``edge_weight``, ``e_id``),
            layers that do not chain, pairs without ``compacted_seeds``, hyperlinks, triplets
            that do not fit or whose positives have labels (PyG refuses ``edge_label``).
    """
    try:
        from torch_geometric.data import Data, HeteroData
    except ImportError as err:
        raise ImportError("MiniBatch.to_pyg() needs PyTorch Geometric: pip install 'graphpipe-gnn[pyg]'") from err
    link = minibatch.is_link_batch
    _check_batch(minibatch, link, neg_sampling)
    typed = minibatch.as_typed()
    layers = typed.sampled_subgraphs
    node_key, label_key, edge_key = _feature_keys(typed, node_feature_key, edge_feature_key, label_key)
    hops = _hops_as_sampled(layers) if minibatch.layout == "pyg" else _pruned_hops(layers)
    if minibatch.is_heterogeneous:
        data = HeteroData()
        node_store, edge_store = data.__getitem__, lambda etype: data[tuple(etype.split(":"))]
    else:
        data = Data()
        node_store = edge_store = lambda _: data
    _add_nodes(node_store, hops, typed, node_key, label_key)
    _add_edges(edge_store, hops, layers, typed.edge_features, edge_key)
    if link:
        _add_pairs(node_store, edge_store, typed, neg_sampling)
    else:
        _add_seeds(node_store, typed, label_key)
    return data


def to_pyg_data(minibatch):
    """GraphBolt's ``MiniBatch.to_pyg_data()`` of an untyped node batch with at most one
    node feature: a ``Data`` with ``x`` (the fetched feature's rows of ``input_nodes``),
    ``edge_index`` (``[2, E]`` int64: the distinct local (source, destination) pairs over
    every layer, sorted), ``y`` (``labels``), ``batch_size`` and ``n_id``
    (``input_nodes``). Block layout only; :func:`to_pyg` gives NeighborLoader's subgraph."""
    from torch_geometric.data import Data

    where = "MiniBatch.to_pyg_data()"
    features = minibatch.node_features or {}
    if minibatch.is_heterogeneous or minibatch.layout != "block" or len(features) > 1:
        raise ValueError(
            f"{where}: GraphBolt's conversion takes an untyped block batch with at most one node feature, got a "
            f"{'typed' if minibatch.is_heterogeneous else 'untyped'} {minibatch.layout!r} batch with node features "
            f"{sorted(features)}; to_pyg() converts every batch (NeighborLoader's Data)"
        )
    _refuse_reused_rows(minibatch, where)
    edge_index = None
    if minibatch.sampled_subgraphs:
        csc = [layer.sampled_csc for layer in minibatch.sampled_subgraphs]
        rows = torch.cat([c.indices.to(torch.int64) for c in csc])
        columns = torch.cat([torch.repeat_interleave(torch.arange(c.indptr.numel() - 1, device=c.indptr.device), c.indptr.diff()) for c in csc])
        edge_index = torch.unique(torch.stack([rows, columns]), dim=1)
    x = next(iter(features.values()), None)
    batch_size = None if minibatch.seeds is None else len(minibatch.seeds)
    return Data(x=x, edge_index=edge_index, y=minibatch.labels, batch_size=batch_size, n_id=minibatch.input_nodes)


def _refuse_reused_rows(minibatch, where: str) -> None:
    """Refuse a batch with reused hot rows: PyG's ``Data`` has no place for them."""
    if minibatch.reused is not None and minibatch.reused.positions.numel():
        raise ValueError(
            f"{where}: the batch reuses hot vertices' rows (hot_reuse): their in-edges are not sampled and their "
            f"rows (MiniBatch.reused) have no place in PyG's Data; insert them with HotReuse.insert into the bottom "
            f"layer's output of the block batch, or sample without hot_reuse"
        )


def _check_batch(minibatch, link: bool, neg_sampling: str) -> None:
    """Refuse what ``to_pyg`` cannot lay out: no layers, layers that do not chain, an
    unknown ``neg_sampling``, triplets of node seeds, or reused hot rows."""
    if not minibatch.sampled_subgraphs:
        raise ValueError("MiniBatch.to_pyg(): the batch has no sampled_subgraphs; add a sampler stage")
    if neg_sampling not in ("binary", "triplet"):
        raise ValueError(f"MiniBatch.to_pyg(): `neg_sampling` must be 'binary' or 'triplet', got {neg_sampling!r}")
    if neg_sampling == "triplet" and not link:
        raise ValueError("MiniBatch.to_pyg(): neg_sampling='triplet' needs node-pair seeds (link prediction)")
    _refuse_reused_rows(minibatch, "MiniBatch.to_pyg()")
    layers = minibatch.sampled_subgraphs
    if any(a.num_dst_nodes != b.num_src_nodes for a, b in zip(layers, layers[1:])):
        raise ValueError(
            "MiniBatch.to_pyg(): the layers do not chain (per node type, layer i's destinations must be layer i + 1's "
            "sources, as graphpipe's samplers make them; cooperative batches hold one rank's share only)"
        )


def _feature_keys(typed, node_feature_key, edge_feature_key, label_key):
    """``(node_key, label_key, edge_key)``: the feature names ``to_pyg`` puts in ``x``,
    ``y`` and ``edge_attr`` (None: none), checked against the batch's features."""
    node_names = _feature_names(typed.node_features, "node_features")
    if label_key is None:
        label_key = "y" if "y" in node_names else None
    else:
        _feature_key(node_names, label_key, "label_key")
    # The label feature is never picked as x by default; PyG's "x" (or from_pyg's "feat") is.
    candidates = node_names - {label_key}
    default = next((name for name in ("x", "feat") if name in candidates), None)
    node_key = _feature_key(
        node_names if node_feature_key is not None else {default} if default else candidates, node_feature_key,
        "node_feature_key",
    )  # fmt: skip
    edge_names = set().union(*(_feature_names(layer, "edge_features") for layer in typed.edge_features))
    if edge_feature_key is not None:
        return node_key, label_key, _feature_key(edge_names, edge_feature_key, "edge_feature_key")
    # PyG's "edge_attr" by its name, else the only one fetched but PyG's "edge_weight" (a
    # name of its own); several and no choice: no edge_attr (they may be fetched for other uses).
    candidates = edge_names - {"edge_weight"}
    edge_key = "edge_attr" if "edge_attr" in candidates else next(iter(candidates)) if len(candidates) == 1 else None
    return node_key, label_key, edge_key


# Fields to_pyg sets on an edge store itself: an edge feature of one of these names is refused.
_EDGE_FIELDS = ("edge_index", "e_id", "num_sampled_edges", "edge_label", "edge_label_index", "edge_label_time",
                "input_id")  # fmt: skip
# Fields to_pyg sets on a node store itself: a node feature of one of these names is refused.
_NODE_FIELDS = ("n_id", "num_nodes", "num_sampled_nodes", "batch", "batch_size", "input_id", "seed_time")


def _add_nodes(node_store, hops: "_PygHops", typed, node_key, label_key) -> None:
    """Each node type's ``n_id``, ``num_nodes``, ``num_sampled_nodes``, ``batch`` (disjoint
    subtrees: a pyg batch, rows as sampled) and every fetched node feature of ``typed``
    (the batch's typed view), rows in ``n_id`` order (as NeighborLoader slices every node
    attribute): ``node_key`` as ``x``, ``label_key`` as ``y``, the others by their names."""
    for node_type, n_id in hops.n_id.items():
        store = node_store(node_type)
        store.n_id = n_id
        store.num_nodes = n_id.numel()
        store.num_sampled_nodes = hops.num_sampled_nodes[node_type]
    for node_type, subtrees in (typed.subtree_ids or {}).items():
        node_store(node_type).batch = subtrees
    for (node_type, name), feature in typed.node_features.items():
        if name in _NODE_FIELDS:
            raise ValueError(
                f"MiniBatch.to_pyg(): node feature {name!r} has the name of a field NeighborLoader's batches set "
                f"({', '.join(_NODE_FIELDS)}); fetch it under another name"
            )
        if hops.rows is not None:
            feature = feature[hops.rows[node_type].to(feature.device)]
        store = node_store(node_type)
        if name in ("x", "y") and name != {"x": node_key, "y": label_key}[name]:
            raise ValueError(
                f"MiniBatch.to_pyg(): node feature {name!r} would be replaced by the feature "
                f"{(node_key if name == 'x' else label_key)!r} chosen as `{name}`; fetch it under another name"
            )
        if name == label_key:
            store.y = feature
        if name == node_key:
            store.x = feature
        if name not in (label_key, node_key):
            setattr(store, name, feature)


def _add_edges(edge_store, hops: "_PygHops", layers: List[SampledSubgraph], edge_features: list, edge_key) -> None:
    """Each edge type's ``edge_index``, ``e_id``, ``num_sampled_edges``, ``edge_weight``,
    ``edge_attr`` and every fetched edge feature by name, hop by hop."""
    num_layers = len(layers)
    for etype, hop_edges in hops.edges.items():
        edge_index, edge_ids, edge_weights = [], [], []
        features: Dict[str, list] = {name: [] for layer in edge_features for t, name in layer if t == etype}
        for hop, (local_edges, positions) in enumerate(hop_edges, start=1):
            layer = num_layers - hop
            sg = layers[layer]
            edge_index.append(local_edges)
            edge_ids.append(sg.original_edge_ids[etype][positions])
            if sg.edge_weights is not None:
                edge_weights.append(sg.edge_weights[etype][positions])
            for name, pieces in features.items():
                feature = edge_features[layer].get((etype, name))
                if feature is not None:
                    pieces.append(feature[positions])
        store = edge_store(etype)
        store.edge_index = torch.cat(edge_index, dim=1)
        store.e_id = torch.cat(edge_ids)
        store.num_sampled_edges = [e.size(1) for e in edge_index]
        if edge_weights:
            store.edge_weight = torch.cat(edge_weights)
        for name, pieces in features.items():
            if len(pieces) == num_layers:  # fetched for every layer: as NeighborLoader slices edge attributes
                _check_edge_name(name, edge_key, bool(edge_weights))
                setattr(store, name, torch.cat(pieces))
                if name == edge_key:
                    store.edge_attr = getattr(store, name)


def _check_edge_name(name: str, edge_key, labor_weights: bool) -> None:
    """Refuse an edge feature whose name is a field ``to_pyg`` sets otherwise."""
    taken = (
        "a field NeighborLoader's batches set" if name in _EDGE_FIELDS
        else "LABOR's edge_weight of the batch" if name == "edge_weight" and labor_weights
        else f"edge_attr, which edge feature {edge_key!r} fills" if name == "edge_attr" and edge_key != name
        else None
    )  # fmt: skip
    if taken:
        raise ValueError(f"MiniBatch.to_pyg(): edge feature {name!r} has the name of {taken}; fetch it under another name")


def _add_seeds(node_store, typed, label_key) -> None:
    """NeighborLoader's fields of each seed type: ``batch_size``, ``input_id`` and ``y``
    (the seeds' ``labels``, when no label feature gave one)."""
    for node_type, seeds in typed.seeds.items():
        store = node_store(node_type)
        store.batch_size = seeds.shape[0]
        ids = typed.item_ids if typed.input_id is None else typed.input_id
        if ids is not None and node_type in ids:
            store.input_id = ids[node_type]
        if label_key is None and typed.labels is not None and node_type in typed.labels:
            store.y = typed.labels[node_type]
        if typed.timestamp is not None and node_type in typed.timestamp:
            store.seed_time = typed.timestamp[node_type]


def _add_pairs(node_store, edge_store, typed, neg_sampling: str) -> None:
    """LinkNeighborLoader's fields of each seed edge type (see :func:`to_pyg`)."""
    if typed.compacted_seeds is None:
        raise ValueError(
            "MiniBatch.to_pyg(): the node-pair batch has no compacted_seeds; sample it with a graphpipe sampler "
            "(sample_neighbor / sample_layer_neighbor), which sets them"
        )
    for etype, pairs in typed.compacted_seeds.items():
        if pairs.size(1) != 2:
            raise ValueError(
                f"MiniBatch.to_pyg(): the seeds are hyperlinks of {pairs.size(1)} nodes each (GraphBolt's [N, k] "
                f"items), which PyG's loaders have no form for; to_pyg() takes node seeds or node pairs [N, 2] (PyG's "
                f"edge_label_index [2, N] is ItemSet(edge_label_index.t(), names='seeds'))"
            )
        store = edge_store(etype)
        if typed.item_ids is not None and etype in typed.item_ids:
            store.input_id = typed.item_ids[etype]
        if neg_sampling == "binary":
            store.edge_label_index = pairs.t().contiguous()
            labels = None if typed.labels is None else typed.labels.get(etype)
            if labels is not None:
                store.edge_label = labels.to(torch.float32) if labels.dtype == torch.bool else labels
            if typed.timestamp is not None and etype in typed.timestamp:
                store.edge_label_time = typed.timestamp[etype]
            continue
        indexes = None if typed.indexes is None else typed.indexes.get(etype)
        src_type, _, dst_type = etype.split(":")
        fields = zip((src_type, dst_type, dst_type), ("src_index", "dst_pos_index", "dst_neg_index"))
        triplets = _triplets(pairs, typed.seeds[etype], indexes)
        labels = None if typed.labels is None else typed.labels.get(etype)
        if labels is not None and bool(labels[: triplets[0].numel()].ne(1).any()):  # not the sampler's 1.0s
            raise ValueError(
                "MiniBatch.to_pyg(neg_sampling='triplet'): the positive pairs have labels of their own, which the "
                "triplet layout has no field for (PyG: 'edge_label' needs to be undefined for 'triplet'-based negative "
                "sampling); give the pairs no labels, or use neg_sampling='binary'"
            )
        if typed.timestamp is not None and etype in typed.timestamp:  # PyG's triplet seed_time: the positives'
            node_store(src_type).seed_time = node_store(dst_type).seed_time = typed.timestamp[etype][: triplets[0].numel()]
        for (node_type, name), value in zip(fields, triplets):
            store = node_store(node_type)
            if name in store:
                raise ValueError(
                    f"MiniBatch.to_pyg(neg_sampling='triplet'): two seed edge types of the batch put `{name}` on node "
                    f"type '{node_type}' (PyG's layout has one per node type); batch the edge types apart"
                )
            setattr(store, name, value)


def _triplets(pairs: torch.Tensor, seeds: torch.Tensor, indexes: Optional[torch.Tensor]):
    """``(src_index [P], dst_pos_index [P], dst_neg_index [P, k] or [P])`` of node pairs
    laid out as ``sample_uniform_negative`` makes them; ``pairs`` are ``compacted_seeds``
    (no pairs, a rank's empty share of a global batch: three ``[0]``)."""
    num_pairs = pairs.size(0)
    if num_pairs == 0:
        return pairs[:, 0], pairs[:, 1], pairs[:, 1]
    num_positives, k = negatives_layout(indexes, num_pairs) or (0, 0)
    if (
        num_positives == 0
        or k < 1
        or not torch.equal(seeds[num_positives:, 0], seeds[:num_positives, 0].repeat_interleave(k))
    ):
        raise ValueError(
            "MiniBatch.to_pyg(neg_sampling='triplet') needs the layout of sample_uniform_negative: P positive pairs, "
            "then k negatives per positive with its source, grouped by `indexes` (arange(P), then each repeated k "
            "times)"
        )
    dst_neg_index = pairs[num_positives:, 1].reshape(num_positives, k).squeeze(-1)
    return pairs[:num_positives, 0], pairs[:num_positives, 1], dst_neg_index


class _PygHops(NamedTuple):
    """NeighborLoader's subgraph of a batch, per type, as :func:`to_pyg` assembles it.

    ``n_id[t]``: ``[N_t]`` ids of node type ``t`` in hop order; ``rows[t]``: the rows of
    ``input_nodes[t]`` (and of its node features) they are, or ``rows`` is None when they
    are ``input_nodes`` itself; ``num_sampled_nodes[t]``: ``L + 1`` counts;
    ``edges[etype][k - 1]``: hop ``k``'s ``[2, E]`` local (source, target) ids and the
    positions of those edges in layer ``L - k`` of that edge type.
    """

    n_id: Dict[str, torch.Tensor]
    rows: Optional[Dict[str, torch.Tensor]]
    num_sampled_nodes: Dict[str, List[int]]
    edges: Dict[str, List[tuple]]


def _hops_as_sampled(layers: List[SampledSubgraph]) -> _PygHops:
    """A ``layout="pyg"`` batch: per type, every layer's sources are a prefix of
    ``input_nodes`` and its edges go to the nodes the previous layer added, so local ids
    are already NeighborLoader's."""
    counts = {t: [ids.numel()] for t, ids in layers[-1].original_column_node_ids.items()}
    edges = {etype: [] for etype in layers[0].sampled_csc}
    for sg in reversed(layers):  # hop 1 first
        for node_type, hop_counts in counts.items():
            hop_counts.append(sg.original_row_node_ids[node_type].numel() - sg.original_column_node_ids[node_type].numel())
        for etype, local_edges in sg.edge_index().items():
            edges[etype].append((local_edges, slice(None)))
    return _PygHops(n_id=layers[0].original_row_node_ids, rows=None, num_sampled_nodes=counts, edges=edges)


def _pruned_hops(layers: List[SampledSubgraph]) -> _PygHops:
    """A ``layout="block"`` batch pruned to NeighborLoader's subgraph: hop ``k`` keeps,
    for every edge type ``src:rel:dst``, the in-edges of the ``dst`` nodes first reached
    at hop ``k - 1`` (in layer ``L - k``), and adds per node type the new sources from
    every edge type starting at it, ordered by id within the hop as a ``"pyg"`` sampler
    orders them.

    Works on block-local ids: per node type every layer's sources are a prefix of
    ``input_nodes`` and its destinations a prefix of its sources, so a node has the same
    local id (its position in ``input_nodes[type]``) in every layer.
    """
    input_nodes = layers[0].original_row_node_ids
    ends = {etype: etype.split(":") for etype in layers[0].sampled_csc}  # (src, rel, dst)
    known = {t: torch.arange(n, device=input_nodes[t].device) for t, n in layers[-1].num_dst_nodes.items()}
    counts = {t: [ids.numel()] for t, ids in known.items()}
    frontier_start = dict.fromkeys(known, 0)
    edges: Dict[str, List[tuple]] = {etype: [] for etype in ends}
    for hop, sg in enumerate(reversed(layers), start=1):
        picked, sources = {}, {t: [] for t in known}
        for etype, (src, _, dst) in ends.items():
            csc = sg.sampled_csc[etype]
            picked[etype] = _frontier_in_edges(csc, known[dst], frontier_start[dst])
            sources[src].append(csc.indices[picked[etype][0]])
        local_sources = {}
        for node_type, pieces in sources.items():
            frontier_start[node_type] = known[node_type].numel()
            known[node_type], local_sources[node_type] = _add_hop(known[node_type], pieces, input_nodes[node_type])
            counts[node_type].append(known[node_type].numel() - frontier_start[node_type])
        for etype, (src, _, _) in ends.items():
            positions, targets = picked[etype]
            edges[etype].append((torch.stack([local_sources[src].pop(0), targets]), positions))
    n_id = {t: input_nodes[t][rows] for t, rows in known.items()}
    return _PygHops(n_id=n_id, rows=known, num_sampled_nodes=counts, edges=edges)


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


def _add_hop(known: torch.Tensor, pieces: List[torch.Tensor], input_nodes: torch.Tensor):
    """Append a hop's new nodes of one type to ``known`` (block-local ids, hop order).

    ``pieces``: ``[E_i]`` block-local ids of the sources of the hop's kept edges, one
    tensor per edge type starting at the node type; ``input_nodes``: the ids they index,
    by which the new nodes are ordered (as a ``"pyg"`` sampler orders them). Returns
    ``(known, local_pieces)``: ``known`` with the new nodes appended, and per piece the
    ``[E_i]`` int64 positions of its sources in it.
    """
    num_known = known.numel()
    sources = torch.cat([known[:0], *pieces])
    grown, local_sources = unique_and_compact(known, sources, max(input_nodes.numel(), 1))
    # The new nodes come in block-local order; renumber them by id.
    new = grown[num_known:]
    order = torch.argsort(input_nodes[new])
    relabel = torch.arange(grown.numel(), device=grown.device)
    relabel[num_known + order] = relabel[num_known:].clone()
    local = relabel[local_sources]
    local_pieces = list(local.split([p.numel() for p in pieces]))
    return torch.cat([known, new[order]]), local_pieces


def _ranges(starts: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``cat([arange(s, s + c) for s, c in zip(starts, counts)])`` as int64."""
    total = int(counts.sum())
    offsets = torch.cumsum(counts, 0) - counts
    shift = torch.repeat_interleave(starts.to(torch.int64) - offsets, counts, output_size=total)
    return torch.arange(total, device=starts.device) + shift


def _feature_key(known, key: Optional[str], argument: str) -> Optional[str]:
    """The feature ``to_pyg`` puts in ``x`` / ``y`` / ``edge_attr``: ``key``, or the only
    one known (``None`` if none is known and none was asked for)."""
    if key is None:
        if len(known) > 1:
            raise ValueError(f"MiniBatch.to_pyg(): several features {sorted(known)}; pass {argument}= to choose one")
        return next(iter(known), None)
    if key not in known:
        raise KeyError(f"MiniBatch.to_pyg(): unknown {argument} '{key}'; known keys: {sorted(known)}")
    return key


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
