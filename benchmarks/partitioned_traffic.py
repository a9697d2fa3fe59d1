"""Partitioned training's traffic: P processes, each holding only its part, hash vs METIS.

Steps:

1. an R-MAT graph (``gp.datasets.rmat_edges``: ``--num-nodes``, ``--num-edges``) with
   ``[num_nodes, --feature-dim]`` float32 features (``--on-disk``: built through files as
   ``scale.py`` does, float16) and ``--train-seeds`` random training seeds, split by
   ``graphpipe.distributed.partition`` into ``--parts`` parts, hash and METIS;
2. the cut-edge fraction of each (edges whose source and destination owners differ), also of
   the assignment alone at ``--predict`` part counts (METIS: ``metis_assignment`` on the same
   graph, parts balanced by bytes as ``partition(method="metis")`` does; hash: ``Partition``);
3. ``--parts`` gloo processes, each mapping only its part (``load_partition(out_dir, rank)``),
   optionally confined to a memory cgroup of ``--memory-limit-gb`` (per rank, page cache
   included; joined after start-up, so with cgroup v1 the interpreter's and torch's pages
   stay charged outside it), run ``DistributedItemSampler.from_part(part, "train", --batch-size,
   shuffle=True, drop_uneven_inputs=True)``, NS ``--fanouts`` and the feature fetch, first
   cooperative then independent (``cooperative=False``) batches: after ``--warmup`` batches,
   ``--batches`` timed batches give it/s per rank and the bytes this rank sends per batch;
4. a table: the measured bytes per batch per rank at ``--parts``, and those predicted at
   ``--predict`` part counts (model below), with the link bandwidth each needs at the
   measured it/s.

Bytes counted: the collectives the library calls are wrapped in each rank
(``torch.distributed.all_to_all_single``, ``all_gather``, ``all_reduce``); a call adds the
payload this rank addresses to other ranks: for ``all_to_all_single`` the input rows outside
this rank's own split, for ``all_gather`` and ``all_reduce`` the tensor once per peer (ring
all-reduce sends less, 2 (P-1)/P of it). Floating-point payload is reported as feature rows,
integer payload as ids (sampling requests, sampled edges, counts). Gloo's headers and TCP
are not counted.

Model for other part counts (weak scaling: ``--batch-size`` seeds per rank, the same graph):
every byte sent crosses a cut, and the share of a rank's frontier vertices that another rank
owns is taken to be the cut-edge fraction, so bytes per batch per rank at P parts are the
measured bytes times ``cut(P) / cut(measured P)`` (for hash, ``cut(P)`` is about
``1 - 1/P``). It ignores that larger cooperative global batches deduplicate more (which
lowers the cooperative figure) and METIS's load imbalance.

    python benchmarks/partitioned_traffic.py --dir /tmp/traffic                  # 1M nodes, 15M edges
    python benchmarks/partitioned_traffic.py --dir /tmp/t --num-nodes 20000 --num-edges 300000 \\
        --batch-size 64 --batches 3 --warmup 1                                     # quick
    # papers100M's shape (benchmarks/scale.py's defaults) built through files (--on-disk: a
    # dataset larger than memory; 80 GB of disk with its parts), 4 ranks of 8 GB each:
    python benchmarks/partitioned_traffic.py --dir /scratch/traffic --on-disk --num-nodes 111059956 \\
        --num-edges 1615685872 --feature-dim 128 --train-seeds 1207179 --methods hash --memory-limit-gb 8
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import graphpipe as gp  # noqa: E402
from graphpipe.distributed import Partition, load_partition, partition  # noqa: E402
from graphpipe.distributed.partitioned import _bytes_per_vertex, metis_assignment  # noqa: E402
from scale import MemoryCgroup, write_edges, write_features  # noqa: E402

MODES = {"cooperative": True, "independent": False}


def build(args):
    """``(graph, features, item_sets)``: the R-MAT graph, float32 features, training seeds."""
    if args.on_disk:
        return build_on_disk(args)
    src, dst = gp.datasets.rmat_edges(args.num_nodes, args.num_edges, seed=0)
    graph = gp.CSCGraph.from_coo(src, dst, args.num_nodes)
    del src, dst
    generator = torch.Generator().manual_seed(0)
    features = torch.rand(args.num_nodes, args.feature_dim, generator=generator)
    train = torch.randperm(args.num_nodes, generator=generator)[: args.train_seeds]
    return graph, gp.FeatureStore({"feat": features}), {"train": gp.ItemSet(train, names="seeds")}


def build_on_disk(args):
    """As :func:`build`, through files as ``benchmarks/scale.py`` builds them, for datasets
    larger than memory: the R-MAT edge list written in chunks, ``CSCGraph.from_coo_files``
    (mapped), ``[num_nodes, --feature-dim]`` float16 features in a mapped ``.npy`` (row ``v``
    holds ``v % 2048``)."""
    edges, graph_file, features_file = (os.path.join(args.dir, name) for name in ("edges.npy", "graph.pt", "features.npy"))
    write_edges(edges, args.num_nodes, args.num_edges, 1 << 24)
    graph = gp.CSCGraph.from_coo_files(graph_file, edges, num_nodes=args.num_nodes)
    os.remove(edges)
    write_features(features_file, args.num_nodes, args.feature_dim, "float16", 1 << 20)
    train = torch.from_numpy(np.random.default_rng(0).choice(args.num_nodes, args.train_seeds, replace=False))
    return graph, gp.FeatureStore({"feat": gp.Feature(features_file)}), {"train": gp.ItemSet(train, names="seeds")}


def cut_fraction(graph, owners: torch.Tensor) -> float:
    """The fraction of edges whose source and destination owners (``[num_nodes]``) differ
    (a million destinations at a time: the graph may be mapped and larger than memory)."""
    cut, indptr, step = 0, graph.indptr.to(torch.int64), 1 << 20
    for lo in range(0, graph.total_num_nodes, step):
        hi = min(lo + step, graph.total_num_nodes)
        dst_owners = torch.repeat_interleave(owners[lo:hi], indptr[lo + 1 : hi + 1] - indptr[lo:hi])
        cut += int((owners[graph.indices[indptr[lo] : indptr[hi]].to(torch.int64)] != dst_owners).sum())
    return cut / max(graph.total_num_edges, 1)


def assignment(graph, features, method: str, num_parts: int) -> torch.Tensor:
    """``[num_nodes]`` owners; METIS's parts balanced by bytes, as ``partition(method="metis")``."""
    if method == "metis":
        return metis_assignment(graph, num_parts, _bytes_per_vertex(graph, features))
    return Partition(num_parts).owner(torch.arange(graph.total_num_nodes))


