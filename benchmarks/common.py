"""Measurement helpers shared by the CPU benchmarks and by both sides of compare_graphbolt.py.

Only numpy, torch and the standard library: ``graphbolt_side.py`` imports this module in
the GraphBolt venv (torch 2.2, numpy < 2), where graphpipe is not installed.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np
import torch

__all__ = ["batch_shape", "consecutive_overlap", "endless", "layer_shape", "measure_rate", "ratio"]


def measure_rate(
    batches: Iterable,
    warmup: int,
    windows: int,
    window: int,
    inspect: Optional[Callable[[object], object]] = None,
) -> Dict:
    """Throughput of an iterable of batches: skip ``warmup`` batches, then time ``windows``
    consecutive windows of ``window`` batches each.

    The rate of a window is ``window / wall seconds``; the result's ``it_per_s`` is the
    median over windows. Windows (not single batches) are timed because a loader with
    several workers hands batches over in bursts, so single inter-arrival times say
    little. ``inspect(batch)`` runs inside the timed loop on every measured batch (keep
    it O(1), e.g. read shapes); its results are returned in order as ``stats``.

    ``cpu_s_per_batch`` is the median over windows of this process's CPU time (every
    thread, user and system) per batch: how many core-seconds a batch costs, which bounds
    what stages sharing the same cores can reach together. Worker processes are not in it.

    Raises:
        ValueError: if the iterable ends before ``warmup + windows * window`` batches.
    """
    needed = warmup + windows * window
    iterator = iter(batches)
    stats: List[object] = []
    rates: List[float] = []
    cpu_per_batch: List[float] = []
    try:
        for _ in range(warmup):
            _next(iterator, needed)
        for _ in range(windows):
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(window):
                batch = _next(iterator, needed)
                if inspect is not None:
                    stats.append(inspect(batch))
            rates.append(window / (time.perf_counter() - start))
            cpu_per_batch.append((time.process_time() - cpu_start) / window)
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
    return {
        "it_per_s": statistics.median(rates),
        "window_it_per_s": rates,
        "cpu_s_per_batch": statistics.median(cpu_per_batch),
        "stats": stats,
    }


def _next(iterator, needed: int):
    try:
        return next(iterator)
    except StopIteration:
        raise ValueError(
            f"measure_rate: the batches ran out before warmup + windows * window = {needed}; "
            "give the sampler more seeds or measure fewer batches"
        ) from None


def batch_shape(minibatch) -> Dict[str, int]:
    """``input_nodes`` and ``sampled_edges`` (summed over layers) of a sampled MiniBatch,
    and for typed batches (dict ``input_nodes``, a CSC per edge type) the sums over types
    and ``sampled_edges_layer{i}`` per layer (layer 0: the input layer).

    Works for graphpipe and GraphBolt MiniBatches alike (both have ``input_nodes`` and
    ``sampled_subgraphs[i].sampled_csc.indices``).
    """
    if not isinstance(minibatch.input_nodes, dict):
        return {
            "input_nodes": int(minibatch.input_nodes.numel()),
            "sampled_edges": sum(int(s.sampled_csc.indices.numel()) for s in minibatch.sampled_subgraphs),
        }
    shape = {"input_nodes": sum(int(ids.numel()) for ids in minibatch.input_nodes.values())}
    for layer, subgraph in enumerate(minibatch.sampled_subgraphs):
        shape[f"sampled_edges_layer{layer}"] = sum(int(csc.indices.numel()) for csc in subgraph.sampled_csc.values())
    shape["sampled_edges"] = sum(value for key, value in shape.items() if key.startswith("sampled_edges_layer"))
    return shape


def layer_shape(minibatch) -> Dict[str, int]:
    """:func:`batch_shape` with ``sampled_edges_layer{i}`` per layer (layer 0: the input
    layer) for untyped batches too (typed ones have them already)."""
    shape = batch_shape(minibatch)
    if not isinstance(minibatch.input_nodes, dict):
        for layer, subgraph in enumerate(minibatch.sampled_subgraphs):
            shape[f"sampled_edges_layer{layer}"] = int(subgraph.sampled_csc.indices.numel())
    return shape


def consecutive_overlap(node_sets: Sequence[torch.Tensor]) -> float:
    """Median over ``i >= 1`` of ``|set_i ∩ set_{i-1}| / |set_i|`` (node id tensors, each
    without repeats): how much of a batch's input was already in the previous batch's."""
    fractions = []
    for previous, current in zip(node_sets[:-1], node_sets[1:]):
        shared = np.intersect1d(previous.numpy(), current.numpy(), assume_unique=True).size
        fractions.append(shared / max(current.numel(), 1))
    return statistics.median(fractions)


def ratio(ours: Optional[float], theirs: Optional[float]) -> Optional[float]:
    """``ours / theirs``, or None when either is missing."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def endless(pipe: Iterable) -> Iterator:
    """The batches of ``pipe``, epoch after epoch (``iter(pipe)`` starts each epoch)."""
    return itertools.chain.from_iterable(itertools.repeat(pipe))
