"""Data at scale: out-of-core CSC build and disk-backed features, at papers100M size.

Steps, each timed, with the process's peak resident memory after it:

1. write an R-MAT edge list ``[2, num_edges]`` int32/int64 ``.npy`` to ``--dir`` in chunks
   (``rmat_edges`` with one seed per chunk), and a ``[num_nodes, feature_dim]`` float32
   feature table, never holding either whole;
2. ``CSCGraph.from_coo_files`` (bounded memory: 16 bytes per node plus a chunk);
3. ``DiskBasedFeature`` behind a ``CPUCachedFeature`` of ``--cache-gb``: rows per second
   and hit rate for batches of Zipf-distributed ids (hot ids scattered over the table),
   reading the next batch while the current one is checked (``read_async``).

Defaults are ogbn-papers100M's shape (111M nodes, 1.6B edges, 128-dim features: ~13 GB
of edges, ~57 GB of features; the disk needs about twice that). The result is printed and
written as JSON with ``--json``. Run it on a machine with that much free disk::

    python benchmarks/scale.py --dir /scratch/scale --json scale.json
    python benchmarks/scale.py --dir /tmp/s --num-nodes 1000 --num-edges 5000 --feature-dim 4 --batches 3  # tiny
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

import numpy as np
import torch

import graphpipe as gp
from graphpipe.cpu_cache import CPUCachedFeature
from graphpipe.disk_feature import DiskBasedFeature


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def write_edges(path: str, num_nodes: int, num_edges: int, chunk: int) -> None:
    dtype = np.int32 if num_nodes <= 2**31 else np.int64
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(2, num_edges))
    for i, start in enumerate(range(0, num_edges, chunk)):
        n = min(chunk, num_edges - start)
        src, dst = gp.datasets.rmat_edges(num_nodes, n, seed=i)
        out[0, start : start + n] = src.numpy()
        out[1, start : start + n] = dst.numpy()
    out.flush()


def write_features(path: str, num_nodes: int, dim: int, chunk: int) -> None:
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(num_nodes, dim))
    for start in range(0, num_nodes, chunk):
        rows = np.arange(start, min(start + chunk, num_nodes), dtype=np.float32)
        out[start : start + rows.size] = rows[:, None]  # row v holds v: checkable after reading
    out.flush()


def zipf_ids(rng, num_rows: int, size: int, alpha: float, scatter: int) -> np.ndarray:
    """Ids with rank ``k`` drawn with probability ~ ``k**-alpha`` (numpy's Zipf, folded
    into the table), rank ``k`` stored at id ``(k * scatter) % num_rows``."""
    ranks = (rng.zipf(alpha, size) - 1) % num_rows
    return (ranks * scatter) % num_rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="scratch folder for the edge list, graph and features")
    parser.add_argument("--num-nodes", type=int, default=111_059_956)
    parser.add_argument("--num-edges", type=int, default=1_615_685_872)
    parser.add_argument("--feature-dim", type=int, default=128)
    parser.add_argument("--chunk-edges", type=int, default=1 << 24)
    parser.add_argument("--block-edges", type=int, default=1 << 28)
    parser.add_argument("--cache-gb", type=float, default=8.0)
    parser.add_argument("--batch-size", type=int, default=200_000, help="feature rows per batch (a sampled layer's inputs)")
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--zipf", type=float, default=1.2, help="Zipf exponent of the feature ids (> 1)")
    parser.add_argument("--io-threads", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the files (default: remove them at the end)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    edges, graph_file, features = (os.path.join(args.dir, f) for f in ("edges.npy", "graph.pt", "feat.npy"))
    results = {"args": vars(args)}

    def step(name, work):
        start = time.perf_counter()
        value = work()
        results[name] = {"seconds": round(time.perf_counter() - start, 3), "peak_rss_gb": round(peak_rss_gb(), 3)}
        print(f"{name}: {results[name]}", flush=True)
        return value

    try:
        step("write_edges", lambda: write_edges(edges, args.num_nodes, args.num_edges, args.chunk_edges))
        graph = step(
            "build_csc",
            lambda: gp.CSCGraph.from_coo_files(
                graph_file, edges, num_nodes=args.num_nodes, chunk_edges=args.chunk_edges, block_edges=args.block_edges
            ),
        )
        results["graph"] = repr(graph)
        # Spot check: the in-edges of a few nodes are those of the edge list.
        edge_list = np.load(edges, mmap_mode="r")
        for v in np.random.default_rng(0).integers(0, args.num_nodes, 3):
            lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
            ids = graph.map_edge_ids(torch.arange(lo, hi)).numpy()
            assert bool((edge_list[1][ids] == v).all()) and bool((edge_list[0][ids] == graph.indices[lo:hi].numpy()).all())
        del graph, edge_list

        step("write_features", lambda: write_features(features, args.num_nodes, args.feature_dim, 1 << 20))
        disk = DiskBasedFeature(features, num_threads=args.io_threads)
        cached = CPUCachedFeature(disk, int(args.cache_gb * 2**30))
        rng = np.random.default_rng(0)
        scatter = 2_654_435_761 % args.num_nodes or 1
        batches = [torch.from_numpy(zipf_ids(rng, args.num_nodes, args.batch_size, args.zipf, scatter)) for _ in range(args.batches)]

        def read_all():
            start = time.perf_counter()
            for batch in batches:
                rows = cached.read(batch)
                assert torch.equal(rows[:, 0], batch.to(torch.float32))
            return args.batches * args.batch_size / (time.perf_counter() - start)

        results["cached_rows_per_s"] = round(step("read_cached", read_all))
        results["cache"] = cached.cache_stats()
        uncached = batches[: max(1, args.batches // 5)]

        def read_disk():
            start = time.perf_counter()
            future = disk.read_async(uncached[0])
            for i in range(len(uncached)):
                rows = future.result()
                if i + 1 < len(uncached):
                    future = disk.read_async(uncached[i + 1])  # the next batch reads while this one is checked
                assert torch.equal(rows[:, 0], uncached[i].to(torch.float32))
            return len(uncached) * args.batch_size / (time.perf_counter() - start)

        results["disk_rows_per_s"] = round(step("read_disk", read_disk))
        results["direct_io"] = disk.uses_direct_io
        disk.close()
    finally:
        if not args.keep:
            for path in (edges, graph_file, features):
                if os.path.exists(path):
                    os.remove(path)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
