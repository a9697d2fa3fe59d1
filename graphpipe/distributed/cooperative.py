"""Cooperative minibatching: the ranks sample, fetch and compute one shared global batch.

After Balın et al., "Cooperative Minibatching in Graph Neural Networks": each vertex has
one owner (:class:`~graphpipe.distributed.Partition`). For global batch ``i`` (the union
of the ranks' shares from a :class:`~graphpipe.DistributedItemSampler`):

1. every rank sends its seeds (and labels) to their owners;
2. per layer, from the seeds outwards, each rank samples the in-edges of the frontier
   vertices it owns (``sampler.sample_block``, keyed by global vertex ids, so the edges
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

Typed (heterogeneous) graphs take the same steps with every id type-local, as in their
non-cooperative MiniBatches: a vertex's owner is that of its global id
(``node_type_offset[type] +`` type-local id), the ids of all node types cross in one
exchange per step, each rank samples its destinations' in-edges of every edge type
with the typed kernel, and every exchange plan, feature and model exchange is per
node type (:func:`_sample_typed_cooperatively`).

Each exchange is one ``torch.distributed.all_to_all_single`` (gloo on CPU, NCCL on
GPU) on the process group the :class:`~graphpipe.DistributedItemSampler` made for that
stage, so the sampling thread, the feature thread and the training loop never
interleave collectives on one group. Feature exchanges of all keys of a batch are in
flight together (``async_op=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple, Union

import torch
import torch.distributed as dist

from graphpipe.batch.item_set import HeteroItemSet
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.graph.sampled_subgraph import SampledSubgraph
from graphpipe.ops import unique_and_compact
from graphpipe.graph.checks import check_typed_seeds
from graphpipe._internal.checks import check_node_ids
from graphpipe.distributed.partition import Partition

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
    their owners: on typed graphs one plan per node type (``{ntype: ExchangePlan}``, every
    node type of the graph, ids type-local)."""

    exchange: Optional[Union[ExchangePlan, Dict[str, ExchangePlan]]] = None


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


def agree_on_seed(source, seed: Optional[int], where: str) -> int:
    """The seed every rank's cooperative sampler uses, agreed once when it is built.

    One ``all_gather`` on the sampling group of ``source``, the DistributedItemSampler
    upstream (None when there is none: the first batch reports it):
    ``seed=None`` takes the seed rank 0 draws; a given seed must be the same on every
    rank (a ValueError otherwise). Without a process group (``rank=``/``world_size=``
    given) there is nothing to agree on: the seed is returned (drawn when None).
    """
    drawn = int(torch.randint(0, 2**62, ())) if seed is None else seed
    if source is None or source.sampling_group is None or not dist.is_initialized():
        return drawn
    mine = torch.tensor([drawn >> 32, drawn & 0xFFFFFFFF, seed is None], dtype=torch.int64)
    gathered = [torch.empty_like(mine) for _ in range(source.world_size)]
    dist.all_gather(gathered, mine, group=source.sampling_group)
    seeds = [(int(t[0]) << 32) | int(t[1]) for t in gathered]
    if seed is not None and len(set(seeds)) != 1:
        raise ValueError(f"{where}: `seed` must be the same on every rank, got {seeds} (per rank)")
    return seeds[0]


def sample_subgraphs_cooperatively(sampler, minibatch: MiniBatch, source) -> MiniBatch:
    """Sample this rank's part of the global batch that ``minibatch`` is this rank's share of.

    A collective call: every rank of the DistributedItemSampler upstream of ``sampler``
    calls it for the same global batch. ``sampler.seed`` is the same on every rank
    (agreed once when the sampler was built: :func:`agree_on_seed`).

    Returns the MiniBatch with ``seeds`` (and ``labels``) replaced by the global batch's
    seeds this rank owns, ``sampled_subgraphs`` a list of
    :class:`CooperativeSampledSubgraph` (destinations: the vertices of the layer's
    frontier this rank owns) and ``input_nodes`` the first layer's source nodes.

    Typed graphs: the same exchanges, in the typed layout (see
    :func:`_sample_typed_cooperatively`).
    """
    where = f"{type(sampler).__name__} (cooperative)"
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
    if sampler.graph.is_heterogeneous:
        return _sample_typed_cooperatively(sampler, minibatch, source, where)
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
        # The block in local ids with the user's edge ids.
        subgraph = sampler.sample_block(nodes, (nodes.numel(),), layer, minibatch)
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


