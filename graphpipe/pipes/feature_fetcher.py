"""FeatureFetcher: gather the features a MiniBatch needs from a FeatureStore."""

from __future__ import annotations

import functools
import math
import threading
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.features.store import Feature, FeatureKey, FeatureStore, Key, describe, listed_key, type_name
from graphpipe.batch.minibatch import MiniBatch, with_fields
from graphpipe._internal.checks import check_bool, check_graphbolt_flags, check_node_ids
from graphpipe.ops.compile import gather_rows_task
from graphpipe.distributed.cooperative import fetch_node_features_cooperatively
from graphpipe.distributed.remote import fetch_features_from_owners
from graphpipe.pipes.distributed_item_sampler import find_distributed_item_sampler
from graphpipe.pipes.base import Pipe, functional_pipe, upstream

__all__ = ["FeatureFetcher"]


@functional_pipe("fetch_feature")
class FeatureFetcher(Pipe):
    """Fill ``node_features`` and ``edge_features`` of every MiniBatch.

    Homogeneous batches: node features are read for ``input_nodes`` (or for ``seeds``
    when the batch has no sampled subgraphs): row ``k`` belongs to ``input_nodes[k]``.
    Edge features are read per layer for ``sampled_subgraphs[i].original_edge_ids`` into
    ``edge_features[i]``, keyed by name.

    Typed batches (GraphBolt's form): with ``node_feature_keys={"paper": ["feat"]}``,
    ``node_features[("paper", "feat")]`` holds the rows of ``input_nodes["paper"]`` (or
    ``seeds["paper"]``) read from ``features["node", "paper", "feat"]``; with
    ``edge_feature_keys={"author:writes:paper": ["w"]}``,
    ``edge_features[i][("author:writes:paper", "w")]`` the rows of
    ``sampled_subgraphs[i].original_edge_ids["author:writes:paper"]`` (ids within the
    edge type). A requested type the batch has no nodes or edges of gets an empty
    ``[0, *row_shape]`` tensor, so every batch has the same keys. A homogeneous batch is
    the one-type case: one path reads both.

    When a sampler upstream samples from a :class:`~graphpipe.CSCGraph`, the requested
    features are checked when the stage is built: each node feature needs a row for
    every node (of its type: ``graph.num_nodes_per_type[ntype]``), each edge feature one
    for every edge (of its type), and a typed graph needs dict keys naming its types.
    Tables may have more rows (padding, nodes added later), as GraphBolt's and PyG's
    stores allow. The ids such a sampler makes are then read unchecked when only stages
    declaring ``role = "copy"`` lie between it and the fetcher; otherwise (a user's
    stage, or no sampler), every id a batch reads is checked to be in range.

    Args:
        source: pipe of MiniBatches.
        features: the :class:`~graphpipe.FeatureStore` to read from.
        node_feature_keys: names of node features to fetch (a list), or for typed
            batches node type -> names (a dict).
        edge_feature_keys: names of edge features to fetch, or for typed batches edge
            type (``"src:relation:dst"`` or a ``(src, relation, dst)`` tuple) -> names.
        overlap_fetch: GraphBolt's flag (a bool), accepted and doing nothing: the
            :class:`~graphpipe.DataLoader` places and overlaps the stages itself.
        cooperative: read each node's features on the rank that owns it and send them to
            the ranks that need them (after a sampler with ``cooperative=True``; see
            :mod:`graphpipe.distributed.cooperative`).

    Attributes:
        typed: whether the keys are per type (dicts).
        node_feature_keys: ``[name, ...]``, or ``{node_type: [name, ...]}`` when typed.
        edge_feature_keys: ``[name, ...]``, or ``{"src:relation:dst": [name, ...]}`` when
            typed (tuple edge types normalised to strings).
    """

    def __init__(
        self,
        source: Pipe,
        features: FeatureStore,
        node_feature_keys: Union[Sequence[str], Mapping[str, Sequence[str]]] = (),
        edge_feature_keys: Union[Sequence[str], Mapping[object, Sequence[str]]] = (),
        overlap_fetch: bool = True,
        cooperative: bool = False,
    ):
        super().__init__()
        if not isinstance(features, FeatureStore):
            raise TypeError(
                f"FeatureFetcher: `features` must be a graphpipe.FeatureStore, got {type(features).__name__}"
            )
        self.source = source
        self.features = features
        check_graphbolt_flags("FeatureFetcher", overlap_fetch=overlap_fetch)
        self.cooperative = check_bool(cooperative, "cooperative", "FeatureFetcher")
        self._blocks = _OutputBlocks()
        # The nearest stage upstream that samples from a CSCGraph (stages[at]), or None.
        stages = upstream(source)
        at = next((i for i, stage in enumerate(stages) if isinstance(getattr(stage, "graph", None), CSCGraph)), None)
        sampler = None if at is None else stages[at]
        self.typed = isinstance(node_feature_keys, Mapping) or isinstance(edge_feature_keys, Mapping)
        given = {"node": node_feature_keys, "edge": edge_feature_keys}
        if sampler is not None and sampler.graph.is_heterogeneous != self.typed and any(map(len, given.values())):
            graph = sampler.graph  # keys of one kind (lists, dicts) that do not fit its graph
            if graph.is_heterogeneous:
                raise TypeError(
                    f"FeatureFetcher: the graph of the upstream {type(sampler).__name__} is heterogeneous, so "
                    "`node_feature_keys` / `edge_feature_keys` must be dicts of type -> names, e.g. "
                    f"node_feature_keys={{'{graph.node_types[0]}': {list(given['node']) or ['feat']}}}; "
                    f"node types: {graph.node_types}, edge types: {graph.edge_types}"
                )
            kind, keys = next((kind, keys) for kind, keys in given.items() if isinstance(keys, Mapping))
            raise TypeError(
                f"FeatureFetcher: the graph of the upstream {type(sampler).__name__} is homogeneous, so "
                f"`{kind}_feature_keys` must be a list of names, got the dict {dict(keys)!r}"
            )
        by_type = {kind: _keys_by_type(features, kind, keys, self.typed, sampler) for kind, keys in given.items()}
        self.node_feature_keys, self.edge_feature_keys = (
            keys if self.typed else keys.get(None, []) for keys in by_type.values()
        )
        self._reads = {
            kind: [_Read.of(features, (kind, t, name)) for t, names in keys.items() for name in names]
            for kind, keys in by_type.items()
        }
        # A sampler's ids are in range of its graph, whose rows are checked here: never per batch,
        # unless a stage between it and this one may have changed them.
        # Only stages declaring role = "copy" (they move batches, not change them) may lie between.
        self._check_ids = sampler is None or any(stage.role != "copy" for stage in stages[:at])
        # After a sampler over a part (graphpipe.distributed.remote): every row is read by its owner.
        self.part_graph = sampler.graph if not self.cooperative and getattr(sampler, "on_part", False) else None
        # The Pipe protocol: cooperative fetches, and fetches over a part, are collective calls.
        self.collective = (self.cooperative and bool(self._reads["node"])) or self.part_graph is not None
        if sampler is not None:
            _check_rows(self._reads, sampler)

    def fetch(self, minibatch: MiniBatch) -> MiniBatch:
        """``minibatch`` with the requested features added (the input is not modified)."""
        if self.part_graph is not None:
            source = find_distributed_item_sampler(self, "FeatureFetcher (over a part)")
            node_features, edge_features = fetch_features_from_owners(self, minibatch, source, self.part_graph)
            return with_fields(minibatch, node_features=node_features, edge_features=edge_features)
        node_features = dict(minibatch.node_features)
        if self.cooperative and self._reads["node"]:
            source = find_distributed_item_sampler(self, "FeatureFetcher (cooperative)")
            node_features.update(fetch_node_features_cooperatively(self, minibatch, source))
        elif self._reads["node"]:
            field = "seeds" if minibatch.input_nodes is None else "input_nodes"  # a user's stage may set them alone
            ids = getattr(minibatch, field)
            if ids is None:
                raise ValueError(
                    "FeatureFetcher: the MiniBatch has neither `input_nodes` nor `seeds` to read node features for"
                )
            self._read_into(node_features, "node", ids, field)
        edge_features = [dict(layer) for layer in minibatch.edge_features]
        if self._reads["edge"]:
            if not minibatch.sampled_subgraphs:
                raise ValueError(
                    "FeatureFetcher: edge features need `sampled_subgraphs`; put a sampler stage before fetch_feature"
                )
            edge_features += [{} for _ in range(minibatch.num_layers - len(edge_features))]
            for i, (layer, subgraph) in enumerate(zip(edge_features, minibatch.sampled_subgraphs)):
                self._read_into(layer, "edge", subgraph.original_edge_ids, f"sampled_subgraphs[{i}].original_edge_ids")
        return with_fields(minibatch, node_features=node_features, edge_features=edge_features)

    def process(self, item):
        """The per-batch work of the stage protocol: :meth:`fetch` (a subclass overriding it is honoured)."""
        return self.fetch(item)

    def fetched_features(self) -> List[Tuple[str, FeatureKey, Feature]]:
        """``(kind, key, feature)`` of every feature this stage reads, ``key`` as the
        store lists it (a name, or ``(type, name)`` when typed): ``features[kind, key]``."""
        return [(read.key[0], listed_key(read.key), read.feature) for reads in self._reads.values() for read in reads]

    def cache_hit_rates(self) -> Dict[str, float]:
        """``{"node/feat": hit rate}`` (typed: ``"node/paper/feat"``) for each fetched
        feature behind a cache (:class:`~graphpipe.CPUCachedFeature`,
        :class:`~graphpipe.GPUCachedFeature`) since the last :meth:`reset_stats`;
        :meth:`graphpipe.DataLoader.stats` reports it."""
        return {
            "/".join(part for part in read.key if part is not None): read.feature.hit_rate
            for reads in self._reads.values()
            for read in reads
            if hasattr(read.feature, "hit_rate")
        }

    def reset_stats(self) -> None:
        """Zero the hit counts of the cached features this stage reads (each epoch)."""
        for _, _, feature in self.fetched_features():
            reset = getattr(feature, "reset_stats", None)
            if reset is not None:
                reset()

    def _read_into(self, out: dict, kind: str, ids, field: str) -> None:
        """Read every requested ``kind`` feature at ``ids`` (the MiniBatch's ``field``: a
        tensor, or type -> tensor when typed) into ``out``, under the batch's keys."""
        if self._check_ids and isinstance(ids, Mapping) != self.typed:
            if self.typed:
                raise TypeError(
                    f"FeatureFetcher: the keys are per type (dicts), so `{field}` must be a dict of type -> ids "
                    f"(a heterogeneous batch), got {type(ids).__name__}; for a homogeneous batch pass lists of names"
                )
            raise TypeError(
                f"FeatureFetcher: `{field}` is a dict of type -> ids (a heterogeneous batch), so the keys must be "
                f"dicts of type -> names, e.g. node_feature_keys={{'{next(iter(ids), 'paper')}': "
                f"{list(self.node_feature_keys) or ['feat']}}}"
            )
        by_type = ids if self.typed else {None: ids}
        for key, batch_key, feature, label, reader in self._reads[kind]:
            type_ids = by_type.get(key[1])
            if type_ids is None:  # a type the batch has none of
                device = next((t.device for t in by_type.values() if isinstance(t, torch.Tensor)), torch.device("cpu"))
                type_ids = torch.empty(0, dtype=torch.int64, device=device)
            if self._check_ids:
                where = field if key[1] is None else f"{field}['{key[1]}']"
                type_ids = check_node_ids(type_ids, feature.num_rows, where, f"FeatureFetcher: {label}", kind)
            if reader is not None:
                out[batch_key] = reader(type_ids)
            else:
                out[batch_key] = feature.read_valid(type_ids, self._blocks.output(feature, type_ids, key))

    role = "fetcher"  # the Pipe protocol's declarations

    @property
    def thread_safe(self) -> bool:
        """Pipe protocol: batches may be fetched in several threads at once when every
        feature read allows it; a user's ``read`` (a store or feature overriding it) only
        where the user's class sets ``concurrent_reads`` itself (GraphBolt runs it in one
        thread)."""
        return all(read.concurrent() for reads in self._reads.values() for read in reads)

    def compile_tasks(self) -> list:
        """Pipe protocol: the row gathers of the plain CPU tables it reads (caches and disk
        features have kernels of their own)."""
        return [
            gather_rows_task(feature.data)
            for _, _, feature in self.fetched_features()
            if type(feature) is Feature and not (isinstance(feature.data, torch.Tensor) and feature.data.is_cuda)
        ]

    def stats(self) -> dict:
        """Pipe protocol: ``{"cache_hit_rate": cache_hit_rates()}`` when it reads cached features."""
        rates = self.cache_hit_rates()
        return {"cache_hit_rate": rates} if rates else {}


