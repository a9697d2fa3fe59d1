"""NodeClassificationDataset: a graph, its features, labels and train/validation/test items."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..csc_graph import CSCGraph
from ..feature_store import FeatureStore
from ..item_set import ItemSet

__all__ = ["NodeClassificationDataset"]


@dataclass
class NodeClassificationDataset:
    """Everything a node-classification training script needs, as GraphBolt's ``Dataset``.

    Attributes:
        name: a short name, e.g. ``"karate_club"``.
        graph: the (symmetric) graph in CSC form.
        features: node features; key ``"feat"`` is ``[num_nodes, feature_dim]`` float32.
        train_set, validation_set, test_set: disjoint :class:`~graphpipe.ItemSet` s with
            fields ``("seeds", "labels")``, both ``[n]`` int64.
        num_classes: labels are in ``[0, num_classes)``.
        labels: ``[num_nodes]`` int64 label of every node (for evaluating on all nodes).
    """

    name: str
    graph: CSCGraph
    features: FeatureStore
    train_set: ItemSet
    validation_set: ItemSet
    test_set: ItemSet
    num_classes: int
    labels: torch.Tensor

    def __repr__(self) -> str:
        feat = self.features["feat"]
        return (
            f"NodeClassificationDataset(name='{self.name}', num_nodes={self.graph.num_nodes}, "
            f"num_edges={self.graph.num_edges}, feature_dim={feat.row_shape[0]}, "
            f"num_classes={self.num_classes}, train={len(self.train_set)}, "
            f"validation={len(self.validation_set)}, test={len(self.test_set)})"
        )
