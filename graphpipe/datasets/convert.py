"""from_pyg / from_dgl: a PyG ``Data`` or a DGL graph as graph + features + item sets.

Both give a :class:`~graphpipe.datasets.NodeClassificationDataset` in one call, so a
script that has its data in PyG or DGL form switches to graphpipe's pipes without
writing files:

* the graph is ``CSCGraph.from_coo`` of the edges in the source's edge order, so
  ``graph.original_edge_ids`` map CSC positions back to the source's edge ids (PyG: the
  column of ``edge_index``; DGL: the edge id) and edge features are read by them;
* node features: every node-level tensor (labels and split masks too); the input
  features (PyG's ``x``, DGL's ``ndata["feat"]``) are stored as ``"feat"``, the name
  graphpipe's and GraphBolt's examples read;
* edge features: every edge-level tensor, by its name;
* labels (``y`` / ``ndata["label"]``) and the ``train``/``val``/``test`` masks become
  the item sets ``("seeds", "labels")``, seeds in increasing id order; a split without a
  mask (or with an empty one) is None, with a warning saying so.

PyG decides which tensors are node- or edge-level by their row count; ``x``, ``y`` and
the masks are read as node-level whatever their rows (``x`` with more rows than nodes
kept: padding, nodes added later; fewer rows, and ``y`` or masks with more, refused,
naming them). A tensor PyG counts as neither, or lays out a column per item (a name with
``index``, as ``edge_label_index``), is skipped with a warning naming it.

Heterogeneous graphs (``HeteroData``, DGL graphs with several node or edge types) give
the same dataset, typed (GraphBolt's form):

* the graph is ``CSCGraph.from_hetero_edges`` of the edges per edge type
  (``"src:relation:dst"``), in the source's edge order within each type, so
  ``original_edge_ids`` are the source's edge ids within their type;
* features are keyed ``(node_type, name)`` and ``(edge_type, name)``
  (``store["node", "paper", "feat"]``);
* ``labels`` is a dict node type -> labels over the node types that have labels, and
  each split a :class:`~graphpipe.HeteroItemSet` over the labelled types that have a
  mask for it (``minibatch.seeds == {"paper": ...}``).
"""

from __future__ import annotations

import warnings
from typing import Dict, Mapping, Optional, Tuple

import torch

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import HeteroItemSet, ItemSet
from graphpipe.datasets.base import NodeClassificationDataset, num_classes_of

__all__ = ["from_pyg", "from_dgl"]

_SPLITS = ("train", "val", "test")
_SET_NAMES = {"train": "train_set", "val": "validation_set", "test": "test_set"}
# PyG keys that are node-level whatever their row count (PyG classifies tensors by it, so
# an `x` with more or fewer rows than num_nodes would otherwise be dropped unseen).
_PYG_NODE_KEYS = ("x", "y", "train_mask", "val_mask", "test_mask")


def from_pyg(data, name: str = "pyg", num_classes: Optional[int] = None) -> NodeClassificationDataset:
    """A :class:`NodeClassificationDataset` of a ``torch_geometric.data.Data`` or ``HeteroData``.

    Reads ``edge_index`` (``[2, num_edges]``, row 0 sources; or the sparse ``adj_t`` of
    ``T.ToSparseTensor()``), ``num_nodes``, ``x`` (stored as node feature ``"feat"``),
    ``y`` (``[num_nodes]`` or ``[num_nodes, 1]`` labels, or ``[num_nodes, k]`` multi-label
    ones, e.g. PPI's 121 tasks: a batch's labels are its seeds' rows), ``train_mask`` /
    ``val_mask`` / ``test_mask`` (``[num_nodes]`` bool: the item sets) and every node- or edge-level
    tensor (``y``, masks, ``time``, ``edge_attr``...) as a feature of its name.
    A ``HeteroData`` is read the same way per node type (``data["paper"].x``, ...) and
    per edge type (``data["author", "writes", "paper"].edge_index``, ...); see the
    module's docstring for the typed result.

    Args:
        data: the PyG graph.
        name: the dataset's name.
        num_classes: defaults to ``y.max() + 1`` for integer ``[num_nodes]`` labels, ``k``
            for ``[num_nodes, k]`` ones (as PyG's ``Dataset.num_classes``).
    """
    where = "from_pyg"
    if type(data).__name__ == "HeteroData":
        dataset = _from_pyg_hetero(data, name, num_classes)
        _warn_missing_splits(dataset, where)
        return dataset
    if not hasattr(data, "edge_index") or not hasattr(data, "is_node_attr"):
        raise TypeError(f"{where}: `data` must be a torch_geometric.data.Data, got {type(data).__name__}")
    edge_index = _edge_index(data, where, "`data`")
    graph = CSCGraph.from_edge_index(edge_index, num_nodes=data.num_nodes)
    node_data, edge_data = _pyg_tensors(data, "`data`", _PYG_NODE_KEYS, edge_index.size(1))
    dataset = _dataset(where, name, graph, node_data, edge_data, "x", "y", num_classes)
    _warn_missing_splits(dataset, where)
    return dataset


