"""graphpipe vs DGL GraphBolt 2.1 on CPU, side by side on one generated graph, in one run.

    python -m venv venv-dgl && venv-dgl/bin/pip install torch==2.2.1 torchdata==0.7.1 dgl==2.1.0 \\
        "numpy<2" pandas pydantic pyyaml "setuptools<70"
    .venv/bin/python benchmarks/compare_graphbolt.py --graphbolt-python venv-dgl/bin/python

The script (in graphpipe's venv) generates one R-MAT power-law graph with
``graphpipe.datasets.synthetic_node_classification`` (default 2M nodes, ~60M directed
edges, int32 indptr/indices, 100-dim float32 features), saves it as .npy files in a
temporary directory together with the seed ids in batch order (a random permutation of
the non-isolated nodes), measures graphpipe in this process, then runs
``benchmarks/graphbolt_side.py`` under the GraphBolt venv's python on the same files.
Both sides read the same seeds in the same order, so batch ``i`` has the same seeds
on both sides, and use the same number of threads: ``NUMBA_NUM_THREADS`` (default: all
cores) numba and torch threads here, as many torch threads there.

Measurements (fanouts [15, 10, 5], batch 1024 by default):

* sampling only (ItemSampler -> sampler, iterated directly): it/s, sampled edges/s,
  input nodes per batch; neighbor sampling, LABOR-0, LABOR-* (graphpipe only: GraphBolt
  2.1 has LABOR-0 only);
* sample + fetch, the plain chain iterated directly;
* end-to-end loaders: ``gp.DataLoader(pipe)`` (default transforms) and
  ``gp.DataLoader(pipe, transforms=[])``; GraphBolt's ``gb.DataLoader`` at
  ``num_workers`` 0, 1, 2, its best counted;
* overlap efficiency: graphpipe's end-to-end it/s divided by the rate of its slowest
  stage run alone (sampling alone, or fetching alone on already sampled batches); next to
  it, the ceiling the cores put on it: each stage alone costs some core-seconds per batch
  (this process's CPU time, every thread), and stages that share the cores can together
  run at most ``cores / (sampling + fetch core-seconds per batch)`` batches per second;
* LABOR batch dependency: for LABOR-0 with kappa in 1, 4, 32, 256, input nodes per batch
  and the fraction of a batch's input nodes that were input nodes of the previous batch;
* link prediction (``--cases lp``): batches of ``--batch-size`` node pairs (random edges of
  the graph, the same pairs in the same order on both sides, saved as ``pairs.npy``), one
  uniform negative per pair, neighbor sampling from the pairs' endpoints with the seed
  edges excluded (graphpipe: ``sample_neighbor(..., exclude_seed_edges=True)``, skipped
  inside the kernel; GraphBolt: ``transform(gb.exclude_seed_edges)`` after
  ``sample_neighbor``): sampling only, and end to end with features (``gp.DataLoader``
  against ``gb.DataLoader`` at its best ``num_workers``).

* heterogeneous node classification (``--cases hetero``): ``graphpipe.datasets.synthetic_mag``
  (ogbn-mag's node and edge types and proportions; ``--hetero-papers``, default 2M papers:
  5.3M nodes, 113M edges in 7 edge types, 128-dim float32 features for all four node
  types), seeds a random permutation of the training papers, ``--fanouts`` for every edge
  type (GraphBolt: a fanout tensor with one entry per edge type, since a single entry
  would cap a node's neighbours over all types together): typed NS and LABOR-0 sampling
  only, and NS end to end with the features of every node type (``gp.DataLoader``
  against ``gb.DataLoader`` at its best ``num_workers``). The NS output layer's sampled
  edges per batch depend only on the seeds, so they must be equal on both sides (a
  check that both sample the same edge types with the same fanouts); the other layers'
  counts should be close.

* temporal neighbor sampling (``--cases temporal``): the node case's graph and seeds with
  int64 times (``TIME_SPAN``, seeded): node and edge times uniform in ``[0, TIME_SPAN)``,
  each seed's time uniform in ``[TIME_SPAN / 2, TIME_SPAN)``, saved as ``node_timestamp.npy``,
  ``edge_timestamp.npy``, ``seed_timestamp.npy``. Both sides: ``temporal_sample_neighbor``
  with the node and the edge attribute ``"timestamp"`` (a neighbour is kept iff its node
  time and its edge's time are both earlier than the root seed's time, at every hop), seeds
  ``ItemSet((seeds, times), names=("seeds", "timestamp"))``, GraphBolt's layout (no
  deduplication: every sampled edge makes a new input node). graphpipe samples on the graph
  sorted by time once before any timing (``sort_by_time``; its time, and the build time of
  a temporal sampler, which reads every edge's time once, are reported apart) and,
  as an extra row, on the unsorted graph (the masked path). GraphBolt gets int64 indices
  (2.1 fails on int32 ones with node times, see ``graphbolt_side._temporal``); its fast
  path for nodes of over 1000 in-edges (random draws checked against both times) works in
  2.1 (the unconditional ``continue`` that disables it came later, with time windows).
  GraphBolt 2.1 has no temporal LABOR and no time window, so neither is compared. Sampling
  only, and end to end with features (``gp.DataLoader`` against ``gb.DataLoader`` at its
  best ``num_workers``). The output layer's sampled edges per batch, ``min(fanout, valid
  neighbours)`` per seed, depend only on the seeds and times, so they must be equal on both
  sides (a check that both apply the same rule). Next to it, graphpipe only, the filter's
  cost: the temporal rates against graphpipe's non-temporal NS on the same seeds, without
  deduplication (the same layout: the filter is the only difference) and with it (the
  default).

``--cases node lp`` (the default) runs the homogeneous cases; ``--cases hetero`` only the
heterogeneous one (the homogeneous graph is then not generated); ``--cases temporal`` only
the temporal one.

Rounds: this VM's speed drifts by tens of percent over minutes, so the script measures
graphpipe, then GraphBolt, ``--rounds`` times in turn on the same graph, and reports every
figure as its median over rounds (ratios of those medians; overlap efficiency from them).

Every rate: ``--warmup`` batches skipped, then ``--windows`` windows of ``--window``
batches timed, median window rate reported (see ``common.measure_rate``); LABOR-* and
the kappa sweep, seconds per batch, use 2 warm-up batches and 3 windows of
``--slow-window`` batches. Prints a
markdown table; ``--json PATH`` also writes every number.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import operator
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

import numba
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import graphpipe as gp  # noqa: E402
from common import batch_shape, consecutive_overlap, layer_shape, measure_rate, ratio  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
_COMPARE = {">=": operator.ge, "<=": operator.le, "<": operator.lt, "==": operator.eq}
TIME_SPAN = 1_000_000  # node and edge times in [0, TIME_SPAN), seed times in [TIME_SPAN / 2, TIME_SPAN)
TIME = "timestamp"  # the node and the edge attribute holding the times, on both sides


def main() -> None:
    args, earlier = _arguments()
    start = time.perf_counter()
    batches = max(args.warmup + args.windows * args.window, 2 + 3 * args.slow_window)
    homogeneous = bool({"node", "lp", "temporal"} & set(args.cases))
    setup = {}
    if homogeneous:
        dataset = gp.datasets.synthetic_node_classification(
            num_nodes=args.num_nodes, avg_degree=args.avg_degree, feature_dim=args.feature_dim, seed=args.seed
        )
        graph, features = dataset.graph, dataset.features
        seeds = _seed_order(graph, batches * args.batch_size, args.seed)
        pairs = _pair_order(graph, batches * args.batch_size, args.seed)
        setup.update({
            "num_nodes": graph.total_num_nodes,
            "num_edges": graph.total_num_edges,
            "index_dtype": str(graph.indices.dtype),
            "feature_dim": args.feature_dim,
            "generate_s": time.perf_counter() - start,
        })
        _log(f"graph: {setup['num_nodes']:,} nodes, {setup['num_edges']:,} edges ({setup['generate_s']:.0f} s)")
    if "temporal" in args.cases:
        times = _timestamps(graph, seeds.numel(), args.seed)
        temporal_graphs, setup["temporal"] = _temporal_graphs(graph, times)
    if "hetero" in args.cases:
        hetero, hetero_seeds, setup["hetero"] = _hetero_setup(args)

    with tempfile.TemporaryDirectory(prefix="graphpipe-vs-graphbolt-") as data_dir:
        if homogeneous:
            np.save(os.path.join(data_dir, "feat.npy"), np.asarray(features["feat"].data))
            arrays = {"indptr": graph.indptr, "indices": graph.indices, "seeds": seeds, "pairs": pairs}
            for name, values in (arrays | times if "temporal" in args.cases else arrays).items():
                np.save(os.path.join(data_dir, f"{name}.npy"), values.numpy())
        if "hetero" in args.cases:
            _save_hetero(os.path.join(data_dir, "hetero"), hetero, hetero_seeds)
        rounds = []
        for round_index in range(args.rounds):
            _log(f"round {round_index + 1} of {args.rounds}")
            mine = measure_graphpipe(graph, features, seeds, args) if "node" in args.cases else {}
            if "lp" in args.cases:
                mine.update(measure_graphpipe_link_prediction(graph, features, pairs, args))
            if "hetero" in args.cases:
                mine.update(measure_graphpipe_hetero(hetero, hetero_seeds, args))
            if "temporal" in args.cases:
                mine.update(measure_graphpipe_temporal(temporal_graphs, features, seeds, times, args))
            rounds.append((mine, run_graphbolt(data_dir, args) if earlier is None else None))
    ours = _median_of_rounds([mine for mine, _ in rounds])
    theirs = _median_of_rounds([other for _, other in rounds]) if earlier is None else dict(earlier["graphbolt"])
    if earlier is not None:
        theirs["torch"] = earlier["versions"]["graphbolt_torch"]
    if "node" in args.cases:
        for method in ("ns", "labor0"):
            _overlap(ours, method)

    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": _cpu_name(), "cores": _cores(), "python": platform.python_version()},
        "versions": {"graphpipe": gp.__version__, "torch": torch.__version__, "numba": numba.__version__,
                     "graphbolt_torch": theirs.pop("torch")},
        "args": vars(args),
        "setup": setup,
        "graphpipe": ours,
        "graphbolt": theirs,
        "total_s": time.perf_counter() - start,
    }
    print(format_tables(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _arguments() -> tuple:
    """The command line, checked, and with ``--graphbolt-json`` the earlier run it names (else None)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphbolt-python", help="python of the venv with dgl 2.1 (venv-dgl/bin/python)")
    parser.add_argument("--graphbolt-json",
                        help="instead of running GraphBolt, take its figures from this earlier --json output (same "
                             "arguments, same machine): to compare two graphpipe versions against one GraphBolt run")
    parser.add_argument("--num-nodes", type=int, default=2_000_000)
    parser.add_argument("--avg-degree", type=int, default=34, help="R-MAT edges per node (both directions)")
    parser.add_argument("--feature-dim", type=int, default=100)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2], help="GraphBolt num_workers to try")
    parser.add_argument("--kappas", type=int, nargs="+", default=[1, 4, 32, 256])
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--slow-window", type=int, default=4,
                        help="LABOR-* and the kappa sweep (seconds per batch): 2 warm-up batches, 3 windows of this many")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure both sides this many times, alternating; every figure is the median over rounds")
    parser.add_argument("--json", help="also write all results to this file")
    parser.add_argument("--cases", nargs="+", choices=["node", "lp", "hetero", "temporal"], default=["node", "lp"],
                        help="node: the node-classification measurements; lp: link prediction; "
                             "hetero: node classification on the ogbn-mag-like typed graph; "
                             "temporal: temporal neighbor sampling on the node case's graph with times")
    parser.add_argument("--hetero-papers", type=int, default=2_000_000,
                        help="papers of the heterogeneous graph (synthetic_mag; other node types scale with it)")
    args = parser.parse_args()
    if (args.graphbolt_python is None) == (args.graphbolt_json is None):
        parser.error("pass one of --graphbolt-python (run GraphBolt) and --graphbolt-json (reuse a run's figures)")
    earlier = None
    if args.graphbolt_json:
        with open(args.graphbolt_json) as f:
            earlier = json.load(f)
        if {k: v for k, v in earlier["args"].items() if k not in ("json", "graphbolt_python", "graphbolt_json")} != {
            k: v for k, v in vars(args).items() if k not in ("json", "graphbolt_python", "graphbolt_json", "threads")
        } | {"threads": earlier["args"]["threads"]}:
            parser.error(f"--graphbolt-json: {args.graphbolt_json} was measured with other arguments: {earlier['args']}")
    # numba's thread count is per thread (a background stage would not inherit a
    # set_num_threads here), so the process-wide NUMBA_NUM_THREADS sets it for both sides.
    args.threads = numba.config.NUMBA_NUM_THREADS
    if earlier is not None and earlier["args"]["threads"] != args.threads:
        parser.error(f"--graphbolt-json: GraphBolt ran on {earlier['args']['threads']} threads there, this run has "
                     f"NUMBA_NUM_THREADS={args.threads}; run with the same count")  # fmt: skip
    torch.set_num_threads(args.threads)
    return args, earlier


