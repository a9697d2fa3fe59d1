"""An R-GCN on a heterogeneous graph, fed by graphpipe and trained with PyG.

The data is graphpipe's synthetic ogbn-mag look-alike: papers, authors, institutions and
fields of study, with ``cites``, ``writes``, ``affiliated_with`` and ``has_topic`` edges
and their reverses. Paper labels follow the graph more than the paper features, so the
graph model should clearly beat an MLP on paper features.

The chain is the homogeneous one with typed arguments::

    pipe = (gp.ItemSampler(ds.train_set, 1024, shuffle=True)     # a HeteroItemSet of papers
            .sample_neighbor(ds.graph, [10, 10], layout="pyg")     # every edge type, 10 each
            .fetch_feature(ds.features, {t: ["feat"] for t in ds.graph.node_types})
            .transform(gp.MiniBatch.to_pyg))                       # a PyG HeteroData

Each batch is the ``HeteroData`` PyG's ``NeighborLoader`` returns for heterogeneous
graphs: per node type ``x``, ``n_id`` and ``num_sampled_nodes``, per edge type
``edge_index`` and ``num_sampled_edges`` (so ``trim_to_layer`` drops the nodes and edges
a layer no longer needs), and ``batch_size`` and ``y`` on the seed type. The model is
PyG code: one ``HeteroConv`` of relation-specific ``SAGEConv``s per layer (an R-GCN with
mean aggregation per relation, summed over relations).

    python examples/hetero_rgcn.py            # 25 s on 2 CPU cores (R-GCN 95%, MLP 22%)
    python examples/hetero_rgcn.py --small    # seconds (used by the tests)
    python examples/hetero_rgcn.py --num-papers 100000 --epochs 4   # 7 min on 2 cores

The defaults (20,000 papers, 3 epochs) took 24 s on a 2-core machine that other jobs
shared (load 2-3), generation and the MLP baseline included; 100,000 papers for 4 epochs
took 7 min there (95 s an epoch) and 30 min on a busier one.
"""

import argparse
import os
import time

# See examples/pyg_graphsage.py: set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import torch
import torch.nn.functional as F
import tqdm
from torch_geometric.nn import MLP, HeteroConv, SAGEConv
from torch_geometric.utils import trim_to_layer

import graphpipe as gp

TARGET = "paper"


class RGCN(torch.nn.Module):
    """Per node type a linear input projection, then ``num_layers`` relational layers."""

    def __init__(self, in_channels: dict, edge_types: list, hidden: int, out_channels: int, num_layers: int):
        super().__init__()
        self.project = torch.nn.ModuleDict({t: torch.nn.Linear(d, hidden) for t, d in in_channels.items()})
        self.convs = torch.nn.ModuleList(
            HeteroConv({etype: SAGEConv(hidden, hidden) for etype in edge_types}, aggr="sum") for _ in range(num_layers)
        )
        self.classify = torch.nn.Linear(hidden, out_channels)

    def forward(self, batch):
        x = {t: self.project[t](x) for t, x in batch.x_dict.items()}
        edge_index = batch.edge_index_dict
        for layer, conv in enumerate(self.convs):
            x, edge_index, _ = trim_to_layer(
                layer, batch.num_sampled_nodes_dict, batch.num_sampled_edges_dict, x, edge_index
            )
            x = {t: F.dropout(F.relu(h), p=0.5, training=self.training) for t, h in conv(x, edge_index).items()}
        return self.classify(x[TARGET])[: batch[TARGET].batch_size]


def loader(ds, item_set, args, shuffle):
    pipe = (
        gp.ItemSampler(item_set, args.batch_size, shuffle=shuffle, seed=0)
        .sample_neighbor(ds.graph, [10, 10], layout="pyg")
        .fetch_feature(ds.features, {t: ["feat"] for t in ds.graph.node_types})
        .copy_to(args.device)
        .transform(gp.MiniBatch.to_pyg)
    )
    return gp.DataLoader(pipe)


@torch.no_grad()
def validation_accuracy(model, val_loader) -> float:
    model.eval()
    correct = total = 0
    for batch in val_loader:
        seeds = batch[TARGET]
        correct += int((model(batch).argmax(1) == seeds.y[: seeds.batch_size]).sum())
        total += seeds.batch_size
    return correct / total


def mlp_baseline(ds) -> float:
    """Validation accuracy of an MLP on paper features alone (full batch: no graph needed)."""
    x = ds.features["node", TARGET, "feat"].data
    x = torch.as_tensor(x)
    train_seeds, train_labels = ds.train_set.item_sets[TARGET].items
    val_seeds, val_labels = ds.validation_set.item_sets[TARGET].items
    mlp = MLP([x.size(1), 128, 128, ds.num_classes], dropout=0.5)
    optimizer = torch.optim.Adam(mlp.parameters(), lr=1e-2, weight_decay=5e-4)
    mlp.train()
    for _ in range(50):
        optimizer.zero_grad()
        F.cross_entropy(mlp(x[train_seeds]), train_labels).backward()
        optimizer.step()
    mlp.eval()
    with torch.no_grad():
        return float((mlp(x[val_seeds]).argmax(1) == val_labels).float().mean())


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-papers", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a tiny graph and run, for tests")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")
    if args.small:
        args.num_papers, args.epochs, args.batch_size = 2_000, 1, 128
    return args


def main():
    args = parse_args()
    ds = gp.datasets.synthetic_mag(num_papers=args.num_papers, seed=0)
    print(ds)
    torch.manual_seed(0)
    in_channels = {t: ds.features["node", t, "feat"].row_shape[0] for t in ds.graph.node_types}
    edge_types = [tuple(t.split(":")) for t in ds.graph.edge_types]
    model = RGCN(in_channels, edge_types, hidden=128, out_channels=ds.num_classes, num_layers=2).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    train_loader = loader(ds, ds.train_set, args, shuffle=True)
    val_loader = loader(ds, ds.validation_set, args, shuffle=False)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        for batch in tqdm.tqdm(train_loader, desc=f"epoch {epoch}", leave=False, disable=None):
            optimizer.zero_grad()
            seeds = batch[TARGET]
            loss = F.cross_entropy(model(batch), seeds.y[: seeds.batch_size])
            loss.backward()
            optimizer.step()
        acc = validation_accuracy(model, val_loader)
        print(f"epoch {epoch}: loss {loss.item():.4f}, validation accuracy {acc:.4f} ({time.perf_counter() - start:.1f} s)")

    print(f"MLP validation accuracy: {mlp_baseline(ds):.4f}")
    print(f"R-GCN validation accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
