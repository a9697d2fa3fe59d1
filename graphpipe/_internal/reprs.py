"""Reprs of dataclasses holding tensors: fields with tensors as ``dtype[shape]``, not values."""

from __future__ import annotations

from dataclasses import fields

import torch

__all__ = ["fields_repr"]


def _summary(value, indent: str = "") -> str:
    """``value`` for a repr, tensors as ``dtype[shape]`` (and ``@device`` off the CPU)."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        device = "" if value.device.type == "cpu" else f"@{value.device}"
        return f"{dtype}[{', '.join(map(str, value.shape))}]{device}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_summary(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list) and len(value) > 0:
        inner = indent + "    "
        return "[\n" + "".join(f"{inner}{_summary(item, inner)},\n" for item in value) + indent + "]"
    return repr(value)


def fields_repr(obj, multiline: bool = False) -> str:
    """``Type(field=summary, ...)`` over the dataclass fields of ``obj`` (any added later
    included), one a line when ``multiline``."""
    indent = "    " if multiline else ""
    parts = [f"{f.name}={_summary(getattr(obj, f.name), indent)}" for f in fields(obj)]
    if multiline:
        return f"{type(obj).__name__}(\n" + "".join(f"{indent}{part},\n" for part in parts) + ")"
    return f"{type(obj).__name__}({', '.join(parts)})"

