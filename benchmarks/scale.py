"""Data at scale: out-of-core CSC build, sampling a mapped graph, features larger than memory.

Steps, each timed, with the process's peak resident memory and (when confined) the peak of
its memory cgroup, page cache included:

1. confine the process to ``--memory-limit-gb`` with a memory cgroup (v1 or v2; needs
   permission to create one, as root in a container), so that neither the graph nor the
   features fit in the memory the process may use, page cache included;
2. write an R-MAT edge list ``[2, num_edges]`` ``.npy`` in chunks
   (``gp.datasets.rmat_edge_chunks``), never holding it whole;
3. ``CSCGraph.from_coo_files`` (bounded memory: 16 bytes per node plus a chunk), spot
   checked against the edge list, which is then removed to make room on disk;
4. write a ``[num_nodes, feature_dim]`` feature table (row ``v`` holds ``v % 2048``,
   exact in float16, checked after every read);
5. the disk's random-read limit with ``fio`` (4 KiB ``O_DIRECT`` random reads of the
   feature file; io_uring, else libaio, else psync; the best IOPS over queue depths);
6. neighbor sampling ``--fanouts`` with batches of ``--batch-size`` seeds from the mapped
   graph (``CSCGraph.load(mmap=True)``), it/s;
7. the end-to-end loader (``gp.DataLoader``: sample, fetch features) with the features as
   a plain ``numpy.memmap`` (through the page cache) and as a ``DiskBasedFeature``
   (``O_DIRECT`` reads from a pool of threads) behind a ``CPUCachedFeature`` of 0%, 10%
   and 30% of the rows: it/s, cache hit rate, rows read from disk per second and their
   fraction of the fio limit.

Defaults are ogbn-papers100M's shape (111M nodes, 1.6B edges, 128-dim float16 features,
1.2M training seeds): about 13 GB of edges, 14 GB of graph and 28 GB of features, with a
12 GB limit; the disk needs about 45 GB free at the peak (during step 3). Run it as::

    python benchmarks/scale.py --dir /scratch/scale --json scale.json
    python benchmarks/scale.py --dir /tmp/s --num-nodes 1000 --num-edges 5000 --feature-dim 4 \\
        --memory-limit-gb 0 --fio-seconds 0 --train-seeds 300 --batch-size 20 --windows 1 --window 2  # tiny
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import graphpipe as gp  # noqa: E402
from common import measure_rate  # noqa: E402
from graphpipe.features.cpu_cache import CPUCachedFeature  # noqa: E402
from graphpipe.features.disk import DiskBasedFeature  # noqa: E402

_CHECK_MODULUS = 2048  # every integer below it is exact in float16


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


class MemoryCgroup:
    """This process (threads and children) in a new memory cgroup limited to ``limit_bytes``.

    cgroup v2 (``memory.max``) where ``/sys/fs/cgroup`` is unified, else v1
    (``memory.limit_in_bytes``); page cache is charged to the cgroup in both. ``close()``
    moves the process back and removes the cgroup.
    """

    def __init__(self, limit_bytes: int):
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            root, limit_file, self.peak_file = "/sys/fs/cgroup", "memory.max", "memory.peak"
        else:
            root, limit_file, self.peak_file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.max_usage_in_bytes"
        self.parent = os.path.join(root, _own_cgroup(root))
        self.path = os.path.join(root, f"graphpipe-scale-{os.getpid()}")
        try:
            os.mkdir(self.path)
            with open(os.path.join(self.path, limit_file), "w") as f:
                f.write(str(limit_bytes))
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as error:
            raise SystemExit(
                f"scale.py: cannot create a memory cgroup under {root} ({error}); run as a user who may "
                "(root in a container), or under `systemd-run --scope -p MemoryMax=...` with --memory-limit-gb 0"
            ) from None

    def peak_gb(self) -> float:
        with open(os.path.join(self.path, self.peak_file)) as f:
            return int(f.read()) / 2**30

    def close(self) -> None:
        with open(os.path.join(self.parent, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        os.rmdir(self.path)


def _own_cgroup(root: str) -> str:
    """This process's cgroup path, relative to ``root``."""
    controller = "" if root == "/sys/fs/cgroup" else "memory"
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers.split(",") == [controller] if controller else controllers == "":
                return path.lstrip("/")
    return ""


def write_edges(path: str, num_nodes: int, num_edges: int, chunk: int) -> None:
    dtype = np.int32 if num_nodes <= 2**31 else np.int64
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(2, num_edges))
    start = 0
    for src, dst in gp.datasets.rmat_edge_chunks(num_nodes, num_edges, chunk, seed=0):
        out[0, start : start + src.numel()] = src.numpy()
        out[1, start : start + src.numel()] = dst.numpy()
        start += src.numel()
    out.flush()


