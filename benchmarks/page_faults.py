"""Minor page faults and CPU time per batch of the NS and LABOR-0 chains, loader and plain.

    RETAIN=0 OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 .venv/bin/python benchmarks/page_faults.py
    RETAIN=1 ... (opts in to graphpipe.allocator.retain_freed_memory() first)

Fault counts do not depend on the machine's load, unlike times: the numbers in RESULTS.md's
stage-protocol section come from this script on the 2M-node benchmark graph (``N``).
"""
import os, sys, time, resource
import graphpipe as gp
if os.environ.get("RETAIN") == "1":
    from graphpipe.allocator import retain_freed_memory
    print("retain:", retain_freed_memory())
import torch
t=time.time()
data = gp.datasets.synthetic_node_classification(num_nodes=int(os.environ.get("N", "2000000")), avg_degree=34, seed=0)
print("data", time.time()-t, data.graph.num_edges)
def pipe(kind):
    p = gp.ItemSampler(data.train_set, batch_size=1024, shuffle=True, seed=0)
    p = p.sample_neighbor(data.graph, [15,10,5], seed=0) if kind=="ns" else p.sample_layer_neighbor(data.graph, [15,10,5], seed=0)
    return p.fetch_feature(data.features, ["feat"])
for kind in ["ns", "labor"]:
    for mode in ["loader", "plain"]:
        loader = gp.DataLoader(pipe(kind)) if mode == "loader" else pipe(kind)
        it = iter(loader)
        for _ in range(8): next(it)
        r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
        n=30
        for _ in range(n): next(it)
        r1 = resource.getrusage(resource.RUSAGE_SELF); t1 = time.perf_counter()
        print(kind, mode, "ms/batch %.1f" % ((t1-t0)/n*1e3), "cpu ms/batch %.1f" % ((r1.ru_utime-r0.ru_utime+r1.ru_stime-r0.ru_stime)/n*1e3), "sys ms/batch %.1f" % ((r1.ru_stime-r0.ru_stime)/n*1e3), "minflt/batch", (r1.ru_minflt-r0.ru_minflt)//n, flush=True)
        del it, loader
