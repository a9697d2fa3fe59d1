"""Cooperative minibatching: the ranks sample, fetch and compute one shared global batch.

After Balın et al., "Cooperative Minibatching in Graph Neural Networks": each vertex has
one owner (:class:`~graphpipe.distributed.Partition`). For global batch ``i`` (the union
of the ranks' shares from a :class:`~graphpipe.DistributedItemSampler`):

1. every rank sends its seeds (and labels) to their owners;
2. per layer, from the seeds outwards, each rank samples the in-edges of the frontier
   vertices it owns (``sampler.sample_layer``, keyed by global vertex ids, so the edges
   do not depend on which rank samples), compacts them into an ordinary
   :class:`~graphpipe.SampledSubgraph`, and sends the layer's source ids to their owners
   (all-to-all: counts first, then ids, sorted by owner). The owners deduplicate what
   they receive: that is their frontier for the next layer;
3. features are read by the owners for their own vertices and sent to the ranks that
   need them (``fetch_feature(..., cooperative=True)``);
4. between GNN layers the model calls :func:`cooperative_exchange`, which sends each
   rank the rows of its next layer's source nodes from their owners (autograd-aware).

A vertex needed by several ranks is sampled and read once, by its owner: with
overlapping neighbourhoods the ranks sample and fetch fewer distinct vertices in total
than with independent batches. With a fixed seed the union over ranks of the sampled
edges of a global batch equals what one process samples for that batch.

Each exchange is one ``torch.distributed.all_to_all_single`` (gloo on CPU, NCCL on
GPU) on the process group the :class:`~graphpipe.DistributedItemSampler` made for that
stage, so the sampling thread, the feature thread and the training loop never
interleave collectives on one group. Feature exchanges of all keys of a batch are in
flight together (``async_op=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from ..minibatch import MiniBatch, SampledSubgraph
from ..ops import unique_and_compact
from ..validation import check_node_ids
from .item_sampler import find_distributed_item_sampler
from .partition import Partition

__all__ = [
    "CooperativeSampledSubgraph",
    "ExchangePlan",
    "cooperative_exchange",
    "fetch_node_features_cooperatively",
    "sample_subgraphs_cooperatively",
]


@dataclass
class ExchangePlan:
    """How the rows of one layer's source nodes reach this rank from their owners.

    Attributes:
        local_node_ids: ``[num_local]`` int64 global ids of the rows this rank holds and
            serves: the vertices it owns in the layer's input (row ``k`` of the ``h``
            given to :func:`cooperative_exchange` belongs to ``local_node_ids[k]``).
        send_index: ``[sum(send_counts)]`` int64 rows of ``local_node_ids`` this rank
            sends, grouped by requesting rank.
        send_counts: rows sent to each rank (``world_size`` ints).
        recv_counts: rows received from each rank (``world_size`` ints).
        recv_index: ``[num_src_nodes]`` int64: source node ``j`` of the layer is row
            ``recv_index[j]`` of the received buffer.
        group: the process group of the model's exchanges.
    """

    local_node_ids: torch.Tensor
    send_index: torch.Tensor
    send_counts: List[int]
    recv_counts: List[int]
    recv_index: torch.Tensor
    group: Optional[object] = None


@dataclass
class CooperativeSampledSubgraph(SampledSubgraph):
    """A :class:`~graphpipe.SampledSubgraph` of the destinations this rank owns, with the
    :class:`ExchangePlan` that brings its source rows (``original_row_node_ids``) from
    their owners."""

    exchange: Optional[ExchangePlan] = None


def _all_to_all(send: torch.Tensor, send_counts: List[int], recv_counts: List[int], group, async_op=False):
    """Rows of ``send`` (grouped by rank, ``send_counts``) to every rank; returns ``(received, work)``."""
    send = send.contiguous()
    received = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
    work = dist.all_to_all_single(received, send, recv_counts, send_counts, group=group, async_op=async_op)
    return received, work


def _send_to_owners(ids: torch.Tensor, partition: Partition, group) -> Tuple[torch.Tensor, torch.Tensor, List[int], List[int]]:
    """Send every id to its owner.

    Returns ``(received, order, sent_counts, received_counts)``: ``received`` holds the
    ids this rank owns, from rank 0's requests to the last rank's; ``ids[order]`` is what
    was sent, grouped by owner.
    """
    owners = partition.owner(ids)
    order = torch.argsort(owners, stable=True)
    counts = torch.bincount(owners, minlength=partition.num_parts)
    received_counts = torch.empty_like(counts)
    dist.all_to_all_single(received_counts, counts, group=group)
    sent_counts, received_counts = counts.tolist(), received_counts.tolist()
    received, _ = _all_to_all(ids[order], sent_counts, received_counts, group)
    return received, order, sent_counts, received_counts


def agree_on_seed(sampler, seed: Optional[int]) -> int:
    """The seed every rank's cooperative ``sampler`` uses, agreed once when it is built.

    One ``all_gather`` on the sampling group of the DistributedItemSampler upstream:
    ``seed=None`` takes the seed rank 0 draws; a given seed must be the same on every
    rank (a ValueError otherwise). Without a process group (``rank=``/``world_size=``
    given) there is nothing to agree on: the seed is returned (drawn when None).
    """
    where = f"{type(sampler).__name__} (cooperative)"
    drawn = int(torch.randint(0, 2**62, ())) if seed is None else seed
    try:
        source = find_distributed_item_sampler(sampler, where)
    except ValueError:
        return drawn  # the first batch reports the missing DistributedItemSampler
    if source.sampling_group is None or not dist.is_initialized():
        return drawn
    mine = torch.tensor([drawn >> 32, drawn & 0xFFFFFFFF, seed is None], dtype=torch.int64)
    gathered = [torch.empty_like(mine) for _ in range(source.world_size)]
    dist.all_gather(gathered, mine, group=source.sampling_group)
    seeds = [(int(t[0]) << 32) | int(t[1]) for t in gathered]
    if seed is not None and len(set(seeds)) != 1:
        raise ValueError(f"{where}: `seed` must be the same on every rank, got {seeds} (per rank)")
    return seeds[0]


def sample_subgraphs_cooperatively(sampler, minibatch: MiniBatch) -> MiniBatch:
    """Sample this rank's part of the global batch that ``minibatch`` is this rank's share of.

    A collective call: every rank of the DistributedItemSampler upstream of ``sampler``
    calls it for the same global batch. ``sampler.seed`` is the same on every rank
    (agreed once when the sampler was built: :func:`agree_on_seed`).

    Returns the MiniBatch with ``seeds`` (and ``labels``) replaced by the global batch's
    seeds this rank owns, ``sampled_subgraphs`` a list of
    :class:`CooperativeSampledSubgraph` (destinations: the vertices of the layer's
    frontier this rank owns) and ``input_nodes`` the first layer's source nodes.
    """
    where = f"{type(sampler).__name__} (cooperative)"
    source = find_distributed_item_sampler(sampler, where)
    if source.sampling_group is None or not dist.is_initialized():
        raise RuntimeError(
            f"{where}: torch.distributed is not initialised in this process (cooperative sampling cannot run "
            f"in worker processes: use DataLoader(num_workers=0))"
        )
    if source.uneven:
        raise ValueError(
            f"{where}: some ranks get fewer batches than others ({len(source.item_set)} items, batch_size="
            f"{source.batch_size}, {source.world_size} ranks); pass drop_uneven_inputs=True to the "
            f"DistributedItemSampler"
        )
    if minibatch.seeds is None:
        raise ValueError(f"{where}: the MiniBatch has no `seeds` to sample from")
    group, partition = source.sampling_group, source.partition
    seeds = check_node_ids(minibatch.seeds, sampler.graph.num_nodes, "seeds", where)

    nodes, order, sent, received = _send_to_owners(seeds, partition, group)
    labels, labels_sent = minibatch.labels, None
    if labels is not None:
        # In flight while the layers are sampled.
        labels, labels_sent = _all_to_all(labels[order], sent, received, group, async_op=True)
    owned_seeds = nodes
    subgraphs: List[SampledSubgraph] = []
    for layer in reversed(range(len(sampler.fanouts))):
        # compact_layer gives the block in local ids with the user's edge ids.
        subgraph = sampler.compact_layer(nodes, sampler.sample_layer(nodes, layer, minibatch))
        plan = _plan_exchange(subgraph.original_row_node_ids, nodes, partition, group, source.exchange_group)
        subgraphs.append(CooperativeSampledSubgraph(**vars(subgraph), exchange=plan))
        nodes = plan.local_node_ids
    subgraphs.reverse()
    if labels_sent is not None:
        labels_sent.wait()
    return replace(
        minibatch,
        seeds=owned_seeds,
        labels=labels,
        sampled_subgraphs=subgraphs,
        input_nodes=subgraphs[0].original_row_node_ids,
    )


def _plan_exchange(src_nodes, owned_dst, partition, group, exchange_group) -> ExchangePlan:
    """Send a layer's source ids to their owners; return the layer's plan, whose
    ``local_node_ids`` are this rank's next frontier (``owned_dst`` first, then the other
    owned ids received, ascending)."""
    received, order, sent_counts, received_counts = _send_to_owners(src_nodes, partition, group)
    frontier, positions = unique_and_compact(owned_dst, received)
    recv_index = torch.empty_like(order)
    recv_index[order] = torch.arange(order.numel())
    return ExchangePlan(
        local_node_ids=frontier,
        send_index=positions,
        send_counts=received_counts,
        recv_counts=sent_counts,
        recv_index=recv_index,
        group=exchange_group,
    )


def _start_exchange(rows: torch.Tensor, plan: ExchangePlan, group):
    """Start sending ``rows`` (``[num_local, ...]``) per ``plan``; ``finish()`` returns the source rows."""
    index = plan.send_index.to(rows.device)
    received, work = _all_to_all(rows[index], plan.send_counts, plan.recv_counts, group, async_op=True)

    def finish() -> torch.Tensor:
        work.wait()
        return received[plan.recv_index.to(received.device)]

    return finish


class _Exchange(torch.autograd.Function):
    """Rows to the ranks that need them; gradients back to the owners, duplicates summed."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, plan: ExchangePlan) -> torch.Tensor:
        ctx.plan = plan
        ctx.num_rows = rows.shape[0]
        return _start_exchange(rows, plan, plan.group)()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        plan = ctx.plan
        buffer = grad.new_empty((sum(plan.recv_counts),) + tuple(grad.shape[1:]))
        buffer[plan.recv_index.to(grad.device)] = grad
        returned, _ = _all_to_all(buffer, plan.recv_counts, plan.send_counts, plan.group)
        grad_rows = grad.new_zeros((ctx.num_rows,) + tuple(grad.shape[1:]))
        grad_rows.index_add_(0, plan.send_index.to(grad.device), returned)
        return grad_rows, None


