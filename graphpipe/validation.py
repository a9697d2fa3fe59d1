"""Argument checks shared by stages: each error names the argument and the expected form."""

from typing import List, Sequence

import numpy as np
import torch

__all__ = ["check_edge_weights", "check_fanout", "check_fanouts", "check_importance_sampling", "check_node_ids"]


def check_fanouts(fanouts: Sequence[int], where: str) -> List[int]:
    """``fanouts`` as a list of ints, each ``>= 1`` or ``-1`` (all neighbours)."""
    if isinstance(fanouts, torch.Tensor):
        fanouts = fanouts.tolist()
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence) or len(fanouts) == 0:
        raise ValueError(
            f"{where}: `fanouts` must be a non-empty list of ints (one per GNN layer, each >= 1 "
            f"or -1 for all neighbours), got {fanouts!r}"
        )
    out = []
    for i, f in enumerate(fanouts):
        if isinstance(f, bool) or not isinstance(f, int) or f == 0 or f < -1:
            raise ValueError(
                f"{where}: `fanouts[{i}]` must be an int >= 1 or -1 (all neighbours), got {f!r}"
            )
        out.append(int(f))
    return out


def check_fanout(fanout, where: str) -> int:
    """One layer's ``fanout`` (a Python or numpy int, ``>= 1`` or ``-1``) as an int."""
    if isinstance(fanout, bool) or not isinstance(fanout, (int, np.integer)) or fanout == 0 or fanout < -1:
        raise ValueError(f"{where}: `fanout` must be an int >= 1 or -1 (all neighbours), got {fanout!r}")
    return int(fanout)


def check_importance_sampling(importance_sampling, where: str) -> int:
    """LABOR's ``importance_sampling``: 0 (LABOR-0), ``k > 0`` (LABOR-k) or -1 (LABOR-*)."""
    if isinstance(importance_sampling, bool) or not isinstance(importance_sampling, int) or importance_sampling < -1:
        raise ValueError(
            f"{where}: `importance_sampling` must be an int >= -1 (0: LABOR-0, k > 0: LABOR-k, "
            f"-1: LABOR-*), got {importance_sampling!r}"
        )
    return importance_sampling


def check_node_ids(ids: torch.Tensor, num_nodes: int, name: str, where: str) -> torch.Tensor:
    """``ids`` as int64, after checking it is a 1-D integer tensor within ``[0, num_nodes)``."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{where}: `{name}` must be a torch.Tensor of node ids, got {type(ids).__name__}")
    if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(
            f"{where}: `{name}` must be an integer tensor (int32 or int64 node ids), got dtype {ids.dtype}"
        )
    if ids.dim() != 1:
        raise ValueError(f"{where}: `{name}` must be 1-D, got shape {tuple(ids.shape)}")
    if ids.numel():
        if ids.device.type == "cpu":
            # numpy's reductions: torch's threaded aminmax takes milliseconds on a busy machine
            lo, hi = int(ids.numpy().min()), int(ids.numpy().max())
        else:
            lo, hi = (int(x) for x in torch.aminmax(ids))
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{where}: `{name}` holds node id {bad}, out of range: valid ids are "
                f"0..{num_nodes - 1} (num_nodes={num_nodes})"
            )
    return ids.to(torch.int64)


def check_edge_weights(graph, name: str, where: str) -> torch.Tensor:
    """The edge attribute ``name`` of ``graph`` as sampling weights: 1-D, floating,
    no negative or NaN value; float16/bfloat16 widened to float32."""
    if name not in graph.edge_attributes:
        raise KeyError(
            f"{where}: `weights`={name!r} is not an edge attribute of the graph; known "
            f"edge attributes: {sorted(graph.edge_attributes)}"
        )
    probs = graph.edge_attributes[name]
    if probs.dim() != 1 or not probs.is_floating_point():
        raise ValueError(
            f"{where}: `weights` attribute {name!r} must be a 1-D float tensor "
            f"[num_edges], got shape {tuple(probs.shape)} and dtype {probs.dtype}"
        )
    if probs.dtype not in (torch.float32, torch.float64):
        probs = probs.to(torch.float32)
    if probs.numel() and not bool((probs >= 0).all()):
        raise ValueError(
            f"{where}: `weights` attribute {name!r} must be non-negative (and not NaN), "
            f"got minimum {float(probs.min())}"
        )
    return probs.contiguous()
