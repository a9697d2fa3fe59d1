"""GPU sampling it/s and edges/s for NS and LABOR-0 vs the CPU (numba) sampler, same graph.

    python benchmarks/gpu/bench_sampling.py [--nodes 2000000] [--edges 60000000] [--on cpu|gpu|both] [--smoke] [--profile]

Three layers (fanouts [15, 10, 5]), batch 1024, random seeds; each iteration samples all
layers and unique-and-compacts them, as ``SubgraphSampler`` does. GPU runs use the
graph in device memory and pinned in host memory (zero-copy reads).

``--profile`` then prints (to stderr) torch.profiler's table of 10 NS batches on the device
graph: the GPU's busy time against the wall time says whether launches and host syncs or
the kernels themselves bound the it/s.

The issue's target compares the GPU's it/s with the CPU sampler's on this project's 2-core
machine: ``--on cpu`` there measures that figure (``cpu_reference.jsonl`` holds it) and
``check_targets.py`` divides by it.
"""

import argparse
import time

import torch

from common import emit, power_law_graph, require_cuda, sync
from graphpipe.ops import derive_key, gpu_sampling, torch_random
from graphpipe.ops.labor import Variates, sample_labor
from graphpipe.ops.neighbor_sampling import sample_neighbors
from graphpipe.ops.unique_and_compact import unique_and_compact

FANOUTS = [15, 10, 5]


def sample_layers(layer_op, uc_op, seeds, key_of_layer):
    nodes, edges = seeds, 0
    for layer in reversed(range(len(FANOUTS))):
        sample = layer_op(nodes, FANOUTS[layer], key_of_layer(layer))
        nodes, _ = uc_op(nodes, sample.indices)
        edges += sample.indices.numel()
    return nodes.numel(), edges


def run(name, where, layer_op, uc_op, num_nodes, device, iters):
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, num_nodes, (1024,), generator=gen).unique().to(device) for _ in range(iters + 3)]
    for b in batches[:3]:
        sample_layers(layer_op, uc_op, b, lambda layer: derive_key(0, 0, layer))
    sync()
    t0, edges, inputs = time.perf_counter(), 0, 0
    for i, b in enumerate(batches[3:]):
        n, e = sample_layers(layer_op, uc_op, b, lambda layer: derive_key(0, i, layer))
        edges, inputs = edges + e, inputs + n
    sync()
    seconds = time.perf_counter() - t0
    emit({"bench": "sampling", "sampler": name, "graph_in": where, "it/s": round(iters / seconds, 1),
          "edges/s": round(edges / seconds), "input_nodes/batch": inputs // iters, "fanouts": FANOUTS})


def profile(g, num_nodes, device):
    """torch.profiler over 10 NS batches (graph in device memory), its table to stderr."""
    import sys

    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    gen = torch.Generator().manual_seed(1)
    seeds = [torch.randint(0, num_nodes, (1024,), generator=gen).unique().to(device) for _ in range(10)]

    def op(n, f, k):
        return gpu_sampling.sample_neighbors_torch(g.indptr, g.indices, n, f, key=k)

    sync()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for i, b in enumerate(seeds):
            sample_layers(op, gpu_sampling.unique_and_compact_torch, b, lambda layer, i=i: derive_key(1, i, layer))
        sync()
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    print(events.table(sort_by="self_device_time_total", row_limit=25), file=sys.stderr)
    gpu_us = sum(e.self_device_time_total for e in events)
    print(f"profile: 10 NS batches, wall {wall * 1e3:.1f} ms, GPU busy {gpu_us / 1e3:.1f} ms", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--edges", type=int, default=60_000_000)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--on", default="both", choices=["cpu", "gpu", "both"], help="which samplers to time")
    parser.add_argument("--smoke", action="store_true", help="tiny run; on CPU tensors without a GPU")
    parser.add_argument("--profile", action="store_true", help="then profile 10 NS batches on the device graph")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.edges, args.iters = 20_000, 200_000, 3
    device = require_cuda(allow_cpu=args.smoke or args.on == "cpu")
    graph = power_law_graph(args.nodes, args.edges)
    cpu = torch.device("cpu")

    if args.on != "gpu":
        run("NS", "cpu (numba)", lambda n, f, k: sample_neighbors(graph.indptr, graph.indices, n, f, key=k),
            unique_and_compact, args.nodes, cpu, args.iters)
        run("LABOR-0", "cpu (numba)", lambda n, f, k: sample_labor(graph.indptr, graph.indices, n, f, variates=Variates(k)),
            unique_and_compact, args.nodes, cpu, args.iters)
    if args.on == "cpu":
        return
    placements = [("device memory", graph.to(device))]
    if device.type == "cuda":
        placements.append(("pinned host (UVA)", graph.pin_memory_()))
    for where, g in placements:
        run("NS", where,
            lambda n, f, k, g=g: gpu_sampling.sample_neighbors_torch(g.indptr, g.indices, n, f, key=k),
            gpu_sampling.unique_and_compact_torch, args.nodes, device, args.iters)
        run("LABOR-0", where,
            lambda n, f, k, g=g: gpu_sampling.sample_labor_torch(
                g.indptr, g.indices, n, f, variates=lambda t: torch_random.uniform(k, t)),
            gpu_sampling.unique_and_compact_torch, args.nodes, device, args.iters)
    if args.profile:
        profile(placements[0][1], args.nodes, device)


if __name__ == "__main__":
    main()
