"""Per-batch Python time of the default loader, where kernels cost little.

A 20,000-node synthetic graph (4 in-edges per node, 8-dim features), NS fanouts [2, 2],
batches of 32 of all its nodes (625 a epoch): `gp.DataLoader(pipe)` with its default placement, 3 epochs after a
warm one. Prints one JSON line: wall and process CPU microseconds per batch. Compare two
versions of graphpipe in turn, each run a new process::

    for i in 1 2 3 4 5; do
        PYTHONPATH=/path/to/old .venv/bin/python benchmarks/loader_overhead.py
        .venv/bin/python benchmarks/loader_overhead.py
    done
"""

import json
import time

import torch

import graphpipe as gp


def main() -> None:
    ds = gp.datasets.synthetic_node_classification(num_nodes=20_000, avg_degree=4, feature_dim=8, seed=0)
    pipe = (
        gp.ItemSampler(gp.ItemSet(torch.arange(ds.graph.total_num_nodes), names="seeds"), 32, shuffle=True, seed=0)
        .sample_neighbor(ds.graph, [2, 2], seed=0)
        .fetch_feature(ds.features, ["feat"])
    )
    loader = gp.DataLoader(pipe)
    for _ in loader:  # warm: kernels compiled, threads started once
        pass
    batches, wall, cpu = 0, time.perf_counter(), time.process_time()
    for _ in range(3):
        for _ in loader:
            batches += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"graphpipe": gp.__file__, "batches": batches, "wall_us": 1e6 * wall / batches,
                      "cpu_us": 1e6 * cpu / batches}))


if __name__ == "__main__":
    main()
