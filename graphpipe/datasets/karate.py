"""Zachary's karate club, embedded in the source (no download)."""

from __future__ import annotations

import torch

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import ItemSet
from graphpipe.datasets.base import NodeClassificationDataset

__all__ = ["karate_club"]

# The 78 friendships among the 34 members (W. W. Zachary, "An information flow model for
# conflict and fission in small groups", 1977), as in networkx's karate_club_graph().
_EDGES = (
    (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 10), (0, 11), (0, 12),
    (0, 13), (0, 17), (0, 19), (0, 21), (0, 31), (1, 2), (1, 3), (1, 7), (1, 13), (1, 17),
    (1, 19), (1, 21), (1, 30), (2, 3), (2, 7), (2, 8), (2, 9), (2, 13), (2, 27), (2, 28),
    (2, 32), (3, 7), (3, 12), (3, 13), (4, 6), (4, 10), (5, 6), (5, 10), (5, 16), (6, 16),
    (8, 30), (8, 32), (8, 33), (9, 33), (13, 33), (14, 32), (14, 33), (15, 32), (15, 33),
    (18, 32), (18, 33), (19, 33), (20, 32), (20, 33), (22, 32), (22, 33), (23, 25), (23, 27),
    (23, 29), (23, 32), (23, 33), (24, 25), (24, 27), (24, 31), (25, 31), (26, 29), (26, 33),
    (27, 33), (28, 31), (28, 33), (29, 32), (29, 33), (30, 32), (30, 33), (31, 32), (31, 33),
    (32, 33),
)  # fmt: skip

# The faction each member joined after the split: 0 = the instructor "Mr. Hi" (node 0),
# 1 = the administrator "Officer" (node 33); networkx's "club" attribute.
_FACTIONS = (
    0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1,
)  # fmt: skip

_TRAIN = (0, 1, 32, 33)
_VALIDATION = (2, 8, 16, 23, 27, 30)


def karate_club() -> NodeClassificationDataset:
    """Zachary's karate club: 34 nodes, 78 friendships stored as 156 directed edges.

    Labels are the two factions the club split into (2 classes of 17 members),
    features the one-hot identity ``[34, 34]`` float32. The splits are small and fixed:
    train = the two leaders and their closest allies (nodes 0, 1, 32, 33), validation =
    6 nodes, test = the other 24.
    """
    edges = torch.tensor(_EDGES, dtype=torch.int32)
    src = torch.cat([edges[:, 0], edges[:, 1]])
    dst = torch.cat([edges[:, 1], edges[:, 0]])
    graph = CSCGraph.from_coo(src, dst, num_nodes=34)
    labels = torch.tensor(_FACTIONS, dtype=torch.int64)
    held_out = set(_TRAIN) | set(_VALIDATION)
    test = tuple(v for v in range(34) if v not in held_out)

    def items(nodes):
        seeds = torch.tensor(nodes, dtype=torch.int64)
        return ItemSet((seeds, labels[seeds]), names=("seeds", "labels"))

    return NodeClassificationDataset(
        name="karate_club",
        graph=graph,
        features=FeatureStore({"feat": torch.eye(34)}),
        train_set=items(_TRAIN),
        validation_set=items(_VALIDATION),
        test_set=items(test),
        num_classes=2,
        labels=labels,
    )