def _seed_order(graph: gp.CSCGraph, count: int, seed: int) -> torch.Tensor:
    """``[count]`` int64: a random permutation of the nodes with in-edges, cut to ``count``."""
    degrees = graph.indptr[1:] - graph.indptr[:-1]
    connected = torch.nonzero(degrees > 0).flatten()
    if connected.numel() < count:
        raise ValueError(f"the graph has {connected.numel()} non-isolated nodes, fewer than the {count} seeds needed")
    order = torch.randperm(connected.numel(), generator=torch.Generator().manual_seed(seed))
    return connected[order[:count]]


def _pair_order(graph: gp.CSCGraph, count: int, seed: int) -> torch.Tensor:
    """``[count, 2]`` int64 (source, destination) pairs: random distinct edges of the graph."""
    if graph.total_num_edges < count:
        raise ValueError(f"the graph has {graph.total_num_edges} edges, fewer than the {count} pairs needed")
    positions = torch.randperm(graph.total_num_edges, generator=torch.Generator().manual_seed(seed + 1))[:count]
    destinations = torch.searchsorted(graph.indptr.to(torch.int64), positions, right=True) - 1
    return torch.stack([graph.indices[positions].to(torch.int64), destinations], dim=1)


def _timestamps(graph: gp.CSCGraph, count: int, seed: int) -> dict:
    """Random int64 times: ``node_timestamp`` ``[num_nodes]`` and ``edge_timestamp``
    ``[num_edges]`` (by CSC position) uniform in ``[0, TIME_SPAN)``, ``seed_timestamp``
    ``[count]`` uniform in ``[TIME_SPAN / 2, TIME_SPAN)``: a neighbour passes a seed at time
    ``t`` with probability ``(t / TIME_SPAN)^2``, between 1/4 and 1."""
    generator = torch.Generator().manual_seed(seed + 2)
    return {
        "node_timestamp": torch.randint(0, TIME_SPAN, (graph.total_num_nodes,), generator=generator),
        "edge_timestamp": torch.randint(0, TIME_SPAN, (graph.total_num_edges,), generator=generator),
        "seed_timestamp": torch.randint(TIME_SPAN // 2, TIME_SPAN, (count,), generator=generator),
    }


def _temporal_graphs(graph: gp.CSCGraph, times: dict) -> tuple:
    """``graph`` as ``{"plain", "unsorted"`` (with the node and edge times of ``times``),
    ``"sorted"`` (that one ``sort_by_time``)}`` and the setup entry: the time span and the
    sort's seconds (sorted twice: the first compiles the kernels on an install's first run)."""
    timed = dataclasses.replace(graph, node_attributes={TIME: times["node_timestamp"]},
                                edge_attributes={TIME: times["edge_timestamp"]})
    for _ in range(2):
        start = time.perf_counter()
        time_sorted = timed.sort_by_time(node_timestamp_attr_name=TIME, edge_timestamp_attr_name=TIME)
        sort_s = time.perf_counter() - start
    _log(f"graphpipe sort_by_time: {sort_s:.1f} s")
    return {"plain": graph, "unsorted": timed, "sorted": time_sorted}, {"time_span": TIME_SPAN, "sort_by_time_s": sort_s}


def _hetero_setup(args) -> tuple:
    """The ogbn-mag-like dataset, its seeds (:func:`_hetero_seed_order`) and its setup entry."""
    start = time.perf_counter()
    hetero = gp.datasets.synthetic_mag(num_papers=args.hetero_papers, seed=args.seed)
    seeds = _hetero_seed_order(hetero, args.warmup + args.windows * args.window, args)
    setup = {
        "num_nodes": hetero.graph.num_nodes_per_type,
        "num_edges": hetero.graph.total_num_edges,
        "num_edge_types": len(hetero.graph.edge_types),
        "feature_dim": hetero.node_features[("paper", "feat")].shape[1],
        "generate_s": time.perf_counter() - start,
    }
    _log(f"heterogeneous graph: {hetero.graph.total_num_nodes:,} nodes, {hetero.graph.total_num_edges:,} edges "
         f"({setup['generate_s']:.0f} s)")
    return hetero, seeds, setup


def _hetero_seed_order(dataset, batches: int, args) -> torch.Tensor:
    """``[batches * batch_size]`` int64 paper ids: a random permutation of the training
    papers, cut to what the measurements read."""
    papers = dataset.train_set.item_sets["paper"].items[0]
    count = batches * args.batch_size
    if papers.numel() < count:
        raise ValueError(
            f"--hetero-papers {args.hetero_papers} gives {papers.numel()} training papers, fewer than the {count} "
            f"seeds of {batches} batches of {args.batch_size}; use more papers or fewer/smaller batches"
        )
    order = torch.randperm(papers.numel(), generator=torch.Generator().manual_seed(args.seed))
    return papers[order[:count]]


def _save_hetero(directory: str, dataset, seeds: torch.Tensor) -> None:
    """The typed graph, every node type's features and the seeds as .npy files (plus the
    type maps as JSON), what ``graphbolt_side.py`` reads for ``--cases hetero``."""
    os.makedirs(directory)
    graph = dataset.graph
    for name in ("indptr", "indices", "node_type_offset", "type_per_edge"):
        np.save(os.path.join(directory, f"{name}.npy"), getattr(graph, name).numpy())
    for (node_type, name), table in dataset.node_features.items():
        np.save(os.path.join(directory, f"{name}_{node_type}.npy"), table.numpy())
    np.save(os.path.join(directory, "seeds.npy"), seeds.numpy())
    with open(os.path.join(directory, "types.json"), "w") as f:
        json.dump({"node_type_to_id": dict(graph.node_type_to_id), "edge_type_to_id": dict(graph.edge_type_to_id)}, f)


def measure_graphpipe_hetero(dataset, seeds: torch.Tensor, args) -> dict:
    """Typed NS and LABOR-0 sampling on the ogbn-mag-like graph, and NS end to end with the
    features of every node type; see the module docstring."""
    window = dict(warmup=args.warmup, windows=args.windows, window=args.window)
    graph = dataset.graph
    item_set = gp.HeteroItemSet({"paper": gp.ItemSet(seeds, names="seeds")})
    samplers = {
        "hetero_ns": lambda pipe: pipe.sample_neighbor(graph, args.fanouts, seed=args.seed),
        "hetero_labor0": lambda pipe: pipe.sample_layer_neighbor(graph, args.fanouts, seed=args.seed),
    }
    results = {}
    for method, sample in samplers.items():
        pipe = sample(gp.ItemSampler(item_set, args.batch_size, shuffle=False))
        results[f"{method}_sampling"] = _summary(measure_rate(pipe, inspect=batch_shape, **window))
        _log(f"graphpipe {method} sampling: {results[f'{method}_sampling']['it_per_s']:.2f} it/s")
    keys = {node_type: ["feat"] for node_type in graph.node_types}
    pipe = samplers["hetero_ns"](gp.ItemSampler(item_set, args.batch_size, shuffle=False))
    pipe = pipe.fetch_feature(dataset.features, node_feature_keys=keys)
    loader = gp.DataLoader(pipe)
    results["hetero_ns_loader"] = _summary(measure_rate(loader, **window))
    loader.close()
    _log(f"graphpipe hetero_ns loader: {results['hetero_ns_loader']['it_per_s']:.2f} it/s")
    return results


def measure_graphpipe_temporal(graphs: dict, features: gp.FeatureStore, seeds: torch.Tensor, times: dict,
                               args) -> dict:
    """Temporal NS (node and edge times) on the time-sorted and on the unsorted graph, and
    non-temporal NS with and without deduplication on the plain graph, sampling only; the
    sorted graph's temporal NS end to end with features; see the module docstring.
    ``graphs``: ``"plain"``, ``"unsorted"`` (with times), ``"sorted"`` (``sort_by_time``)."""
    window = dict(warmup=args.warmup, windows=args.windows, window=args.window)
    timed_items = gp.ItemSet((seeds, times["seed_timestamp"]), names=("seeds", "timestamp"))
    plain_items = gp.ItemSet(seeds, names="seeds")
    by_time = dict(node_timestamp_attr_name=TIME, edge_timestamp_attr_name=TIME, seed=args.seed)
    samplers = {
        "temporal_ns": lambda: gp.ItemSampler(timed_items, args.batch_size, shuffle=False).temporal_sample_neighbor(
            graphs["sorted"], args.fanouts, **by_time),
        "temporal_ns_unsorted": lambda: gp.ItemSampler(timed_items, args.batch_size, shuffle=False)
        .temporal_sample_neighbor(graphs["unsorted"], args.fanouts, **by_time),
        "nontemporal_ns_block": lambda: gp.ItemSampler(plain_items, args.batch_size, shuffle=False).sample_neighbor(
            graphs["plain"], args.fanouts, deduplicate=False, seed=args.seed),
        "nontemporal_ns": lambda: gp.ItemSampler(plain_items, args.batch_size, shuffle=False).sample_neighbor(
            graphs["plain"], args.fanouts, seed=args.seed),
    }
    # Building a temporal sampler reads every edge's time once (time keys, sortedness check);
    # timed on a second build, the first compiles the kernels on an install's first run.
    samplers["temporal_ns"]()
    build_start = time.perf_counter()
    samplers["temporal_ns"]()
    results = {"temporal_ns_build_s": time.perf_counter() - build_start}
    for method, pipe in samplers.items():
        results[f"{method}_sampling"] = _summary(measure_rate(pipe(), inspect=layer_shape, **window))
        _log(f"graphpipe {method} sampling: {results[f'{method}_sampling']['it_per_s']:.2f} it/s")
    loader = gp.DataLoader(samplers["temporal_ns"]().fetch_feature(features, node_feature_keys=["feat"]))
    results["temporal_ns_loader"] = _summary(measure_rate(loader, **window))
    loader.close()
    _log(f"graphpipe temporal_ns loader: {results['temporal_ns_loader']['it_per_s']:.2f} it/s")
    return results


def measure_graphpipe_link_prediction(graph: gp.CSCGraph, features: gp.FeatureStore, pairs: torch.Tensor, args) -> dict:
    """Link prediction: pairs -> one uniform negative each -> neighbor sampling without the
    seed edges (-> features); see the module docstring."""
    window = dict(warmup=args.warmup, windows=args.windows, window=args.window)

    def chain(fetch):
        pipe = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), args.batch_size, shuffle=False)
        pipe = pipe.sample_uniform_negative(graph, 1, seed=args.seed)
        pipe = pipe.sample_neighbor(graph, args.fanouts, exclude_seed_edges=True, seed=args.seed)
        return pipe.fetch_feature(features, node_feature_keys=["feat"]) if fetch else pipe

    results = {"lp_sampling": _summary(measure_rate(chain(fetch=False), inspect=batch_shape, **window))}
    _log(f"graphpipe link prediction sampling: {results['lp_sampling']['it_per_s']:.1f} it/s")
    loader = gp.DataLoader(chain(fetch=True))
    results["lp_loader"] = _summary(measure_rate(loader, **window))
    loader.close()
    _log(f"graphpipe link prediction loader: {results['lp_loader']['it_per_s']:.1f} it/s")
    return results


