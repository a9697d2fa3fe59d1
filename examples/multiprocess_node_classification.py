"""Multi-process GraphSAGE training with graphpipe: independent or cooperative minibatches.

Every process (rank) trains a DistributedDataParallel copy of the model. Two modes:

* independent (``--independent``): each rank samples its own share of the global batch,
  as with any DistributedSampler;
* cooperative (the default): the ranks sample the global batch together. Each vertex
  has an owner (hash partition); the owner samples its in-edges, reads its features and
  computes its rows of every layer, and ``gp.cooperative_exchange`` sends rows between
  layers. Vertices that several ranks need are sampled and read once.

    .venv/bin/torchrun --nproc-per-node=2 examples/multiprocess_node_classification.py          # CPU, gloo
    .venv/bin/torchrun --nproc-per-node=2 examples/multiprocess_node_classification.py --small  # seconds
    .venv/bin/torchrun --nproc-per-node=4 examples/multiprocess_node_classification.py --device cuda  # NCCL

Each epoch prints the number of vertices whose features were read, summed over ranks:
fewer with cooperative minibatching, for the same global batches.
"""

import argparse
import os
import time

# Idle OpenMP threads must not spin on few cores (see node_classification.py); torch reads these at import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import torch
import torch.distributed as dist
import torch.nn.functional as F
import tqdm
from torch.nn.parallel import DistributedDataParallel

import graphpipe as gp
from node_classification import GraphSAGE


class CooperativeGraphSAGE(GraphSAGE):
    """The single-process GraphSAGE, exchanging rows between ranks when batches are cooperative."""

    def forward(self, minibatch: gp.MiniBatch, cooperative: bool) -> torch.Tensor:
        h = minibatch.node_features["feat"]
        for i, (layer, subgraph) in enumerate(zip(self.layers, minibatch.sampled_subgraphs)):
            if cooperative and i > 0:
                # h holds the rows of the vertices this rank owns; fetch the layer's inputs.
                h = gp.cooperative_exchange(minibatch, i, h)
            h = layer(subgraph, h)
            if i < len(self.layers) - 1:
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h  # one row per seed of minibatch.seeds


def make_loader(ds, item_set, args, shuffle):
    source = gp.DistributedItemSampler(
        item_set, batch_size=args.batch_size, shuffle=shuffle, drop_uneven_inputs=True, seed=0
    )
    pipe = source.sample_neighbor(ds.graph, [15, 10, 5], seed=0, cooperative=args.cooperative)
    pipe = pipe.fetch_feature(ds.features, ["feat"], cooperative=args.cooperative)
    return gp.DataLoader(pipe.copy_to(args.device))


def all_ranks_sum(*values: float):
    total = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(total)
    return total.tolist()


def run_epoch(model, loader, args, optimizer=None, desc=None):
    """Train (with ``optimizer``) or evaluate; returns (accuracy, feature rows read), over all ranks.
    ``desc``: show a progress bar (on rank 0, when stderr is a terminal) with this title."""
    model.train(optimizer is not None)
    correct = total = rows_read = 0
    show = desc is not None and dist.get_rank() == 0
    with torch.set_grad_enabled(optimizer is not None):
        for minibatch in tqdm.tqdm(loader, desc=desc, leave=False, disable=None if show else True):
            first = minibatch.sampled_subgraphs[0]
            rows_read += first.exchange.local_node_ids.numel() if args.cooperative else minibatch.input_nodes.numel()
            logits = model(minibatch, args.cooperative)
            if optimizer is not None:
                # Sum over this rank's seeds / per-rank batch size: DDP averages over ranks,
                # so the update is the mean loss over the global batch (seeds per rank vary
                # in cooperative mode, where each rank trains the seeds it owns).
                loss = F.cross_entropy(logits, minibatch.labels, reduction="sum") / args.batch_size
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            correct += int((logits.argmax(1) == minibatch.labels).sum())
            total += minibatch.batch_size
    correct, total, rows_read = all_ranks_sum(correct, total, rows_read)
    return correct / max(total, 1), int(rows_read)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-nodes", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512, help="seeds per rank per step")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--independent", action="store_true", help="no cooperative minibatching")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--small", action="store_true", help="a tiny graph and run, for tests")
    args = parser.parse_args()
    args.cooperative = not args.independent
    if args.small:
        args.num_nodes, args.epochs, args.batch_size = 10_000, 4, 64
    if args.device == "cuda":
        args.device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(args.device)
    dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))

    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, seed=0)
    if rank == 0:
        mode = "cooperative" if args.cooperative else "independent"
        print(f"{ds}\n{world_size} ranks, {mode} minibatches of {args.batch_size} seeds per rank")
    feature_dim = ds.features["feat"].row_shape[0]
    torch.manual_seed(0)
    model = CooperativeGraphSAGE(feature_dim, 256, ds.num_classes).to(args.device)
    model = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    train = make_loader(ds, ds.train_set, args, shuffle=True)
    validation = make_loader(ds, ds.validation_set, args, shuffle=False)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        _, rows_read = run_epoch(model, train, args, optimizer, desc=f"epoch {epoch}")
        acc, _ = run_epoch(model, validation, args)
        if rank == 0:
            print(
                f"epoch {epoch}: validation accuracy {acc:.4f}, feature rows read (all ranks) {rows_read}, "
                f"{time.perf_counter() - start:.1f} s"
            )
    if rank == 0:
        print(f"GraphSAGE validation accuracy: {acc:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