def from_dgl(graph, name: str = "dgl", num_classes: Optional[int] = None) -> NodeClassificationDataset:
    """A :class:`NodeClassificationDataset` of a ``dgl.DGLGraph``.

    Edges in DGL's edge id order (``graph.edges(order="eid")``); ``ndata["feat"]`` is
    node feature ``"feat"``, ``ndata["label"]`` the labels, ``ndata["train_mask"]`` /
    ``"val_mask"`` / ``"test_mask"`` the splits; every other ``ndata`` / ``edata``
    tensor a node / edge feature of its name. A heterograph (several node or edge
    types) is read per node type (``graph.nodes[ntype].data``) and per canonical edge
    type (``graph.edges(etype=..., order="eid")``, ``graph.edges[etype].data``); see
    the module's docstring for the typed result.
    """
    where = "from_dgl"
    if not all(hasattr(graph, a) for a in ("edges", "ndata", "edata", "num_nodes")):
        raise TypeError(f"{where}: `graph` must be a dgl.DGLGraph, got {type(graph).__name__}")
    if len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1:
        dataset = _from_dgl_hetero(graph, name, num_classes)
        _warn_missing_splits(dataset, where)
        return dataset
    src, dst = graph.edges(order="eid")
    csc = CSCGraph.from_coo(src, dst, num_nodes=graph.num_nodes())
    node_data = {k: v for k, v in graph.ndata.items() if isinstance(v, torch.Tensor)}
    edge_data = {k: v for k, v in graph.edata.items() if isinstance(v, torch.Tensor)}
    dataset = _dataset(where, name, csc, node_data, edge_data, "feat", "label", num_classes)
    _warn_missing_splits(dataset, where)
    return dataset


def _from_pyg_hetero(data, name: str, num_classes: Optional[int]) -> NodeClassificationDataset:
    where = "from_pyg"
    num_nodes = {}
    for node_type in data.node_types:
        count = data[node_type].num_nodes
        if count is None:
            raise ValueError(
                f"{where}: node type '{node_type}' has no `num_nodes` and no node-level tensor to infer it from; "
                f"set data['{node_type}'].num_nodes"
            )
        num_nodes[node_type] = count
    edges = {}
    for edge_type in data.edge_types:
        edges[edge_type] = _edge_index(data[edge_type], where, f"edge type {edge_type}")
    if not edges:
        raise ValueError(f"{where}: the HeteroData has no edge types; the graph needs edges")
    graph = CSCGraph.from_hetero_edges(edges, num_nodes)
    node_data = {t: _pyg_tensors(data[t], f"node type '{t}'", _PYG_NODE_KEYS, 0)[0] for t in data.node_types}
    edge_data = {
        ":".join(t): _pyg_tensors(data[t], f"edge type {t}", (), edges[t].size(1))[1] for t in data.edge_types
    }
    return _hetero_dataset(where, name, graph, node_data, edge_data, "x", "y", num_classes)


def _pyg_tensors(store, what: str, node_keys: Tuple[str, ...], num_edges: int) -> Tuple[dict, dict]:
    """``(node-level, edge-level)`` tensors of a PyG store by name, as PyG counts them by
    rows (``node_keys`` are node-level whatever their rows). A tensor of neither kind is
    skipped with a warning naming it; ``x`` beside ``feat`` (x is stored as ``"feat"``) and
    an edge tensor of other than ``num_edges`` rows beside ``adj_t`` are refused."""
    node_data, edge_data, skipped, by_column = {}, {}, [], []
    for key, value in store.items():
        if key in ("edge_index", "adj_t") or not isinstance(value, torch.Tensor):
            continue
        if "index" in key or key == "face":  # PyG's __cat_dim__: -1, a column per item (edge_label_index)
            by_column.append(f"`{key}`")
        elif key in node_keys:
            node_data[key] = value
        elif store.is_edge_attr(key):
            edge_data[key] = value
        elif store.is_node_attr(key):
            node_data[key] = value
        else:
            skipped.append(f"`{key}` ({value.size(0) if value.dim() else 0} rows)")
    if skipped:
        warnings.warn(
            f"from_pyg: {what}: skipped {', '.join(skipped)}: PyG reads a tensor as node- or edge-level by its rows, "
            f"and these have neither count"
        )
    if by_column:
        warnings.warn(
            f"from_pyg: {what}: skipped {', '.join(by_column)}: PyG lays index tensors out a column per item, not a row "
            f"per node or edge; give link pairs as an ItemSet (e.g. gp.ItemSet(edge_label_index.t(), names='seeds'))"
        )
    if "x" in node_data and "feat" in node_data:
        raise ValueError(f"from_pyg: {what} has both `x` and `feat`; `x` is stored as node feature 'feat': rename `feat`")
    if store.get("edge_index") is None:
        for key, value in edge_data.items():
            if value.size(0) != num_edges:
                raise ValueError(
                    f"from_pyg: {what}'s `{key}` has {value.size(0)} rows for the {num_edges} edges of `adj_t` "
                    f"(T.ToSparseTensor() merged parallel edges, keeping their rows): convert without ToSparseTensor"
                )
    return node_data, edge_data


