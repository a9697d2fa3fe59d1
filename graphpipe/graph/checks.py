"""Checks of arguments that refer to a graph: its edge weights, typed fanouts and seeds."""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

import warnings

import numpy as np
import torch

from graphpipe._internal.checks import as_int, check_node_ids
from graphpipe.graph.edge_types import parse_edge_type

__all__ = ["ATTRIBUTES_HINT", "check_edge_weights", "check_item_seeds", "check_typed_fanouts", "check_typed_pairs", "check_typed_seeds", "refuse_typed_seeds"]

# Said where a graph attribute is missing: from_pyg / from_dgl users expect PyG's edge_weight / time there.
ATTRIBUTES_HINT = (
    "graph attributes are given when the graph is built (CSCGraph.from_edge_index(..., edge_attributes=..., "
    "node_attributes=...)); from_pyg and from_dgl keep such tensors as features only"
)


def check_typed_fanouts(fanouts, edge_types: List[str], where: str) -> List[List[int]]:
    """Fanouts for a typed graph: ``[num_layers][num_edge_types]`` ints, each ``>= 0``
    (0: the layer samples no edge of that type) or ``-1`` (all of them).

    Each layer's entry is one of: an int for every edge type (PyG's meaning; 0 samples
    nothing in that layer; a one-element tensor too, with a warning on a graph of several
    edge types: GraphBolt's ``torch.LongTensor([k])`` means ``k`` over all types together); a dict
    ``{edge type: int}`` naming every edge type (``"src:relation:dst"`` or a tuple); or a
    list / 1-D tensor of ``num_edge_types`` ints in edge type id order (GraphBolt's form)."""
    if isinstance(fanouts, (str, bytes, Mapping)) or not isinstance(fanouts, (Sequence, torch.Tensor, np.ndarray)):
        raise ValueError(
            f"{where}: `fanouts` must be a non-empty list with one entry per GNN layer (an int, a dict of edge "
            f"type -> int, or a list of {len(edge_types)} ints in edge type id order), got {fanouts!r}"
        )
    if isinstance(fanouts, (torch.Tensor, np.ndarray)):
        fanouts = list(fanouts) if fanouts.ndim == 2 else fanouts.tolist()
    if len(fanouts) == 0:
        raise ValueError(f"{where}: `fanouts` must have one entry per GNN layer, got none")
    layers, warned = [], False
    for i, entry in enumerate(fanouts):
        name = f"fanouts[{i}]"
        if isinstance(entry, Mapping):
            given = {}
            for key, value in entry.items():
                etype = ":".join(parse_edge_type(key, where))
                if etype not in edge_types:
                    raise ValueError(f"{where}: `{name}` names unknown edge type {key!r}; the graph's edge types: {edge_types}")
                given[etype] = value
            missing = [t for t in edge_types if t not in given]
            if missing:
                raise ValueError(
                    f"{where}: `{name}` has no fanout for edge type(s) {missing}; give every edge type one "
                    f"(0 samples none of that type)"
                )
            values = [given[t] for t in edge_types]
        elif isinstance(entry, (torch.Tensor, np.ndarray)) and entry.ndim == 1 and len(entry) != 1:
            values = entry.tolist()
        elif isinstance(entry, (list, tuple)):
            values = list(entry)
        else:
            fanout = as_int(entry)
            one_element = isinstance(entry, (torch.Tensor, np.ndarray)) and entry.ndim == 1
            if one_element and len(edge_types) > 1 and fanout is not None and fanout > 0 and not warned:
                warned = True
                warnings.warn(
                    f"{where}: `{name}` is a one-element tensor ({fanout}): graphpipe samples up to {fanout} in-edges "
                    f"of EACH of the {len(edge_types)} edge types per node (GraphBolt: {fanout} over all types together); "
                    f"pass an int for this meaning, or a list of per-edge-type fanouts",
                    stacklevel=5,
                )
            if fanout is None or fanout < -1:
                raise ValueError(
                    f"{where}: `{name}` must be an int >= 0 or -1 (all) for every edge type, a dict of edge type -> "
                    f"int or a list of {len(edge_types)} ints, got {entry!r}"
                )
            layers.append([fanout] * len(edge_types))
            continue
        if len(values) != len(edge_types):
            raise ValueError(
                f"{where}: `{name}` has {len(values)} fanouts, but the graph has {len(edge_types)} edge types "
                f"{edge_types} (give one per edge type, in id order, or a dict)"
            )
        layer = []
        for etype, value in zip(edge_types, values):
            fanout = as_int(value)
            if fanout is None or fanout < -1:
                raise ValueError(
                    f"{where}: `{name}` for edge type '{etype}' must be an int >= 0 or -1 (all), got {value!r}"
                )
            layer.append(fanout)
        layers.append(layer)
    return layers


