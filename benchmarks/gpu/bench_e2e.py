"""End-to-end it/s with features pinned on the host: CPU path vs GPU sampling + UVA fetch
(+ GPU cache at 10% and 30% of rows), and overlap efficiency.

    python benchmarks/gpu/bench_e2e.py [--log2-nodes 24] [--avg-degree 15] [--sampler NS|LABOR-0] [--smoke]

Graph: R-MAT with 2**log2_nodes nodes, 100-dim float32 features pinned in place; fanouts
[15, 10, 5], batch 1024; the consumer runs a 3-layer GraphSAGE-mean forward and backward
(``--hidden``, 256). For each configuration it reports the loader's it/s, the rate of every stage
run alone (sampling, fetching, training on prepared batches) and the overlap efficiency
(e2e it/s divided by the slowest stage's rate; target >= 0.9).
"""

import argparse
import time

import numpy as np
import torch

from common import emit, power_law_graph, require_cuda, sync
import graphpipe as gp

FANOUTS = [15, 10, 5]


class SAGEMean(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(2 * a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, mb, x):
        for i, (layer, sg) in enumerate(zip(self.layers, mb.sampled_subgraphs)):
            src, dst = sg.edge_index()
            agg = torch.zeros(sg.num_dst_nodes, x.shape[1], device=x.device).index_add_(0, dst, x[src])
            deg = torch.bincount(dst, minlength=sg.num_dst_nodes).clamp(min=1)[:, None]
            x = layer(torch.cat([x[: sg.num_dst_nodes], agg / deg], 1))
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


def train_step(model, opt, mb):
    out = model(mb, mb.node_features["feat"])
    loss = torch.nn.functional.cross_entropy(out, mb.labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def rate(iterable, n, step=lambda x: None):
    """Items per second of consuming ``n`` items of ``iterable`` (after 3 warm-up items)."""
    it = iter(iterable)
    for _ in range(3):
        step(next(it))
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step(next(it))
    sync()
    return n / (time.perf_counter() - t0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2-nodes", type=int, default=24)
    parser.add_argument("--avg-degree", type=int, default=15)
    parser.add_argument("--sampler", default="NS", choices=["NS", "LABOR-0"])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--smoke", action="store_true", help="tiny run; on CPU tensors without a GPU")
    args = parser.parse_args()
    if args.smoke:
        args.log2_nodes, args.batches, args.hidden = 13, 3, 8
    device = require_cuda(allow_cpu=args.smoke)
    num_nodes = 1 << args.log2_nodes
    graph = power_law_graph(num_nodes, num_nodes * args.avg_degree)
    table = np.full((num_nodes, 100), 0.5, dtype=np.float32)
    features = gp.FeatureStore({"feat": table}).pin_memory_()
    labels = torch.randint(0, 10, (num_nodes,))
    items = gp.ItemSet((torch.arange(num_nodes), labels), names=("seeds", "labels"))
    model = SAGEMean([100, args.hidden, args.hidden, 10]).to(device)
    opt = torch.optim.Adam(model.parameters())

    def sampled(seeds, g):
        if args.sampler == "NS":
            return seeds.sample_neighbor(g, FANOUTS, seed=0)
        return seeds.sample_layer_neighbor(g, FANOUTS, seed=0)

    def seeds_pipe():
        return gp.ItemSampler(items, 1024, shuffle=True, seed=0)

    graph_pinned = graph.pin_memory_()  # in place: the CPU sampler reads the same arrays
    configs = {
        "cpu sampling + cpu fetch + copy": lambda f: sampled(seeds_pipe(), graph).fetch_feature(f, ["feat"]).copy_to(device),
        "gpu sampling (pinned graph) + uva fetch": lambda f: sampled(seeds_pipe().copy_to(device), graph_pinned).fetch_feature(f, ["feat"]),
    }
    stores = {"no cache": features}
    for fraction in (0.1, 0.3):
        for policy in ("static", "clock"):
            stores[f"{policy} cache {fraction:.0%}"] = gp.gpu_cached_feature(
                features, "feat", max_bytes=int(fraction * num_nodes) * 400, policy=policy,
                hotness=gp.hotness_from_degree(graph) if policy == "static" else None,
            )
    for config, build in configs.items():
        for store_name, store in stores.items():
            if config.startswith("cpu") and store_name != "no cache":
                continue
            pipe = build(store)
            step = lambda mb: train_step(model, opt, mb)  # noqa: E731
            cache = store["feat"]
            if isinstance(cache, gp.GPUCachedFeature):
                cache.reset_stats()
            e2e = rate(gp.DataLoader(pipe), args.batches, step)
            hit_rate = cache.hit_rate if isinstance(cache, gp.GPUCachedFeature) else None
            fetcher = pipe if config.startswith("gpu") else pipe.source
            sample_alone = rate(fetcher.source, args.batches)
            samples = [mb for _, mb in zip(range(args.batches + 3), fetcher.source)]
            fetch_alone = rate((fetcher.fetch(mb) for mb in samples), args.batches)
            prepared = [mb for _, mb in zip(range(args.batches + 3), gp.DataLoader(pipe))]
            train_alone = rate(prepared, args.batches, step)
            record = {"bench": "e2e", "config": config, "store": store_name, "sampler": args.sampler,
                      "nodes": num_nodes, "edges": graph.total_num_edges, "e2e it/s": round(e2e, 2),
                      "sample it/s": round(sample_alone, 2), "fetch it/s": round(fetch_alone, 2),
                      "train it/s": round(train_alone, 2),
                      "overlap efficiency": round(e2e / min(sample_alone, fetch_alone, train_alone), 3)}
            if hit_rate is not None:
                record["hit_rate"] = round(hit_rate, 4)
            emit(record)


if __name__ == "__main__":
    main()
