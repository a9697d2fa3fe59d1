"""Unique-and-compact: relabel a layer's nodes to local ids, destinations first."""

from typing import Tuple

import torch

__all__ = ["unique_and_compact"]


def unique_and_compact(dst_nodes: torch.Tensor, src_nodes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Give every node of a sampled layer a local id, destination nodes first.

    Args:
        dst_nodes: ``[num_dst]`` int64 distinct global ids (the layer's destinations).
        src_nodes: ``[num_edges]`` int64 global ids of sampled sources (repeats allowed).

    Returns:
        ``(unique_nodes, local_src)``: ``unique_nodes`` ``[num_src]`` int64 is
        ``dst_nodes`` followed by the source ids that are not destinations, each once, in
        ascending id order; ``local_src`` ``[num_edges]`` int64 gives
        ``unique_nodes[local_src] == src_nodes``.
    """
    num_dst = dst_nodes.numel()
    all_nodes = torch.cat([dst_nodes.to(torch.int64), src_nodes.to(torch.int64)])
    uniq, inverse = torch.unique(all_nodes, sorted=True, return_inverse=True)
    local_of_uniq = torch.empty_like(uniq)
    is_dst = torch.zeros(uniq.numel(), dtype=torch.bool, device=uniq.device)
    is_dst[inverse[:num_dst]] = True
    local_of_uniq[inverse[:num_dst]] = torch.arange(num_dst, device=uniq.device)
    new = ~is_dst
    local_of_uniq[new] = num_dst + torch.arange(int(new.sum()), device=uniq.device)
    unique_nodes = torch.cat([dst_nodes.to(torch.int64), uniq[new]])
    return unique_nodes, local_of_uniq[inverse[num_dst:]]
