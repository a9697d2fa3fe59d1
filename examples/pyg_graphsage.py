"""PyG's GraphSAGE fed by graphpipe instead of ``NeighborLoader``: a three-line change.

A PyG training script samples with::

    loader = NeighborLoader(data, num_neighbors=[5, 10, 15], batch_size=1024,
                            input_nodes=data.train_mask, shuffle=True)
    for batch in loader:
        ...

and becomes a graphpipe one by replacing those lines with::

    pipe = (gp.ItemSampler(ds.train_set, 1024, shuffle=True)
            .sample_neighbor(ds.graph, [15, 10, 5], layout="pyg")
            .fetch_feature(ds.features, ["feat"]).copy_to(device)
            .transform(gp.MiniBatch.to_pyg))
    loader = gp.DataLoader(pipe)
    for batch in loader:
        ...

graphpipe lists fanouts input layer first (GraphBolt's order), so PyG's ``[5, 10, 15]``
(seeds first) is ``[15, 10, 5]``. ``layout="pyg"`` samples as NeighborLoader does (each
node's neighbours once, at the hop where it is first reached), and ``batch`` is a PyG
``Data`` laid out as NeighborLoader's: ``x``, ``edge_index``, ``y``, ``batch_size``,
``n_id``, ``e_id`` and the per-hop counts that let ``GraphSAGE`` trim each layer to the
nodes still needed. The loader can be iterated once per epoch. The model and training
step below are PyG code, unchanged.

    python examples/pyg_graphsage.py            # 35 s on 2 CPU cores (50 s on a first run)
    python examples/pyg_graphsage.py --small    # seconds (used by the tests)
"""

import argparse
import os
import time

# Idle OpenMP threads (torch's and numba's share one runtime) spin for ~3 ms by default and
# starve the working ones on machines with few cores. PASSIVE stops that; with GNU OpenMP a
# 0.1 ms spin (GOMP_SPINCOUNT) still wakes threads fast between back-to-back kernels. Both
# are read when torch is imported, so set them first.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import torch
import torch.nn.functional as F
import tqdm
from torch_geometric.nn import MLP, GraphSAGE

import graphpipe as gp


def loader(ds, item_set, args, shuffle):
    pipe = (
        gp.ItemSampler(item_set, args.batch_size, shuffle=shuffle, seed=0)
        .sample_neighbor(ds.graph, [15, 10, 5], layout="pyg")
        .fetch_feature(ds.features, ["feat"])
        .copy_to(args.device)
        .transform(gp.MiniBatch.to_pyg)
    )
    return gp.DataLoader(pipe)


def forward(model, batch):
    out = model(
        batch.x,
        batch.edge_index,
        num_sampled_nodes_per_hop=batch.num_sampled_nodes,
        num_sampled_edges_per_hop=batch.num_sampled_edges,
    )
    return out[: batch.batch_size]


@torch.no_grad()
def validation_accuracy(model, val_loader) -> float:
    model.eval()
    correct = total = 0
    for batch in val_loader:
        correct += int((forward(model, batch).argmax(1) == batch.y[: batch.batch_size]).sum())
        total += batch.batch_size
    return correct / total


def mlp_baseline(ds) -> float:
    """Validation accuracy of an MLP on the node features alone (full batch: no graph needed)."""
    x, y = ds.features["feat"].data, ds.labels
    train, val = ds.train_set.items[0], ds.validation_set.items[0]
    mlp = MLP([x.size(1), 128, 128, ds.num_classes], dropout=0.5)
    optimizer = torch.optim.Adam(mlp.parameters(), lr=2e-2, weight_decay=5e-4)
    mlp.train()
    for _ in range(30):
        optimizer.zero_grad()
        F.cross_entropy(mlp(x[train]), y[train]).backward()
        optimizer.step()
    mlp.eval()
    with torch.no_grad():
        return float((mlp(x[val]).argmax(1) == y[val]).float().mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-nodes", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a tiny graph and run, for tests")
    args = parser.parse_args()
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")
    if args.small:
        args.num_nodes, args.epochs, args.batch_size = 10_000, 4, 128

    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, seed=0)
    print(ds)
    torch.manual_seed(0)
    model = GraphSAGE(ds.features["feat"].row_shape[0], 256, num_layers=3, out_channels=ds.num_classes, dropout=0.5)
    model = model.to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    train_loader = loader(ds, ds.train_set, args, shuffle=True)
    val_loader = loader(ds, ds.validation_set, args, shuffle=False)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        for batch in tqdm.tqdm(train_loader, desc=f"epoch {epoch}", leave=False, disable=None):
            optimizer.zero_grad()
            loss = F.cross_entropy(forward(model, batch), batch.y[: batch.batch_size])
            loss.backward()
            optimizer.step()
        acc = validation_accuracy(model, val_loader)
        print(f"epoch {epoch}: loss {loss.item():.4f}, validation accuracy {acc:.4f} ({time.perf_counter() - start:.1f} s)")

    print(f"MLP validation accuracy: {mlp_baseline(ds):.4f}")
    print(f"GraphSAGE validation accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
