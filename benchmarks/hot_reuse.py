"""Hot-vertex reuse (issue 33): work per batch, epoch time and accuracy against the hot ratio.

    python benchmarks/hot_reuse.py [--num-nodes 200000] [--epochs 4] [--ratios 0 0.05 0.1 0.2] [--counted 0.1] [--super-batch 2] [--seed 0] [--device cuda]

GraphSAGE (3 layers, 256 hidden, fanouts [15, 10, 5], batch 1024) on the built-in node
classification dataset, trained from the same initialisation for the same epochs with
``HotReuse`` at each hot ratio (0: no reuse), hot vertices by ``hotness_from_degree`` (one set
for the run, a share of all nodes), then at each ``--counted`` ratio with
``hotness="super_batch"`` (a set per super-batch by access counts, a share of the vertices it
reaches). Per run: sampled edges, input nodes and feature bytes per training batch, rows
reused per batch, seconds per epoch (wall, and CPU seconds of all threads; counted: with the
seconds per batch spent choosing the hot sets), and the validation accuracy after the last epoch (validation samples without
reuse). Prints one JSON line per run, then a table.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import graphpipe as gp  # noqa: E402
from node_classification import GraphSAGE  # noqa: E402

FANOUTS = [15, 10, 5]


def forward(model, minibatch, reuse=None):
    """GraphSAGE's forward with the bottom layer's hot rows put in (``reuse``)."""
    h = minibatch.node_features["feat"]
    for i, (layer, subgraph) in enumerate(zip(model.layers, minibatch.sampled_subgraphs)):
        h = layer(subgraph, h)
        if i == 0 and reuse is not None:
            h = reuse.insert(h, minibatch)
        if i < len(model.layers) - 1:
            h = F.dropout(F.relu(h), model.dropout, model.training)
    return h


def run(ds, ratio, args, hotness="degree"):
    torch.manual_seed(args.seed)
    model = GraphSAGE(ds.features["feat"].row_shape[0], 256, ds.num_classes).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=5e-4)
    reuse = None
    if ratio > 0:
        scores = gp.hotness_from_degree(ds.graph) if hotness == "degree" else hotness
        reuse = gp.HotReuse(model.layers[0], ds.features, "feat", scores, ratio, super_batch=args.super_batch)
    train = gp.DataLoader(
        gp.ItemSampler(ds.train_set, 1024, shuffle=True, seed=0)
        .sample_neighbor(ds.graph, FANOUTS, seed=0, hot_reuse=reuse).fetch_feature(ds.features, ["feat"]).copy_to(args.device)
    )
    validation = gp.DataLoader(
        gp.ItemSampler(ds.validation_set, 1024, seed=0).sample_neighbor(ds.graph, FANOUTS, seed=0)
        .fetch_feature(ds.features, ["feat"]).copy_to(args.device)
    )
    row_bytes = ds.features["feat"].row_shape[0] * ds.features["feat"].dtype.itemsize
    batches = edges = inputs = reused = 0
    seconds, cpu_seconds, counting = [], [], []
    for _ in range(args.epochs):
        model.train()
        start, cpu_start = time.perf_counter(), time.process_time()
        for mb in train:
            loss = F.cross_entropy(forward(model, mb, reuse), mb.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if reuse is not None:
                reuse.push(model.layers[0])
                reused += mb.reused.positions.numel()
            batches += 1
            edges += sum(sg.original_edge_ids.numel() for sg in mb.sampled_subgraphs)
            inputs += mb.input_nodes.numel()
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
        if reuse is not None and reuse.counted:
            counting.append(reuse.stats()["counting s/batch"])  # this epoch's (the loader resets the stats)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for mb in validation:
            correct += int((forward(model, mb).argmax(1) == mb.labels).sum())
            total += mb.batch_size
    return {
        "bench": "hot_reuse", "device": args.device, "hot_ratio": ratio, "hotness": hotness if ratio > 0 else "-",
        "super_batch": args.super_batch, "epochs": args.epochs,
        "edges/batch": round(edges / batches), "input_nodes/batch": round(inputs / batches),
        "feature_MB/batch": round(inputs * row_bytes / batches / 1e6, 2), "rows_reused/batch": round(reused / batches, 1),
        "hot_rows_computed/batch (last epoch)": reuse.stats()["hot rows computed/batch"] if reuse is not None else 0.0,
        "s/epoch": round(sorted(seconds)[len(seconds) // 2], 2), "validation_accuracy": round(correct / total, 4),
        "cpu_s/epoch": round(sorted(cpu_seconds)[len(cpu_seconds) // 2], 2),  # all threads: steadier on a shared machine
        **({"hot_vertices/super-batch (last epoch)": reuse.stats()["hot vertices/super-batch"],
            "counting_s/batch": round(sorted(counting)[len(counting) // 2], 4)} if counting else {}),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-nodes", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--ratios", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2])
    parser.add_argument("--counted", type=float, nargs="*", default=[0.1],
                        help="hot ratios also run with hotness='super_batch' (of the vertices each super-batch reaches)")
    parser.add_argument("--super-batch", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the model's initialisation and dropout draws")
    parser.add_argument("--device", default="cpu", help="where the model trains (the hot rows are computed on the CPU)")
    args = parser.parse_args()
    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, seed=0)
    results = []
    for ratio, hotness in [(r, "degree") for r in args.ratios] + [(r, "super_batch") for r in args.counted]:
        results.append(run(ds, ratio, args, hotness))
        print(json.dumps(results[-1]), flush=True)
    base = results[0]
    print("\n| hot ratio | edges/batch | input nodes/batch | feature MB/batch | rows reused/batch | hot rows computed/batch | s/epoch | CPU s/epoch | val. accuracy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        counted = f" counted (s/batch counting: {r['counting_s/batch']})" if r["hotness"] == "super_batch" else ""
        print(f"| {r['hot_ratio']:.0%}{counted} | {r['edges/batch']} ({r['edges/batch'] / base['edges/batch']:.2f}x) "
              f"| {r['input_nodes/batch']} ({r['input_nodes/batch'] / base['input_nodes/batch']:.2f}x) "
              f"| {r['feature_MB/batch']} | {r['rows_reused/batch']} | {r['hot_rows_computed/batch (last epoch)']} | {r['s/epoch']} "
              f"({base['s/epoch'] / r['s/epoch']:.2f}x faster) | {r['cpu_s/epoch']} | {r['validation_accuracy']:.4f} |")


if __name__ == "__main__":
    main()
