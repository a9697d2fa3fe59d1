"""UniformNegativeSampler: negatives for link prediction, GraphBolt's ``sample_uniform_negative``."""

from __future__ import annotations

import math
from functools import partial
from typing import Dict, Optional, Tuple

import torch

from graphpipe._internal.checks import check_bool, check_int, check_node_pairs, check_number
from graphpipe.batch.item_set import pairs_with_negatives
from graphpipe.batch.minibatch import MiniBatch, with_fields
from graphpipe.distributed.partitioned import check_whole_graph, part_of
from graphpipe.distributed.remote import sample_negatives_from_owners
from graphpipe.graph.temporal import COMPARISONS, timestamps
from graphpipe.graph.csc_graph import CSCGraph, check_graph
from graphpipe.graph.checks import check_typed_pairs
from graphpipe.ops import derive_key, sample_uniform_negatives
from graphpipe.ops.compile import compile_uniform_negatives, dtype_only
from graphpipe.ops.edge_lookup import in_neighbours_sorted
from graphpipe.ops.negative_sampling import check_negative_ratio, sample_random_pairs
from graphpipe.pipes.base import Pipe, functional_pipe, upstream
from graphpipe.pipes.distributed_item_sampler import DistributedItemSampler, find_distributed_item_sampler
from graphpipe.pipes.subgraph_sampler import SubgraphSampler
from graphpipe.pipes.capabilities import UnsupportedCombination, check_supported

__all__ = ["UniformNegativeSampler"]


