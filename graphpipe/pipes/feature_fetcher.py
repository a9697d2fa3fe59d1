"""FeatureFetcher: gather the features a MiniBatch needs from a FeatureStore."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Sequence

from ..feature_store import FeatureStore
from ..minibatch import MiniBatch
from .base import Pipe, functional_pipe

__all__ = ["FeatureFetcher"]


@functional_pipe("fetch_feature")
class FeatureFetcher(Pipe):
    """Fill ``node_features`` and ``edge_features`` of every MiniBatch.

    Node features are read for ``input_nodes`` (or for ``seeds`` when the batch has no
    sampled subgraphs): row ``k`` belongs to ``input_nodes[k]``. Edge features are read
    per layer for ``sampled_subgraphs[i].original_edge_ids`` into ``edge_features[i]``.

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
            for key in self.node_feature_keys:
                node_features[key] = self.features["node", key].read(ids)
        edge_features = [dict(layer) for layer in minibatch.edge_features]
        if self.edge_feature_keys:
            if not minibatch.sampled_subgraphs:
                raise ValueError(
                    "FeatureFetcher: edge features need `sampled_subgraphs`; put a sampler stage before fetch_feature"
                )
            edge_features += [{} for _ in range(minibatch.num_layers - len(edge_features))]
            for layer, subgraph in zip(edge_features, minibatch.sampled_subgraphs):
                for key in self.edge_feature_keys:
                    layer[key] = self.features["edge", key].read(subgraph.original_edge_ids)
        return replace(minibatch, node_features=node_features, edge_features=edge_features)

    def __iter__(self):
        for minibatch in self.source:
            yield self.fetch(minibatch)


def _checked_keys(features: FeatureStore, kind: str, keys: Sequence[str]) -> List[str]:
    if isinstance(keys, str):
        raise TypeError(f"FeatureFetcher: `{kind}_feature_keys` must be a list of names, got the string {keys!r}")
    keys = list(keys)
    unknown = [key for key in keys if (kind, key) not in features]
    if unknown:
        known = features.node_keys if kind == "node" else features.edge_keys
        raise KeyError(f"FeatureFetcher: unknown {kind} feature(s) {unknown}; known {kind} features: {known}")
    return keys