def _send_typed_to_owners(
    ids: List[torch.Tensor], partition: Partition, group
) -> Tuple[List[Tuple[torch.Tensor, torch.Tensor, List[int], List[int]]], torch.Tensor, torch.Tensor]:
    """Send every id to its owner, ids of every node type in one exchange.

    Args:
        ids: per node type id, ``[n_t]`` int64 GLOBAL ids (``node_type_offset[t] +``
            type-local id), the key of :class:`Partition`.

    Returns:
        ``(routes, sent, received)``: per node type, ``(received_ids, order,
        sent_counts, received_counts)`` as :func:`_send_to_owners` returns for that
        type's ids alone (``received_ids`` from rank 0's requests to the last rank's;
        ``ids[t][order]`` grouped by owner); ``sent`` and ``received`` are the
        ``[world_size, num_types]`` count matrices (row: the peer rank), with which
        per-item values of type ``t`` follow the ids (:func:`_send_typed_rows`).
    """
    num_types, num_parts = len(ids), partition.num_parts
    owners = [partition.owner(t_ids) for t_ids in ids]
    orders = [torch.argsort(o, stable=True) for o in owners]
    sent = torch.stack([torch.bincount(o, minlength=num_parts) for o in owners], dim=1).contiguous()
    received = torch.empty_like(sent)
    dist.all_to_all_single(received, sent, group=group)  # row r goes to rank r
    # The send buffer: per owner, per type (types in id order), the ids in their order.
    pieces = [t_ids[order].split(sent[:, t].tolist()) for t, (t_ids, order) in enumerate(zip(ids, orders))]
    buffer = torch.cat([pieces[t][r] for r in range(num_parts) for t in range(num_types)] or [torch.empty(0, dtype=torch.int64)])
    arrived, _ = _all_to_all(buffer, sent.sum(1).tolist(), received.sum(1).tolist(), group)
    arrived = arrived.split(received.flatten().tolist())  # piece r * num_types + t: type t from rank r
    routes = [
        (
            torch.cat([arrived[r * num_types + t] for r in range(num_parts)]),
            orders[t],
            sent[:, t].tolist(),
            received[:, t].tolist(),
        )
        for t in range(num_types)
    ]
    return routes, sent, received


