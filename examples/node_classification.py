"""Node classification with a 3-layer GraphSAGE in plain PyTorch, fed by graphpipe.

Trains on the built-in synthetic power-law graph (R-MAT with planted communities, see
``graphpipe.datasets.synthetic_node_classification``) and compares with an MLP trained
on the same node features: the labels follow the graph, so the GNN wins clearly.

    python examples/node_classification.py                  # 25 s on 2 CPU cores (35 s on a first run)
    python examples/node_classification.py --small          # seconds (used by the tests)
    python examples/node_classification.py --device cuda --num-nodes 2000000
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
import torch.nn as nn
import torch.nn.functional as F
import tqdm

import graphpipe as gp


class SAGEConv(nn.Module):
    """GraphSAGE layer with mean aggregation over one sampled subgraph (a block)."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.lin_self = nn.Linear(in_dim, out_dim)
        self.lin_neigh = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, subgraph: gp.SampledSubgraph, h: torch.Tensor) -> torch.Tensor:
        # h: [num_src_nodes, in_dim]; the destinations are the first num_dst_nodes rows.
        src, dst = subgraph.edge_index()
        num_dst = subgraph.num_dst_nodes
        total = torch.zeros(num_dst, h.size(1), dtype=h.dtype, device=h.device).index_add_(0, dst, h[src])
        degree = torch.bincount(dst, minlength=num_dst).clamp_(min=1).unsqueeze(1)
        return self.lin_self(h[:num_dst]) + self.lin_neigh(total / degree)


class GraphSAGE(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int = 3, dropout: float = 0.5):
        super().__init__()
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        self.layers = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, minibatch: gp.MiniBatch) -> torch.Tensor:
        h = minibatch.node_features["feat"]
        for i, (layer, subgraph) in enumerate(zip(self.layers, minibatch.sampled_subgraphs)):
            h = layer(subgraph, h)
            if i < len(self.layers) - 1:
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h  # [batch_size, out_dim]: one row per seed


class MLP(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, dropout: float = 0.5):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden_dim, hidden_dim), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden_dim, out_dim),
        )  # fmt: skip

    def forward(self, minibatch: gp.MiniBatch) -> torch.Tensor:
        return self.net(minibatch.node_features["feat"])


def make_pipe(ds, item_set, args, fanouts, shuffle):
    """Batches of ``item_set`` with their sampled neighbourhoods (none if ``fanouts`` is None) and features."""
    pipe = gp.ItemSampler(item_set, batch_size=args.batch_size, shuffle=shuffle, seed=0)
    if fanouts is not None:
        pipe = pipe.sample_neighbor(ds.graph, fanouts, seed=0)
    return pipe.fetch_feature(ds.features, node_feature_keys=["feat"]).copy_to(args.device)


def train_epoch(model, optimizer, loader, desc):
    model.train()
    progress = tqdm.tqdm(loader, desc=desc, leave=False, disable=None)
    for minibatch in progress:
        loss = F.cross_entropy(model(minibatch), minibatch.labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        progress.set_postfix(loss=f"{loss.item():.3f}")


@torch.no_grad()
def accuracy(model, loader) -> float:
    model.eval()
    correct = total = 0
    for minibatch in loader:
        correct += int((model(minibatch).argmax(1) == minibatch.labels).sum())
        total += minibatch.batch_size
    return correct / total


def fit(name, model, ds, args, fanouts, epochs):
    """Train ``model`` for ``epochs`` and print its validation accuracy after each."""
    model = model.to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    train = gp.DataLoader(make_pipe(ds, ds.train_set, args, fanouts, shuffle=True))
    validation = gp.DataLoader(make_pipe(ds, ds.validation_set, args, fanouts, shuffle=False))
    start = time.perf_counter()
    for epoch in range(epochs):
        train_epoch(model, optimizer, train, f"{name} epoch {epoch}")
        acc = accuracy(model, validation)
        print(f"{name} epoch {epoch}: validation accuracy {acc:.4f} ({time.perf_counter() - start:.1f} s)")
    return acc


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
    fanouts = [15, 10, 5]  # fanouts[-1] is the seeds' fanout

    start = time.perf_counter()
    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, seed=0)
    print(f"{ds}\ngenerated in {time.perf_counter() - start:.1f} s")
    feature_dim = ds.features["feat"].row_shape[0]

    torch.manual_seed(0)  # each model's initialisation and dropout draws, independent of the other run
    mlp_acc = fit("MLP", MLP(feature_dim, 256, ds.num_classes), ds, args, None, epochs=2 * args.epochs)
    torch.manual_seed(0)
    sage_acc = fit("GraphSAGE", GraphSAGE(feature_dim, 256, ds.num_classes), ds, args, fanouts, args.epochs)
    print(f"MLP validation accuracy: {mlp_acc:.4f}")
    print(f"GraphSAGE validation accuracy: {sage_acc:.4f}")


if __name__ == "__main__":
    main()
