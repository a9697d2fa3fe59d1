"""Argument checks shared by stages: each error names the argument and the expected form."""

import math
import numbers
from typing import List, Optional, Sequence

import numpy as np
import torch

__all__ = [
    "ID_DTYPES",
    "NOT_TIME_DTYPES",
    "as_int",
    "check_fanout",
    "check_fanouts",
    "check_graphbolt_flags",
    "check_importance_sampling",
    "check_int",
    "check_number",
    "check_node_ids",
    "check_node_pairs",
    "check_reverse_edge_ids",
]

# The dtypes of ids users may give (graphpipe widens them; uint16-64 are refused: torch lacks their ops).
ID_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)
# Integer dtypes that are not times: bool, and uint64 (its values past int64's would wrap).
NOT_TIME_DTYPES = (torch.bool, getattr(torch, "uint64", torch.bool))

# LABOR-k's largest k: LABOR-* (-1) converges in about 16 iterations, and each more is a
# pass over every sampled edge (k = 10**6 took 48 s for two batches of 4 seeds).
MAX_IMPORTANCE_SAMPLING = 100


def as_int(value) -> Optional[int]:
    """``value`` as a Python int when it is an integer in one of the forms users pass:
    a Python int, a numpy integer, or an integer tensor / numpy array with exactly one
    element (0-d or ``[1]``, as GraphBolt's fanouts ``[torch.LongTensor([15]), ...]``).
    None for anything else: bools, floats (also ``1.0``), strings, longer tensors."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, torch.Tensor):
        integer = not (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool)
        return int(value.item()) if integer and value.numel() == 1 else None
    if isinstance(value, np.ndarray):
        return int(value.item()) if value.dtype.kind in "iu" and value.size == 1 else None
    return None


def check_bool(value, name: str, where: str, why: str = "") -> bool:
    """``value`` if it is a bool, else a TypeError naming ``name`` (``why``: a parenthesis)."""
    if not isinstance(value, bool):
        raise TypeError(f"{where}: `{name}` must be a bool{why}, got {value!r}")
    return value


def check_int(value, name: str, where: str, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    """``value`` (see :func:`as_int`) as a Python int in ``[minimum, maximum]``; a
    ValueError naming ``where`` and the argument ``name`` otherwise."""
    number = as_int(value)
    if number is None or (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        if minimum is not None and maximum is not None:
            expected = f"an int in [{minimum}, {maximum}]"
        elif minimum is not None:
            expected = f"an int >= {minimum}"
        elif maximum is not None:
            expected = f"an int <= {maximum}"
        else:
            expected = "an int"
        raise ValueError(f"{where}: `{name}` must be {expected}, got {value!r}")
    return number


def check_number(value, name: str, where: str, low: float = -math.inf, high: float = math.inf, low_open: bool = False) -> float:
    """``value`` as a float when it is a finite real number (a Python or numpy number, or a
    one-element tensor; not a bool) in ``[low, high]`` (``(low, high]`` when ``low_open``);
    a ValueError naming ``where`` and the argument ``name`` otherwise."""
    one_element = isinstance(value, torch.Tensor) and value.numel() == 1 or isinstance(value, np.ndarray) and value.size == 1
    number = value.item() if one_element else value
    real = isinstance(number, numbers.Real) and not isinstance(number, (bool, np.bool_))
    if not (real and math.isfinite(number) and (low < number if low_open else low <= number) and number <= high):
        bounds = [f"> {low}" if low_open else f">= {low}"] if low > -math.inf else []
        bounds += [f"<= {high}"] if high < math.inf else []
        raise ValueError(f"{where}: `{name}` must be a finite number{' ' + ' and '.join(bounds) if bounds else ''}, got {value!r}")
    return float(number)


def check_fanouts(fanouts: Sequence[int], where: str) -> List[int]:
    """``fanouts`` (a list or tuple of ints in the forms of :func:`as_int`, or a 1-D integer
    tensor or numpy array) as a list of ints, each ``>= 0`` (0: the layer samples no edge,
    as a typed graph's and PyG's) or ``-1`` (all neighbours)."""
    if isinstance(fanouts, (torch.Tensor, np.ndarray)) and fanouts.ndim == 1:
        fanouts = fanouts.tolist()
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence) or len(fanouts) == 0:
        raise ValueError(
            f"{where}: `fanouts` must be a non-empty list of ints (one per GNN layer, each >= 0 "
            f"or -1 for all neighbours), got {fanouts!r}"
        )
    return [check_fanout(f, where, f"fanouts[{i}]") for i, f in enumerate(fanouts)]


def check_fanout(value, where: str, name: str = "fanout") -> int:
    """One layer's fanout (see :func:`as_int`), ``>= 0`` (0: no edge) or ``-1`` (all), as an int."""
    fanout = as_int(value)
    if fanout is None or fanout < -1:
        raise ValueError(f"{where}: `{name}` must be an int >= 0 or -1 (all neighbours), got {value!r}")
    return fanout


