"""Argument checks shared by stages: each error names the argument and the expected form."""

from typing import List, Sequence

import torch

__all__ = ["check_fanouts", "check_node_ids"]


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
