"""LayerSample: what a one-layer sampling op returns, before compaction; :func:`ragged`
flattens per-destination rows of items, as the torch ops lay them out."""

from typing import NamedTuple, Optional, Tuple

import torch

__all__ = ["LayerSample", "ragged"]


class LayerSample(NamedTuple):
    """The edges sampled for one layer, in global ids, grouped by destination.

    Attributes:
        indptr: ``[num_dst + 1]`` int64; the sampled in-edges of destination ``j`` are
            positions ``indptr[j]:indptr[j + 1]``.
        indices: ``[num_sampled_edges]`` int64 global source node ids.
        edge_ids: ``[num_sampled_edges]`` int64 edge ids in the graph.
        edge_weights: ``[num_sampled_edges]`` float32 estimator weights, or None.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    edge_ids: torch.Tensor
    edge_weights: Optional[torch.Tensor] = None

    @classmethod
    def empty(cls, num_dst: int, device: torch.device, weights: bool = False) -> "LayerSample":
        """No edge for ``num_dst`` destinations (a fanout of 0); float32 ``edge_weights`` with ``weights``."""
        none = torch.empty(0, dtype=torch.int64, device=device)
        weight = torch.empty(0, dtype=torch.float32, device=device) if weights else None
        return cls(torch.zeros(num_dst + 1, dtype=torch.int64, device=device), none, none.clone(), weight)

    @classmethod
    def from_counts(cls, counts, indices, edge_ids, edge_weights=None) -> "LayerSample":
        """The layer whose destination ``j`` holds the next ``counts[j]`` of the sampled edges."""
        indptr = torch.zeros(counts.numel() + 1, dtype=torch.int64, device=counts.device)
        torch.cumsum(counts, 0, out=indptr[1:])
        return cls(indptr, indices, edge_ids, edge_weights)


def ragged(counts: torch.Tensor, total: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flatten ragged rows of ``counts`` items (``total`` in all): ``(row of item, position in
    row, row offsets)``."""
    offsets = torch.cumsum(counts, 0) - counts
    row = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts, output_size=total)
    return row, torch.arange(total, device=counts.device) - offsets[row], offsets