def _edge_index(store, where: str, what: str) -> torch.Tensor:
    """``[2, E]`` (source, target) of a PyG store: its ``edge_index``, or its sparse
    ``adj_t`` (``T.ToSparseTensor()``: a torch sparse ``[num_dst, num_src]`` tensor, or a
    ``SparseTensor`` with ``.coo()``), edges in ``adj_t``'s row-major order. An ``adj_t``
    with values other than 1 (``ToSparseTensor(attr=...)``) is refused: they are edge
    features this would drop."""
    edge_index = store.get("edge_index")
    if edge_index is not None:
        return edge_index
    adj_t = store.get("adj_t")
    if isinstance(adj_t, torch.Tensor) and adj_t.layout != torch.strided:
        coo = adj_t.to_sparse_coo().coalesce()
        (dst, src), values = coo.indices(), coo.values()
    elif hasattr(adj_t, "coo"):
        dst, src, values = adj_t.coo()
    else:
        raise ValueError(
            f"{where}: {what} has no `edge_index` and no sparse `adj_t`; give the edges as a [2, num_edges] edge_index"
        )
    if values is not None and not bool((values == 1).all()):
        raise ValueError(
            f"{where}: {what}'s `adj_t` holds edge values (T.ToSparseTensor(attr=...)), which graphpipe would drop; "
            "convert the data without ToSparseTensor (edge_index and the edge attribute)"
        )
    return torch.stack([src, dst])


def _from_dgl_hetero(graph, name: str, num_classes: Optional[int]) -> NodeClassificationDataset:
    edge_types = graph.canonical_etypes
    csc = CSCGraph.from_hetero_edges(
        {edge_type: graph.edges(etype=edge_type, order="eid") for edge_type in edge_types},
        {node_type: graph.num_nodes(node_type) for node_type in graph.ntypes},
    )
    node_data = {
        node_type: {k: v for k, v in graph.nodes[node_type].data.items() if isinstance(v, torch.Tensor)}
        for node_type in graph.ntypes
    }
    edge_data = {
        ":".join(edge_type): {k: v for k, v in graph.edges[edge_type].data.items() if isinstance(v, torch.Tensor)}
        for edge_type in edge_types
    }
    return _hetero_dataset("from_dgl", name, csc, node_data, edge_data, "feat", "label", num_classes)


def _dataset(
    where: str,
    name: str,
    graph: CSCGraph,
    node_data: Dict[str, torch.Tensor],
    edge_data: Mapping[str, torch.Tensor],
    feature_key: str,
    label_key: str,
    num_classes: Optional[int],
) -> NodeClassificationDataset:
    features, labels, sets = _node_items(where, "", graph.total_num_nodes, node_data, feature_key, label_key)
    return NodeClassificationDataset(
        name=name,
        graph=graph,
        features=FeatureStore(features, {key: value.contiguous() for key, value in edge_data.items()}),
        train_set=sets["train"],
        validation_set=sets["val"],
        test_set=sets["test"],
        num_classes=num_classes_of(num_classes, [labels]),
        labels=labels,
    )