def peak_rss_gb() -> float:
    """This process's peak resident memory (``VmHWM``: unlike ``ru_maxrss``, not the peak of
    the parent that spawned it, which exec keeps)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 2**20  # kB


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


class Traffic:
    """Wraps ``torch.distributed``'s collectives to add up what this rank sends to others."""

    def __init__(self):
        self.sent = {"features": 0, "ids": 0}
        for name in ("all_to_all_single", "all_gather", "all_reduce"):
            setattr(dist, name, self._wrap(name, getattr(dist, name)))

    def _wrap(self, name, call):
        @functools.wraps(call)
        def counted(*args, **kwargs):
            group = kwargs.get("group")
            peers = dist.get_world_size(group) - 1
            if name == "all_to_all_single":
                sent = args[1] if len(args) > 1 else kwargs["input"]
                splits = args[3] if len(args) > 3 else kwargs.get("input_split_sizes")
                own = splits[dist.get_rank(group)] if splits else sent.shape[0] // (peers + 1)
                rows = sent.shape[0] - own
                nbytes = rows * (sent.nbytes // max(sent.shape[0], 1))
            else:
                sent = args[1] if name == "all_gather" else args[0]
                nbytes = sent.nbytes * peers
            self.sent["features" if sent.is_floating_point() else "ids"] += nbytes
            return call(*args, **kwargs)

        return counted

    def reset(self) -> None:
        self.sent = {key: 0 for key in self.sent}


def rank_main(rank: int, world_size: int, args, results: str) -> None:
    """One rank: maps its part, times cooperative then independent batches, writes its figures."""
    import numba

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    cgroup = MemoryCgroup(int(args.memory_limit_gb * 2**30)) if args.memory_limit_gb > 0 else None
    init = f"file://{os.path.join(results, 'init')}"
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size, timeout=timedelta(seconds=600))
    traffic = Traffic()
    part = load_partition(args.part_dir, rank, num_parts=world_size)
    out = {"rank": rank, "part_gb": directory_bytes(os.path.join(args.part_dir, f"part-{rank}")) / 2**30}
    for mode, cooperative in MODES.items():
        pipe = (
            gp.DistributedItemSampler.from_part(part, "train", args.batch_size, shuffle=True, drop_uneven_inputs=True, seed=0)
            .sample_neighbor(part.graph, args.fanouts, cooperative=cooperative)
            .fetch_feature(part.features, ["feat"], cooperative=cooperative)
        )
        batches = iter(gp.DataLoader(pipe))
        for _ in range(args.warmup):
            next(batches)
        traffic.reset()
        inputs, start = 0, time.perf_counter()
        for _ in range(args.batches):
            inputs += next(batches).input_nodes.numel()
        elapsed = time.perf_counter() - start
        out[mode] = {
            "it_s": args.batches / elapsed,
            "bytes_per_batch": sum(traffic.sent.values()) / args.batches,
            **{f"{key}_bytes_per_batch": value / args.batches for key, value in traffic.sent.items()},
            "input_nodes_per_batch": inputs / args.batches,
        }
    out["peak_rss_gb"] = peak_rss_gb()
    out["cgroup_peak_gb"] = cgroup.peak_gb() if cgroup else None
    with open(os.path.join(results, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    os._exit(0)  # without tearing the process group down: a peer may already be gone


def evict_from_page_cache(path: str) -> None:
    """Drop the files under ``path`` from the page cache (``POSIX_FADV_DONTNEED``), so that the
    pages a rank maps are read from disk and charged to its cgroup, not found already cached
    (and charged to the process that wrote them)."""
    for directory, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def remove_cgroup(pid: int) -> None:
    """Remove ``MemoryCgroup``'s cgroup of the exited process ``pid``, if there is one."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory"):
        path = os.path.join(root, f"graphpipe-scale-{pid}")
        if os.path.isdir(path):
            os.rmdir(path)


def run_ranks(args, method: str) -> list:
    """The ranks' figures (``rank_main``) over the parts of ``method``."""
    results = os.path.join(args.dir, f"results-{method}")
    os.makedirs(results, exist_ok=True)
    for name in os.listdir(results):
        os.unlink(os.path.join(results, name))
    args.part_dir = os.path.join(args.dir, method)
    evict_from_page_cache(args.part_dir)
    context = mp.get_context("spawn")
    processes = [context.Process(target=rank_main, args=(r, args.parts, args, results)) for r in range(args.parts)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
        remove_cgroup(process.pid)  # left behind by a rank that failed or was killed out of memory
    failed = [r for r, p in enumerate(processes) if p.exitcode != 0]
    if failed:
        raise SystemExit(f"partitioned_traffic.py: ranks {failed} failed (exit codes {[processes[r].exitcode for r in failed]})")
    ranks = []
    for r in range(args.parts):
        with open(os.path.join(results, f"rank{r}.json")) as f:
            ranks.append(json.load(f))
    return ranks


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def table(args, cuts: dict, measured: dict) -> str:
    """Markdown: per part count, method and mode, the cut fraction, bytes per batch per rank
    (mean and busiest rank; measured at ``args.parts``, else predicted) and the link bandwidth the
    busiest rank needs at the measured it/s."""
    lines = [
        "| P | method | cut fraction | mode | MB sent/batch/rank: mean | busiest rank | it/s/rank (at P=%d) "
        "| link needed, busiest rank (Gbit/s) |" % args.parts,
        "|---|---|---|---|---|---|---|---|",
    ]
    for num_parts in [args.parts, *args.predict]:
        for method in args.methods:
            for mode in MODES:
                it_s, mean, busiest = measured[method, mode]
                scale = cuts[method, num_parts] / cuts[method, args.parts]
                kind = "measured" if num_parts == args.parts else "predicted"
                lines.append(
                    f"| {num_parts} | {method} | {cuts[method, num_parts]:.3f} | {mode} | {mean * scale / 1e6:.2f} ({kind}) "
                    f"| {busiest * scale / 1e6:.2f} | {it_s:.2f} | {busiest * scale * it_s * 8 / 1e9:.3f} |"
                )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="scratch directory for the parts (one subdirectory per method)")
    parser.add_argument("--num-nodes", type=int, default=1_000_000)
    parser.add_argument("--num-edges", type=int, default=15_000_000)
    parser.add_argument("--feature-dim", type=int, default=100)
    parser.add_argument("--train-seeds", type=int, default=None, help="default: enough for warmup + batches")
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--methods", nargs="+", choices=["hash", "metis"], default=["hash", "metis"])
    parser.add_argument("--predict", type=int, nargs="*", default=[16, 64], help="part counts to predict for")
    parser.add_argument("--batch-size", type=int, default=1024, help="seeds per rank")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--batches", type=int, default=20, help="timed batches per mode")
    parser.add_argument("--warmup", type=int, default=2, help="untimed batches per mode first (kernel compilation)")
    parser.add_argument("--memory-limit-gb", type=float, default=0.0, help="per rank memory cgroup; 0: none")
    parser.add_argument("--on-disk", action="store_true", help="build through files (scale.py's steps): larger than memory")
    args = parser.parse_args()
    if args.train_seeds is None:
        args.train_seeds = (args.warmup + args.batches + 1) * args.parts * args.batch_size
    os.makedirs(args.dir, exist_ok=True)
    start = time.perf_counter()
    graph, features, item_sets = build(args)
    emit({"step": "build", "seconds": time.perf_counter() - start, "num_nodes": args.num_nodes, "num_edges": args.num_edges})
    cuts, measured = {}, {}
    for method in args.methods:
        for num_parts in [args.parts, *args.predict]:
            start = time.perf_counter()
            owners = assignment(graph, features, method, num_parts)
            cuts[method, num_parts] = cut_fraction(graph, owners)
            emit({"step": "assign", "method": method, "parts": num_parts, "cut_fraction": cuts[method, num_parts],
                  "seconds": time.perf_counter() - start})  # fmt: skip
            if num_parts == args.parts:
                start = time.perf_counter()
                partition(graph, features, item_sets, num_parts, os.path.join(args.dir, method), method=owners if method == "metis" else "hash")
                emit({"step": "partition", "method": method, "parts": num_parts, "seconds": time.perf_counter() - start,
                      "dataset_gb": directory_bytes(os.path.join(args.dir, method)) / 2**30})  # fmt: skip
    del graph, features, item_sets
    for method in args.methods:
        ranks = run_ranks(args, method)
        for mode in MODES:
            per_rank = [r[mode] for r in ranks]
            sent = [r["bytes_per_batch"] for r in per_rank]
            measured[method, mode] = (np.mean([r["it_s"] for r in per_rank]), np.mean(sent), max(sent))
            emit({"step": "batches", "method": method, "mode": mode, "parts": args.parts, "per_rank": per_rank})
        emit({"step": "memory", "method": method, **{f"rank{r['rank']}": {k: r[k] for k in ("part_gb", "peak_rss_gb", "cgroup_peak_gb")} for r in ranks}})
    print(table(args, cuts, measured))


if __name__ == "__main__":
    main()
