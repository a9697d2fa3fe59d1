"""Cooperative vs independent minibatching: work and traffic per global batch, P = 2, 4, 8.

Simulates P ranks in one process by counting ids (no timing): for each global batch of
``P * batch_size`` training seeds,

* independent: rank ``r`` samples its ``batch_size`` seeds alone (as with a
  DistributedItemSampler and ``cooperative=False``) and reads the features of all its
  input nodes;
* cooperative: the ranks sample the global batch together as
  :mod:`graphpipe.distributed.cooperative` does (each frontier vertex sampled by its
  owner, source ids sent to their owners, deduplicated there), owners read each input
  vertex's features once and send rows to the ranks that need them.

Per global batch it reports the vertices whose neighbourhoods were sampled (all layers,
all ranks), the feature rows read from the feature store, the feature bytes read, the
bytes of feature rows sent rank to rank, and the ids sent during sampling. Two
ownerships: the hash partition (default) and a community partition (the synthetic
graph's planted communities, ``label % P``: a stand-in for a METIS partition).
Sampling uses the library's own kernels (same vertex-keyed variates), so the
cooperative union equals the single-process sample of the global batch.

    python benchmarks/cooperative.py                       # 200k-node synthetic graph
    python benchmarks/cooperative.py --num-nodes 20000 --batches 2   # quick
"""

from __future__ import annotations

import argparse
import time
from typing import Dict, List

import torch

import graphpipe as gp
from graphpipe.distributed import Partition
from graphpipe.ops import derive_key, sample_neighbors, unique_and_compact


def sample_layer(graph, nodes, fanout, key):
    return sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=key)


def independent(graph, seeds_per_rank: List[torch.Tensor], fanouts, keys) -> Dict[str, int]:
    sampled = inputs = 0
    for seeds in seeds_per_rank:
        nodes = seeds
        for layer in reversed(range(len(fanouts))):
            sampled += nodes.numel()
            sample = sample_layer(graph, nodes, fanouts[layer], keys[layer])
            nodes, _ = unique_and_compact(nodes, sample.indices)
        inputs += nodes.numel()
    return {"sampled": sampled, "rows_read": inputs, "rows_sent": 0, "ids_sent": 0}


def cooperative(graph, seeds: torch.Tensor, partition: Partition, fanouts, keys) -> Dict[str, int]:
    parts = partition.num_parts
    owner = partition.owner(seeds)
    owned = [seeds[owner == r] for r in range(parts)]
    sampled = ids_sent = 0
    for layer in reversed(range(len(fanouts))):
        sources = []
        for r in range(parts):
            sampled += owned[r].numel()
            sample = sample_layer(graph, owned[r], fanouts[layer], keys[layer])
            src, _ = unique_and_compact(owned[r], sample.indices)
            src_owner = partition.owner(src)
            ids_sent += int((src_owner != r).sum())
            sources.append((src, src_owner))
        # Owners deduplicate the ids they receive; their own destinations come first.
        owned = [
            unique_and_compact(owned[r], torch.cat([src[o == r] for src, o in sources]))[0] for r in range(parts)
        ]
    rows_read = sum(nodes.numel() for nodes in owned)
    # Rows of the input layer sent to non-owners: exactly the ids sent in the last exchange.
    rows_sent = sum(int((o != r).sum()) for r, (_, o) in enumerate(sources))
    return {"sampled": sampled, "rows_read": rows_read, "rows_sent": rows_sent, "ids_sent": ids_sent}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-nodes", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=1024, help="seeds per rank")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--parts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--batches", type=int, default=4, help="global batches averaged")
    args = parser.parse_args()

    start = time.perf_counter()
    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, seed=0)
    train = ds.train_set.field("seeds")
    row_bytes = ds.features["feat"].read(torch.zeros(1, dtype=torch.int64)).element_size() * ds.features["feat"].row_shape[0]
    print(f"{ds} ({time.perf_counter() - start:.1f} s); fanouts {args.fanouts}, {args.batch_size} seeds per rank, "
          f"feature row {row_bytes} B, mean over {args.batches} global batches")  # fmt: skip
    print()
    print("| P | partition | sampled vertices indep. / coop. (x) | feature rows read indep. / coop. (x) "
          "| feature MB read indep. / coop. | feature MB sent rank to rank (coop.) | ids sent (coop.) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for parts in args.parts:
        global_size = parts * args.batch_size
        partitions = {"hash": Partition(parts), "community": Partition(parts, ds.labels % parts)}
        totals = {name: {} for name in ("independent", *partitions)}
        if global_size > train.numel():
            print(f"| {parts} | - | skipped: {global_size} seeds per global batch, {train.numel()} training nodes |")
            continue
        num_batches = args.batches
        for b in range(num_batches):
            # Each global batch: distinct training nodes, drawn afresh (as one epoch's batch).
            order = torch.randperm(train.numel(), generator=torch.Generator().manual_seed(1000 * parts + b))
            seeds = train[order[:global_size]]
            keys = [derive_key(0, b, layer) for layer in range(len(args.fanouts))]
            runs = {"independent": independent(ds.graph, list(seeds.split(args.batch_size)), args.fanouts, keys)}
            for name, partition in partitions.items():
                runs[name] = cooperative(ds.graph, seeds, partition, args.fanouts, keys)
            for name, counts in runs.items():
                for k, v in counts.items():
                    totals[name][k] = totals[name].get(k, 0) + v / num_batches
        ind = totals["independent"]
        for name in partitions:
            coop = totals[name]
            mb = 1e-6 * row_bytes
            print(
                f"| {parts} | {name} | {ind['sampled']:,.0f} / {coop['sampled']:,.0f} ({ind['sampled'] / coop['sampled']:.2f}x) "
                f"| {ind['rows_read']:,.0f} / {coop['rows_read']:,.0f} ({ind['rows_read'] / coop['rows_read']:.2f}x) "
                f"| {ind['rows_read'] * mb:.1f} / {coop['rows_read'] * mb:.1f} | {coop['rows_sent'] * mb:.1f} "
                f"| {coop['ids_sent']:,.0f} |"
            )


if __name__ == "__main__":
    main()