@functional_pipe("sample_uniform_negative")
class UniformNegativeSampler(Pipe):
    """Append ``negative_ratio`` uniform negatives per positive node pair.

    For each positive pair ``(u, v)`` of ``minibatch.seeds`` (``[P, 2]``), draw ``k =
    negative_ratio`` destinations ``v'`` uniformly from the graph's nodes, keeping the
    source, as GraphBolt's ``sample_uniform_negative`` (ogbl-citation2's protocol; PyG's
    ``neg_sampling="triplet"`` with ``to_pyg(neg_sampling="triplet")``). The batch then
    has GraphBolt's layout:

    * ``seeds``: ``[P * (1 + k), 2]``, the ``P`` positives, then the negatives of
      positive 0, of positive 1, ...;
    * ``labels``: float32, 1 for the positives and 0 for the negatives, as GraphBolt
      2.2+ (ready for ``binary_cross_entropy_with_logits``; a batch that had labels keeps
      them for the positives, and its negatives get zeros of the same dtype);
    * ``indexes``: int64, ``i`` for positive ``i`` and each of its negatives.

    Typed graphs: ``seeds`` is a dict edge type ``"src:relation:dst"`` -> ``[P, 2]``
    type-local pairs; each edge type gets its own negatives, drawn from the nodes of its
    destination type, and ``seeds``, ``labels`` and ``indexes`` become dicts by edge type.

    The negatives of a batch's pair ``i`` are a function of the seed, the batch index,
    ``i`` and the pair (:mod:`graphpipe.ops.negative_sampling`): the same from any thread,
    worker process or resumed run, independent between the ranks of a
    ``DistributedItemSampler``.

    ``neg_sampling="binary"`` draws PyG's ``LinkNeighborLoader(neg_sampling="binary")``
    negatives instead (for ``to_pyg()``'s binary layout): ``ceil(P * negative_ratio)``
    pairs whose source and destination are both uniform over the nodes of their types,
    independent of the positives; ``seeds`` are the positives then those pairs,
    ``labels`` as above, and ``indexes`` is None (a negative belongs to no positive).

    Args:
        source: a pipe of MiniBatches whose ``seeds`` are ``[P, 2]`` node pairs.
        graph: the :class:`~graphpipe.CSCGraph` whose nodes are drawn.
        negative_ratio: negatives per positive, an int ``>= 1`` (binary: a number ``> 0``).
        exclude_existing_edges: redraw a negative while ``u -> v'`` is an edge of
            ``graph`` (of the pair's edge type), so every negative is a non-edge (without
            it, as in GraphBolt and PyG, a few negatives are edges: false negatives).
        seed: seed of the random keys (``None``: drawn once from torch's generator).
        neg_sampling: ``"triplet"`` (GraphBolt's: ``k`` corrupted destinations per
            positive) or ``"binary"`` (PyG's random pairs).
        node_timestamp_attr_name: temporal link prediction: an int64 node attribute of
            ``graph``; a negative node later than its pair's ``timestamp`` (by
            ``comparison``, ``"<"`` (the default) or ``"<="``) is redrawn, the same rule at every draw
            (both ends of a binary pair). Each negative gets its positive's ``timestamp``
            (binary: the positives' times tiled, as PyG).
    """

    def __init__(
        self,
        source: Pipe,
        graph: CSCGraph,
        negative_ratio: int,
        exclude_existing_edges: bool = False,
        seed: Optional[int] = None,
        neg_sampling: str = "triplet",
        node_timestamp_attr_name: Optional[str] = None,
        comparison: Optional[str] = None,
    ):
        super().__init__()
        name = type(self).__name__
        check_graph(graph, name)
        sampler = next((stage for stage in upstream(source) if isinstance(stage, SubgraphSampler)), None)
        if sampler is not None:  # its layers and compacted_seeds would not hold the negatives
            raise ValueError(
                f"{name}: {type(sampler).__name__} upstream samples the layers before the negatives exist; add them "
                f"first: ItemSampler(...).sample_uniform_negative(graph, k).sample_neighbor(graph, fanouts)"
            )
        # A part graph holds only the owned vertices' in-edges: the owners check the draws.
        self.on_part = exclude_existing_edges is True and part_of(graph) is not None
        self.collective = self.on_part  # the Pipe protocol: negatives checked at the owners are collective calls
        if self.on_part and not any(isinstance(stage, DistributedItemSampler) for stage in upstream(source)):
            check_whole_graph(graph, name, "put DistributedItemSampler.from_part(part, split, batch_size) upstream")
        if exclude_existing_edges is True and not self.on_part and graph.indptr_nodes is not None:
            raise ValueError(
                f"{name}: `exclude_existing_edges=True` looks drawn pairs up in the graph, but it holds the in-edges of only "
                f"{graph.indptr.numel() - 1} of its {graph.total_num_nodes} nodes (`indptr_nodes`: a part of a partitioned "
                f"dataset); sample the part load_partition maps, with DistributedItemSampler.from_part upstream"
            )
        self.node_time, self.node_time_name = None, node_timestamp_attr_name
        if node_timestamp_attr_name is not None:
            self.node_time = timestamps(graph, node_timestamp_attr_name, "node", "node_timestamp_attr_name", name)
            comparison = "<" if comparison is None else comparison
            if comparison not in COMPARISONS:
                raise ValueError(f"{name}: `comparison` must be '<' (negatives strictly earlier than the pair) or '<=', got {comparison!r}")
        elif comparison is not None:
            raise ValueError(f"{name}: `comparison` applies to temporal negatives; name the node times with `node_timestamp_attr_name`")
        self.comparison = comparison
        if neg_sampling not in ("triplet", "binary"):
            raise ValueError(
                f"{name}: `neg_sampling` must be 'triplet' (k corrupted destinations per positive, GraphBolt's) or "
                f"'binary' (PyG's LinkNeighborLoader: random pairs), got {neg_sampling!r}"
            )
        if neg_sampling == "binary" and exclude_existing_edges:
            raise ValueError(f"{name}: `exclude_existing_edges=True` redraws corrupted destinations: it needs neg_sampling='triplet'")
        self.neg_sampling = neg_sampling
        check_bool(exclude_existing_edges, "exclude_existing_edges", name)
        on_gpu = graph.indptr.is_cuda or graph.indices.is_cuda
        check_supported(name, graph="typed" if graph.is_heterogeneous else "untyped", task="link", **({"device": "GPU"} if on_gpu else {}))
        if exclude_existing_edges and on_gpu:
            raise UnsupportedCombination(
                f"{name}: `exclude_existing_edges=True` looks edges up in host memory; keep the graph on the CPU "
                f"(pinned with graph.pin_memory_() for GPU sampling) instead of graph.to('cuda')"
            )
        self.source = source
        self.graph = graph
        if neg_sampling == "binary":
            negative_ratio = check_number(negative_ratio, "negative_ratio", f"{name} (neg_sampling='binary')", 0.0, low_open=True)
            check_negative_ratio(math.ceil(negative_ratio), 1, name)  # the ceil(P * ratio) pairs must fit
            self.negative_ratio = negative_ratio
        else:
            self.negative_ratio = check_negative_ratio(negative_ratio, 1, name)
        self.exclude_existing_edges = exclude_existing_edges
        # Edges are looked up by binary search where every node's sources are sorted (per edge type).
        types = graph.type_per_edge if graph.is_heterogeneous else None
        self.sorted_indices = exclude_existing_edges and in_neighbours_sorted(graph.indptr, graph.indices, types)
        self.seed = int(torch.randint(0, 2**62, ())) if seed is None else check_int(seed, "seed", name)

    def state_options(self) -> Dict[str, object]:
        """Pipe protocol: how many negatives, of which kind, which excluded, how late."""
        times = None if self.node_time is None else [self.node_time_name, self.comparison]
        return {"negative_ratio": self.negative_ratio, "neg_sampling": self.neg_sampling,
                "exclude_existing_edges": self.exclude_existing_edges, "times": times}  # fmt: skip

    def process(self, minibatch: MiniBatch) -> MiniBatch:
        """The batch with its negatives appended (see the class doc)."""
        name = type(self).__name__
        if self.on_part:  # every rank, also with no pairs: a collective call
            return sample_negatives_from_owners(self, minibatch, find_distributed_item_sampler(self, f"{name} (over a part)"))
        no_pairs = isinstance(minibatch.seeds, dict) and not minibatch.seeds  # a rank's empty share of a typed batch
        if not (minibatch.is_link_batch or (no_pairs and self.graph.is_heterogeneous)):
            seeds = minibatch.seeds
            shape = {k: tuple(v.shape) for k, v in seeds.items()} if isinstance(seeds, dict) else None if seeds is None else tuple(seeds.shape)
            raise ValueError(
                f"{name}: the MiniBatch's `seeds` must be node pairs of shape [N, 2] (an ItemSet of pairs, "
                f"names='seeds'; typed: per edge type), got {shape}"
            )
        if minibatch.indexes is not None:
            raise ValueError(
                f"{name}: the MiniBatch already has `indexes` (its items carry their own negatives, as "
                f"evaluation sets do); sample negatives for batches of positive pairs only"
            )
        if not self.graph.is_heterogeneous:
            pairs = check_node_pairs(minibatch.seeds, self.graph.total_num_nodes, "seeds", name)
            key, ends = derive_key(self.seed, minibatch.batch_index), ((0, self.graph.total_num_nodes),) * 2
            latest = self.latest(minibatch.timestamp, None)
            fields = self._with_negatives(minibatch.seeds, minibatch.labels, key, ends, -1, latest, pairs)
            return with_fields(minibatch, **fields, timestamp=_times(minibatch.timestamp, fields))
        if not isinstance(minibatch.seeds, dict):
            raise ValueError(
                f"{name}: the graph is typed, so the MiniBatch's `seeds` must be typed pairs: a dict edge type "
                f"'src:relation:dst' -> [N, 2] (a HeteroItemSet), got a tensor of shape {tuple(minibatch.seeds.shape)}"
            )
        seeds, labels, indexes, times = {}, {}, {}, {}
        offsets = self.graph.schema.node_type_offset
        for key, pairs in minibatch.seeds.items():
            etype, *types = check_typed_pairs(key, pairs, self.graph.schema, name)
            ends = tuple((offsets[t], offsets[t + 1] - offsets[t]) for t in types)
            key_of_type = derive_key(self.seed, minibatch.batch_index, etype)
            given = None if minibatch.labels is None else minibatch.labels.get(key)
            fields = self._with_negatives(pairs, given, key_of_type, ends, etype, self.latest(minibatch.timestamp, key))
            seeds[key], labels[key], indexes[key] = fields["seeds"], fields["labels"], fields["indexes"]
            if isinstance(minibatch.timestamp, dict) and key in minibatch.timestamp:
                times[key] = _times(minibatch.timestamp[key], fields)
        indexes = indexes if self.neg_sampling == "triplet" else None  # triplet without pairs: {}
        return with_fields(minibatch, seeds=seeds, labels=labels, indexes=indexes, timestamp=times or None)

    def compile_tasks(self) -> list:
        """Pipe protocol: the kernel of triplet negatives (binary ones are torch ops), for a
        graph in host memory."""
        if self.neg_sampling == "binary" or self.graph.indptr.is_cuda:
            return []
        graph = self.graph
        dtypes = (dtype_only(graph.indptr), dtype_only(graph.indices), dtype_only(graph.type_per_edge))
        return [partial(compile_uniform_negatives, *dtypes, self.exclude_existing_edges)]

    def latest(self, timestamp, key) -> Optional[torch.Tensor]:
        """Temporal negatives: ``[P]`` int64 the latest time a negative of each positive
        may have (its ``timestamp``, or one less for ``"<"``), else None."""
        if self.node_time is None:
            return None
        times = timestamp.get(key) if isinstance(timestamp, dict) else timestamp
        if times is None:
            raise ValueError(
                f"{type(self).__name__}: `node_timestamp_attr_name` draws negatives no later than their pair, so the "
                f"pairs need times: an ItemSet field named 'timestamp'"
            )
        times = times.to(torch.int64)
        return times.clamp(min=torch.iinfo(torch.int64).min + 1) - 1 if self.comparison == "<" else times

    def _with_negatives(self, positives, labels, key: int, ends, etype: int, latest, pairs=None) -> dict:
        """The ``seeds``, ``labels`` and ``indexes`` (binary: None) of the ``[P, 2]`` ``positives``
        of edge type id ``etype`` (-1: untyped, ``pairs``: their int64 copy) and their negatives,
        drawn with ``key`` from ``ends``, the ``(first global id, count)`` of the two node types.
        The seeds keep the positives' dtype where it holds every id of the two types, else int64."""
        if labels is not None and (labels.dim() == 0 or labels.size(0) != positives.size(0)):
            raise ValueError(
                f"{type(self).__name__}: the MiniBatch's `labels` must have a row per pair ({positives.size(0)}), got "
                f"shape {tuple(labels.shape)}"
            )
        shift = None if etype < 0 else torch.tensor([ends[0][0], ends[1][0]])
        largest = max(count for _, count in ends) - 1
        if largest > torch.iinfo(positives.dtype).max:
            positives = positives.to(torch.int64)
        if self.neg_sampling == "binary":
            random_pairs = self.random_pairs(positives, *ends, key, latest)
            random_pairs = random_pairs if shift is None else random_pairs - shift
            return _with_random_pairs(positives, labels, random_pairs.to(positives.dtype))
        negatives = self.negatives(pairs if shift is None else positives + shift, key, ends[1], etype, latest)
        negatives = negatives if shift is None else negatives - ends[1][0]
        seeds, labels, indexes = pairs_with_negatives(positives, labels, negatives.to(positives.dtype))
        return {"seeds": seeds, "labels": labels, "indexes": indexes}

    def random_pairs(self, pairs, sources, destinations, key, latest) -> torch.Tensor:
        """``ceil(P * negative_ratio)`` binary negatives of ``P`` positives, as PyG's (global
        ids of the two ranges), each end no later than the positives' ``latest`` tiled over them."""
        num = math.ceil(pairs.size(0) * self.negative_ratio)
        if latest is not None:
            latest = latest.repeat(math.ceil(num / max(latest.numel(), 1)))[:num]
        return sample_random_pairs(num, sources, destinations, key, pairs.device, self.node_time, latest)

    def negatives(self, pairs: torch.Tensor, key: int, candidates: Tuple[int, int], etype: int, latest=None) -> torch.Tensor:
        """``[P, k]`` negative destinations (global ids, drawn from ``candidates``) of the
        global ``pairs`` of edge type id ``etype`` (-1: untyped), no later than ``latest``."""
        return sample_uniform_negatives(
            pairs, self.graph.total_num_nodes, self.negative_ratio, key=key, indptr=self.graph.indptr,
            indices=self.graph.indices, exclude_edges=self.exclude_existing_edges, sorted_indices=self.sorted_indices,
            candidates=candidates, type_per_edge=self.graph.type_per_edge, edge_type=etype,
            node_time=None if latest is None else self.node_time, latest=latest, where=type(self).__name__,
        )  # fmt: skip