class _Read(NamedTuple):
    """One feature a fetcher reads, fixed when it is built."""

    key: Key  # (kind, type or None, name): the store's key, and the output blocks'
    batch_key: FeatureKey  # the MiniBatch's key: the name, or (type, name)
    feature: Feature
    label: str  # for errors: "node feature 'feat' of type 'paper' (30 rows)"
    # A user's store or feature overriding read (GraphBolt's way to add a storage): it reads
    # each batch's rows (``reader(ids)``); None: the feature's read_valid, unchecked.
    reader: Optional[Callable[[torch.Tensor], torch.Tensor]]

    def concurrent(self) -> bool:
        """Whether this read may run in several threads at once (see ``thread_safe``)."""
        if self.reader is None:
            return self.feature.concurrent_reads
        owner = getattr(self.reader, "func", self.reader).__self__  # the store or the feature overriding read
        users = [vars(c) for c in type(owner).__mro__ if not c.__module__.startswith("graphpipe.")]
        declared = any("concurrent_reads" in names for names in [getattr(owner, "__dict__", {}), *users])
        return declared and bool(owner.concurrent_reads) and self.feature.concurrent_reads

    @classmethod
    def of(cls, features: FeatureStore, key: Key) -> "_Read":
        feature = features[key]
        reader = None
        if type(features).read is not FeatureStore.read:
            reader = functools.partial(features.read, *key)
        elif type(feature).read is not Feature.read:
            reader = feature.read
        return cls(key, listed_key(key), feature, f"{key[0]} feature {describe(key)} ({feature.num_rows} rows)", reader)