def measure_graphpipe(graph: gp.CSCGraph, features: gp.FeatureStore, seeds: torch.Tensor, args) -> dict:
    """Every graphpipe measurement; see the module docstring."""
    window = dict(warmup=args.warmup, windows=args.windows, window=args.window)
    slow = dict(warmup=2, windows=3, window=args.slow_window)
    item_set = gp.ItemSet(seeds, names="seeds")
    samplers = {
        "ns": lambda pipe: pipe.sample_neighbor(graph, args.fanouts, seed=args.seed),
        "labor0": lambda pipe: pipe.sample_layer_neighbor(graph, args.fanouts, seed=args.seed),
        "laborstar": lambda pipe: pipe.sample_layer_neighbor(graph, args.fanouts, importance_sampling=-1, seed=args.seed),
    }

    def chain(method, fetch):
        pipe = samplers[method](gp.ItemSampler(item_set, args.batch_size, shuffle=False))
        return pipe.fetch_feature(features, node_feature_keys=["feat"]) if fetch else pipe

    results = {}
    for method in samplers:
        protocol = slow if method == "laborstar" else window
        results[f"{method}_sampling"] = _summary(measure_rate(chain(method, fetch=False), inspect=batch_shape, **protocol))
        _log(f"graphpipe {method} sampling: {results[f'{method}_sampling']['it_per_s']:.1f} it/s")
    for method in ("ns", "labor0"):
        results[f"{method}_fetch_only"] = _summary(measure_rate(_fetch_only(chain(method, fetch=True)), **window))
        results[f"{method}_sample_fetch"] = _summary(measure_rate(chain(method, fetch=True), **window))
        for name, transforms in (("loader", None), ("plain", [])):
            loader = gp.DataLoader(chain(method, fetch=True), transforms=transforms)
            results[f"{method}_{name}"] = _summary(measure_rate(loader, **window))
            loader.close()
        _log(f"graphpipe {method} loader: {results[f'{method}_loader']['it_per_s']:.1f} it/s")

    def input_nodes(minibatch):
        return minibatch.input_nodes

    for kappa in args.kappas:
        pipe = gp.ItemSampler(item_set, args.batch_size, shuffle=False).sample_layer_neighbor(
            graph, args.fanouts, batch_dependency=kappa, seed=args.seed
        )
        measured = measure_rate(pipe, inspect=input_nodes, **slow)
        results[f"labor0_kappa{kappa}"] = {
            "it_per_s": measured["it_per_s"],
            "input_nodes": statistics.median(nodes.numel() for nodes in measured["stats"]),
            "previous_batch_overlap": consecutive_overlap(measured["stats"]),
        }
        _log(f"graphpipe LABOR-0 kappa={kappa}: {results[f'labor0_kappa{kappa}']['it_per_s']:.2f} it/s")
    return results