def check_importance_sampling(importance_sampling, where: str) -> int:
    """LABOR's ``importance_sampling`` as an int: 0 (LABOR-0), ``0 < k <= 100``
    (LABOR-k) or -1 (LABOR-*, iterate until converged)."""
    k = as_int(importance_sampling)
    if k is None or k < -1:
        raise ValueError(
            f"{where}: `importance_sampling` must be an int >= -1 (0: LABOR-0, k > 0: LABOR-k, "
            f"-1: LABOR-*), got {importance_sampling!r}"
        )
    if k > MAX_IMPORTANCE_SAMPLING:
        raise ValueError(
            f"{where}: `importance_sampling`={k} iterations is more than the {MAX_IMPORTANCE_SAMPLING} allowed; "
            f"use importance_sampling=-1 (LABOR-*), which iterates until the probabilities converge "
            f"(about 16 iterations)"
        )
    return k


def check_node_ids(ids: torch.Tensor, num_nodes: int, name: str, where: str, kind: str = "node") -> torch.Tensor:
    """``ids`` as int64, after checking it is a 1-D integer tensor within ``[0, num_nodes)``.

    ``kind`` ("node" or "edge") is the kind of id the error message names."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{where}: `{name}` must be a torch.Tensor of {kind} ids, got {type(ids).__name__}")
    if ids.dtype not in ID_DTYPES:
        raise TypeError(
            f"{where}: `{name}` must be an integer tensor of {kind} ids (int64, int32, int16, int8 or uint8), got dtype {ids.dtype}"
        )
    if ids.dim() != 1:
        raise ValueError(f"{where}: `{name}` must be 1-D, got shape {tuple(ids.shape)}")
    if ids.numel():
        if ids.device.type == "cpu":
            # numpy's reductions: torch's threaded aminmax takes milliseconds on a busy machine
            lo, hi = int(ids.numpy().min()), int(ids.numpy().max())
        else:
            lo, hi = torch.stack(torch.aminmax(ids)).tolist()  # one host read of both
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{where}: `{name}` holds {kind} id {bad}, out of range: valid ids are "
                f"0..{num_nodes - 1} (num_{kind}s={num_nodes})"
            )
    return ids.to(torch.int64)


def check_node_pairs(pairs: torch.Tensor, num_nodes: int, name: str, where: str) -> torch.Tensor:
    """``pairs`` as int64, after checking it is an ``[N, 2]`` integer tensor of
    ``(source, destination)`` node ids within ``[0, num_nodes)``."""
    if isinstance(pairs, torch.Tensor) and (pairs.dim() != 2 or pairs.size(1) != 2):
        raise ValueError(
            f"{where}: `{name}` must be node pairs of shape [N, 2] (one (source, destination) row per "
            f"pair, as ItemSet(pairs, names='seeds') takes them), got shape {tuple(pairs.shape)}"
        )
    check_node_ids(pairs.reshape(-1) if isinstance(pairs, torch.Tensor) else pairs, num_nodes, name, where)
    return pairs.to(torch.int64)


def check_reverse_edge_ids(reverse_edge_ids, num_edges: int, where: str) -> torch.Tensor:
    """``reverse_edge_ids`` (user edge id -> user edge id of its reverse; DGL's
    ``reverse_eids``) as a ``[num_edges]`` int64 CPU tensor: an integer tensor, numpy array
    or list of ``num_edges`` ids in ``[0, num_edges)``. TypeError for another kind of value,
    ValueError for another shape or an id out of range."""
    expected = f"a [num_edges] = [{num_edges}] integer tensor or numpy array (edge id -> the id of its reverse edge)"
    value = reverse_edge_ids
    if isinstance(value, (list, tuple)):
        try:
            value = torch.tensor(value)
        except (TypeError, ValueError, RuntimeError, OverflowError):
            raise TypeError(f"{where}: `reverse_edge_ids` must be {expected}, got a list that is not one") from None
    elif isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise TypeError(f"{where}: `reverse_edge_ids` must be {expected}, got a numpy array of dtype {value.dtype}")
        value = torch.from_numpy(value.astype(np.int64, copy=False))
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where}: `reverse_edge_ids` must be {expected}, got {type(value).__name__}")
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        raise TypeError(f"{where}: `reverse_edge_ids` must be {expected}, got dtype {value.dtype}")
    if value.dim() != 1 or value.numel() != num_edges:
        raise ValueError(f"{where}: `reverse_edge_ids` must be {expected}, got shape {tuple(value.shape)}")
    return check_node_ids(value.cpu(), num_edges, "reverse_edge_ids", where, kind="edge")


# GraphBolt's GPU cache of in-edges: its sizes' least values.
_GRAPHBOLT_SIZES = {"num_gpu_cached_edges": 0, "gpu_cache_threshold": 1}


def check_graphbolt_flags(where: str, **flags) -> None:
    """GraphBolt's scheduling flags (``overlap_fetch``, ``asynchronous``: bools) and GPU
    graph cache sizes (ints), no-ops here."""
    for arg, value in flags.items():
        if arg in _GRAPHBOLT_SIZES:
            check_int(value, arg, where, minimum=_GRAPHBOLT_SIZES[arg])
        else:
            check_bool(value, arg, where, " (GraphBolt's flag; graphpipe's DataLoader overlaps stages itself)")