def _sample_typed_cooperatively(sampler, minibatch: MiniBatch, source, where: str) -> MiniBatch:
    """:func:`sample_subgraphs_cooperatively` on a typed graph.

    Owners are keyed by global node ids (``node_type_offset[t] +`` type-local id), so
    the one :class:`Partition` over ``graph.num_nodes`` serves every node type. Per
    layer, each rank samples the in-edges of every edge type of the destinations it
    owns (the typed kernel, one call: ``sampler.sample_block``), compacts
    each node type's sources against that type's destinations, and sends the sources
    of all types to their owners in one exchange; each owner's next destinations of
    type ``t`` are its destinations of ``t`` followed by the new ones it received,
    ascending. Every id in the result is type-local.

    Returns the MiniBatch with ``seeds``, ``labels`` and ``item_ids`` ({ntype: ...},
    the types of which this rank owns seeds of the global batch) replaced by those of
    the seeds this rank owns (``item_ids``: positions in their type's ItemSet),
    ``sampled_subgraphs`` typed :class:`CooperativeSampledSubgraph` whose ``exchange``
    is ``{ntype: ExchangePlan}``, and ``input_nodes`` the first layer's sources.
    """
    graph = sampler.graph
    node_types = graph.node_types
    offsets = graph.node_type_offset.tolist()
    group, partition = source.sampling_group, source.partition
    seeds = check_typed_seeds(minibatch.seeds, graph, where)
    item_fields = _item_field_templates(source.item_set, where)  # raises, if it must, before any collective
    routes, sent, received = _send_typed_to_owners(
        [seeds[t] + offsets[i] for i, t in enumerate(node_types)], partition, group
    )
    nodes = {t: routes[i][0] - offsets[i] for i, t in enumerate(node_types)}
    owned_seeds = {t: ids for t, ids in nodes.items() if ids.numel()}
    # Labels and item ids follow their seeds; in flight while the layers are sampled.
    in_flight = {
        name: _send_typed_rows(getattr(minibatch, name), routes, sent, received, node_types, templates, group)
        for name, templates in item_fields.items()
    }
    subgraphs: List[SampledSubgraph] = []
    for layer in reversed(range(len(sampler.fanouts))):
        owned = torch.cat([nodes[t].to(torch.int64) + offsets[i] for i, t in enumerate(node_types)])
        subgraph = sampler.sample_block(owned, tuple(nodes[t].numel() for t in node_types), layer, minibatch)
        plans = _plan_typed_exchange(subgraph.original_row_node_ids, nodes, offsets, partition, group, source.exchange_group)
        subgraphs.append(CooperativeSampledSubgraph(**vars(subgraph), exchange=plans))
        nodes = {t: plans[t].local_node_ids for t in node_types}
    subgraphs.reverse()
    fields = {}
    for name, pending in in_flight.items():
        for _, work in pending.values():
            work.wait()
        fields[name] = {t: pending[t][0] for t in owned_seeds}
    return replace(
        minibatch,
        seeds=owned_seeds,
        labels=fields.get("labels"),
        item_ids=fields.get("item_ids"),
        sampled_subgraphs=subgraphs,
        input_nodes=subgraphs[0].original_row_node_ids,
    )


def _item_field_templates(item_set, where: str) -> Dict[str, Dict[str, torch.Tensor]]:
    """The per-seed fields of a typed batch that follow the seeds to their owners
    (``labels`` when the items have them, and ``item_ids``): field -> {ntype: an empty
    tensor of the field's dtype and row shape}. Taken from the item set, which every
    rank holds, because a rank whose share has no seed of a type has no rows of it to
    take the dtype from, and the exchanges of every type must run on every rank."""
    if not isinstance(item_set, HeteroItemSet):
        raise ValueError(
            f"{where}: the graph is heterogeneous, so the DistributedItemSampler needs a HeteroItemSet "
            f"({{node type: ItemSet}}), got {type(item_set).__name__}"
        )
    templates: Dict[str, Dict[str, torch.Tensor]] = {"item_ids": {}}
    if "labels" in item_set.names:
        templates["labels"] = {}
    for node_type, items in item_set.item_sets.items():
        templates["item_ids"][node_type] = torch.empty(0, dtype=torch.int64)
        if "labels" in templates:
            templates["labels"][node_type] = items.field("labels")[:0]
    return templates


def _send_typed_rows(values, routes, sent, received, node_types, templates, group):
    """Start sending the per-seed rows ``values`` ({ntype: [n_t, ...]}, a type absent:
    no rows) along the seeds' ``routes``, for every type of ``templates``, in
    ``node_types`` order (the same on every rank). Returns {ntype: (rows, work)}: once
    ``work`` is waited for, ``rows`` are those of the seeds this rank owns of that type,
    in the order of its received seeds."""
    values = values or {}
    pending = {}
    for i, node_type in enumerate(node_types):
        if node_type in templates:
            rows = values.get(node_type, templates[node_type])[routes[i][1]]
            pending[node_type] = _all_to_all(rows, sent[:, i].tolist(), received[:, i].tolist(), group, async_op=True)
    return pending


