"""Per-batch wall time of a loader whose worker processes send PyG heterogeneous batches.

A synthetic ogbn-mag-like graph (20,000 papers, 64-dim features), NS fanouts [10, 10] in
PyG's layout, node features of every type, ``to_pyg()``: about 30 tensors a batch. Batches
of 16, 256 and 1024 papers, ``gp.DataLoader(pipe, num_workers=W)``, 3 epochs after a warm
one. Prints one JSON line per batch size. Compare two versions of graphpipe in turn, each run
a new process from its own checkout (the workers' fork server imports graphpipe from the
working directory)::

    for i in 1 2 3; do
        (cd /path/to/old && PYTHONPATH=$PWD /path/to/.venv/bin/python /path/to/worker_batches.py --workers 2)
        .venv/bin/python benchmarks/worker_batches.py --workers 2
    done
"""

import argparse
import json
import time

import graphpipe as gp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 256, 1024])
    args = parser.parse_args()
    ds = gp.datasets.synthetic_mag(num_papers=20_000, feature_dim=64, seed=0)
    keys = {t: [k for of, k in ds.features.node_keys if of == t] for t in ds.graph.node_types}
    for batch_size in args.batch_sizes:
        pipe = (
            gp.ItemSampler(ds.train_set, batch_size, shuffle=True, seed=0)
            .sample_neighbor(ds.graph, [10, 10], layout="pyg", seed=0)
            .fetch_feature(ds.features, keys)
            .transform(gp.MiniBatch.to_pyg)
        )
        loader = gp.DataLoader(pipe, num_workers=args.workers)
        for _ in loader:  # warm: workers started, kernels loaded
            pass
        batches, wall = 0, time.perf_counter()
        for _ in range(3):
            for _ in loader:
                batches += 1
        wall = time.perf_counter() - wall
        loader.close()
        print(json.dumps({"graphpipe": gp.__file__, "workers": args.workers, "batch_size": batch_size,
                          "batches": batches, "ms_per_batch": round(1e3 * wall / batches, 2)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
