"""Shared helpers of the GPU benchmarks: timing with CUDA events, a generated power-law graph."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Callable

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import graphpipe as gp  # noqa: E402


def require_cuda(allow_cpu: bool = False) -> torch.device:
    """The CUDA device; exits without one unless ``allow_cpu`` (a smoke run of the code paths)."""
    if allow_cpu:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        sys.exit("this benchmark needs a CUDA GPU (torch.cuda.is_available() is False)")
    return torch.device("cuda")


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def cuda_ms(fn: Callable[[], object], warmup: int = 3, iters: int = 10) -> float:
    """Median milliseconds of ``fn()`` on the current stream, measured with CUDA events
    (wall clock on a CPU-only smoke run)."""
    if not torch.cuda.is_available():
        return wall_ms(fn, warmup, iters)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def sync() -> None:
    """Wait for the GPU's queued work (nothing to wait for on a CPU-only smoke run)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def wall_ms(fn: Callable[[], object], warmup: int = 2, iters: int = 10) -> float:
    """Median wall-clock milliseconds of ``fn()`` (synchronising CUDA after each call)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def power_law_graph(num_nodes: int, num_edges: int, seed: int = 0) -> gp.CSCGraph:
    """An R-MAT graph (Graph500 parameters, ids permuted), int32 arrays where they fit."""
    from graphpipe.datasets import rmat_edges

    src, dst = rmat_edges(num_nodes, num_edges, seed=seed)
    return gp.CSCGraph.from_coo(src, dst, num_nodes)


def emit(record: dict) -> None:
    """Print one result as a JSON line (collect them into benchmarks/RESULTS.md)."""
    record = {"device": device_name(), "cpu_cores": len(os.sched_getaffinity(0)), "torch": torch.__version__, **record}
    print(json.dumps(record), flush=True)