def _plan_typed_exchange(src_nodes, owned_dst, offsets, partition, group, exchange_group) -> Dict[str, ExchangePlan]:
    """:func:`_plan_exchange` per node type, the ids of all types in one exchange:
    ``src_nodes`` and ``owned_dst`` are {ntype: type-local ids}; each plan's
    ``local_node_ids`` (type-local) are this rank's next destinations of that type."""
    node_types = list(owned_dst)
    routes, _, _ = _send_typed_to_owners(
        [src_nodes[t] + offsets[i] for i, t in enumerate(node_types)], partition, group
    )
    plans = {}
    for i, node_type in enumerate(node_types):
        arrived, order, sent_counts, received_counts = routes[i]
        frontier, positions = unique_and_compact(owned_dst[node_type], arrived - offsets[i])
        recv_index = torch.empty_like(order)
        recv_index[order] = torch.arange(order.numel())
        plans[node_type] = ExchangePlan(
            local_node_ids=frontier,
            send_index=positions,
            send_counts=received_counts,
            recv_counts=sent_counts,
            recv_index=recv_index,
            group=exchange_group,
        )
    return plans


def _start_exchange(rows: torch.Tensor, plan: ExchangePlan, group):
    """Start sending ``rows`` (``[num_local, ...]``) per ``plan``; ``finish()`` returns the source rows."""
    index = plan.send_index.to(rows.device)
    received, work = _all_to_all(rows[index], plan.send_counts, plan.recv_counts, group, async_op=True)

    def finish() -> torch.Tensor:
        work.wait()
        return received[plan.recv_index.to(received.device)]

    return finish


def _start_return(grad: torch.Tensor, plan: ExchangePlan, num_rows: int):
    """Start sending the gradient of exchanged rows (``[num_src_nodes, ...]``) back to
    their owners; ``finish()`` returns ``[num_rows, ...]``, duplicates summed."""
    buffer = grad.new_empty((sum(plan.recv_counts),) + tuple(grad.shape[1:]))
    buffer[plan.recv_index.to(grad.device)] = grad
    returned, work = _all_to_all(buffer, plan.recv_counts, plan.send_counts, plan.group, async_op=True)

    def finish() -> torch.Tensor:
        work.wait()
        grad_rows = grad.new_zeros((num_rows,) + tuple(grad.shape[1:]))
        grad_rows.index_add_(0, plan.send_index.to(grad.device), returned)
        return grad_rows

    return finish