def cooperative_exchange(minibatch: MiniBatch, layer: int, h: torch.Tensor) -> torch.Tensor:
    """The input rows of GNN layer ``layer``, gathered from their owners.

    Args:
        minibatch: a batch from a cooperative sampler.
        layer: the GNN layer about to run (``0 <= layer < num_layers``).
        h: ``[num_local, ...]`` rows this rank owns: the output of layer ``layer - 1``
            (rows of ``sampled_subgraphs[layer - 1].original_column_node_ids``), or for
            ``layer = 0`` rows of ``sampled_subgraphs[0].exchange.local_node_ids``.

    Returns:
        ``[sampled_subgraphs[layer].num_src_nodes, ...]``: row ``j`` belongs to
        ``original_row_node_ids[j]``. In backward, each row's gradient goes back to its
        owner and gradients of a row sent to several ranks are summed. A collective call,
        forward and backward: every rank runs it (and its backward) for the same layers.
    """
    subgraphs = minibatch.sampled_subgraphs or []
    if not 0 <= layer < len(subgraphs):
        raise ValueError(f"cooperative_exchange: `layer` must be in [0, {len(subgraphs)}), got {layer!r}")
    subgraph = subgraphs[layer]
    if not isinstance(subgraph, CooperativeSampledSubgraph) or subgraph.exchange is None:
        raise ValueError(
            "cooperative_exchange: the MiniBatch was not sampled cooperatively; build the sampler with "
            "cooperative=True"
        )
    plan = subgraph.exchange
    if not isinstance(h, torch.Tensor) or h.dim() == 0 or h.shape[0] != plan.local_node_ids.numel():
        raise ValueError(
            f"cooperative_exchange: `h` must be a tensor [{plan.local_node_ids.numel()}, ...] (one row per "
            f"vertex this rank owns in layer {layer}'s input), got "
            f"{tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__}"
        )
    return _Exchange.apply(h, plan)


def fetch_node_features_cooperatively(fetcher, minibatch: MiniBatch) -> Dict[str, torch.Tensor]:
    """``fetcher.node_feature_keys`` for ``minibatch.input_nodes``, each row read by its owner.

    Each rank reads the rows of the input vertices it owns (once, however many ranks need
    them) and all-to-all sends them to the ranks that need them; the exchanges of all
    keys run together. A collective call on the feature group of the
    DistributedItemSampler upstream of ``fetcher``.
    """
    where = "FeatureFetcher (cooperative)"
    source = find_distributed_item_sampler(fetcher, where)
    subgraphs = minibatch.sampled_subgraphs or []
    if not subgraphs or not isinstance(subgraphs[0], CooperativeSampledSubgraph):
        raise ValueError(f"{where}: the MiniBatch was not sampled cooperatively; put a sampler with cooperative=True before it")
    plan = subgraphs[0].exchange
    pending = {
        key: _start_exchange(fetcher.features["node", key].read(plan.local_node_ids), plan, source.feature_group)
        for key in fetcher.node_feature_keys
    }
    return {key: finish() for key, finish in pending.items()}
