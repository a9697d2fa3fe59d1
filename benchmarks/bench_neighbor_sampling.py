"""CPU neighbor sampling throughput: ms per batch of ``NeighborSampler.sample_subgraphs``.

A synthetic power-law graph (default 2M nodes, 60M edges, int32 arrays): in-degrees
follow a Pareto law and sources are drawn with a skew, so a few hubs are everyone's
neighbours. Batches of random seeds go through the three-layer loop (sampling and
unique-and-compact per layer); the sampling op and unique-and-compact are also timed
alone. Prints one JSON line per measurement.

    python benchmarks/bench_neighbor_sampling.py --threads 1 2

``--save-graph DIR`` also writes the graph as ``DIR/indptr.npy`` and ``DIR/indices.npy``
for ``graphbolt_neighbor_sampling.py``, which times DGL GraphBolt on the same graph and
the same seed batches.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

import numba
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import graphpipe as gp  # noqa: E402
from graphpipe.ops import sample_neighbors, unique_and_compact  # noqa: E402


def power_law_csc(num_nodes: int, num_edges: int, seed: int = 0) -> gp.CSCGraph:
    """In-degrees ~ Pareto(alpha=1.5) scaled to ``num_edges``; sources ~ ``num_nodes * u**3``
    (then relabelled at random), so source popularity is skewed too."""
    rng = np.random.default_rng(seed)
    raw = rng.pareto(1.5, num_nodes) + 1.0
    degrees = np.floor(raw * (num_edges / raw.sum())).astype(np.int64)
    degrees += np.bincount(rng.integers(0, num_nodes, num_edges - int(degrees.sum())), minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(degrees, out=indptr[1:])
    relabel = rng.permutation(num_nodes).astype(np.int32)
    indices = relabel[(num_nodes * rng.random(num_edges, dtype=np.float32) ** 3).astype(np.int64).clip(0, num_nodes - 1)]
    return gp.CSCGraph(torch.from_numpy(indptr.astype(np.int32)), torch.from_numpy(indices))


def timings_ms(fn, iters: int) -> dict:
    """Wall-clock median and minimum, and the median process CPU time, in ms. On a shared
    machine the minimum and, with one thread, the CPU time are the steadier numbers."""
    wall, cpu = [], []
    for _ in range(iters):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - w) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
    return {"median": round(statistics.median(wall), 2), "min": round(min(wall), 2), "cpu": round(statistics.median(cpu), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--edges", type=int, default=60_000_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--threads", type=int, nargs="+", default=[numba.config.NUMBA_NUM_THREADS])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--weighted", action="store_true", help="sample by a random float32 edge weight")
    parser.add_argument("--save-graph", metavar="DIR", help="write indptr.npy and indices.npy to DIR")
    args = parser.parse_args()

    t0 = time.perf_counter()
    graph = power_law_csc(args.nodes, args.edges)
    print(f"# graph {graph} built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if args.save_graph:
        os.makedirs(args.save_graph, exist_ok=True)
        np.save(os.path.join(args.save_graph, "indptr.npy"), graph.indptr.numpy())
        np.save(os.path.join(args.save_graph, "indices.npy"), graph.indices.numpy())
    seeds = torch.randperm(args.nodes, generator=torch.Generator().manual_seed(0))
    batches = [seeds[i * args.batch_size : (i + 1) * args.batch_size] for i in range(args.batches)]
    if args.weighted:
        weight = torch.rand(args.edges, generator=torch.Generator().manual_seed(1))
        graph = dataclasses.replace(graph, edge_attributes={**graph.edge_attributes, "weight": weight})
    sampler = gp.NeighborSampler([], graph, args.fanouts, weights="weight" if args.weighted else None, seed=0)
    probs = sampler.probs

    for threads in args.threads:
        numba.set_num_threads(threads)
        # A warm-up pass (it compiles the kernels the first time); its layer-0 inputs are
        # kept for the op timings.
        mb = sampler.sample_subgraphs(gp.MiniBatch(seeds=batches[0]))
        layer0 = mb.sampled_subgraphs[0]
        dst0 = layer0.original_column_node_ids
        src0 = layer0.original_row_node_ids[layer0.sampled_csc.indices]
        it = iter(range(10**9))
        full = timings_ms(
            lambda: sampler.sample_subgraphs(gp.MiniBatch(seeds=batches[next(it) % len(batches)], batch_index=next(it))),
            args.batches,
        )
        sample0 = timings_ms(
            lambda: sample_neighbors(graph.indptr, graph.indices, dst0, args.fanouts[0], key=12345, probs=probs),
            args.batches,
        )
        unique0 = timings_ms(lambda: unique_and_compact(dst0, src0), args.batches)
        record = {
            "bench": "neighbor_sampling_cpu",
            "weighted": args.weighted,
            "nodes": args.nodes,
            "edges": args.edges,
            "batch_size": args.batch_size,
            "fanouts": args.fanouts,
            "threads": threads,
            "ms_per_batch": full,
            "layer0_sample_ms": sample0,
            "layer0_unique_and_compact_ms": unique0,
            "layer0_dst": dst0.numel(),
            "layer0_edges": src0.numel(),
            "input_nodes": mb.input_nodes.numel(),
        }
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
