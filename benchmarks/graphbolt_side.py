"""The DGL GraphBolt 2.1 side of compare_graphbolt.py; runs in the GraphBolt venv.

compare_graphbolt.py starts it as a subprocess of that venv's python; by hand::

    venv-dgl/bin/python benchmarks/graphbolt_side.py --data DIR --fanouts 15 10 5

``DIR`` holds ``indptr.npy``, ``indices.npy`` (the CSC graph), ``feat.npy`` (``[num_nodes,
dim]`` float32), ``seeds.npy`` (the seed ids in batch order) and ``pairs.npy`` (``[N, 2]``
node pairs in batch order, for link prediction). The graph becomes
``gb.fused_csc_sampling_graph(indptr, indices)``, the features a ``gb.TorchBasedFeature``
in RAM. Batches are cut from ``seeds.npy`` / ``pairs.npy`` in order (``shuffle=False``),
so batch ``i`` has the same seeds as graphpipe's batch ``i``. Link prediction runs
``sample_uniform_negative(graph, 1)``, ``sample_neighbor`` and ``gb.exclude_seed_edges``
(a transform after sampling, as GraphBolt's examples do). ``--cases hetero`` reads
``DIR/hetero/``: ``indptr``, ``indices``, ``node_type_offset``, ``type_per_edge``
(``gb.fused_csc_sampling_graph`` with the type maps of ``types.json``), ``feat_<node
type>.npy`` (a ``gb.TorchBasedFeature`` per node type) and ``seeds.npy`` (paper ids in
batch order, a ``gb.ItemSetDict`` of papers); every layer's fanout is a tensor with one
entry per edge type. ``--cases temporal`` also reads ``node_timestamp.npy`` (``[num_nodes]``
int64), ``edge_timestamp.npy`` (``[num_edges]`` int64, by CSC position) and
``seed_timestamp.npy`` (``[len(seeds)]`` int64, the time of each seed): the graph gets
them as the node and edge attribute ``"timestamp"`` and int64 indices (see ``_temporal``),
the seeds are ``gb.ItemSet((seeds, seed_timestamp), names=("seeds", "timestamp"))`` and
``temporal_sample_neighbor`` filters with both timestamps. Prints one JSON object on the
last line.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import warnings
from functools import partial

import numpy as np
import torch

import dgl.graphbolt as gb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import batch_shape, layer_shape, measure_rate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="directory with indptr/indices/feat/seeds .npy files")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (GraphBolt's kernels)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2], help="gb.DataLoader num_workers to try")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--cases", nargs="+", choices=["node", "lp", "hetero", "temporal"],
                        default=["node", "lp"])
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)

    def load(name):
        return torch.from_numpy(np.load(os.path.join(args.data, f"{name}.npy")))

    window = dict(warmup=args.warmup, windows=args.windows, window=args.window)
    results = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if "hetero" in args.cases:
        results.update(_hetero(os.path.join(args.data, "hetero"), args, window))
    if not {"node", "lp", "temporal"} & set(args.cases):
        print(json.dumps(results))
        return

    features = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(load("feat"))})
    if "temporal" in args.cases:
        results.update(_temporal(load, features, args, window))
    if not {"node", "lp"} & set(args.cases):
        print(json.dumps(results))
        return

    graph = gb.fused_csc_sampling_graph(load("indptr"), load("indices"))
    seeds = load("seeds").to(graph.indices.dtype)  # GraphBolt wants seeds of the graph's index dtype
    item_set = gb.ItemSet(seeds, names="seed_nodes")  # GraphBolt 2.1's name for seeds

    def chain(method, fetch):
        pipe = gb.ItemSampler(item_set, args.batch_size, shuffle=False)
        pipe = getattr(pipe, method)(graph, args.fanouts)
        return pipe.fetch_feature(features, node_feature_keys=["feat"]) if fetch else pipe

    if "lp" in args.cases:
        pairs = gb.ItemSet(load("pairs").to(graph.indices.dtype), names="seeds")
        results.update(_link_prediction(graph, features, pairs, args, window))
    if "node" not in args.cases:
        print(json.dumps(results))
        return
    for name, method in (("ns", "sample_neighbor"), ("labor0", "sample_layer_neighbor")):
        sampling = measure_rate(chain(method, fetch=False), inspect=batch_shape, **window)
        results[f"{name}_sampling"] = _summary(sampling)
        if name == "ns":
            results["ns_sample_fetch"] = _summary(measure_rate(chain(method, fetch=True), **window))
        for workers in args.workers:
            loader = gb.DataLoader(chain(method, fetch=True), num_workers=workers)
            results[f"{name}_loader_w{workers}"] = _summary(measure_rate(loader, **window))
            del loader
            gc.collect()
        print(f"graphbolt: {name} done", file=sys.stderr, flush=True)
    print(json.dumps(results))


def _link_prediction(graph, features, pairs, args, window):
    """Pairs -> one uniform negative each -> neighbor sampling -> seed edges excluded
    (-> features): sampling only, and ``gb.DataLoader`` end to end per ``num_workers``."""

    def chain(fetch):
        pipe = gb.ItemSampler(pairs, args.batch_size, shuffle=False).sample_uniform_negative(graph, 1)
        pipe = pipe.sample_neighbor(graph, args.fanouts).transform(partial(gb.exclude_seed_edges))
        return pipe.fetch_feature(features, node_feature_keys=["feat"]) if fetch else pipe

    results = {"lp_sampling": _summary(measure_rate(chain(fetch=False), inspect=batch_shape, **window))}
    for workers in args.workers:
        loader = gb.DataLoader(chain(fetch=True), num_workers=workers)
        results[f"lp_loader_w{workers}"] = _summary(measure_rate(loader, **window))
        del loader
        gc.collect()
    print("graphbolt: lp done", file=sys.stderr, flush=True)
    return results


def _temporal(load, features, args, window):
    """Temporal NS from the seeds at their times, neighbours and edges strictly earlier than
    the root seed (node and edge timestamps together): sampling only, and with features
    through ``gb.DataLoader`` per ``num_workers``."""
    # GraphBolt 2.1's fast path (a node with over 1000 neighbours, no probabilities) reads
    # the neighbour's id as int64 to look up its node time: with int32 indices it raises
    # "expected scalar type Long but found Int", so the graph gets int64 indices.
    graph = gb.fused_csc_sampling_graph(
        load("indptr"), load("indices").to(torch.int64),
        node_attributes={"timestamp": load("node_timestamp")}, edge_attributes={"timestamp": load("edge_timestamp")},
    )
    item_set = gb.ItemSet((load("seeds"), load("seed_timestamp")), names=("seeds", "timestamp"))

    def chain(fetch):
        pipe = gb.ItemSampler(item_set, args.batch_size, shuffle=False).temporal_sample_neighbor(
            graph, args.fanouts, node_timestamp_attr_name="timestamp", edge_timestamp_attr_name="timestamp"
        )
        return pipe.fetch_feature(features, node_feature_keys=["feat"]) if fetch else pipe

    results = {"temporal_ns_sampling": _summary(measure_rate(chain(fetch=False), inspect=layer_shape, **window))}
    for workers in args.workers:
        loader = gb.DataLoader(chain(fetch=True), num_workers=workers)
        results[f"temporal_ns_loader_w{workers}"] = _summary(measure_rate(loader, **window))
        del loader
        gc.collect()
    print("graphbolt: temporal done", file=sys.stderr, flush=True)
    return results


def _hetero(directory, args, window):
    """Typed NS and LABOR-0 sampling only, and NS with every node type's features through
    ``gb.DataLoader`` per ``num_workers``, on the saved ogbn-mag-like graph."""

    def load(name):
        return torch.from_numpy(np.load(os.path.join(directory, f"{name}.npy")))

    with open(os.path.join(directory, "types.json")) as f:
        types = json.load(f)
    graph = gb.fused_csc_sampling_graph(
        load("indptr"), load("indices"), node_type_offset=load("node_type_offset"),
        type_per_edge=load("type_per_edge"), node_type_to_id=types["node_type_to_id"],
        edge_type_to_id=types["edge_type_to_id"],
    )
    node_types = list(types["node_type_to_id"])
    features = gb.BasicFeatureStore(
        {("node", node_type, "feat"): gb.TorchBasedFeature(load(f"feat_{node_type}")) for node_type in node_types}
    )
    item_set = gb.ItemSetDict({"paper": gb.ItemSet(load("seeds").to(graph.indices.dtype), names="seed_nodes")})
    # One entry per edge type: a single-entry tensor would cap a node's neighbours over all
    # of its edge types together.
    fanouts = [torch.full((len(types["edge_type_to_id"]),), fanout, dtype=torch.int64) for fanout in args.fanouts]

    def chain(method, fetch):
        pipe = getattr(gb.ItemSampler(item_set, args.batch_size, shuffle=False), method)(graph, fanouts)
        return pipe.fetch_feature(features, node_feature_keys={t: ["feat"] for t in node_types}) if fetch else pipe

    results = {}
    for name, method in (("hetero_ns", "sample_neighbor"), ("hetero_labor0", "sample_layer_neighbor")):
        sampling = measure_rate(chain(method, fetch=False), inspect=batch_shape, **window)
        results[f"{name}_sampling"] = _summary(sampling)
    for workers in args.workers:
        loader = gb.DataLoader(chain("sample_neighbor", fetch=True), num_workers=workers)
        results[f"hetero_ns_loader_w{workers}"] = _summary(measure_rate(loader, **window))
        del loader
        gc.collect()
    print("graphbolt: hetero done", file=sys.stderr, flush=True)
    return results


def _summary(measured):
    """it/s and, when measured, median input nodes and sampled edges per batch."""
    out = {"it_per_s": measured["it_per_s"], "window_it_per_s": measured["window_it_per_s"]}
    if measured["stats"]:
        for key in measured["stats"][0]:
            out[key] = float(np.median([s[key] for s in measured["stats"]]))
    return out


if __name__ == "__main__":
    main()