def check_graph(graph: gp.CSCGraph, edges_path: str, num_nodes: int) -> None:
    """The in-edges of a few nodes are those of the edge list."""
    edge_list = np.load(edges_path, mmap_mode="r")
    for v in np.random.default_rng(0).integers(0, num_nodes, 3):
        lo, hi = int(graph.indptr[v]), int(graph.indptr[v + 1])
        ids = graph.map_edge_ids(torch.arange(lo, hi)).numpy()
        assert bool((edge_list[1][ids] == v).all()) and bool((edge_list[0][ids] == graph.indices[lo:hi].numpy()).all())


def write_features(path: str, num_nodes: int, dim: int, dtype: str, chunk: int) -> None:
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(num_nodes, dim))
    for start in range(0, num_nodes, chunk):
        rows = np.arange(start, min(start + chunk, num_nodes)) % _CHECK_MODULUS
        out[start : start + rows.size] = rows[:, None]
        out.flush()  # write back as we go: dirty pages stay within the memory limit


def fio_random_read(path: str, seconds: int) -> dict:
    """4 KiB O_DIRECT random reads of ``path`` with fio: the best IOPS over queue depths."""
    if seconds <= 0:
        return {"error": "skipped (--fio-seconds 0)"}
    if shutil.which("fio") is None:
        return {"error": "fio is not installed"}
    best = {"iops": 0.0}
    for engine, depths in (("io_uring", (32, 128)), ("libaio", (32, 128)), ("psync", (1,))):
        for depth in depths:
            jobs = 16 if engine == "psync" else 1
            command = [
                "fio", "--name=randread", f"--filename={path}", "--rw=randread", "--bs=4k", "--direct=1",
                f"--ioengine={engine}", f"--iodepth={depth}", f"--numjobs={jobs}", "--group_reporting",
                f"--runtime={seconds}", "--time_based", "--readonly", "--output-format=json",
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                continue
            iops = json.loads(done.stdout[done.stdout.index("{") :])["jobs"][0]["read"]["iops"]
            if iops > best["iops"]:
                best = {"iops": round(iops), "engine": engine, "iodepth": depth, "numjobs": jobs}
        if best["iops"]:
            return best  # the first engine that runs is the fastest available
    return {"error": "fio failed with every engine"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="scratch folder for the edge list, graph and features")
    parser.add_argument("--num-nodes", type=int, default=111_059_956)
    parser.add_argument("--num-edges", type=int, default=1_615_685_872)
    parser.add_argument("--feature-dim", type=int, default=128)
    parser.add_argument("--feature-dtype", default="float16", choices=["float16", "float32"])
    parser.add_argument("--memory-limit-gb", type=float, default=12.0, help="0: no cgroup (limit it yourself)")
    parser.add_argument("--chunk-edges", type=int, default=1 << 24)
    parser.add_argument(
        "--block-edges", type=int, help="CSC output slots per fill pass (default: 2^28, at most 1/4 of the limit)"
    )
    parser.add_argument("--train-seeds", type=int, default=1_207_179, help="random seed nodes (papers100M's train set size)")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--cache-fractions", type=float, nargs="+", default=[0.0, 0.1, 0.3])
    parser.add_argument("--no-memmap", action="store_true", help="skip the memmap loader (15 min at full size)")
    parser.add_argument("--io-threads", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=2, help="batches before each measurement")
    parser.add_argument("--cache-warmup", type=int, default=30, help="batches before measuring with a cache (filling it)")
    parser.add_argument("--windows", type=int, default=2)
    parser.add_argument("--window", type=int, default=3, help="batches per timed window")
    parser.add_argument("--fio-seconds", type=int, default=15, help="per fio run; 0 skips fio")
    parser.add_argument("--keep", action="store_true", help="keep the files (default: remove them at the end)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    edges, graph_file, features = (os.path.join(args.dir, f) for f in ("edges.npy", "graph.pt", "feat.npy"))
    results = {"args": vars(args)}
    limit = int(args.memory_limit_gb * 2**30)
    if args.block_edges is None:  # a pass's output window (indices and edge ids, 8 bytes a slot) in a quarter of it
        args.block_edges = min(1 << 28, limit // 32) if limit else 1 << 28
    cgroup = MemoryCgroup(limit) if limit else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `finally` removes the cgroup and files

    def step(name, work):
        """Run ``work()``; record its seconds and memory peaks, and its result if a dict."""
        start = time.perf_counter()
        value = work()
        results[name] = dict(value) if isinstance(value, dict) else {}
        results[name].update(seconds=round(time.perf_counter() - start, 6), peak_rss_gb=round(peak_rss_gb(), 3))
        if cgroup is not None:
            results[name]["cgroup_peak_gb"] = round(cgroup.peak_gb(), 3)
        print(f"{name}: {results[name]}", flush=True)
        return value

    try:
        step("write_edges", lambda: write_edges(edges, args.num_nodes, args.num_edges, args.chunk_edges))
        graph = step(
            "build_csc",
            lambda: gp.CSCGraph.from_coo_files(
                graph_file, edges, num_nodes=args.num_nodes, chunk_edges=args.chunk_edges, block_edges=args.block_edges
            ),
        )
        results["graph"] = repr(graph)
        check_graph(graph, edges, args.num_nodes)
        os.remove(edges)
        step("write_features", lambda: write_features(features, args.num_nodes, args.feature_dim, args.feature_dtype, 1 << 20))
        results["files_gb"] = {
            name: round(os.path.getsize(path) / 2**30, 2) for name, path in (("graph", graph_file), ("features", features))
        }
        fio_iops = step("fio_4k_randread", lambda: fio_random_read(features, args.fio_seconds)).get("iops")

        del graph
        graph = gp.CSCGraph.load(graph_file, mmap=True)
        seeds = torch.from_numpy(np.random.default_rng(0).choice(args.num_nodes, args.train_seeds, replace=False))

        def chain(seed: int):
            sampler = gp.ItemSampler(gp.ItemSet(seeds, names="seeds"), args.batch_size, shuffle=True, seed=seed)
            return sampler.sample_neighbor(graph, args.fanouts, seed=seed)

        def sample():
            rate = measure_rate(chain(0), args.warmup, args.windows, args.window, lambda b: b.input_nodes.numel())
            return {"it_per_s": round(rate["it_per_s"], 3), "input_nodes_per_batch": int(np.mean(rate["stats"]))}

        step("sample", sample)

        variants = [] if args.no_memmap else [("memmap", None)]
        variants += [(f"disk_cache_{fraction:g}", fraction) for fraction in args.cache_fractions]
        for name, fraction in variants:
            step(name, lambda: end_to_end(args, chain, features, fraction))
            if fraction is not None and fio_iops:
                results[name]["fraction_of_fio"] = round(results[name]["disk_rows_per_s"] / fio_iops, 3)
    finally:
        if cgroup is not None:
            cgroup.close()
        if not args.keep:
            for path in (edges, graph_file, features):
                if os.path.exists(path):
                    os.remove(path)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def end_to_end(args, chain, features_path: str, cache_fraction) -> dict:
    """``gp.DataLoader`` of sample + fetch with the features as a memmap
    (``cache_fraction is None``) or on disk behind a cache of that fraction of the rows."""
    disk = cached = None
    if cache_fraction is None:
        feature = gp.Feature(features_path)
    else:
        feature = disk = DiskBasedFeature(features_path, num_threads=args.io_threads)
        if cache_fraction > 0:
            row_bytes = disk.nbytes // disk.num_rows
            feature = cached = CPUCachedFeature(disk, int(cache_fraction * disk.num_rows) * row_bytes)
    pipe = chain(1).fetch_feature(gp.FeatureStore({"feat": feature}), node_feature_keys=["feat"])
    batches = iter(gp.DataLoader(pipe))
    try:
        for _ in range(args.warmup if cached is None else args.cache_warmup):
            next(batches)
        if cached is not None:
            cached.reset_stats()

        def check(batch):
            expected = (batch.input_nodes % _CHECK_MODULUS).to(batch.node_features["feat"].dtype)
            assert torch.equal(batch.node_features["feat"][:, 0], expected)
            return batch.input_nodes.numel()

        rate = measure_rate(batches, 0, args.windows, args.window, check)
    finally:
        batches.close()
        for thread in threading.enumerate():  # a stage left finishing a slow batch would read on
            if thread.name.startswith(("graphpipe-prefetch", "graphpipe-pool")):
                thread.join()
    rows_per_batch = float(np.mean(rate["stats"]))
    result = {"it_per_s": round(rate["it_per_s"], 3), "rows_per_batch": int(rows_per_batch)}
    if disk is not None:
        misses = cached.cache_stats()["misses"] / len(rate["stats"]) if cached is not None else rows_per_batch
        result["hit_rate"] = round(cached.hit_rate, 3) if cached is not None else 0.0
        result["disk_rows_per_s"] = round(misses * rate["it_per_s"])
        result["direct_io"] = disk.uses_direct_io
        disk.close()
    return result


if __name__ == "__main__":
    main()