class _Exchange(torch.autograd.Function):
    """Rows to the ranks that need them; gradients back to the owners, duplicates summed.

    ``apply(plans, *rows)``: one tensor of rows per plan (one per node type on typed
    graphs), exchanged together in one autograd node, so that every rank runs the
    exchanges of all types, forward and backward, in the same order (separate nodes
    could run their backward collectives in different orders, or not at all on a rank
    whose loss does not use a type)."""

    @staticmethod
    def forward(ctx, plans: Tuple[ExchangePlan, ...], *rows: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        ctx.plans = plans
        ctx.num_rows = [r.shape[0] for r in rows]
        pending = [_start_exchange(r, plan, plan.group) for r, plan in zip(rows, plans)]
        return tuple(finish() for finish in pending)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        pending = [_start_return(g, plan, n) for g, plan, n in zip(grads, ctx.plans, ctx.num_rows)]
        return (None, *(finish() for finish in pending))


def cooperative_exchange(
    minibatch: MiniBatch, layer: int, h: Union[torch.Tensor, Dict[str, torch.Tensor]]
) -> Union[torch.Tensor, Dict[str, torch.Tensor]]:
    """The input rows of GNN layer ``layer``, gathered from their owners.

    Args:
        minibatch: a batch from a cooperative sampler.
        layer: the GNN layer about to run (``0 <= layer < num_layers``).
        h: ``[num_local, ...]`` rows this rank owns: the output of layer ``layer - 1``
            (rows of ``sampled_subgraphs[layer - 1].original_column_node_ids``), or for
            ``layer = 0`` rows of ``sampled_subgraphs[0].exchange.local_node_ids``.
            Typed batches: a dict ``{ntype: [num_local_t, ...]}`` (rows of
            ``original_column_node_ids[ntype]``, or of
            ``exchange[ntype].local_node_ids`` for ``layer = 0``) over node types that
            are the same on every rank.

    Returns:
        ``[sampled_subgraphs[layer].num_src_nodes, ...]``: row ``j`` belongs to
        ``original_row_node_ids[j]`` (typed: ``{ntype: [num_src_t, ...]}``, the types
        of ``h``). In backward, each row's gradient goes back to its owner and gradients
        of a row sent to several ranks are summed. A collective call, forward and
        backward: every rank runs it (and its backward) for the same layers.
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
    if isinstance(plan, dict):
        return _exchange_typed(plan, layer, h)
    _check_rows(h, plan, layer, "`h`")
    return _Exchange.apply((plan,), h)[0]


def _check_rows(h, plan: ExchangePlan, layer: int, name: str) -> None:
    if not isinstance(h, torch.Tensor) or h.dim() == 0 or h.shape[0] != plan.local_node_ids.numel():
        raise ValueError(
            f"cooperative_exchange: {name} must be a tensor [{plan.local_node_ids.numel()}, ...] (one row per "
            f"vertex this rank owns in layer {layer}'s input), got "
            f"{tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__}"
        )


def _exchange_typed(plans: Dict[str, ExchangePlan], layer: int, h) -> Dict[str, torch.Tensor]:
    """:func:`cooperative_exchange` of a typed batch: the types of ``h``, in the graph's
    node type order (the same on every rank, whatever the order of ``h``)."""
    if not isinstance(h, dict) or not h or any(t not in plans for t in h):
        raise ValueError(
            f"cooperative_exchange: the batch is typed, so `h` must be a non-empty dict {{node type: rows}} over "
            f"node types of {list(plans)}, got "
            + (f"keys {list(h)}" if isinstance(h, dict) else type(h).__name__)
        )
    node_types = [t for t in plans if t in h]
    for node_type in node_types:
        _check_rows(h[node_type], plans[node_type], layer, f"`h['{node_type}']`")
    rows = _Exchange.apply(tuple(plans[t] for t in node_types), *(h[t] for t in node_types))
    return dict(zip(node_types, rows))


def fetch_node_features_cooperatively(fetcher, minibatch: MiniBatch, source) -> Dict:
    """``fetcher.node_feature_keys`` for ``minibatch.input_nodes``, each row read by its owner.

    Each rank reads the rows of the input vertices it owns (once, however many ranks need
    them) and all-to-all sends them to the ranks that need them; the exchanges of all
    keys run together. A collective call on the feature group of the
    DistributedItemSampler upstream of ``fetcher``.

    Typed batches: ``fetcher.node_feature_keys`` is ``{ntype: [names]}`` and the result
    ``{(ntype, name): [len(input_nodes[ntype]), ...]}``; each owner reads
    ``fetcher.features["node", ntype, name]`` at its type-local ids.
    """
    where = "FeatureFetcher (cooperative)"
    subgraphs = minibatch.sampled_subgraphs or []
    if not subgraphs or not isinstance(subgraphs[0], CooperativeSampledSubgraph):
        raise ValueError(f"{where}: the MiniBatch was not sampled cooperatively; put a sampler with cooperative=True before it")
    plan = subgraphs[0].exchange
    if isinstance(plan, dict):
        return _fetch_typed(fetcher, plan, source.feature_group, where)
    pending = {
        key: _start_exchange(fetcher.features["node", key].read(plan.local_node_ids), plan, source.feature_group)
        for key in fetcher.node_feature_keys
    }
    return {key: finish() for key, finish in pending.items()}


def _fetch_typed(fetcher, plans: Dict[str, ExchangePlan], group, where: str) -> Dict[Tuple[str, str], torch.Tensor]:
    """:func:`fetch_node_features_cooperatively` of a typed batch; the keys are exchanged
    in the graph's node type order, then in the order of their names (the same on
    every rank)."""
    keys = fetcher.node_feature_keys
    if not isinstance(keys, dict) or any(t not in plans for t in keys):
        raise ValueError(
            f"{where}: the batch is typed, so the node feature keys must be a dict {{node type: [names]}} over "
            f"node types of {list(plans)}, got {keys!r}"
        )
    pending = {
        (node_type, name): _start_exchange(
            fetcher.features["node", node_type, name].read(plans[node_type].local_node_ids), plans[node_type], group
        )
        for node_type in plans
        for name in keys.get(node_type, ())
    }
    return {key: finish() for key, finish in pending.items()}
