"""Edge types: GraphBolt's ``"src_type:relation:dst_type"`` strings and PyG's / DGL's
``(src_type, relation, dst_type)`` tuples."""

from __future__ import annotations

from typing import Tuple

__all__ = ["NO_COLON_IN_TYPE_NAMES", "etype_str_to_tuple", "etype_tuple_to_str", "parse_edge_type"]


NO_COLON_IN_TYPE_NAMES = "':' separates the parts of 'src_type:relation:dst_type' edge type strings, so type names cannot hold it; rename the type"


def parse_edge_type(edge_type, where: str = "CSCGraph") -> Tuple[str, str, str]:
    """``(src_type, relation, dst_type)`` of an edge type given as ``"src:relation:dst"``
    (GraphBolt's form) or as a 3-tuple of strings (PyG's and DGL's)."""
    parts = edge_type.split(":") if isinstance(edge_type, str) else edge_type
    if not isinstance(parts, (tuple, list)) or len(parts) != 3 or not all(isinstance(p, str) and p for p in parts):
        raise ValueError(
            f"{where}: an edge type must be 'src_type:relation:dst_type' or a (src_type, relation, dst_type) "
            f"tuple of non-empty strings, got {edge_type!r}"
        )
    for role, part in zip(("source node type", "relation", "destination node type"), parts):
        if ":" in part:
            raise ValueError(f"{where}: the {role} '{part}' of edge type {edge_type!r} contains ':'; {NO_COLON_IN_TYPE_NAMES}")
    return tuple(parts)


def etype_str_to_tuple(edge_type) -> Tuple[str, str, str]:
    """GraphBolt's name: ``"src:relation:dst"`` (or a tuple, returned as is) -> ``(src, relation, dst)``."""
    return parse_edge_type(edge_type, "etype_str_to_tuple")


def etype_tuple_to_str(edge_type) -> str:
    """GraphBolt's name: ``(src, relation, dst)`` (or a string) -> ``"src:relation:dst"``."""
    return ":".join(parse_edge_type(edge_type, "etype_tuple_to_str"))