def _overlap(results: dict, method: str) -> None:
    """Add ``{method}_overlap_efficiency`` (loader it/s over the slowest stage's it/s alone)
    and ``{method}_overlap_ceiling``: the efficiency the cores allow when the stages' work,
    in core-seconds per batch, is shared perfectly among them."""
    sampling, fetch = results[f"{method}_sampling"], results[f"{method}_fetch_only"]
    slowest = min(sampling["it_per_s"], fetch["it_per_s"])
    shared = _cores() / (sampling["cpu_s_per_batch"] + fetch["cpu_s_per_batch"])
    results[f"{method}_overlap_efficiency"] = results[f"{method}_loader"]["it_per_s"] / slowest
    results[f"{method}_overlap_ceiling"] = min(slowest, shared) / slowest


def _cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _fetch_only(pipe: gp.FeatureFetcher, distinct: int = 8):
    """Fetch features again and again for ``distinct`` batches sampled beforehand (their
    features, ~8 x 100 MB, do not fit in a CPU cache), so fetching is timed alone."""
    sampled = list(itertools.islice(pipe.source, distinct))
    return (pipe.fetch(minibatch) for minibatch in itertools.cycle(sampled))


def _median_of_rounds(rounds: list):
    """One result from several rounds' results of the same shape: every number is the
    median over rounds, every list (of window rates) the rounds' lists joined."""
    first = rounds[0]
    if isinstance(first, dict):
        return {key: _median_of_rounds([r[key] for r in rounds]) for key in first}
    if isinstance(first, list):
        return [value for r in rounds for value in r]
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return statistics.median(rounds)
    return first


