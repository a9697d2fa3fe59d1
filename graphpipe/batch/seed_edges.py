"""GraphBolt's ``exclude_seed_edges`` transform: a sampled link batch without its seed
edges, removed after sampling (``pipe.transform(gp.exclude_seed_edges)``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import torch

from graphpipe._internal.checks import check_bool
from graphpipe.batch.minibatch import MiniBatch, with_fields
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.graph.sampled_subgraph import checked_pairs, kept_edges, select_edges

__all__ = ["exclude_seed_edges"]

_WHERE = "exclude_seed_edges"


def exclude_seed_edges(
    minibatch: MiniBatch, include_reverse_edges: bool = False, reverse_etypes_mapping: Optional[Mapping] = None
) -> MiniBatch:
    """GraphBolt's: ``minibatch`` with no layer holding an edge ``u -> v`` of a pair
    ``(u, v)`` of ``minibatch.seeds`` (``[N, 2]`` global ids, positives and the negatives a
    negative sampler appended alike; typed: ``{edge type: [N, 2]}`` type-local, each pair
    excluded from its own edge type), nor with ``include_reverse_edges`` an edge ``v -> u``
    (untyped: every one; typed: of the type ``reverse_etypes_mapping`` maps the pair's edge
    type to, e.g. ``{"user:like:item": "item:liked-by:user"}``).

    Each layer is :meth:`SampledSubgraph.exclude_edges` of those pairs: its nodes stay as
    they are, its edges, ``original_edge_ids``, ``edge_weights`` and ``edge_features`` lose
    the excluded ones; every other field, and attributes a user's stage set, are kept.
    Post-hoc: a destination keeps what the sampler drew minus the excluded edges, so it may
    end with fewer than its fanout, where the sampler's ``exclude_seed_edges=True`` (or
    ``.exclude_seed_edges(...)`` after it) skips them while sampling and draws others in
    their place. Returns a new MiniBatch (GraphBolt changes its argument)."""
    check_bool(include_reverse_edges, "include_reverse_edges", _WHERE)
    if not isinstance(minibatch, MiniBatch) or minibatch.sampled_subgraphs is None:
        raise TypeError(f"{_WHERE}: `minibatch` must be a sampled MiniBatch (apply it after sample_neighbor), got {_described(minibatch)}")
    if any(getattr(layer, "exchange", None) is not None for layer in minibatch.sampled_subgraphs):
        raise ValueError(
            f"{_WHERE}: a cooperative batch's layers hold the in-edges of every pair of the global batch, and this "
            f"rank's seeds name only its own pairs; pass exclude_seed_edges=True to the cooperative sampler"
        )
    edges = _seed_edges(minibatch, include_reverse_edges, reverse_etypes_mapping)
    layers, edge_features = [], list(minibatch.edge_features)
    for i, layer in enumerate(minibatch.sampled_subgraphs):
        index = kept_edges(layer, edges, False, _WHERE)
        layers.append(select_edges(layer, index))
        if i < len(edge_features):
            edge_features[i] = {key: _pick_rows(key, value, index) for key, value in edge_features[i].items()}
    return with_fields(minibatch, sampled_subgraphs=layers, edge_features=edge_features)


def _seed_edges(minibatch: MiniBatch, include_reverse_edges: bool, mapping) -> object:
    """The pairs to exclude: ``[M, 2]`` int64, or a dict edge type -> those (typed)."""
    seeds = minibatch.seeds
    if not isinstance(seeds, dict):
        if mapping is not None:
            raise ValueError(f"{_WHERE}: `reverse_etypes_mapping` names edge types, but the batch is untyped; leave it None")
        pairs = _seed_pairs(seeds, "minibatch.seeds")
        return torch.cat([pairs, pairs.flip(1)]) if include_reverse_edges else pairs
    edges = {etype: _seed_pairs(pairs, f"minibatch.seeds[{etype!r}]", etype) for etype, pairs in seeds.items()}
    if mapping is not None and not include_reverse_edges:
        raise ValueError(f"{_WHERE}: `reverse_etypes_mapping` says which edges are reverses, but `include_reverse_edges` is False; pass include_reverse_edges=True")
    if not include_reverse_edges:
        return edges
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValueError(
            f"{_WHERE}: `include_reverse_edges=True` on a typed batch needs reverse_etypes_mapping, a dict edge type -> "
            f"its reverse edge type (GraphBolt's form, e.g. {{'user:like:item': 'item:liked-by:user'}}), got {mapping!r}"
        )
    combined = dict(edges)
    for key, value in mapping.items():
        forward, reverse = (parse_edge_type(t, _WHERE) for t in (key, value))
        if (reverse[0], reverse[2]) != (forward[2], forward[0]):
            raise ValueError(
                f"{_WHERE}: `reverse_etypes_mapping` maps {key!r} to {value!r}, whose edges do not run the other way "
                f"(from {forward[2]!r} to {forward[0]!r})"
            )
        etype, reverse_etype = ":".join(forward), ":".join(reverse)
        if etype in edges:
            flipped = edges[etype].flip(1)
            combined[reverse_etype] = torch.cat([combined[reverse_etype], flipped]) if reverse_etype in combined else flipped
    return combined


def _seed_pairs(pairs, name: str, etype: Optional[str] = None) -> torch.Tensor:
    """``pairs`` if ``[N, 2]`` integer node pairs (under an edge type key when typed), else
    an error naming ``name``: node seeds and hyperlinks have no edge to exclude."""
    if not isinstance(pairs, torch.Tensor) or pairs.dim() != 2 or pairs.size(1) != 2:
        got = f"shape {tuple(pairs.shape)}" if isinstance(pairs, torch.Tensor) else type(pairs).__name__
        kind = {1: " (node seeds)", 2: " (hyperlinks)"}.get(pairs.dim(), "") if isinstance(pairs, torch.Tensor) else ""
        raise ValueError(f"{_WHERE}: `{name}` must be [N, 2] (source, destination) node pairs, a link batch's seeds; got {got}{kind}")
    if etype is not None:
        parse_edge_type(etype, _WHERE)
    return checked_pairs(pairs, name, _WHERE)  # integer ids, as int64


def _pick_rows(key, value: torch.Tensor, index) -> torch.Tensor:
    """A layer's edge feature ``value`` (``key``: a name, typed ``(edge type, name)``) with
    the rows of the edges kept (``index``: :func:`kept_edges`' answer)."""
    if isinstance(index, dict):
        index = index.get(key[0]) if isinstance(key, tuple) else None
    return value if index is None else value[index.to(value.device)]


def _described(value) -> str:
    """``value``'s type, and for a MiniBatch that it has no layers."""
    return "a MiniBatch without sampled_subgraphs" if isinstance(value, MiniBatch) else type(value).__name__
