"""NodeClassificationDataset: a graph, its features, labels and train/validation/test items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Union

import torch

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import HeteroItemSet, ItemSet

__all__ = ["NodeClassificationDataset"]


@dataclass
class NodeClassificationDataset:
    """Everything a node-classification training script needs, as GraphBolt's ``Dataset``.

    Attributes:
        name: a short name, e.g. ``"karate_club"``.
        graph: the (symmetric) graph in CSC form.
        features: node features; key ``"feat"`` is ``[num_nodes, feature_dim]`` float32.
            A typed (heterogeneous) dataset keys them ``(node_type, name)``, e.g.
            ``features["node", "paper", "feat"]``.
        train_set, validation_set, test_set: disjoint :class:`~graphpipe.ItemSet` s with
            fields ``("seeds", "labels")``, ``[n]`` int64 seeds and ``[n]`` int64 labels, or
            ``[n, num_tasks]`` for multi-label data (None where a converted
            dataset has no such split, e.g. ``from_pyg`` of a ``Data`` without masks,
            which warns);
            for a typed dataset :class:`~graphpipe.HeteroItemSet` s over the labelled
            node types.
        num_classes: labels are in ``[0, num_classes)`` (None if unknown; for several
            labelled node types, over all of them); multi-label: the number of tasks.
        labels: ``[num_nodes]`` int64 (multi-label: ``[num_nodes, num_tasks]``) label of
            every node (for evaluating on all nodes), or None for an unlabelled converted dataset; for a typed dataset a dict node
            type -> ``[num_nodes_of_type]`` labels of the labelled types.
    """

    name: str
    graph: CSCGraph
    features: FeatureStore
    train_set: Optional[Union[ItemSet, HeteroItemSet]]
    validation_set: Optional[Union[ItemSet, HeteroItemSet]]
    test_set: Optional[Union[ItemSet, HeteroItemSet]]
    num_classes: Optional[int]
    labels: Optional[Union[torch.Tensor, Dict[str, torch.Tensor]]]

    def __repr__(self) -> str:
        if self.graph.is_heterogeneous:
            feature_dim = {
                t: self.features["node", t, "feat"].row_shape[0]
                for t in self.graph.node_types
                if ("node", t, "feat") in self.features and self.features["node", t, "feat"].row_shape
            }
        else:
            feature_dim = self.features["feat"].row_shape[0] if "feat" in self.features else None
        sizes = ", ".join(
            f"{name}={None if item_set is None else len(item_set)}"
            for name, item_set in (("train", self.train_set), ("validation", self.validation_set), ("test", self.test_set))
        )
        return (
            f"NodeClassificationDataset(name='{self.name}', num_nodes={self.graph.total_num_nodes}, "
            f"num_edges={self.graph.total_num_edges}, feature_dim={feature_dim}, "
            f"num_classes={self.num_classes}, {sizes})"
        )


def num_classes_of(given: Optional[int], labels) -> Optional[int]:
    """``given``, else the most over every labelled type of: one more than the largest
    integer ``[n]`` label, the ``k`` columns of ``[n, k]`` multi-label labels (any dtype,
    as PyG's ``num_classes`` of PPI's; OGB's ``num_tasks`` for ogbn-proteins)."""
    if given is not None:
        return given
    counts = []
    for t in labels:
        if t is not None and t.dim() == 2:
            counts.append(t.size(1))
        elif t is not None and not t.dtype.is_floating_point and t.numel():
            counts.append(int(t.max()) + 1)
    return max(counts) if counts else None