def _times(timestamp: Optional[torch.Tensor], fields: dict) -> Optional[torch.Tensor]:
    """The seeds' times with negatives: each negative gets its positive's time (per-pair
    negatives, by ``indexes``), or the positives' times tiled over the binary negatives
    (PyG's ``edge_label_time.repeat``)."""
    if timestamp is None:
        return None
    if fields.get("indexes") is not None:
        return timestamp[fields["indexes"]]
    num = fields["seeds"].size(0)
    return timestamp.repeat(math.ceil(num / max(timestamp.numel(), 1)))[:num]


def _with_random_pairs(positives: torch.Tensor, labels: Optional[torch.Tensor], random_pairs: torch.Tensor) -> dict:
    """The ``seeds``, ``labels`` and ``indexes`` (None) of positives and binary negatives."""
    if labels is None:
        labels = torch.ones(positives.size(0), dtype=torch.float32, device=positives.device)
    elif bool((labels == 0).any()):  # PyG shifts such labels by 1; a 0 would read as a sampled negative
        raise ValueError(
            "UniformNegativeSampler(neg_sampling='binary'): the positives' `labels` contain 0, the label of the "
            "sampled negatives; give positives labels >= 1 (or none: they get 1.0)"
        )
    negative_labels = labels.new_zeros((random_pairs.size(0),) + tuple(labels.shape[1:]))
    seeds = torch.cat([positives, random_pairs])
    return {"seeds": seeds, "labels": torch.cat([labels, negative_labels]), "indexes": None}


