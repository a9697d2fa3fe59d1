"""Ownership: which rank owns each vertex in cooperative minibatching.

The owner of a vertex samples its in-edges, reads its features and holds its rows of
every layer's output. Two fixed assignments:

* hash partition (the default): ``owner(v) = mix64(v) mod num_parts``, with the
  SplitMix64 finaliser of :mod:`graphpipe.ops.random`. Hashing instead of ``v mod P``
  keeps the parts balanced when ids correlate with degree or community (generators
  and reorderings often number hubs or clusters consecutively).
* a user partition: a ``[num_nodes]`` integer tensor, ``assignment[v]`` the rank that
  owns ``v`` (e.g. from METIS or the graph's communities). A locality-preserving
  partition keeps more of each neighbourhood on its owner, so fewer ids and rows cross
  ranks.

On typed (heterogeneous) graphs vertices are keyed by their global id,
``graph.node_type_offset[type] +`` type-local id: one partition of ``graph.total_num_nodes``
ids covers every node type (a user assignment is indexed by global ids), and the hash
partition spreads every type over the ranks.
"""

from __future__ import annotations

from typing import Optional

import torch

from graphpipe._internal.checks import check_int
from graphpipe.ops.torch_random import mix64

__all__ = ["Partition", "owner_dtype"]


def owner_dtype(num_parts: int) -> torch.dtype:
    """The smallest integer dtype holding the ranks ``0..num_parts - 1``: uint8 up to 256
    parts, then int16 and int32 (an assignment is read by every rank: 1 byte per vertex)."""
    if num_parts <= 1 << 8:
        return torch.uint8
    return torch.int16 if num_parts <= 1 << 15 else torch.int32


class Partition:
    """A fixed map from vertex id to owning rank in ``[0, num_parts)``.

    Args:
        num_parts: number of ranks, ``>= 1``.
        assignment: ``[num_nodes]`` integer tensor of ranks, or None for the hash
            partition. Every rank must use the same assignment. Kept as
            :func:`owner_dtype` (``num_parts``): uint8 up to 256 parts.
    """

    def __init__(self, num_parts: int, assignment: Optional[torch.Tensor] = None):
        num_parts = check_int(num_parts, "num_parts", "Partition", minimum=1)
        if assignment is not None:
            if not isinstance(assignment, torch.Tensor) or assignment.dim() != 1 or assignment.is_floating_point():
                raise ValueError(
                    "Partition: `assignment` must be a 1-D integer tensor [num_nodes] of ranks, got "
                    f"{type(assignment).__name__}"
                    + (f" of shape {tuple(assignment.shape)} and dtype {assignment.dtype}" if isinstance(assignment, torch.Tensor) else "")
                )
            if assignment.numel():
                lo, hi = (int(x) for x in torch.aminmax(assignment))
                if lo < 0 or hi >= num_parts:
                    raise ValueError(
                        f"Partition: `assignment` holds rank {lo if lo < 0 else hi}; ranks must be in "
                        f"0..{num_parts - 1} (num_parts={num_parts})"
                    )
            assignment = assignment.to(owner_dtype(num_parts))
        self.num_parts = num_parts
        self.assignment = assignment

    def owner(self, nodes: torch.Tensor) -> torch.Tensor:
        """``[n]`` int64 owning rank of each of ``nodes`` (``[n]`` int64 global ids)."""
        if self.assignment is not None:
            if nodes.numel() and int(nodes.max()) >= self.assignment.numel():
                raise ValueError(
                    f"Partition.owner: node id {int(nodes.max())} is beyond the partition's "
                    f"{self.assignment.numel()} nodes"
                )
            return self.assignment.to(nodes.device)[nodes].to(torch.int64)
        if self.num_parts == 1:
            return torch.zeros_like(nodes, dtype=torch.int64)
        # mix64 works on int64 bits of a uint64; drop the sign bit before the modulo.
        return (mix64(nodes.to(torch.int64)) & ((1 << 63) - 1)) % self.num_parts

    def __repr__(self) -> str:
        kind = "hash" if self.assignment is None else f"assignment of {self.assignment.numel()} nodes"
        return f"Partition(num_parts={self.num_parts}, {kind})"
