"""FeatureFetcher: gather the features a MiniBatch needs from a FeatureStore."""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.features.store import Feature, FeatureKey, FeatureStore
from graphpipe.batch.minibatch import MiniBatch
from graphpipe._internal.checks import check_node_ids
from graphpipe.ops.compile import gather_rows_task
from graphpipe.distributed.cooperative import fetch_node_features_cooperatively
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
    ``[0, *row_shape]`` tensor, so every batch has the same keys.

    When a sampler upstream samples from a :class:`~graphpipe.CSCGraph`, the requested
    features are checked when the stage is built: each node feature needs a row for
    every node (of its type: ``graph.num_nodes_per_type[ntype]``), each edge feature one
    for every edge (of its type), and a typed graph needs dict keys naming its types.
    Tables may have more rows (padding, nodes added later), as GraphBolt's and PyG's
    stores allow: every id a batch reads is checked to be in range.

    Args:
        source: pipe of MiniBatches.
        features: the :class:`~graphpipe.FeatureStore` to read from.
        node_feature_keys: names of node features to fetch (a list), or for typed
            batches node type -> names (a dict).
        edge_feature_keys: names of edge features to fetch, or for typed batches edge
            type (``"src:relation:dst"`` or a ``(src, relation, dst)`` tuple) -> names.
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
        cooperative: bool = False,
    ):
        super().__init__()
        if not isinstance(features, FeatureStore):
            raise TypeError(
                f"FeatureFetcher: `features` must be a graphpipe.FeatureStore, got {type(features).__name__}"
            )
        self.source = source
        self.features = features
        self.cooperative = bool(cooperative)
        self._blocks = _OutputBlocks()
        sampler = _sampler_upstream(source)
        self.typed = isinstance(node_feature_keys, Mapping) or isinstance(edge_feature_keys, Mapping)
        if self.typed:
            self.node_feature_keys = _typed_keys(features, "node", node_feature_keys, sampler)
            self.edge_feature_keys = _typed_keys(features, "edge", edge_feature_keys, sampler)
        else:
            # Before the names are looked up: a typed store has none of them, and the fix is a dict.
            node_feature_keys, edge_feature_keys = (
                keys if isinstance(keys, str) else list(keys) for keys in (node_feature_keys, edge_feature_keys)
            )
            if sampler is not None and sampler.graph.is_heterogeneous and (node_feature_keys or edge_feature_keys):
                graph = sampler.graph
                raise TypeError(
                    f"FeatureFetcher: the graph of the upstream {type(sampler).__name__} is heterogeneous, so "
                    "`node_feature_keys` / `edge_feature_keys` must be dicts of type -> names, e.g. "
                    f"node_feature_keys={{'{graph.node_types[0]}': {node_feature_keys or ['feat']}}}; "
                    f"node types: {graph.node_types}, edge types: {graph.edge_types}"
                )
            self.node_feature_keys = _checked_keys(features, "node", node_feature_keys)
            self.edge_feature_keys = _checked_keys(features, "edge", edge_feature_keys)
        if sampler is not None:
            _check_rows(self, sampler)

    def fetch(self, minibatch: MiniBatch) -> MiniBatch:
        """``minibatch`` with the requested features added (the input is not modified)."""
        node_features = dict(minibatch.node_features)
        if self.node_feature_keys and self.cooperative:
            source = find_distributed_item_sampler(self, "FeatureFetcher (cooperative)")
            node_features.update(fetch_node_features_cooperatively(self, minibatch, source))
        elif self.node_feature_keys:
            field = "input_nodes" if minibatch.sampled_subgraphs else "seeds"
            ids = getattr(minibatch, field)
            if ids is None:
                raise ValueError(
                    "FeatureFetcher: the MiniBatch has neither `input_nodes` nor `seeds` to read node features for"
                )
            if self.typed:
                ids, empty = self._typed_ids(ids, field)
                for node_type, names in self.node_feature_keys.items():
                    type_ids = ids.get(node_type, empty)
                    for name in names:
                        where = f"{field}['{node_type}']"
                        node_features[node_type, name] = self._read("node", node_type, name, type_ids, where)
            else:
                self._check_untyped(ids, field)
                for key in self.node_feature_keys:
                    node_features[key] = self._read("node", None, key, ids, field)
        edge_features = [dict(layer) for layer in minibatch.edge_features]
        if self.edge_feature_keys:
            if not minibatch.sampled_subgraphs:
                raise ValueError(
                    "FeatureFetcher: edge features need `sampled_subgraphs`; put a sampler stage before fetch_feature"
                )
            edge_features += [{} for _ in range(minibatch.num_layers - len(edge_features))]
            for i, (layer, subgraph) in enumerate(zip(edge_features, minibatch.sampled_subgraphs)):
                field = f"sampled_subgraphs[{i}].original_edge_ids"
                if self.typed:
                    ids, empty = self._typed_ids(subgraph.original_edge_ids, field)
                    for edge_type, names in self.edge_feature_keys.items():
                        type_ids = ids.get(edge_type, empty)
                        for name in names:
                            where = f"{field}['{edge_type}']"
                            layer[edge_type, name] = self._read("edge", edge_type, name, type_ids, where)
                else:
                    self._check_untyped(subgraph.original_edge_ids, field)
                    for key in self.edge_feature_keys:
                        layer[key] = self._read("edge", None, key, subgraph.original_edge_ids, field)
        return replace(minibatch, node_features=node_features, edge_features=edge_features)

    def process(self, item):
        """The per-batch work of the stage protocol: :meth:`fetch`."""
        return self.fetch(item)

    def fetched_features(self) -> List[Tuple[str, FeatureKey, Feature]]:
        """``(kind, key, feature)`` of every feature this stage reads, ``key`` as the
        store lists it (a name, or ``(type, name)`` when typed): ``features[kind, key]``."""
        return [
            (kind, name if type_name is None else (type_name, name), self.features[kind, type_name, name])
            for kind, type_name, name in self._requested()
        ]

    def cache_hit_rates(self) -> Dict[str, float]:
        """``{"node/feat": hit rate}`` (typed: ``"node/paper/feat"``) for each fetched
        feature behind a cache (:class:`~graphpipe.CPUCachedFeature`,
        :class:`~graphpipe.GPUCachedFeature`) since the last :meth:`reset_stats`;
        :meth:`graphpipe.DataLoader.stats` reports it."""
        return {
            "/".join(part for part in (kind, type_name, name) if part is not None): feature.hit_rate
            for (kind, type_name, name), (_, _, feature) in zip(self._requested(), self.fetched_features())
            if hasattr(feature, "hit_rate")
        }

    def reset_stats(self) -> None:
        """Zero the hit counts of the cached features this stage reads (each epoch)."""
        for _, _, feature in self.fetched_features():
            reset = getattr(feature, "reset_stats", None)
            if reset is not None:
                reset()

    @property
    def collective(self) -> bool:
        """Cooperative fetches are collective calls: the loader runs them one at a time."""
        return self.cooperative and bool(self.node_feature_keys)

    def _requested(self) -> List[Tuple[str, Optional[str], str]]:
        """``(kind, type or None, name)`` of every requested feature."""
        out = []
        for kind, keys in (("node", self.node_feature_keys), ("edge", self.edge_feature_keys)):
            if self.typed:
                out += [(kind, type_name, name) for type_name, names in keys.items() for name in names]
            else:
                out += [(kind, None, name) for name in keys]
        return out

    def _typed_ids(self, ids, field: str) -> Tuple[Mapping[str, torch.Tensor], torch.Tensor]:
        """``ids`` (type -> ids) of a typed batch, after checking it is a dict, and an empty
        int64 tensor on the ids' device to read for the types the batch lacks."""
        if not isinstance(ids, Mapping):
            raise TypeError(
                f"FeatureFetcher: the keys are per type (dicts), so `{field}` must be a dict of type -> ids "
                f"(a heterogeneous batch), got {type(ids).__name__}; for a homogeneous batch pass lists of names"
            )
        device = next((t.device for t in ids.values() if isinstance(t, torch.Tensor)), torch.device("cpu"))
        return ids, torch.empty(0, dtype=torch.int64, device=device)

    def _check_untyped(self, ids, field: str) -> None:
        if isinstance(ids, Mapping):
            raise TypeError(
                f"FeatureFetcher: `{field}` is a dict of type -> ids (a heterogeneous batch), so the keys must be "
                f"dicts of type -> names, e.g. node_feature_keys={{'{next(iter(ids), 'paper')}': "
                f"{list(self.node_feature_keys) or ['feat']}}}"
            )

    def _read(self, kind: str, type_name: Optional[str], name: str, ids: torch.Tensor, field: str) -> torch.Tensor:
        """Rows ``ids`` of the ``kind`` feature ``name`` (of ``type_name``, None when
        homogeneous); an id out of range is reported as a node or edge id of that
        feature, found in the MiniBatch field ``field``."""
        feature = self.features[kind, type_name, name]
        try:
            return feature.read(ids, self._blocks.output(feature, ids, (kind, type_name, name)))
        except ValueError:
            # The table's own check knows neither the feature nor the kind of id: say both.
            of_type = "" if type_name is None else f" of type '{type_name}'"
            where = f"FeatureFetcher: {kind} feature '{name}'{of_type} ({feature.num_rows} rows)"
            check_node_ids(ids, feature.num_rows, field, where, kind=kind)
            raise

    role = "fetcher"  # the Pipe protocol's declarations

    @property
    def thread_safe(self) -> bool:
        """Pipe protocol: batches may be fetched in several threads at once when every
        feature read allows it."""
        return all(feature.concurrent_reads for _, _, feature in self.fetched_features())

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
        self._blocks: Dict[Tuple[str, Optional[str], str], List[list]] = {}  # (kind, type, name) -> [[block, ref]]

    def __reduce__(self):
        return _OutputBlocks, ()  # blocks are this process's memory: a copy starts empty

    def output(self, feature, ids: torch.Tensor, key: Tuple[str, Optional[str], str]) -> Optional[torch.Tensor]:
        """An uninitialised ``[len(ids), *row_shape]`` tensor on a reused block, or None
        (the feature reads into memory of its own) when the rows are not plain CPU rows."""
        if type(feature).read is not Feature.read or ids.device.type != "cpu" or ids.dim() != 1:
            return None
        data = feature.data
        if isinstance(data, torch.Tensor) and data.device.type != "cpu":
            return None
        dtype = feature.dtype
        shape = (ids.numel(),) + feature.row_shape
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0:
            return None
        with self._lock:
            slots = self._blocks.setdefault(key, [])
            slot = next((s for s in slots if (s[1] is None or s[1].expired()) and s[0].nbytes >= nbytes), None)
            if slot is None:
                slot = next((s for s in slots if s[1] is None or s[1].expired()), None)
                block = np.empty(nbytes + nbytes // 4, np.uint8)  # headroom: batch sizes vary
                if slot is not None:
                    slot[0] = block
                elif len(slots) < _BLOCKS_PER_FEATURE:
                    slot = [block, None]
                    slots.append(slot)
                else:
                    return None
            out = torch.from_numpy(slot[0][:nbytes]).view(dtype).reshape(shape)
            slot[1] = StorageWeakRef(out.untyped_storage())
        return out


_BLOCKS_PER_FEATURE = 8


def _checked_keys(features: FeatureStore, kind: str, keys: Sequence[str]) -> List[str]:
    if isinstance(keys, str):
        raise TypeError(f"FeatureFetcher: `{kind}_feature_keys` must be a list of names, got the string {keys!r}")
    keys = list(keys)
    unknown = [key for key in keys if (kind, key) not in features]
    if unknown:
        known = features.node_keys if kind == "node" else features.edge_keys
        raise KeyError(f"FeatureFetcher: unknown {kind} feature(s) {unknown}; known {kind} features: {known}")
    return keys


def _sampler_upstream(source) -> Optional[Pipe]:
    """The nearest stage upstream of ``source`` (following ``.source``) that samples from a
    :class:`~graphpipe.CSCGraph` (has a ``graph`` attribute), or None."""
    return next((stage for stage in upstream(source) if isinstance(getattr(stage, "graph", None), CSCGraph)), None)


def _typed_keys(features: FeatureStore, kind: str, keys, sampler: Optional[Pipe]) -> Dict[str, List[str]]:
    """``keys`` as ``{type: [names]}`` (edge types as ``"src:relation:dst"``), after checking
    that the types are the upstream graph's and the store has every feature of each type."""
    argument = f"{kind}_feature_keys"
    if not isinstance(keys, Mapping):
        names = [keys] if isinstance(keys, str) else list(keys)
        if names:
            raise TypeError(
                f"FeatureFetcher: `{argument}` must be a dict of {kind} type -> names like the other keys "
                f"(typed batches), got {names!r}"
            )
        return {}
    graph = sampler.graph if sampler is not None else None
    if graph is not None and not graph.is_heterogeneous:
        raise TypeError(
            f"FeatureFetcher: the graph of the upstream {type(sampler).__name__} is homogeneous, so `{argument}` "
            f"must be a list of names, got the dict {dict(keys)!r}"
        )
    out: Dict[str, List[str]] = {}
    for type_name, names in keys.items():
        if kind == "edge":
            type_name = "{}:{}:{}".format(*parse_edge_type(type_name, f"FeatureFetcher: `{argument}`"))
        elif not isinstance(type_name, str):
            raise TypeError(f"FeatureFetcher: `{argument}` keys must be node type names (str), got {type_name!r}")
        if graph is not None:
            known = graph.node_types if kind == "node" else graph.edge_types
            if type_name not in known:
                raise ValueError(
                    f"FeatureFetcher: `{argument}` names {kind} type '{type_name}', which the graph of the upstream "
                    f"{type(sampler).__name__} lacks; known {kind} types: {known}"
                )
        if isinstance(names, str) or not isinstance(names, (Sequence, set, frozenset)):
            raise TypeError(
                f"FeatureFetcher: `{argument}['{type_name}']` must be a list of names, got {names!r}"
            )
        names = list(names)
        missing = [name for name in names if (kind, type_name, name) not in features]
        if missing:
            of_type = [key[1] for key in (features.node_keys if kind == "node" else features.edge_keys)
                       if isinstance(key, tuple) and key[0] == type_name]
            raise KeyError(
                f"FeatureFetcher: features missing for a type: {kind} type '{type_name}' has no feature(s) "
                f"{missing} in the store (`{argument}['{type_name}']`); its {kind} features: {of_type}"
            )
        out[type_name] = names
    return out


def _check_rows(fetcher: FeatureFetcher, sampler: Pipe) -> None:
    """Node features need a row for every node of the sampler's graph (of their type),
    edge features for every edge (of their type): a shorter table would only fail when a
    batch first reaches a missing row. Longer tables are fine."""
    graph = sampler.graph
    if fetcher.typed:
        edge_counts = torch.bincount(graph.type_per_edge.to(torch.int64), minlength=len(graph.edge_types)).tolist()
        counts = {"node": graph.num_nodes_per_type, "edge": dict(zip(graph.edge_types, edge_counts))}
    else:
        counts = {"node": {None: graph.num_nodes}, "edge": {None: graph.num_edges}}
    for kind, type_name, name in fetcher._requested():
        rows, count = fetcher.features[kind, type_name, name].num_rows, counts[kind][type_name]
        if rows < count:
            of_type = "" if type_name is None else f" of type '{type_name}'"
            raise ValueError(
                f"FeatureFetcher: {kind} feature '{name}'{of_type} has {rows} rows, but the graph of the upstream "
                f"{type(sampler).__name__} has {count} {kind}s{of_type}; a {kind} feature needs a row for every "
                f"{kind}{of_type} (at least {count} rows)"
            )
