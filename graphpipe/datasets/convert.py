"""from_pyg / from_dgl: a PyG ``Data`` or a DGL graph as graph + features + item sets.

Both give a :class:`~graphpipe.datasets.NodeClassificationDataset` in one call, so a
script that has its data in PyG or DGL form switches to graphpipe's pipes without
writing files:

* the graph is ``CSCGraph.from_coo`` of the edges in the source's edge order, so
  ``graph.original_edge_ids`` map CSC positions back to the source's edge ids (PyG: the
  column of ``edge_index``; DGL: the edge id) and edge features are read by them;
* node features: every node-level tensor except labels and split masks; the input
  features (PyG's ``x``, DGL's ``ndata["feat"]``) are stored as ``"feat"``, the name
  graphpipe's and GraphBolt's examples read;
* edge features: every edge-level tensor, by its name;
* labels (``y`` / ``ndata["label"]``) and the ``train``/``val``/``test`` masks become
  the item sets ``("seeds", "labels")``, seeds in increasing id order.

Heterogeneous graphs (``HeteroData``, DGL graphs with several types) are not supported yet.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import torch

from ..csc_graph import CSCGraph
from ..feature_store import FeatureStore
from ..item_set import ItemSet
from .base import NodeClassificationDataset

__all__ = ["from_pyg", "from_dgl"]

_SPLITS = ("train", "val", "test")


def from_pyg(data, name: str = "pyg", num_classes: Optional[int] = None) -> NodeClassificationDataset:
    """A :class:`NodeClassificationDataset` of a ``torch_geometric.data.Data``.

    Reads ``edge_index`` (``[2, num_edges]``, row 0 sources), ``num_nodes``, ``x``
    (stored as node feature ``"feat"``), ``y`` (``[num_nodes]`` or ``[num_nodes, 1]``
    labels), ``train_mask`` / ``val_mask`` / ``test_mask`` (``[num_nodes]`` bool) and
    every other node- or edge-level tensor (e.g. ``edge_attr``) as a feature of that name.

    Args:
        data: the PyG graph.
        name: the dataset's name.
        num_classes: defaults to ``y.max() + 1`` for integer labels.
    """
    where = "from_pyg"
    if type(data).__name__ == "HeteroData":
        raise NotImplementedError(f"{where}: HeteroData is not supported yet; convert a homogeneous Data")
    if not hasattr(data, "edge_index") or not hasattr(data, "is_node_attr"):
        raise TypeError(f"{where}: `data` must be a torch_geometric.data.Data, got {type(data).__name__}")
    if data.edge_index is None:
        raise ValueError(f"{where}: `data.edge_index` is None; the graph needs edges as a [2, num_edges] tensor")
    num_nodes = data.num_nodes
    graph = CSCGraph.from_edge_index(data.edge_index, num_nodes=num_nodes)
    node_data, edge_data = {}, {}
    for key, value in data.items():
        if key == "edge_index" or not isinstance(value, torch.Tensor):
            continue
        if data.is_edge_attr(key):
            edge_data[key] = value
        elif data.is_node_attr(key):
            node_data[key] = value
    return _dataset(where, name, graph, node_data, edge_data, "x", "y", num_classes)


def from_dgl(graph, name: str = "dgl", num_classes: Optional[int] = None) -> NodeClassificationDataset:
    """A :class:`NodeClassificationDataset` of a homogeneous ``dgl.DGLGraph``.

    Edges in DGL's edge id order (``graph.edges(order="eid")``); ``ndata["feat"]`` is
    node feature ``"feat"``, ``ndata["label"]`` the labels, ``ndata["train_mask"]`` /
    ``"val_mask"`` / ``"test_mask"`` the splits; every other ``ndata`` / ``edata``
    tensor a node / edge feature of its name.
    """
    where = "from_dgl"
    if not all(hasattr(graph, a) for a in ("edges", "ndata", "edata", "num_nodes")):
        raise TypeError(f"{where}: `graph` must be a dgl.DGLGraph, got {type(graph).__name__}")
    if len(graph.ntypes) != 1 or len(graph.etypes) != 1:
        raise NotImplementedError(
            f"{where}: heterogeneous graphs ({len(graph.ntypes)} node types, {len(graph.etypes)} edge types) "
            "are not supported yet"
        )
    src, dst = graph.edges(order="eid")
    csc = CSCGraph.from_coo(src, dst, num_nodes=graph.num_nodes())
    node_data = {k: v for k, v in graph.ndata.items() if isinstance(v, torch.Tensor)}
    edge_data = {k: v for k, v in graph.edata.items() if isinstance(v, torch.Tensor)}
    return _dataset(where, name, csc, node_data, edge_data, "feat", "label", num_classes)


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
    node_data = dict(node_data)
    labels = node_data.pop(label_key, None)
    masks = {split: node_data.pop(f"{split}_mask", None) for split in _SPLITS}
    if labels is not None:
        if labels.dim() == 2 and labels.size(1) == 1:
            labels = labels[:, 0]
        if labels.dim() != 1 or labels.size(0) != graph.num_nodes:
            raise ValueError(
                f"{where}: labels `{label_key}` must be [num_nodes] or [num_nodes, 1], got shape {tuple(labels.shape)}"
            )
        if not labels.dtype.is_floating_point:
            labels = labels.to(torch.int64)
            if num_classes is None and labels.numel():
                num_classes = int(labels.max()) + 1
    features = {("feat" if key == feature_key else key): value.contiguous() for key, value in node_data.items()}
    sets = {}
    for split, mask in masks.items():
        if mask is None:
            sets[split] = None
            continue
        if mask.dtype != torch.bool or mask.dim() != 1 or mask.size(0) != graph.num_nodes:
            raise ValueError(
                f"{where}: `{split}_mask` must be a [num_nodes] bool tensor, got {mask.dtype} shape {tuple(mask.shape)} "
                "(for several splits, select one column first)"
            )
        seeds = torch.nonzero(mask).view(-1)
        if seeds.numel() == 0:
            sets[split] = None
        elif labels is None:
            sets[split] = ItemSet(seeds, names="seeds")
        else:
            sets[split] = ItemSet((seeds, labels[seeds]), names=("seeds", "labels"))
    return NodeClassificationDataset(
        name=name,
        graph=graph,
        features=FeatureStore(features, {key: value.contiguous() for key, value in edge_data.items()}),
        train_set=sets["train"],
        validation_set=sets["val"],
        test_set=sets["test"],
        num_classes=num_classes,
        labels=labels,
    )