def run_graphbolt(data_dir: str, args) -> dict:
    """Run graphbolt_side.py in the GraphBolt venv on the saved graph; its JSON results."""
    command = [
        args.graphbolt_python, os.path.join(HERE, "graphbolt_side.py"), "--data", data_dir,
        "--fanouts", *map(str, args.fanouts), "--batch-size", str(args.batch_size), "--threads", str(args.threads),
        "--workers", *map(str, args.workers), "--warmup", str(args.warmup), "--windows", str(args.windows),
        "--window", str(args.window), "--cases", *args.cases,
    ]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the GraphBolt side failed (exit status {done.returncode}): {' '.join(command)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(measured: dict) -> dict:
    out = {"it_per_s": measured["it_per_s"], "window_it_per_s": measured["window_it_per_s"],
           "cpu_s_per_batch": measured["cpu_s_per_batch"]}
    if measured["stats"]:
        for key in measured["stats"][0]:
            out[key] = float(statistics.median(s[key] for s in measured["stats"]))
        out["sampled_edges_per_s"] = out["sampled_edges"] * out["it_per_s"]
    return out


def format_tables(results: dict) -> str:
    """Markdown tables of the results: side-by-side rates with ratios and targets, then (node
    cases) the overlap and the kappa sweep."""
    ours, theirs = results["graphpipe"], results["graphbolt"]
    cases = results["args"]["cases"]
    rows = (_node_rows(ours, theirs) if "node" in cases else []) + (_link_rows(ours, theirs) if "lp" in cases else [])
    rows += _hetero_rows(ours, theirs) if "hetero" in cases else []
    rows += _temporal_rows(ours, theirs, results["setup"]) if "temporal" in cases else []
    setup, run = results["setup"], results["args"]
    graphs = []
    if "num_nodes" in setup:
        graphs.append(f"graph {setup['num_nodes']:,} nodes, {setup['num_edges']:,} edges ({setup['index_dtype']}), "
                      f"{setup['feature_dim']}-dim float32 features")
    if "hetero" in setup:
        hetero = setup["hetero"]
        nodes = ", ".join(f"{n:,} {t}" for t, n in hetero["num_nodes"].items())
        graphs.append(f"heterogeneous graph (synthetic_mag) {nodes}, {hetero['num_edges']:,} edges of "
                      f"{hetero['num_edge_types']} types, {hetero['feature_dim']}-dim float32 features per node type")
    if "temporal" in setup:
        span = setup["temporal"]["time_span"]
        graphs.append(f"temporal: int64 node and edge times uniform in [0, {span:,}), seed times in "
                      f"[{span // 2:,}, {span:,}), kept iff both times < the root seed's")
    lines = [
        f"{results['date']}, {results['machine']['cpu']}, {results['machine']['cores']} cores, "
        f"{run['threads']} threads per side; {'; '.join(graphs)}; fanouts {run['fanouts']} "
        f"(per edge type on the heterogeneous graph), batch {run['batch_size']}; {run['warmup']} warm-up batches, "
        f"median of {run['windows']} windows x {run['window']} batches, median of {run['rounds']} alternating rounds; "
        f"total {results['total_s']:.0f} s",
        "",
        "| measurement | graphpipe | GraphBolt 2.1 | ratio | target | met |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for label, mine, other, target in rows:
        r = ratio(mine, other)
        goal, met = "", ""
        if target is not None and r is not None:
            op, bound = target
            goal = f"{op} {bound:g}x"
            met = "yes" if _COMPARE[op](r, bound) else "**no**"
        shown = "n/a" if r is None else f"{r:.2f}x"
        lines.append(f"| {label} | {_fmt(mine)} | {_fmt(other)} | {shown} | {goal} | {met} |")
    methods = [
        m for m, case in (("ns", "node"), ("labor0", "node"), ("lp", "lp"), ("hetero_ns", "hetero"),
                          ("temporal_ns", "temporal")) if case in cases
    ]
    lines += ["", "GraphBolt gb.DataLoader it/s by num_workers:", ""]
    lines += [
        f"- {method}: " + ", ".join(
            f"num_workers={key.rsplit('_w', 1)[1]}: {theirs[key]['it_per_s']:.2f}"
            for key in sorted(theirs) if key.startswith(f"{method}_loader_w")
        )
        for method in methods
    ]
    if "node" in cases:
        lines += _node_sections(results)
    if "temporal" in cases:
        lines += _temporal_section(ours)
    return "\n".join(lines)


def _best_loader(theirs: dict, method: str):
    """GraphBolt's best ``gb.DataLoader`` rate for ``method`` and its key (``..._w<workers>``)."""
    return max((theirs[key]["it_per_s"], key) for key in theirs if key.startswith(f"{method}_loader_w"))


def _node_rows(ours: dict, theirs: dict) -> list:
    best = {method: _best_loader(theirs, method) for method in ("ns", "labor0")}
    return [
        ("NS sampling only, it/s", ours["ns_sampling"]["it_per_s"], theirs["ns_sampling"]["it_per_s"], (">=", 5.0)),
        ("NS sampled edges/s", ours["ns_sampling"]["sampled_edges_per_s"],
         theirs["ns_sampling"]["sampled_edges"] * theirs["ns_sampling"]["it_per_s"], None),
        ("NS input nodes/batch", ours["ns_sampling"]["input_nodes"], theirs["ns_sampling"]["input_nodes"], None),
        ("NS sample + fetch (plain chain), it/s", ours["ns_sample_fetch"]["it_per_s"],
         theirs["ns_sample_fetch"]["it_per_s"], None),
        ("LABOR-0 sampling only, it/s", ours["labor0_sampling"]["it_per_s"], theirs["labor0_sampling"]["it_per_s"], (">=", 2.0)),
        # GraphBolt 2.1 has no LABOR-*: its rate is reported next to GraphBolt's LABOR-0, no target.
        ("LABOR-* sampling only, it/s (vs GB LABOR-0)", ours["laborstar_sampling"]["it_per_s"],
         theirs["labor0_sampling"]["it_per_s"], None),
        # Both sides run LABOR-0 on the same seeds, so the expected counts are equal; GraphBolt's
        # own count moves by about 0.2% from run to run (its variates are random), hence 1%.
        ("LABOR-0 input nodes/batch", ours["labor0_sampling"]["input_nodes"], theirs["labor0_sampling"]["input_nodes"],
         ("<=", 1.01)),
        ("LABOR-* input nodes/batch (vs GB LABOR-0)", ours["laborstar_sampling"]["input_nodes"],
         theirs["labor0_sampling"]["input_nodes"], ("<", 1.0)),
        (f"NS end-to-end loader, it/s (GB: {best['ns'][1].rsplit('_', 1)[1]})", ours["ns_loader"]["it_per_s"],
         best["ns"][0], (">=", 4.0)),
        ("NS plain chain in gp.DataLoader(transforms=[]), it/s", ours["ns_plain"]["it_per_s"], best["ns"][0], None),
        (f"LABOR-0 end-to-end loader, it/s (GB: {best['labor0'][1].rsplit('_', 1)[1]})",
         ours["labor0_loader"]["it_per_s"], best["labor0"][0], (">=", 2.0)),
        ("LABOR-0 plain chain in gp.DataLoader(transforms=[]), it/s", ours["labor0_plain"]["it_per_s"],
         best["labor0"][0], None),
    ]


def _link_rows(ours: dict, theirs: dict) -> list:
    rate, key = _best_loader(theirs, "lp")
    return [
        ("LP sampling only (uniform negatives, ratio 1, seed edges excluded), it/s", ours["lp_sampling"]["it_per_s"],
         theirs["lp_sampling"]["it_per_s"], (">=", 4.0)),
        ("LP sampled edges/batch", ours["lp_sampling"]["sampled_edges"], theirs["lp_sampling"]["sampled_edges"], None),
        ("LP input nodes/batch", ours["lp_sampling"]["input_nodes"], theirs["lp_sampling"]["input_nodes"], None),
        (f"LP end-to-end loader with features, it/s (GB: {key.rsplit('_', 1)[1]})", ours["lp_loader"]["it_per_s"],
         rate, (">=", 3.0)),
    ]


def _hetero_rows(ours: dict, theirs: dict) -> list:
    """Typed sampling and end to end on the ogbn-mag-like graph, with issue 15's targets."""
    rate, key = _best_loader(theirs, "hetero_ns")
    mine_ns, their_ns = ours["hetero_ns_sampling"], theirs["hetero_ns_sampling"]
    layers = sorted(k for k in mine_ns if k.startswith("sampled_edges_layer"))
    rows = [
        ("Hetero NS sampling only, it/s", mine_ns["it_per_s"], their_ns["it_per_s"], (">=", 4.0)),
        ("Hetero NS input nodes/batch (all types)", mine_ns["input_nodes"], their_ns["input_nodes"], None),
    ]
    for layer in layers:
        # The output layer (last) samples min(degree, fanout) edges of each type per seed on both sides.
        target = ("==", 1.0) if layer == layers[-1] else None
        rows.append((f"Hetero NS sampled edges/batch, layer {layer[len('sampled_edges_layer'):]}", mine_ns[layer],
                     their_ns[layer], target))
    rows += [
        ("Hetero LABOR-0 sampling only, it/s", ours["hetero_labor0_sampling"]["it_per_s"],
         theirs["hetero_labor0_sampling"]["it_per_s"], (">=", 2.0)),
        ("Hetero LABOR-0 input nodes/batch (all types)", ours["hetero_labor0_sampling"]["input_nodes"],
         theirs["hetero_labor0_sampling"]["input_nodes"], None),
        (f"Hetero NS end-to-end loader with every type's features, it/s (GB: {key.rsplit('_', 1)[1]})",
         ours["hetero_ns_loader"]["it_per_s"], rate, (">=", 3.0)),
    ]
    return rows


def _temporal_rows(ours: dict, theirs: dict, setup: dict) -> list:
    """Temporal NS against GraphBolt's: sampling (time-sorted and unsorted graph), batch
    shape, end to end, with issue 31's targets; graphpipe's one-time sort."""
    rate, key = _best_loader(theirs, "temporal_ns")
    mine, other = ours["temporal_ns_sampling"], theirs["temporal_ns_sampling"]
    rows = [
        ("Temporal NS sampling only (node + edge times, graph sorted by time), it/s", mine["it_per_s"],
         other["it_per_s"], (">=", 4.0)),
        ("Temporal NS sampling only, unsorted graph (masked path), it/s",
         ours["temporal_ns_unsorted_sampling"]["it_per_s"], other["it_per_s"], None),
        ("Temporal NS sampled edges/s (sorted graph)", mine["sampled_edges_per_s"],
         other["sampled_edges"] * other["it_per_s"], None),
        ("Temporal NS input nodes/batch (no deduplication)", mine["input_nodes"], other["input_nodes"], None),
    ]
    layers = sorted(k for k in mine if k.startswith("sampled_edges_layer"))
    for layer in layers:
        # The output layer (last) samples min(fanout, valid neighbours) per seed on both sides.
        target = ("==", 1.0) if layer == layers[-1] else None
        rows.append((f"Temporal NS sampled edges/batch, layer {layer[len('sampled_edges_layer'):]}", mine[layer],
                     other[layer], target))
    rows += [
        (f"Temporal NS end-to-end loader with features, it/s (GB: {key.rsplit('_', 1)[1]})",
         ours["temporal_ns_loader"]["it_per_s"], rate, (">=", 3.0)),
        ("graphpipe sort_by_time, once per graph (not in any rate), s", setup["temporal"]["sort_by_time_s"], None, None),
        ("graphpipe temporal sampler build, once per sampler (not in any rate), s", ours["temporal_ns_build_s"], None,
         None),
    ]
    return rows


def _temporal_section(ours: dict) -> list:
    """graphpipe's temporal NS against its non-temporal NS on the same seeds: the filter's cost."""
    base = ours["nontemporal_ns_block_sampling"]
    lines = ["", "| graphpipe temporal filter cost, same seeds | it/s | sampled edges/batch | ns per sampled edge "
              "| core-ms/batch | it/s vs non-temporal NS without deduplication | ns per edge vs it |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("temporal_ns", "temporal NS, graph sorted by time"),
                       ("temporal_ns_unsorted", "temporal NS, unsorted graph (masked path)"),
                       ("nontemporal_ns_block", "non-temporal NS, deduplicate=False (same layout)"),
                       ("nontemporal_ns", "non-temporal NS, deduplicated (default)")):
        row = ours[f"{key}_sampling"]
        per_edge = 1e9 / row["sampled_edges_per_s"]
        lines.append(
            f"| {label} | {row['it_per_s']:.2f} | {row['sampled_edges']:,.0f} | {per_edge:.1f} | "
            f"{1e3 * row['cpu_s_per_batch']:.1f} | {row['it_per_s'] / base['it_per_s']:.2f}x | "
            f"{per_edge * base['sampled_edges_per_s'] / 1e9:.2f}x |"
        )
    return lines


def _node_sections(results: dict) -> list:
    """The overlap table, LABOR-*'s reduction and the kappa sweep."""
    ours = results["graphpipe"]
    lines = ["", "| graphpipe overlap | loader it/s | plain chain it/s | sampling alone it/s (core-ms/batch) "
              "| fetch alone it/s (core-ms/batch) | efficiency | target | met | ceiling on these cores |",
              "|---|---:|---:|---:|---:|---:|---:|:---:|---:|"]
    for method, label in (("ns", "NS"), ("labor0", "LABOR-0")):
        eff = ours[f"{method}_overlap_efficiency"]
        sampling, fetch = ours[f"{method}_sampling"], ours[f"{method}_fetch_only"]
        lines.append(
            f"| {label} | {ours[f'{method}_loader']['it_per_s']:.1f} | {ours[f'{method}_sample_fetch']['it_per_s']:.1f} | "
            f"{sampling['it_per_s']:.1f} ({1e3 * sampling['cpu_s_per_batch']:.1f}) | "
            f"{fetch['it_per_s']:.1f} ({1e3 * fetch['cpu_s_per_batch']:.1f}) | {eff:.2f} | >= 0.9 | "
            f"{'yes' if eff >= 0.9 else '**no**'} | {ours[f'{method}_overlap_ceiling']:.2f} |"
        )
    lines += ["", f"Ceiling: the efficiency reachable when sampling and fetching share this machine's "
              f"{results['machine']['cores']} cores perfectly, min(slowest stage, cores / (sampling + fetch "
              "core-seconds per batch)) / slowest stage."]
    reduction = 1 - ours["laborstar_sampling"]["input_nodes"] / ours["labor0_sampling"]["input_nodes"]
    lines += ["", f"LABOR-* input nodes per batch vs graphpipe's LABOR-0: {100 * reduction:.1f}% fewer "
              f"(target: fewer; {'met' if reduction > 0 else '**missed**'})", ""]
    lines += ["| LABOR-0 batch_dependency kappa | input nodes/batch | overlap with previous batch's input nodes | it/s |",
              "|---:|---:|---:|---:|"]
    for kappa in results["args"]["kappas"]:
        row = ours[f"labor0_kappa{kappa}"]
        lines.append(f"| {kappa} | {row['input_nodes']:,.0f} | {row['previous_batch_overlap']:.3f} | {row['it_per_s']:.2f} |")
    return lines


def _fmt(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if value >= 1000 else f"{value:.2f}"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
