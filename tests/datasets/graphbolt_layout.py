"""Small dataset directories in GraphBolt's documented on-disk layout (the ``metadata.yaml``
of ``dgl.graphbolt.OnDiskDataset``'s docstring, homogeneous), written as literal YAML so the
layout does not come from graphpipe's reader."""

import os
from types import SimpleNamespace

import numpy as np
import torch

METADATA = """\
dataset_name: graphbolt_test
graph:
  nodes:
    - num: {num_nodes}
  edges:
    - format: {edge_format}
      path: edge_data/edges.{edge_ext}
  feature_data:
    - domain: edge
      name: weight
      format: numpy
      in_memory: true
      path: edge_data/weight.npy
feature_data:
  - domain: node
    name: feat
    format: numpy
    in_memory: false
    path: node_data/feat.npy
  - domain: node
    name: year
    format: torch
    path: node_data/year.pt
  - domain: edge
    name: feat
    format: numpy
    in_memory: false
    path: edge_data/feat.npy
tasks:
  - name: node_classification
    num_classes: {num_classes}
    train_set:
      - data:
          - name: {seed_name}
            format: numpy
            in_memory: true
            path: set/train_seeds.npy
          - name: labels
            format: numpy
            path: set/train_labels.npy
    validation_set:
      - data:
          - name: {seed_name}
            format: numpy
            path: set/validation_seeds.npy
          - name: labels
            format: numpy
            path: set/validation_labels.npy
    test_set:
      - data:
          - name: {seed_name}
            format: torch
            path: set/test_seeds.pt
          - name: labels
            format: torch
            path: set/test_labels.pt
"""


def write_graphbolt_dataset(root, edge_format="csv", seed_name="seeds", num_nodes=300, num_edges=2000, seed=0):
    """Write a random homogeneous dataset under ``root``; return its arrays."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    num_classes = 4
    d = SimpleNamespace(
        src=src, dst=dst, num_nodes=num_nodes, num_classes=num_classes,
        feat=rng.standard_normal((num_nodes, 8)).astype(np.float32),
        year=torch.from_numpy(rng.integers(1990, 2020, num_nodes)),
        edge_feat=rng.standard_normal((num_edges, 3)).astype(np.float32),
        weight=rng.random(num_edges).astype(np.float32),
        labels=rng.integers(0, num_classes, num_nodes),
    )  # fmt: skip
    order = rng.permutation(num_nodes)
    d.splits = {"train": order[:60], "validation": order[60:90], "test": order[90:150]}
    for folder in ("edge_data", "node_data", "set"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    if edge_format == "csv":
        with open(os.path.join(root, "edge_data", "edges.csv"), "w") as f:
            f.writelines(f"{u},{v}\n" for u, v in zip(src, dst))
    else:
        np.save(os.path.join(root, "edge_data", "edges.npy"), np.stack([src, dst]))
    np.save(os.path.join(root, "edge_data", "weight.npy"), d.weight)
    np.save(os.path.join(root, "edge_data", "feat.npy"), d.edge_feat)
    np.save(os.path.join(root, "node_data", "feat.npy"), d.feat)
    torch.save(d.year, os.path.join(root, "node_data", "year.pt"))
    for name, seeds in d.splits.items():
        if name == "test":
            torch.save(torch.from_numpy(seeds), os.path.join(root, "set", "test_seeds.pt"))
            torch.save(torch.from_numpy(d.labels[seeds]), os.path.join(root, "set", "test_labels.pt"))
        else:
            np.save(os.path.join(root, "set", f"{name}_seeds.npy"), seeds)
            np.save(os.path.join(root, "set", f"{name}_labels.npy"), d.labels[seeds])
    with open(os.path.join(root, "metadata.yaml"), "w") as f:
        f.write(METADATA.format(
            num_nodes=num_nodes, edge_format=edge_format, edge_ext="csv" if edge_format == "csv" else "npy",
            num_classes=num_classes, seed_name=seed_name,
        ))  # fmt: skip
    return d
