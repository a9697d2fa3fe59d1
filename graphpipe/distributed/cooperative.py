"""Cooperative minibatching: the ranks sample, fetch and compute one shared global batch.

After Balın et al., "Cooperative Minibatching in Graph Neural Networks": each vertex has
one owner (:class:`~graphpipe.distributed.Partition`, keyed by global ids: on a typed
graph ``node_type_offset[type] +`` type-local id). For global batch ``i`` (the union of
the ranks' shares from a :class:`~graphpipe.DistributedItemSampler`), on global ids,
every node type in one exchange per step (a typed graph is a view with offsets, as in
:mod:`graphpipe.graph.sampling`; an untyped one is its one-type case):

1. every rank sends its seeds to their owners: node seeds with their item ids (the
   owners read the items' labels from the item set, which every rank holds; with
   ``DistributedItemSampler.from_part`` each rank's share is its own items already, and
   nothing is sent); link seeds
   (node pairs, hyperlinks) stay where they are and their distinct endpoints go to
   their owners;
2. per layer, from the seeds outwards, each rank samples the in-edges of the frontier
   vertices it owns (the sampler's one-layer step, keyed by global vertex ids, so the
   edges do not depend on which rank samples), compacts them into an ordinary
   :class:`~graphpipe.SampledSubgraph`, and sends the layer's source ids to their owners
   (all-to-all: counts first, then ids, sorted by owner). The owners deduplicate what
   they receive: that is their frontier for the next layer;
3. features are read by the owners for their own vertices and sent to the ranks that
   need them (``fetch_feature(..., cooperative=True)``);
4. between GNN layers the model calls :func:`cooperative_exchange`, which sends each
   rank the rows of its next layer's source nodes from their owners (autograd-aware);
   after the last layer of a link batch, ``cooperative_exchange(mb, mb.num_layers, h)``
   brings each rank the rows of its own pairs' endpoints, which ``compacted_seeds``
   index: the scores of a rank's pairs are then those one process computes for them.

Ids cross between global and type-local once, when a layer is laid out (typed batches:
GraphBolt's layout, dicts by type, with one :class:`ExchangePlan` per node type, since
each type's rows have their own width). With ``exclude_seed_edges=True`` every rank
excludes the seed edges of the whole global batch. A vertex needed by several ranks is
sampled and read once, by its owner: with overlapping neighbourhoods the ranks sample
and fetch fewer distinct vertices in total than with independent batches. With a fixed
seed the union over ranks of the sampled edges of a global batch equals what one
process samples for that batch.

Each exchange is one ``torch.distributed.all_to_all_single`` (gloo on CPU, NCCL on
GPU) on the process group the :class:`~graphpipe.DistributedItemSampler` made for that
stage, so the sampling thread, the feature thread and the training loop never
interleave collectives on one group. Feature exchanges of all keys of a batch are in
flight together (``async_op=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import time
from itertools import accumulate
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

import torch
import torch.distributed as dist

from graphpipe._internal.checks import check_node_ids
from graphpipe.batch.item_set import HeteroItemSet
from graphpipe.batch.minibatch import MiniBatch, with_fields
from graphpipe.distributed.partition import Partition
from graphpipe.distributed.partitioned import check_part_owners
from graphpipe.graph.sampled_subgraph import HOMO_NODE_TYPE, SampledSubgraph, by_type
from graphpipe.graph.sampling import SeedEdgeExclusion, SeedNodes, compact_layer, link_seed_nodes
from graphpipe.ops import unique_and_compact
from graphpipe.ops.edge_lookup import EdgeExclusion

__all__ = [
    "CooperativeSampledSubgraph",
    "ExchangePlan",
    "cooperative_exchange",
    "fetch_node_features_cooperatively",
    "sample_subgraphs_cooperatively",
]

_FAILED_KEY = "graphpipe/failed"  # + "/<rank>": set in the store by a rank whose collective failed
_REPORT_WAIT_S = 3.0  # how long a rank whose collective failed waits for the other ranks to say so too


@dataclass
class ExchangePlan:
    """How the rows of one layer's source nodes reach this rank from their owners.

    Attributes:
        local_node_ids: ``[num_local]`` int64 ids (type-local on typed graphs) of the
            rows this rank holds and serves: the vertices it owns in the layer's input
            (row ``k`` of the ``h`` given to :func:`cooperative_exchange` belongs to
            ``local_node_ids[k]``).
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
    their owners: on typed graphs one plan per node type (``{ntype: ExchangePlan}``,
    every node type of the graph, ids type-local).

    ``seed_exchange`` (the last layer of a link batch only, same form): the plan that
    brings the rows of this layer's destinations (its outputs) to the ranks whose node
    pairs they end, in the order of each rank's distinct endpoints, ascending (per type),
    which ``MiniBatch.compacted_seeds`` index."""

    exchange: Optional[Union[ExchangePlan, Dict[str, ExchangePlan]]] = None
    seed_exchange: Optional[Union[ExchangePlan, Dict[str, ExchangePlan]]] = None


def _all_to_all(send: torch.Tensor, send_counts: List[int], recv_counts: List[int], group, async_op=False):
    """Rows of ``send`` (grouped by rank, ``send_counts``) to every rank; returns ``(received, work)``
    (``work.wait()`` for ``async_op=True``; a lost peer rank raises :func:`_peer_failure`'s error)."""
    send = send.contiguous()
    received = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
    work = _collective(dist.all_to_all_single, received, send, recv_counts, send_counts, group=group, async_op=async_op)
    return received, work


def _collective(call, *args, group, async_op=False):
    """``call(*args, group=group, async_op=async_op)`` (a ``torch.distributed`` collective),
    its work's ``wait()`` included, raising :func:`_peer_failure`'s error when the backend
    fails (a peer rank exited, or stopped answering within the process group's timeout)."""
    try:
        work = call(*args, group=group, async_op=async_op)
    except RuntimeError as error:
        raise _peer_failure(error, call, group) from error
    return _Work(work, call, group) if async_op else work


class _Work:
    """An async collective's work whose ``wait()`` raises :func:`_peer_failure`'s error."""

    def __init__(self, work, call, group):
        self.work, self.call, self.group = work, call, group

    def wait(self):
        try:
            return self.work.wait()
        except RuntimeError as error:
            raise _peer_failure(error, self.call, self.group) from error


def _peer_failure(error: RuntimeError, call, group) -> RuntimeError:
    """The error to raise for ``error`` from collective ``call`` on ``group``: itself unless
    the backend raised it (gloo's transport, NCCL); then a RuntimeError naming the ranks
    that did not report the failure within ``_REPORT_WAIT_S`` s.

    Every rank whose collective fails says so in the process group's store (key
    ``graphpipe/failed/<rank>``) and waits for the others' keys: a rank that exited, hangs
    or is stuck elsewhere sets none. A gloo peer that exits is noticed at once (its
    connections close); one that hangs, after the process group's timeout."""
    if not (isinstance(error, dist.DistBackendError) or "gloo" in str(error)):
        return error  # a local error (arguments), not a lost peer
    me = dist.get_rank()
    ranks = dist.get_process_group_ranks(group if group is not None else dist.group.WORLD)
    try:
        store = dist.distributed_c10d._get_default_store()  # the one place every rank of the job reaches
        store.set(f"{_FAILED_KEY}/{me}", "1")
        silent, deadline = [r for r in ranks if r != me], time.monotonic() + _REPORT_WAIT_S
        while silent and time.monotonic() < deadline:
            silent = [r for r in silent if not store.check([f"{_FAILED_KEY}/{r}"])]
            time.sleep(0.05)
        found = (
            f"rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))} did not report it within "
            f"{_REPORT_WAIT_S:g} s (exited, hung or stuck elsewhere)"
            if silent else "every rank reported it (none exited)"
        )
    except Exception as store_error:  # the store's host may be the rank that is gone
        found = f"which peer could not be told (the process group's store failed too: {store_error})"
    return RuntimeError(
        f"graphpipe: rank {me}: a collective ({call.__name__}) of {len(ranks)} ranks failed: {found}. The process group "
        f"cannot go on: restart every rank (resume from DataLoader.state_dict checkpoints). The backend said: {error}"
    )


class _Route(NamedTuple):
    """Ids of every node type sent to their owners in one exchange; entry ``t`` of
    ``arrived`` and ``orders`` is node type ``t``'s.

    Attributes:
        arrived: per type, ``[n_t]`` int64 global ids this rank owns (or their ``[n_t, c]``
            rows), from rank 0's requests to the last rank's.
        orders: per type, ``ids_t[orders[t]]`` is what was sent, grouped by owner.
        sent: per type, ids sent to each rank (``world_size`` ints).
        received: per type, ids received from each rank (``world_size`` ints).
    """

    arrived: List[torch.Tensor]
    orders: List[torch.Tensor]
    sent: List[List[int]]
    received: List[List[int]]


def _send_to_owners(ids: torch.Tensor, counts: Sequence[int], partition: Partition, group, rows: Optional[torch.Tensor] = None) -> _Route:
    """Send ``ids`` (``[n]`` int64 global ids, type-major: ``counts`` per node type) to
    their owners: one exchange of the counts, then one of the ids (or of ``rows``,
    ``[n, c]`` int64, one per id, sent in their place)."""
    num_parts, num_types = partition.num_parts, len(counts)
    owners = partition.owner(ids)
    sent_rows = ids if rows is None else rows
    if num_types == 1:  # the one-type case, without type keys or copies
        order, sent_to, received_from, arrived = _ask_owners(sent_rows, owners, num_parts, group)
        return _Route([arrived], [order], [sent_to], [received_from])
    types = torch.repeat_interleave(torch.arange(num_types), torch.tensor(counts))
    # Per type (each keeps its range: the ids are type-major), by owner.
    order = torch.argsort(types * num_parts + owners, stable=True)
    sent = torch.bincount(owners * num_types + types, minlength=num_parts * num_types)  # rank-major, then type
    received = torch.empty_like(sent)
    _collective(dist.all_to_all_single, received, sent, group=group)  # rank r gets entries r * num_types ...
    sent_to, received_from = sent.view(num_parts, num_types).tolist(), received.view(num_parts, num_types).tolist()
    # The send buffer is owner-major: per owner, per type, the ids in their order.
    blocks = order.split([row[t] for t in range(num_types) for row in sent_to])  # block t * num_parts + r
    index = torch.cat([blocks[t * num_parts + r] for r in range(num_parts) for t in range(num_types)])
    arrived, _ = _all_to_all(sent_rows[index], [sum(row) for row in sent_to], [sum(row) for row in received_from], group)
    pieces = arrived.split(received.tolist())  # piece r * num_types + t: type t from rank r
    starts = list(accumulate(counts, initial=0))
    return _Route(
        [torch.cat(pieces[t::num_types]) for t in range(num_types)],
        [order[start:end] - start for start, end in zip(starts, starts[1:])],
        [[row[t] for row in sent_to] for t in range(num_types)],
        [[row[t] for row in received_from] for t in range(num_types)],
    )


def _ask_owners(rows: torch.Tensor, owners: torch.Tensor, world_size: int, group) -> tuple:
    """Send ``rows`` (``[n, ...]``) to their ``owners`` (``[n]`` int64): ``(order, sent, received,
    asked)``: ``rows[order]`` went, ``sent`` / ``received`` rows per rank, and ``asked``
    the rows the ranks sent this one, by rank."""
    order = torch.argsort(owners, stable=True)
    sent = torch.bincount(owners, minlength=world_size)
    received = torch.empty_like(sent)
    _collective(dist.all_to_all_single, received, sent, group=group)
    sent_to, received_from = sent.tolist(), received.tolist()
    asked, _ = _all_to_all(rows[order], sent_to, received_from, group)
    return order, sent_to, received_from, asked


def _to_every_rank(rows: torch.Tensor, world_size: int, group) -> tuple:
    """Send ``rows`` (``[n, ...]``) to every rank: ``(rows received from each rank, every
    rank's rows, rank after rank)``."""
    sent = [rows.shape[0]] * world_size
    received = torch.empty(world_size, dtype=torch.int64)
    _collective(dist.all_to_all_single, received, torch.tensor(sent), group=group)
    received_from = received.tolist()
    return received_from, _all_to_all(rows.repeat(world_size, 1), sent, received_from, group)[0]


def _plan_exchange(route: _Route, owned: Sequence[torch.Tensor], num_nodes: int, group) -> List[ExchangePlan]:
    """Per node type, the plan of the rows of the ids ``route`` sent (global ids). Its
    ``local_node_ids`` are this rank's next destinations of that type: ``owned[t]``
    (its destinations of type ``t``) first, then the other ids of ``t`` it received,
    ascending."""
    plans = []
    for t, (arrived, order) in enumerate(zip(route.arrived, route.orders)):
        frontier, positions = unique_and_compact(owned[t], arrived, num_nodes)
        recv_index = torch.empty_like(order)
        recv_index[order] = torch.arange(order.numel())
        plans.append(ExchangePlan(frontier, positions, route.received[t], route.sent[t], recv_index, group))
    return plans


def _lay_out(plans: List[ExchangePlan], graph) -> Union[ExchangePlan, Dict[str, ExchangePlan]]:
    """The plans in a batch's layout: one plan (untyped), or a dict by node type with
    type-local ``local_node_ids``."""
    if not graph.is_heterogeneous:
        return plans[0]
    schema = graph.schema
    return {
        node_type: replace(plan, local_node_ids=plan.local_node_ids - offset)
        for node_type, plan, offset in zip(schema.node_types, plans, schema.node_type_offset)
    }


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
    _collective(dist.all_gather, gathered, mine, group=source.sampling_group)
    seeds = [(int(t[0]) << 32) | int(t[1]) for t in gathered]
    if seed is not None and len(set(seeds)) != 1:
        raise ValueError(f"{where}: `seed` must be the same on every rank, got {seeds} (per rank)")
    return seeds[0]


def sample_subgraphs_cooperatively(sampler, minibatch: MiniBatch, seeds: SeedNodes, source) -> MiniBatch:
    """Sample this rank's part of the global batch that ``minibatch`` is this rank's share of.

    A collective call: every rank of the DistributedItemSampler ``source`` upstream of
    ``sampler`` calls it for the same global batch, with its ``seeds``
    (``sampler.batch_seeds(minibatch)``). ``sampler.seed`` is the same on every rank
    (agreed once when the sampler was built: :func:`agree_on_seed`).

    Returns the MiniBatch with ``sampled_subgraphs`` a list of
    :class:`CooperativeSampledSubgraph` (destinations: the vertices of the layer's
    frontier this rank owns) and ``input_nodes`` the first layer's source nodes. Node
    seeds: ``seeds``, ``labels`` (every field of the items) and ``item_ids`` are those of
    the global batch's seeds this rank owns, read from the item set by their item ids
    (typed: dicts over the node types it owns seeds of).
    Link seeds: this rank's pairs (and their labels, indexes) stay; ``compacted_seeds``
    index the rows ``cooperative_exchange(mb, mb.num_layers, h)`` returns.
    """
    where = f"{type(sampler).__name__} (cooperative)"
    check_lockstep(source, where, "cooperative sampling cannot run in worker processes")
    graph, group, partition = sampler.graph, source.sampling_group, source.partition
    check_part_owners(graph, partition, source.rank, where)
    pending = None
    if seeds.links is None and source.owned_items is not None:  # from_part: the seeds are this rank's own items
        owned, seed_plans = list(seeds.nodes.split(list(seeds.counts))), None
    elif seeds.links is None:  # node seeds go to their owners; their item ids follow, to read their items by
        seed_route = _send_to_owners(seeds.nodes, seeds.counts, partition, group)
        item_set = source.item_set
        sets = item_set.item_sets if isinstance(item_set, HeteroItemSet) else {HOMO_NODE_TYPE: item_set}
        # checked here, against this rank's graph: ranks holding other datasets must not read past it
        owned = [check_node_ids(ids, graph.total_num_nodes, "seeds from other ranks", f"{where} (do the ranks load the same dataset?)") for ids in seed_route.arrived]
        seed_plans = None
        pending = _send_item_ids(minibatch, sets, seed_route, graph.schema.node_types, group)
    else:  # link seeds stay; their owners sample their distinct endpoints
        seed_route = _send_to_owners(seeds.nodes, seeds.counts, partition, group)
        no_nodes = [seeds.nodes[:0]] * len(seeds.counts)
        seed_plans = _plan_exchange(seed_route, no_nodes, graph.total_num_nodes, source.exchange_group)
        owned = [plan.local_node_ids for plan in seed_plans]
    exclusion = _owned_exclusion(sampler, seeds, owned, source) if sampler.excludes_seed_edges else None
    subgraphs: List[CooperativeSampledSubgraph] = []
    for layer in reversed(range(len(sampler.fanouts))):
        subgraph, owned = _sample_layer(sampler, owned, layer, minibatch, exclusion, source)
        subgraphs.append(subgraph)
    subgraphs.reverse()
    if seed_plans is None:
        fields = {} if pending is None else _owned_items(sets, pending, graph)
    else:
        subgraphs[-1].seed_exchange = _lay_out(seed_plans, graph)
        fields = {"compacted_seeds": sampler.compacted_seeds(seeds)}
    return with_fields(minibatch, **fields, sampled_subgraphs=subgraphs, input_nodes=subgraphs[0].original_row_node_ids)


def _sample_layer(sampler, owned: List[torch.Tensor], layer: int, minibatch, exclusion, source):
    """Layer ``layer`` of this rank: the in-edges of the destinations it owns (``owned``:
    per node type, global ids), compacted, its sources sent to their owners. Returns the
    layer and this rank's destinations of the next layer (per node type, global)."""
    graph = sampler.graph
    nodes, counts = owned[0] if len(owned) == 1 else torch.cat(owned), tuple(ids.numel() for ids in owned)
    sample = sampler.sample_frontier(nodes, counts, sampler.no_skip, layer, minibatch, exclusion)
    step = compact_layer(graph, nodes, counts, sampler.no_skip, sample)
    subgraph, rows, row_counts = sampler.lay_out(step, layer), step.rows, step.row_counts
    del sample, step  # the sample's global sources are freed before the exchange (faster: less memory in use)
    route = _send_to_owners(rows, row_counts, source.partition, source.sampling_group)
    plans = _plan_exchange(route, owned, graph.total_num_nodes, source.exchange_group)
    return CooperativeSampledSubgraph(**vars(subgraph), exchange=_lay_out(plans, graph)), [plan.local_node_ids for plan in plans]


def _send_item_ids(minibatch: MiniBatch, sets: dict, route: _Route, node_types: Sequence[str], group) -> dict:
    """Start sending the item ids of node seeds along the seeds' ``route``: one
    exchange per node type of the item set (``sets``: {node type: ItemSet}), in
    ``node_types`` order, also where a rank's share lacks that type (the same on every
    rank). Returns {node type: (item ids, work)}: once ``work`` is waited for, the item
    ids of the seeds of that type this rank owns, in the order they arrived."""
    item_ids = by_type(minibatch.item_ids, HOMO_NODE_TYPE)
    no_ids = torch.empty(0, dtype=torch.int64)
    return {
        node_type: _all_to_all(
            item_ids.get(node_type, no_ids)[route.orders[t]], route.sent[t], route.received[t], group, async_op=True
        )
        for t, node_type in enumerate(node_types)
        if node_type in sets
    }


def _owned_items(sets: dict, pending: dict, graph) -> dict:
    """The MiniBatch fields (``seeds``, ``labels``, ..., ``item_ids``) of the node seeds
    this rank owns, read from the item set by the item ids that arrived (``pending``):
    dicts over the node types it owns seeds of when the graph is typed."""
    fields: Dict[str, dict] = {name: {} for name in (*next(iter(sets.values())).names, "item_ids")}
    for node_type, (item_ids, work) in pending.items():
        work.wait()
        if item_ids.numel() or not graph.is_heterogeneous:
            for name, rows in sets[node_type].batch(item_ids).items():
                fields[name][node_type] = rows
    if not graph.is_heterogeneous:
        return {name: rows[HOMO_NODE_TYPE] for name, rows in fields.items()}
    return fields


def _owned_exclusion(sampler, seeds: SeedNodes, owned: List[torch.Tensor], source) -> SeedEdgeExclusion:
    """The edges no layer of this rank may sample: the seed edges (and their reverses)
    of the pairs of EVERY rank's share of the batch, as one process excludes them for
    the global batch, kept for the seeds this rank owns (``owned``: per node type,
    ascending), which lead its destinations of every layer."""
    everyone = link_seed_nodes(sampler.graph, _global_links(seeds, source.world_size, source.sampling_group))
    starts = list(accumulate(everyone.counts, initial=0))
    at = [torch.searchsorted(everyone.nodes[starts[d] : starts[d + 1]], ids) for d, ids in enumerate(owned)]
    return exclusion_of_rows(sampler, everyone, at)


def exclusion_of_rows(sampler, everyone: SeedNodes, kept: List[torch.Tensor]) -> SeedEdgeExclusion:
    """The seed edges (and reverses) of the link seeds ``everyone`` that ``sampler``'s
    graph holds, kept for the seed rows ``kept`` (per node type, ascending positions
    among ``everyone``'s rows of that type), which lead the destinations of every layer;
    a disjoint sampler's (``everyone``: :func:`~graphpipe.graph.sampling.distinct_endpoints`)
    are found by node in every layer."""
    graph = sampler.graph
    exclusion = sampler.seed_edge_exclusion(everyone)
    # The kept rows' segments among everyone's: per edge type, one per seed row of its destination type.
    keep = torch.cat([kept[d] + exclusion.segment_offsets[t] for t, (_, d) in enumerate(graph.schema.edge_type_ends)])
    indptr = exclusion.edges.indptr
    first, lengths = indptr[keep], indptr[keep + 1] - indptr[keep]
    kept_indptr = torch.zeros(keep.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=kept_indptr[1:])
    positions = torch.repeat_interleave(first - kept_indptr[:-1], lengths) + torch.arange(int(kept_indptr[-1]))
    segments = tuple(accumulate((kept[d].numel() for _, d in graph.schema.edge_type_ends), initial=0))
    edges = EdgeExclusion(kept_indptr, exclusion.edges.positions[positions])
    nodes = None
    if exclusion.nodes is not None:
        starts = list(accumulate(everyone.counts, initial=0))
        nodes = torch.cat([exclusion.nodes[a:b][rows] for a, b, rows in zip(starts, starts[1:], kept)])
    return SeedEdgeExclusion(edges, segments, tuple(kept_indptr[list(segments)].tolist()), nodes)


def check_lockstep(source, where: str, why: str, uneven_why: str = "") -> None:
    """A collective stage over the DistributedItemSampler ``source`` runs in a process of the
    group and every rank gets as many batches; else an error naming ``where`` and ``why``."""
    if source.sampling_group is None or not dist.is_initialized():
        raise RuntimeError(f"{where}: torch.distributed is not initialised in this process ({why}: use DataLoader(num_workers=0))")
    if source.uneven:
        raise ValueError(
            f"{where}: some ranks get fewer batches than others ({len(source.item_set)} items, batch_size="
            f"{source.batch_size}, {source.world_size} ranks){uneven_why}; pass drop_uneven_inputs=True to the "
            f"DistributedItemSampler"
        )


def _global_links(seeds: SeedNodes, world_size: int, group) -> Dict[int, torch.Tensor]:
    """Every rank's link seeds of the batch: edge type id -> ``[N, 2]`` global ids (none: ``{}``)."""
    _, rows = _to_every_rank(_link_rows(seeds), world_size, group)
    return {etype: rows[rows[:, 2] == etype, :2] for etype in torch.unique(rows[:, 2]).tolist()}


def _link_rows(seeds: SeedNodes) -> torch.Tensor:
    """``[N, 3]`` int64 rows (source, destination, edge type id) of a batch's node pairs
    (global ids); a rank's empty share of a batch: ``[0, 3]``."""
    rows = [torch.cat([pairs, torch.full_like(pairs[:, :1], etype)], 1) for etype, (pairs, _) in seeds.links.items()]
    return torch.cat(rows) if rows else torch.empty(0, 3, dtype=torch.int64)


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
    def forward(ctx, plans, *rows: torch.Tensor):
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
        layer: the GNN layer about to run (``0 <= layer < num_layers``), or for a link
            batch ``num_layers``: the rows of this rank's node pairs' endpoints.
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
        of ``h``); for ``layer = num_layers`` one row per distinct endpoint of this
        rank's pairs, ascending (per type), which ``compacted_seeds`` index. In
        backward, each row's gradient goes back to its owner and gradients of a row sent
        to several ranks are summed. A collective call, forward and backward: every rank
        runs it (and its backward) for the same layers.
    """
    subgraphs = minibatch.sampled_subgraphs or []
    if not 0 <= layer <= len(subgraphs):
        raise ValueError(f"cooperative_exchange: `layer` must be in [0, {len(subgraphs)}], got {layer!r}")
    if not subgraphs or not isinstance(subgraphs[-1], CooperativeSampledSubgraph):
        raise ValueError(
            "cooperative_exchange: the MiniBatch was not sampled cooperatively; build the sampler with "
            "cooperative=True"
        )
    plans = subgraphs[layer].exchange if layer < len(subgraphs) else subgraphs[-1].seed_exchange
    if plans is None:
        raise ValueError(
            f"cooperative_exchange: `layer` {layer} (num_layers) exchanges the outputs of link batches; the seeds "
            f"of a node batch are the ones this rank owns, so its last layer's output is theirs already"
        )
    typed = isinstance(plans, dict)
    if typed and (not isinstance(h, dict) or not h or any(t not in plans for t in h)):
        raise ValueError(
            f"cooperative_exchange: the batch is typed, so `h` must be a non-empty dict {{node type: rows}} over "
            f"node types of {list(plans)}, got " + (f"keys {list(h)}" if isinstance(h, dict) else type(h).__name__)
        )
    if not typed and isinstance(h, dict):
        raise ValueError("cooperative_exchange: the batch is untyped, so `h` must be a tensor, got a dict")
    plans, h = by_type(plans, HOMO_NODE_TYPE), by_type(h, HOMO_NODE_TYPE)
    node_types = [t for t in plans if t in h]  # the graph's node type order: the same on every rank
    for t in node_types:
        rows, expected = h[t], plans[t].local_node_ids.numel()
        if not isinstance(rows, torch.Tensor) or rows.dim() == 0 or rows.shape[0] != expected:
            raise ValueError(
                f"cooperative_exchange: `h`{f'[{t!r}]' if typed else ''} must be a tensor [{expected}, ...] (one "
                f"row per vertex this rank owns among layer {layer}'s inputs), got "
                f"{tuple(rows.shape) if isinstance(rows, torch.Tensor) else type(rows).__name__}"
            )
    rows = _Exchange.apply(tuple(plans[t] for t in node_types), *(h[t] for t in node_types))
    return dict(zip(node_types, rows)) if typed else rows[0]


def fetch_node_features_cooperatively(fetcher, minibatch: MiniBatch, source) -> Dict:
    """The node features ``fetcher`` reads (``fetcher.fetched_features()``) for
    ``minibatch.input_nodes``, each row read by its owner.

    Each rank reads the rows of the input vertices it owns (once, however many ranks need
    them; ``Feature.read_valid``: the ids are the sampler's) and all-to-all sends them to
    the ranks that need them; the exchanges of all keys run together, in the fetcher's
    key order (the same on every rank). A collective call on the feature group of the
    DistributedItemSampler ``source`` upstream of ``fetcher``. Returns the batch's keys
    (a name, or ``(node type, name)`` when typed) -> rows of ``input_nodes`` (of that type).
    """
    subgraphs = minibatch.sampled_subgraphs or []
    if not subgraphs or not isinstance(subgraphs[0], CooperativeSampledSubgraph):
        raise ValueError(
            "FeatureFetcher (cooperative): the MiniBatch was not sampled cooperatively; put a sampler with "
            "cooperative=True before it"
        )
    plans = subgraphs[0].exchange
    pending = {}
    for kind, key, feature in fetcher.fetched_features():
        if kind == "node":
            plan = plans[key[0]] if isinstance(plans, dict) else plans
            pending[key] = _start_exchange(feature.read_valid(plan.local_node_ids), plan, source.feature_group)
    return {key: finish() for key, finish in pending.items()}
