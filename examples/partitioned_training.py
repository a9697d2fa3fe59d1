"""Cooperative GraphSAGE training where each process holds only its part of the dataset.

The synthetic dataset is split once into one part per rank (``graphpipe.distributed.
partition``: the vertices a rank owns, their in-edges and feature rows); every rank then
maps only its own part (``load_partition``: its graph, rows and items) and samples and
fetches cooperatively:
owners sample their vertices' in-edges and read their rows, and the ranks exchange ids
and rows with all-to-all (see examples/multiprocess_node_classification.py).

    # one machine: rank 0 partitions into --parts if it holds no partition for this many ranks
    .venv/bin/torchrun --nproc-per-node=2 examples/partitioned_training.py --parts /tmp/parts
    .venv/bin/torchrun --nproc-per-node=2 examples/partitioned_training.py --parts /tmp/parts-small --small  # seconds
    # several machines: partition first, copy manifest.json, owners.npy and part-<r>/ to
    # the machine of rank r, then on each machine (node rank 0 and 1):
    .venv/bin/python examples/partitioned_training.py --parts /data/parts --partition-only --num-parts 4 --method metis
    .venv/bin/torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=HOST:29400 \\
        examples/partitioned_training.py --parts /data/parts
"""

import argparse
import json
import os
import sys
import time

# Idle OpenMP threads must not spin on few cores (see node_classification.py); torch reads these at import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import graphpipe as gp
from graphpipe.distributed import load_partition, partition
from multiprocess_node_classification import CooperativeGraphSAGE, run_epoch


def partition_synthetic(args, num_parts: int) -> None:
    """Write the synthetic dataset in ``num_parts`` parts into ``args.parts``."""
    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, seed=0)
    splits = {"train": ds.train_set, "validation": ds.validation_set}
    start = time.perf_counter()
    manifest = partition(ds.graph, ds.features, splits, num_parts, args.parts, method=args.method)
    print(
        f"{ds}\npartitioned into {num_parts} parts ({args.method}) in {time.perf_counter() - start:.1f} s: "
        f"{manifest['cut_edges'] / max(manifest['num_edges'], 1):.3f} of the edges cross parts"
    )


def has_partition(directory: str, num_parts: int, args) -> bool:
    """Whether ``directory`` holds ``num_parts`` parts of the graph ``args`` ask for; one of
    another graph (other --num-nodes, --small or --method) is refused, not trained on."""
    try:
        load_partition(directory, 0, num_parts=num_parts, validate=False)
    except (FileNotFoundError, ValueError):
        return False
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    if (manifest["num_nodes"], manifest["method"]) != (args.num_nodes, args.method):
        raise SystemExit(
            f"{directory} holds a partition of {manifest['num_nodes']} nodes by {manifest['method']}, not of "
            f"{args.num_nodes} by {args.method}: pass another --parts directory"
        )
    return True


def make_loader(part, split, args, shuffle):
    # Each rank holds only its items; all ranks agree on the global batches.
    source = gp.DistributedItemSampler.from_part(part, split, args.batch_size, shuffle=shuffle, seed=0)
    pipe = source.sample_neighbor(part.graph, [15, 10, 5], seed=0, cooperative=True)
    return gp.DataLoader(pipe.fetch_feature(part.features, ["feat"], cooperative=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", required=True, help="directory of the partitioned dataset")
    parser.add_argument("--method", default="hash", choices=["hash", "metis"])
    parser.add_argument("--partition-only", action="store_true", help="partition (no torchrun), then exit")
    parser.add_argument("--num-parts", type=int, help="with --partition-only: the number of ranks")
    parser.add_argument("--num-nodes", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512, help="seeds per rank per step")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--small", action="store_true", help="a tiny graph and run, for tests")
    args = parser.parse_args()
    args.cooperative, args.device = True, "cpu"
    if args.small:
        args.num_nodes, args.epochs, args.batch_size = 10_000, 4, 64
    if args.partition_only:
        if args.num_parts is None:
            parser.error("--partition-only needs --num-parts")
        partition_synthetic(args, args.num_parts)
        return
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    if rank == 0 and not has_partition(args.parts, world_size, args):
        os.makedirs(args.parts, exist_ok=True)
        partition_synthetic(args, world_size)
    dist.barrier()
    part = load_partition(args.parts, rank, num_parts=world_size)
    # One write per line: with an unbuffered stdout, print() writes the text and its newline
    # separately, and the ranks' lines could interleave in the shared pipe.
    sys.stdout.write(f"rank {rank}: {part.nodes.numel()} vertices, {part.graph.total_num_edges} in-edges\n")
    sys.stdout.flush()
    labels = [s.field("labels") for s in part.item_sets.values()]
    num_classes = torch.tensor(max((int(x.max()) for x in labels if x.numel()), default=-1) + 1)
    dist.all_reduce(num_classes, op=dist.ReduceOp.MAX)  # over every rank's items
    num_classes = int(num_classes)
    torch.manual_seed(0)
    model = DistributedDataParallel(CooperativeGraphSAGE(part.features["feat"].row_shape[0], 256, num_classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    train = make_loader(part, "train", args, shuffle=True)
    validation = make_loader(part, "validation", args, shuffle=False)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        _, rows_read = run_epoch(model, train, args, optimizer, desc=f"epoch {epoch}")
        acc, _ = run_epoch(model, validation, args)
        if rank == 0:
            print(f"epoch {epoch}: validation accuracy {acc:.4f}, feature rows read (all ranks) {rows_read}, "
                  f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    if rank == 0:
        print(f"GraphSAGE validation accuracy: {acc:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
