"""DGL GraphBolt's ``sample_neighbor`` on the graph saved by ``bench_neighbor_sampling.py``.

Needs an environment with DGL 2.1 (e.g. ``torch==2.1.2 torchdata==0.7.1 dgl==2.1.0
"numpy<2" pandas``), separate from graphpipe's. Times ``ItemSampler(...).sample_neighbor``
over the same seed batches as the graphpipe benchmark (``torch.randperm(num_nodes)``
under seed 0, cut into batches) and prints one JSON line per thread count::

    python benchmarks/bench_neighbor_sampling.py --save-graph /tmp/powerlaw
    python benchmarks/graphbolt_neighbor_sampling.py /tmp/powerlaw --threads 1 2
"""

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch
import dgl
import dgl.graphbolt as gb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graph_dir")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()

    indptr = torch.from_numpy(np.load(os.path.join(args.graph_dir, "indptr.npy"))).to(torch.int64)
    indices = torch.from_numpy(np.load(os.path.join(args.graph_dir, "indices.npy")))
    graph = gb.fused_csc_sampling_graph(indptr, indices)
    num_nodes = indptr.numel() - 1
    seeds = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(0))
    seeds = seeds[: args.batch_size * (args.batches + 2)].to(indices.dtype)
    for threads in args.threads:
        torch.set_num_threads(threads)
        items = gb.ItemSet(seeds, names="seed_nodes")
        pipe = gb.ItemSampler(items, batch_size=args.batch_size).sample_neighbor(graph, args.fanouts)
        batches = iter(pipe)
        next(batches)  # warm-up
        times = []
        for _ in range(args.batches):
            t0 = time.perf_counter()
            minibatch = next(batches)
            times.append((time.perf_counter() - t0) * 1e3)
        record = {
            "bench": "graphbolt_sample_neighbor_cpu",
            "dgl": dgl.__version__,
            "torch": torch.__version__,
            "num_nodes": num_nodes,
            "num_edges": indices.numel(),
            "batch_size": args.batch_size,
            "fanouts": args.fanouts,
            "threads": threads,
            "ms_per_batch": {"median": round(statistics.median(times), 2), "min": round(min(times), 2)},
            "input_nodes": minibatch.input_nodes.numel(),
        }
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
