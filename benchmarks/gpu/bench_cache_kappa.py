"""Feature-cache hit rate vs LABOR's batch_dependency κ (and vs neighbor sampling).

    python benchmarks/gpu/bench_cache_kappa.py [--nodes 2000000] [--edges 60000000] [--cache-fraction 0.1]

Consecutive LABOR batches with batch_dependency=κ share most of their variates, so they
sample overlapping vertex sets and a dynamic cache (CLOCK) hits more as κ grows
(GraphBolt reports a miss rate of 62% at κ=1 and 22% at κ=32). The cache logic is the
same on CPU tensors, so this runs without a GPU too (``--device cpu``; hit rates do not
depend on the device).
"""

import argparse

import torch

from common import emit, power_law_graph
import graphpipe as gp
from graphpipe.features.gpu_cache import GPUCachedFeature


def hit_rate(pipe, cache, warmup, batches):
    for i, mb in enumerate(pipe):
        if i == warmup:
            cache.reset_stats()
        cache.read(mb.input_nodes)
        if i + 1 == warmup + batches:
            break
    return cache.hit_rate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--edges", type=int, default=60_000_000)
    parser.add_argument("--cache-fraction", type=float, default=0.1)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--policy", default="clock", choices=["clock", "static"])
    args = parser.parse_args()
    graph = power_law_graph(args.nodes, args.edges)
    # A 1-dim feature: the hit rate depends on the ids only, and small rows keep this cheap.
    feature = gp.Feature(torch.zeros(args.nodes, 1))
    max_bytes = int(args.cache_fraction * args.nodes) * 4
    hotness = gp.hotness_from_degree(graph) if args.policy == "static" else None
    items = gp.ItemSet(torch.randperm(args.nodes, generator=torch.Generator().manual_seed(0))[: args.nodes // 10])
    fanouts = [15, 10, 5]
    runs = [("NS", None)] + [("LABOR-0", k) for k in (1, 2, 4, 8, 16, 32, 64)]
    for name, kappa in runs:
        seeds = gp.ItemSampler(items, 1024, shuffle=True, seed=0)
        if kappa is None:
            pipe = seeds.sample_neighbor(graph, fanouts, seed=0)
        else:
            pipe = seeds.sample_layer_neighbor(graph, fanouts, batch_dependency=kappa, seed=0)
        cache = GPUCachedFeature(feature, max_bytes, args.policy, hotness, device=args.device)
        rate = hit_rate(pipe, cache, warmup=max(8, kappa or 0), batches=args.batches)
        emit({"bench": "cache_vs_kappa", "sampler": name, "kappa": kappa, "policy": args.policy,
              "cache_fraction": args.cache_fraction, "hit_rate": round(rate, 4), "miss_rate": round(1 - rate, 4),
              "graph": f"rmat {args.nodes} nodes {args.edges} edges", "cache_device": args.device})


if __name__ == "__main__":
    main()
