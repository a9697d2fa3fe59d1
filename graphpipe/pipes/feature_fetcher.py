"""FeatureFetcher: gather the features a MiniBatch needs from a FeatureStore."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence

import torch

from ..csc_graph import CSCGraph
from ..feature_store import FeatureStore
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

    @property
    def collective(self) -> bool:
        """Cooperative fetches are collective calls: the loader runs them one at a time."""
        return self.cooperative and bool(self.node_feature_keys)

    def _read(self, kind: str, key: str, ids: torch.Tensor, name: str) -> torch.Tensor:
        """Rows ``ids`` of the ``kind`` feature ``key``; an id out of range is reported as a
        node or edge id of that feature, found in the MiniBatch field ``name``."""
        feature = self.features[kind, key]
        try:
            return feature.read(ids)
        except ValueError:
            # The table's own check knows neither the feature nor the kind of id: say both.
            where = f"FeatureFetcher: {kind} feature '{key}' ({feature.num_rows} rows)"
            check_node_ids(ids, feature.num_rows, name, where, kind=kind)
            raise


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
