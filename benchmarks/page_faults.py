"""Minor page faults and CPU time per batch of the NS and LABOR-0 chains, loader and plain.

    RETAIN=0 OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 .venv/bin/python benchmarks/page_faults.py
    RETAIN=1 ... (opts in to graphpipe._internal.allocator.retain_freed_memory() first)

Fault counts do not depend on the machine's load, unlike times: the numbers in RESULTS.md's
stage-protocol section come from this script on the 2M-node benchmark graph (``N`` nodes).
"""

import os
import resource
import time

import graphpipe as gp

WARMUP, MEASURED = 8, 30


def main() -> None:
    if os.environ.get("RETAIN") == "1":
        from graphpipe._internal.allocator import retain_freed_memory

        print("retain_freed_memory:", retain_freed_memory())
    data = gp.datasets.synthetic_node_classification(num_nodes=int(os.environ.get("N", "2000000")), avg_degree=34, seed=0)

    def chain(sampler: str):
        items = gp.ItemSampler(data.train_set, batch_size=1024, shuffle=True, seed=0)
        return getattr(items, sampler)(data.graph, [15, 10, 5], seed=0).fetch_feature(data.features, ["feat"])

    for name, sampler in (("NS", "sample_neighbor"), ("LABOR-0", "sample_layer_neighbor")):
        for mode in ("loader", "plain"):
            batches = iter(gp.DataLoader(chain(sampler)) if mode == "loader" else chain(sampler))
            for _ in range(WARMUP):
                next(batches)
            before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(MEASURED):
                next(batches)
            after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            print(
                f"{name} {mode}: {1e3 * wall / MEASURED:.1f} ms/batch, cpu {1e3 * cpu / MEASURED:.1f} ms/batch, "
                f"sys {1e3 * (after.ru_stime - before.ru_stime) / MEASURED:.1f} ms/batch, "
                f"minor faults/batch {(after.ru_minflt - before.ru_minflt) // MEASURED}",
                flush=True,
            )


if __name__ == "__main__":
    main()