def _hetero_dataset(
    where: str,
    name: str,
    graph: CSCGraph,
    node_data: Dict[str, Dict[str, torch.Tensor]],
    edge_data: Dict[str, Dict[str, torch.Tensor]],
    feature_key: str,
    label_key: str,
    num_classes: Optional[int],
) -> NodeClassificationDataset:
    """The typed dataset: features keyed by (type, name); labels and item sets over the
    node types that have labels (or, if none has, over those with split masks)."""
    counts = graph.num_nodes_per_type
    node_features, labels, sets = {}, {}, {}
    for node_type in graph.node_types:
        what = f" of node type '{node_type}'"
        features, labels[node_type], sets[node_type] = _node_items(
            where, what, counts[node_type], node_data[node_type], feature_key, label_key
        )
        node_features.update({(node_type, key): value for key, value in features.items()})
    edge_features = {
        (edge_type, key): value.contiguous() for edge_type, tensors in edge_data.items() for key, value in tensors.items()
    }
    labelled = [t for t in graph.node_types if labels[t] is not None]
    split_types = labelled or graph.node_types
    splits = {}
    for split in _SPLITS:
        per_type = {t: sets[t][split] for t in split_types if sets[t][split] is not None}
        splits[split] = HeteroItemSet(per_type) if per_type else None
    unused = [f"{t} ({', '.join(s for s in _SPLITS if sets[t][s] is not None)})" for t in graph.node_types
              if t not in split_types and any(sets[t][s] is not None for s in _SPLITS)]  # fmt: skip
    if unused:
        warnings.warn(
            f"{where}: the masks of node types without labels ({label_key!r}) are not used: {', '.join(unused)}; the "
            f"item sets cover the labelled types {labelled}",
            stacklevel=4,
        )
    return NodeClassificationDataset(
        name=name,
        graph=graph,
        features=FeatureStore(node_features, edge_features),
        train_set=splits["train"],
        validation_set=splits["val"],
        test_set=splits["test"],
        num_classes=num_classes_of(num_classes, [labels[t] for t in labelled]),
        labels={t: labels[t] for t in labelled} or None,
    )


def _node_items(
    where: str, what: str, num_nodes: int, node_data: Dict[str, torch.Tensor], feature_key: str, label_key: str
) -> Tuple[Dict[str, torch.Tensor], Optional[torch.Tensor], Dict[str, Optional[ItemSet]]]:
    """``(features, labels, {split: ItemSet or None})`` of one node set (a type's nodes,
    named by ``what`` in errors): ``{split}_mask`` tensors give the item sets, and every
    tensor is a feature (``feature_key`` stored as ``"feat"``); the labels stay a
    feature too (under ``label_key``), so fetching it gives every batch node's label, as
    PyG's NeighborLoader's ``y``; from_pyg's sets hold the node ids in an ``input_id``
    field, PyG's ``input_id`` for a boolean mask."""
    node_data = dict(node_data)
    labels = node_data.pop(label_key, None)
    masks = {split: node_data.get(f"{split}_mask") for split in _SPLITS}  # kept as features too, as PyG's
    if labels is not None:
        if labels.dim() == 2 and labels.size(1) == 1:
            labels = labels[:, 0]
        if labels.dim() not in (1, 2) or labels.size(0) != num_nodes:
            raise ValueError(
                f"{where}: labels `{label_key}`{what} must be [num_nodes] (or [num_nodes, 1]) or, multi-label, "
                f"[num_nodes, k] with num_nodes={num_nodes}, got shape {tuple(labels.shape)}"
            )
        if not labels.dtype.is_floating_point:
            labels = labels.to(torch.int64)
    for split, mask in masks.items():
        if mask is not None and (mask.dtype != torch.bool or mask.dim() != 1 or mask.size(0) != num_nodes):
            raise ValueError(
                f"{where}: `{split}_mask`{what} must be a [num_nodes] bool tensor with num_nodes={num_nodes}, got "
                f"{mask.dtype} shape {tuple(mask.shape)} (for several splits, select one column first)"
            )
    for key, value in node_data.items():
        if value.dim() == 0 or value.size(0) < num_nodes:
            raise ValueError(
                f"{where}: node feature `{key}`{what} has shape {tuple(value.shape)}, expected one row per node "
                f"({num_nodes} nodes; more rows are kept, e.g. padding)"
            )
    features = {("feat" if key == feature_key else key): value.contiguous() for key, value in node_data.items()}
    if labels is not None:
        features[label_key] = labels
    sets = {}
    for split, mask in masks.items():
        if mask is None:
            sets[split] = None
            continue
        seeds = torch.nonzero(mask).view(-1)
        if seeds.numel() == 0:
            sets[split] = None
        else:
            fields = {"seeds": seeds, "labels": None if labels is None else labels[seeds], "input_id": seeds if where == "from_pyg" else None}
            fields = {name: value for name, value in fields.items() if value is not None}
            sets[split] = ItemSet(tuple(fields.values()), names=tuple(fields))
    return features, labels, sets


def _warn_missing_splits(dataset: NodeClassificationDataset, where: str) -> None:
    """Say which splits are None (no mask, or an empty one), and what to do instead."""
    missing = [split for split in _SPLITS if getattr(dataset, _SET_NAMES[split]) is None]
    if missing:
        warnings.warn(
            f"{where}: no {', '.join(f'`{s}_mask`' for s in missing)} (or an empty one): the dataset's "
            f"{', '.join(_SET_NAMES[s] for s in missing)} {'is' if len(missing) == 1 else 'are'} None. To train, make "
            f"an item set of the nodes to use, e.g. gp.ItemSet((seeds, dataset.labels[seeds]), names=('seeds', "
            f"'labels')), or give the data boolean [num_nodes] masks",
            stacklevel=3,
        )
