"""NodeClassificationDataset: a graph, its features, labels and train/validation/test items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
            fields ``("seeds", "labels")``, both ``[n]`` int64 (None where a converted
            dataset has no such split, e.g. ``from_pyg`` of a ``Data`` without masks).
        num_classes: labels are in ``[0, num_classes)`` (None if unknown).
        labels: ``[num_nodes]`` int64 label of every node (for evaluating on all nodes),
            or None for an unlabelled converted dataset.
    """

    name: str
    graph: CSCGraph
    features: FeatureStore
    train_set: Optional[ItemSet]
    validation_set: Optional[ItemSet]
    test_set: Optional[ItemSet]
    num_classes: Optional[int]
    labels: Optional[torch.Tensor]

    def __repr__(self) -> str:
        feature_dim = self.features["feat"].row_shape[0] if "feat" in self.features else None
        sizes = ", ".join(
            f"{name}={None if item_set is None else len(item_set)}"
            for name, item_set in (("train", self.train_set), ("validation", self.validation_set), ("test", self.test_set))
        )
        return (
            f"NodeClassificationDataset(name='{self.name}', num_nodes={self.graph.num_nodes}, "
            f"num_edges={self.graph.num_edges}, feature_dim={feature_dim}, "
            f"num_classes={self.num_classes}, {sizes})"
        )