def check_edge_weights(graph, name: str, where: str) -> torch.Tensor:
    """The edge attribute ``name`` of ``graph`` as sampling weights: ``[num_edges]``,
    floating or bool, finite and non-negative. A bool attribute (an edge mask, as
    GraphBolt's ``prob_name`` accepts) becomes float32 0/1; float16/bfloat16 are widened
    to float32. One ``O(num_edges)`` scan, once per sampler."""
    if name not in graph.edge_attributes:
        raise KeyError(
            f"{where}: `weights`={name!r} is not an edge attribute of the graph; known "
            f"edge attributes: {sorted(graph.edge_attributes)}; {ATTRIBUTES_HINT}"
        )
    probs = graph.edge_attributes[name]
    if probs.dim() != 1 or not (probs.is_floating_point() or probs.dtype == torch.bool):
        raise ValueError(
            f"{where}: `weights` attribute {name!r} must be a 1-D float or bool tensor "
            f"[num_edges], got shape {tuple(probs.shape)} and dtype {probs.dtype}"
        )
    if probs.numel() != graph.total_num_edges:
        raise ValueError(
            f"{where}: `weights` attribute {name!r} must have num_edges = {graph.total_num_edges} "
            f"entries, got {probs.numel()}"
        )
    if probs.dtype not in (torch.float32, torch.float64):
        probs = probs.to(torch.float32)
    if probs.numel():
        finite = torch.isfinite(probs)
        if not bool(finite.all()):
            bad = float(probs[~finite][0])
            left_out = " (an edge type left out of a typed attribute is NaN: give every type its weights)"
            raise ValueError(
                f"{where}: `weights` attribute {name!r} must be finite (no NaN or ±inf), got {bad} "
                f"at edge {int((~finite).nonzero()[0])}{left_out if graph.is_heterogeneous and bad != bad else ''}"
            )
        if not bool((probs >= 0).all()):
            raise ValueError(
                f"{where}: `weights` attribute {name!r} must be non-negative, got minimum {float(probs.min())}"
            )
    return probs.contiguous()


def refuse_typed_seeds(seeds, where: str) -> None:
    """Refuse seeds given by type (a HeteroItemSet's dict) for a homogeneous graph."""
    if isinstance(seeds, Mapping):
        raise ValueError(
            f"{where}: `seeds` is a dict of types {sorted(seeds)} (from a HeteroItemSet), but the graph is "
            f"homogeneous; sample a typed graph (CSCGraph.from_hetero_edges) or use an ItemSet"
        )


def check_item_seeds(seeds, graph, where: str) -> None:
    """An item set's ``seeds`` (a tensor; a dict by type from a HeteroItemSet) checked
    against ``graph`` once, when a sampler is built: typed as the graph is, every id in range."""
    if not graph.is_heterogeneous:
        refuse_typed_seeds(seeds, where)
        check_node_ids(seeds.reshape(-1), graph.total_num_nodes, "seeds", where)
        return
    pairs = {key: ids for key, ids in seeds.items() if ids.dim() == 2} if isinstance(seeds, Mapping) else {}
    for key, ids in pairs.items():
        check_typed_pairs(key, ids, graph.schema, where)
    check_typed_seeds({key: ids for key, ids in seeds.items() if key not in pairs} if isinstance(seeds, Mapping) else seeds, graph, where)


def check_typed_seeds(seeds, graph, where: str) -> Dict[str, torch.Tensor]:
    """``seeds`` (node type -> ``[n]`` type-local ids) checked against ``graph``, as int64
    tensors, one entry per node type in id order (empty for a type not given)."""
    schema = graph.schema
    if not isinstance(seeds, dict):
        raise ValueError(
            f"{where}: the graph is heterogeneous, so `seeds` must be a dict of node type -> ids (from a "
            f"HeteroItemSet), got {type(seeds).__name__}; node types: {list(schema.node_types)}"
        )
    offsets = schema.node_type_offset
    out = {}
    for node_type, ids in seeds.items():
        i = schema.node_type_id.get(node_type)
        if i is None:
            raise ValueError(
                f"{where}: `seeds` has unknown node type {node_type!r}; the graph's node types: {list(schema.node_types)}"
            )
        out[node_type] = check_node_ids(ids, offsets[i + 1] - offsets[i], f"seeds['{node_type}']", where).to(torch.int64)
    empty = torch.empty(0, dtype=torch.int64)
    return {t: out.get(t, empty) for t in schema.node_types}


def check_typed_pairs(key, pairs, schema, where: str) -> Tuple[int, int, int]:
    """``(edge type id, source node type id, destination node type id)`` of the link seeds
    ``pairs`` given for edge type ``key``, after checking that ``key`` is an edge type of
    the graph (``schema``) and ``pairs`` ``[N, 2]`` type-local ids of its two node types."""
    etype = schema.edge_type_id.get(":".join(parse_edge_type(key, where))) if isinstance(key, (str, tuple)) else None
    if etype is None or not isinstance(pairs, torch.Tensor) or pairs.dim() != 2 or pairs.size(1) != 2:
        raise ValueError(
            f"{where}: link seeds on a typed graph are a dict edge type -> [N, 2] (source, destination) pairs of "
            f"type-local ids, every key one of the graph's edge types {list(schema.edge_types)}; got key {key!r} "
            f"with {tuple(pairs.shape) if isinstance(pairs, torch.Tensor) else type(pairs).__name__}"
        )
    offsets = schema.node_type_offset
    for column, node_type in enumerate(schema.edge_type_ends[etype]):
        name = f"seeds['{schema.edge_types[etype]}'][:, {column}]"
        check_node_ids(pairs[:, column], offsets[node_type + 1] - offsets[node_type], name, where)
    return (etype, *schema.edge_type_ends[etype])
