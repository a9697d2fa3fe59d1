"""FeatureFetcher: gather the features a MiniBatch needs from a FeatureStore."""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from ..csc_graph import CSCGraph
from ..feature_store import Feature, FeatureStore
from ..minibatch import MiniBatch
from ..validation import check_node_ids
from .base import Pipe, functional_pipe, upstream

__all__ = ["FeatureFetcher"]


@functional_pipe("fetch_feature")
class FeatureFetcher(Pipe):
    """Fill ``node_features`` and ``edge_features`` of every MiniBatch.

    Node features are read for ``input_nodes`` (or for ``seeds`` when the batch has no
    sampled subgraphs): row ``k`` belongs to ``input_nodes[k]``. Edge features are read
    per layer for ``sampled_subgraphs[i].original_edge_ids`` into ``edge_features[i]``.

    When a sampler upstream samples from a :class:`~graphpipe.CSCGraph`, each requested
    node feature must have ``graph.num_nodes`` rows and each edge feature
    ``graph.num_edges`` rows; this is checked when the stage is built.

    Args:
        source: pipe of MiniBatches.
        features: the :class:`~graphpipe.FeatureStore` to read from.
        node_feature_keys: names of node features to fetch.
        edge_feature_keys: names of edge features to fetch.
        cooperative: read each node's features on the rank that owns it and send them to
            the ranks that need them (after a sampler with ``cooperative=True``; see
            :mod:`graphpipe.distributed.cooperative`).
    """

    def __init__(
        self,
        source: Pipe,
        features: FeatureStore,
        node_feature_keys: Sequence[str] = (),
        edge_feature_keys: Sequence[str] = (),
        cooperative: bool = False,
    ):
        super().__init__()
        if not isinstance(features, FeatureStore):
            raise TypeError(
                f"FeatureFetcher: `features` must be a graphpipe.FeatureStore, got {type(features).__name__}"
            )
        self.source = source
        self.features = features
        self.node_feature_keys: List[str] = _checked_keys(features, "node", node_feature_keys)
        self.edge_feature_keys: List[str] = _checked_keys(features, "edge", edge_feature_keys)
        self.cooperative = bool(cooperative)
        self._blocks = _OutputBlocks()
        sampler = _sampler_upstream(source)
        if sampler is not None:
            _check_rows(features, self.node_feature_keys, self.edge_feature_keys, sampler)

    def fetch(self, minibatch: MiniBatch) -> MiniBatch:
        """``minibatch`` with the requested features added (the input is not modified)."""
        node_features = dict(minibatch.node_features)
        if self.node_feature_keys and self.cooperative:
            from ..distributed.cooperative import fetch_node_features_cooperatively

            node_features.update(fetch_node_features_cooperatively(self, minibatch))
        elif self.node_feature_keys:
            ids = minibatch.input_nodes if minibatch.sampled_subgraphs else minibatch.seeds
            if ids is None:
                raise ValueError(
                    "FeatureFetcher: the MiniBatch has neither `input_nodes` nor `seeds` to read node features for"
                )
            name = "input_nodes" if minibatch.sampled_subgraphs else "seeds"
            for key in self.node_feature_keys:
                node_features[key] = self._read("node", key, ids, name)
        edge_features = [dict(layer) for layer in minibatch.edge_features]
        if self.edge_feature_keys:
            if not minibatch.sampled_subgraphs:
                raise ValueError(
                    "FeatureFetcher: edge features need `sampled_subgraphs`; put a sampler stage before fetch_feature"
                )
            edge_features += [{} for _ in range(minibatch.num_layers - len(edge_features))]
            for i, (layer, subgraph) in enumerate(zip(edge_features, minibatch.sampled_subgraphs)):
                for key in self.edge_feature_keys:
                    name = f"sampled_subgraphs[{i}].original_edge_ids"
                    layer[key] = self._read("edge", key, subgraph.original_edge_ids, name)
        return replace(minibatch, node_features=node_features, edge_features=edge_features)

    def process(self, item):
        """The per-batch work of the stage protocol: :meth:`fetch`."""
        return self.fetch(item)

    def cache_hit_rates(self) -> Dict[str, float]:
        """``{"node/feat": hit rate}`` for each fetched feature behind a cache
        (:class:`~graphpipe.CPUCachedFeature`, :class:`~graphpipe.GPUCachedFeature`) since
        the last :meth:`reset_stats`; :meth:`graphpipe.DataLoader.stats` reports it."""
        return {
            f"{kind}/{key}": self.features[kind, key].hit_rate
            for kind, keys in (("node", self.node_feature_keys), ("edge", self.edge_feature_keys))
            for key in keys
            if hasattr(self.features[kind, key], "hit_rate")
        }

    def reset_stats(self) -> None:
        """Zero the hit counts of the cached features this stage reads (each epoch)."""
        for kind, keys in (("node", self.node_feature_keys), ("edge", self.edge_feature_keys)):
            for key in keys:
                reset = getattr(self.features[kind, key], "reset_stats", None)
                if reset is not None:
                    reset()

    @property
    def collective(self) -> bool:
        """Cooperative fetches are collective calls: the loader runs them one at a time."""
        return self.cooperative and bool(self.node_feature_keys)

    def _read(self, kind: str, key: str, ids: torch.Tensor, name: str) -> torch.Tensor:
        """Rows ``ids`` of the ``kind`` feature ``key``; an id out of range is reported as a
        node or edge id of that feature, found in the MiniBatch field ``name``."""
        feature = self.features[kind, key]
        try:
            return feature.read(ids, self._blocks.output(feature, ids, (kind, key)))
        except ValueError:
            # The table's own check knows neither the feature nor the kind of id: say both.
            where = f"FeatureFetcher: {kind} feature '{key}' ({feature.num_rows} rows)"
            check_node_ids(ids, feature.num_rows, name, where, kind=kind)
            raise


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
        self._blocks: Dict[Tuple[str, str], List[list]] = {}  # key -> [[block, storage ref or None]]

    def __reduce__(self):
        return _OutputBlocks, ()  # blocks are this process's memory: a copy starts empty

    def output(self, feature, ids: torch.Tensor, key: Tuple[str, str]) -> Optional[torch.Tensor]:
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


def _check_rows(features: FeatureStore, node_keys: List[str], edge_keys: List[str], sampler: Pipe) -> None:
    """Node features need one row per node of the sampler's graph, edge features one per edge:
    a shorter table would only fail when a batch first reaches a missing row."""
    graph = sampler.graph
    expected = {"node": (graph.num_nodes, "nodes"), "edge": (graph.num_edges, "edges")}
    for kind, keys in (("node", node_keys), ("edge", edge_keys)):
        count, what = expected[kind]
        for key in keys:
            rows = features[kind, key].num_rows
            if rows != count:
                raise ValueError(
                    f"FeatureFetcher: {kind} feature '{key}' has {rows} rows, but the graph of the upstream "
                    f"{type(sampler).__name__} has {count} {what}; a {kind} feature needs one row per {kind} "
                    f"({count} rows)"
                )