class _OutputBlocks:
    """Memory blocks reused for the rows a fetcher reads on the CPU, per feature.

    A batch's rows of one feature are tens of MB (160k rows of 400 B in the benchmark).
    A fresh block that large is mapped by malloc and faulted in page by page every batch
    (on the 2-core benchmark machine ~340 faults, 30 ms of kernel time, more than the
    gather itself). A block is lent again only once no tensor uses it any more (every
    tensor made from it, views included, has been freed: a weak reference to their
    storage tells), so a batch the training loop keeps is never overwritten. At most
    ``_BLOCKS_PER_FEATURE`` blocks are kept per feature (batches in flight: queued,
    being fetched, being trained on); past that, reads get fresh memory.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._blocks: Dict[Key, List[list]] = {}  # (kind, type, name) -> [[block, ref]]

    def __reduce__(self):
        return _OutputBlocks, ()  # blocks are this process's memory: a copy starts empty

    def output(self, feature, ids: torch.Tensor, key: Key) -> Optional[torch.Tensor]:
        """An uninitialised ``[len(ids), *row_shape]`` tensor on a reused block, or None
        (the feature reads into memory of its own) when the rows are not plain CPU rows."""
        if type(feature).read_valid is not Feature.read_valid or ids.device.type != "cpu":
            return None
        shape = (ids.numel(),) + feature.row_shape
        nbytes = math.prod(shape) * feature.dtype.itemsize
        if nbytes == 0 or (isinstance(feature.data, torch.Tensor) and feature.data.device.type != "cpu"):
            return None
        with self._lock:
            slots = self._blocks.setdefault(key, [])
            free = [s for s in slots if s[1] is None or s[1].expired()]
            slot = next((s for s in free if s[0].nbytes >= nbytes), None)
            if slot is None:
                if not free and len(slots) >= _BLOCKS_PER_FEATURE:
                    return None
                slot = free[0] if free else [None, None]
                slot[0] = np.empty(nbytes + nbytes // 4, np.uint8)  # headroom: batch sizes vary
                if not free:
                    slots.append(slot)
            out = torch.from_numpy(slot[0][:nbytes]).view(feature.dtype).reshape(shape)
            slot[1] = StorageWeakRef(out.untyped_storage())
        return out


_BLOCKS_PER_FEATURE = 8


def _keys_by_type(features: FeatureStore, kind: str, keys, typed: bool, sampler: Optional[Pipe]) -> Dict[Optional[str], List[str]]:
    """``keys`` as ``{type: [names]}`` (``{None: [names]}`` when untyped; edge types as
    ``"src:relation:dst"``), after checking that the types are the upstream graph's and
    that the store has every feature."""
    argument = f"{kind}_feature_keys"
    keys = () if keys is None else keys  # GraphBolt's default
    if isinstance(keys, str):
        raise TypeError(f"FeatureFetcher: `{argument}` must be a list of names, got the string {keys!r}")
    if typed and not isinstance(keys, Mapping):
        if len(keys):
            raise TypeError(
                f"FeatureFetcher: `{argument}` must be a dict of {kind} type -> names like the other keys "
                f"(typed batches), got {list(keys)!r}"
            )
        keys = {}
    out: Dict[Optional[str], List[str]] = {}
    for given_type, names in (keys.items() if typed else [(None, keys)]):
        if typed:  # as the store keys it (edge types as "src:relation:dst"), a type of the upstream graph
            given_type = type_name(kind, given_type, f"FeatureFetcher: `{argument}`")
            graph = None if sampler is None else sampler.graph
            known = None if graph is None else graph.node_types if kind == "node" else graph.edge_types
            if known is not None and given_type not in known:
                raise ValueError(
                    f"FeatureFetcher: `{argument}` names {kind} type '{given_type}', which the graph of the upstream "
                    f"{type(sampler).__name__} lacks; known {kind} types: {known}"
                )
        label = argument if given_type is None else f"{argument}['{given_type}']"
        if isinstance(names, str) or not isinstance(names, (Sequence, set, frozenset)):
            raise TypeError(f"FeatureFetcher: `{label}` must be a list of names, got {names!r}")
        names = list(names)
        missing = [name for name in names if (kind, given_type, name) not in features]
        if missing:
            listed = features.node_keys if kind == "node" else features.edge_keys
            known = listed if given_type is None else [k[1] for k in listed if isinstance(k, tuple) and k[0] == given_type]
            of_type = "" if given_type is None else f" of type '{given_type}'"
            raise KeyError(
                f"FeatureFetcher: unknown {kind} feature(s) {missing}{of_type} (`{label}`); the store's {kind} "
                f"features{of_type}: {known}"
            )
        if names:
            out[given_type] = names
    return out


def _check_rows(reads: Dict[str, List[_Read]], sampler: Pipe) -> None:
    """Node features need a row for every node of the sampler's graph (of their type),
    edge features for every edge (of their type): a shorter table would only fail when a
    batch first reaches a missing row. Longer tables are fine."""
    graph = sampler.graph
    if graph.is_heterogeneous:
        edge_counts = torch.bincount(graph.type_per_edge.to(torch.int64), minlength=len(graph.edge_types)).tolist()
        counts = {"node": graph.num_nodes_per_type, "edge": dict(zip(graph.edge_types, edge_counts))}
    else:
        counts = {"node": {None: graph.total_num_nodes}, "edge": {None: graph.total_num_edges}}
    for kind, kind_reads in reads.items():
        for (_, of, name), _, feature, _, _ in kind_reads:
            rows, count = feature.num_rows, counts[kind][of]
            if rows < count:
                of_type = "" if of is None else f" of type '{of}'"
                raise ValueError(
                    f"FeatureFetcher: {kind} feature '{name}'{of_type} has {rows} rows, but the graph of the upstream "
                    f"{type(sampler).__name__} has {count} {kind}s{of_type}; a {kind} feature needs a row for every "
                    f"{kind}{of_type} (at least {count} rows)"
                )


