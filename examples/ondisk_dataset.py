"""Train GraphSAGE on a GraphBolt on-disk dataset directory, read as it is.

A dataset preprocessed for ``dgl.graphbolt.OnDiskDataset`` (a directory with a
``metadata.yaml``: graph edges, features, tasks with train/validation/test sets) loads
with ``gp.datasets.OnDiskDataset(path)``; nothing is converted. Features marked
``in_memory: false`` stay on disk (memory-mapped); the graph is built once with bounded
memory and cached beside the directory, in ``<path>.graphpipe/``.

    python examples/ondisk_dataset.py --path /data/my_graphbolt_dataset
    python examples/ondisk_dataset.py            # writes a demo directory first (synthetic graph)
    python examples/ondisk_dataset.py --small    # seconds (used by the tests)

Needs PyYAML (``pip install pyyaml``).
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import numpy as np
import torch

import graphpipe as gp
from node_classification import GraphSAGE, accuracy, train_epoch

# GraphBolt's documented layout (homogeneous graph, one node classification task).
METADATA = """\
dataset_name: synthetic_ondisk
graph:
  nodes:
    - num: {num_nodes}
  edges:
    - format: numpy
      path: edges/edges.npy
feature_data:
  - domain: node
    name: feat
    format: numpy
    in_memory: false
    path: data/feat.npy
tasks:
  - name: node_classification
    num_classes: {num_classes}
    train_set:
      - data:
          - {{name: seeds, format: numpy, path: set/train_seeds.npy}}
          - {{name: labels, format: numpy, path: set/train_labels.npy}}
    validation_set:
      - data:
          - {{name: seeds, format: numpy, path: set/validation_seeds.npy}}
          - {{name: labels, format: numpy, path: set/validation_labels.npy}}
    test_set:
      - data:
          - {{name: seeds, format: numpy, path: set/test_seeds.npy}}
          - {{name: labels, format: numpy, path: set/test_labels.npy}}
"""


def write_demo_directory(path: str, num_nodes: int) -> None:
    """The built-in synthetic dataset, written in GraphBolt's on-disk layout."""
    ds = gp.datasets.synthetic_node_classification(num_nodes=num_nodes, seed=0)
    for folder in ("edges", "data", "set"):
        os.makedirs(os.path.join(path, folder), exist_ok=True)
    np.save(os.path.join(path, "edges", "edges.npy"), ds.graph.edge_index().numpy())
    np.save(os.path.join(path, "data", "feat.npy"), ds.features["feat"].read(torch.arange(num_nodes)).numpy())
    for name in ("train", "validation", "test"):
        item_set = getattr(ds, f"{name}_set")
        np.save(os.path.join(path, "set", f"{name}_seeds.npy"), item_set.field("seeds").numpy())
        np.save(os.path.join(path, "set", f"{name}_labels.npy"), item_set.field("labels").numpy())
    with open(os.path.join(path, "metadata.yaml"), "w") as f:
        f.write(METADATA.format(num_nodes=num_nodes, num_classes=ds.num_classes))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", help="a GraphBolt on-disk dataset directory (default: write a demo one)")
    parser.add_argument("--num-nodes", type=int, default=200_000, help="size of the demo dataset")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a tiny demo dataset and run, for tests")
    args = parser.parse_args()
    if args.small:
        args.num_nodes, args.epochs, args.batch_size = 3000, 5, 128
    with tempfile.TemporaryDirectory() as scratch:
        path = args.path
        if path is None:
            path = os.path.join(scratch, "synthetic_ondisk")
            write_demo_directory(path, args.num_nodes)
        start = time.perf_counter()
        ds = gp.datasets.OnDiskDataset(path).load()
        print(f"{ds}\nopened in {time.perf_counter() - start:.1f} s")
        task = ds.tasks[0]
        fanouts = [15, 10, 5]

        def loader(item_set, shuffle):
            pipe = gp.ItemSampler(item_set, batch_size=args.batch_size, shuffle=shuffle, seed=0)
            pipe = pipe.sample_neighbor(ds.graph, fanouts, seed=0).fetch_feature(ds.feature, node_feature_keys=["feat"])
            return gp.DataLoader(pipe.copy_to(args.device))

        torch.manual_seed(0)
        model = GraphSAGE(ds.feature["feat"].row_shape[0], 256, task.num_classes).to(args.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
        train, validation = loader(task.train_set, True), loader(task.validation_set, False)
        for epoch in range(args.epochs):
            train_epoch(model, optimizer, train, f"epoch {epoch}")
            acc = accuracy(model, validation)
            print(f"epoch {epoch}: validation accuracy {acc:.4f} ({time.perf_counter() - start:.1f} s)")
        print(f"GraphSAGE validation accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
