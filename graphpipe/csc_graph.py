"""CSCGraph: a graph stored by destination (compressed sparse columns).

Edges are grouped by their target node, so ``indices[indptr[v]:indptr[v + 1]]`` are the
in-neighbours (sources) of ``v``: exactly what message passing aggregates and what a
sampler draws from. Edge ``e`` of the CSC is edge id ``e``; ``edge_attributes`` are
indexed by it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Optional

import torch

__all__ = ["CSCGraph", "smallest_index_dtype"]

_INT_DTYPES = (torch.int32, torch.int64)


def smallest_index_dtype(max_value: int) -> torch.dtype:
    """int32 when every value up to ``max_value`` fits, else int64."""
    return torch.int32 if max_value < 2**31 else torch.int64


@dataclass
class CSCGraph:
    """A homogeneous graph in CSC form.

    Attributes:
        indptr: ``[num_nodes + 1]`` int32/int64, non-decreasing, ``indptr[0] == 0``,
            ``indptr[-1] == num_edges``.
        indices: ``[num_edges]`` int32/int64 source node ids, each in ``[0, num_nodes)``.
        edge_attributes: name -> ``[num_edges, ...]`` tensor indexed by edge id
            (e.g. ``"weight"`` for weighted sampling).
        node_attributes: name -> ``[num_nodes, ...]`` tensor.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    edge_attributes: Dict[str, torch.Tensor] = field(default_factory=dict)
    node_attributes: Dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self):
        self.edge_attributes = dict(self.edge_attributes or {})
        self.node_attributes = dict(self.node_attributes or {})
        self.validate()

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_coo(
        cls,
        src: torch.Tensor,
        dst: torch.Tensor,
        num_nodes: Optional[int] = None,
        edge_attributes: Optional[Dict[str, torch.Tensor]] = None,
        node_attributes: Optional[Dict[str, torch.Tensor]] = None,
    ) -> "CSCGraph":
        """Build from edge lists ``src -> dst`` (1-D integer tensors of equal length).

        Edges are stably sorted by ``dst``; ``edge_attributes`` given in COO order are
        permuted along. ``num_nodes`` defaults to ``max id + 1``.
        """
        src = torch.as_tensor(src)
        dst = torch.as_tensor(dst)
        for name, t in (("src", src), ("dst", dst)):
            if t.dim() != 1 or t.dtype not in _INT_DTYPES + (torch.int16, torch.uint8, torch.int8):
                raise ValueError(
                    f"from_coo: `{name}` must be a 1-D integer tensor, got shape "
                    f"{tuple(t.shape)} and dtype {t.dtype}"
                )
        if src.numel() != dst.numel():
            raise ValueError(
                f"from_coo: `src` and `dst` must have the same length, got "
                f"{src.numel()} and {dst.numel()}"
            )
        max_id = int(torch.maximum(src.max(), dst.max())) if src.numel() else -1
        if num_nodes is None:
            num_nodes = max_id + 1
        if src.numel() and int(torch.minimum(src.min(), dst.min())) < 0:
            raise ValueError("from_coo: node ids must be >= 0")
        if max_id >= num_nodes:
            raise ValueError(
                f"from_coo: node id {max_id} out of range for num_nodes={num_nodes} "
                f"(valid ids are 0..{num_nodes - 1})"
            )
        num_edges = src.numel()
        dst64 = dst.to(torch.int64)
        perm = torch.argsort(dst64, stable=True)
        counts = torch.bincount(dst64, minlength=num_nodes)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        indices = src[perm].to(smallest_index_dtype(max(num_nodes - 1, 0)))
        indptr = indptr.to(smallest_index_dtype(num_edges))
        edge_attributes = {
            name: _check_edge_attr(name, t, num_edges)[perm]
            for name, t in (edge_attributes or {}).items()
        }
        return cls(indptr, indices, edge_attributes, node_attributes or {})

    @classmethod
    def from_edge_index(
        cls,
        edge_index: torch.Tensor,
        num_nodes: Optional[int] = None,
        edge_attributes: Optional[Dict[str, torch.Tensor]] = None,
        node_attributes: Optional[Dict[str, torch.Tensor]] = None,
    ) -> "CSCGraph":
        """Build from a PyG ``edge_index`` of shape ``[2, num_edges]``.

        Row 0 holds sources and row 1 targets (PyG's ``flow="source_to_target"``), so a
        node samples among its in-neighbours.
        """
        edge_index = torch.as_tensor(edge_index)
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(
                f"from_edge_index: `edge_index` must have shape [2, num_edges], got "
                f"{tuple(edge_index.shape)}"
            )
        return cls.from_coo(edge_index[0], edge_index[1], num_nodes, edge_attributes, node_attributes)

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    def in_degrees(self) -> torch.Tensor:
        """``[num_nodes]`` int64 in-degree of every node."""
        return (self.indptr[1:] - self.indptr[:-1]).to(torch.int64)

    def edge_index(self) -> torch.Tensor:
        """``[2, num_edges]`` int64 (sources, targets) in edge-id order."""
        dst = torch.repeat_interleave(
            torch.arange(self.num_nodes), self.in_degrees(), output_size=self.num_edges
        )
        return torch.stack([self.indices.to(torch.int64), dst])

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ``ValueError`` naming the array at fault if the CSC is malformed."""
        indptr, indices = self.indptr, self.indices
        for name, t in (("indptr", indptr), ("indices", indices)):
            if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype not in _INT_DTYPES:
                raise ValueError(
                    f"CSCGraph: `{name}` must be a 1-D int32 or int64 tensor, got "
                    f"{type(t).__name__} {getattr(t, 'dtype', '')} shape {tuple(getattr(t, 'shape', ()))}"
                )
        if indptr.numel() < 1:
            raise ValueError("CSCGraph: `indptr` must have num_nodes + 1 >= 1 entries")
        if int(indptr[0]) != 0:
            raise ValueError(f"CSCGraph: `indptr[0]` must be 0, got {int(indptr[0])}")
        if int(indptr[-1]) != indices.numel():
            raise ValueError(
                f"CSCGraph: length mismatch: `indptr[-1]` is {int(indptr[-1])} but `indices` "
                f"has {indices.numel()} entries"
            )
        if indptr.numel() > 1:
            steps = indptr[1:] - indptr[:-1]
            if bool((steps < 0).any()):
                bad = int(torch.nonzero(steps < 0)[0])
                raise ValueError(
                    f"CSCGraph: `indptr` must be non-decreasing, but indptr[{bad + 1}]="
                    f"{int(indptr[bad + 1])} < indptr[{bad}]={int(indptr[bad])}"
                )
        num_nodes = indptr.numel() - 1
        if indices.numel():
            lo, hi = int(indices.min()), int(indices.max())
            if lo < 0 or hi >= num_nodes:
                bad = lo if lo < 0 else hi
                raise ValueError(
                    f"CSCGraph: `indices` holds node id {bad}, out of range for "
                    f"num_nodes={num_nodes} (valid ids are 0..{num_nodes - 1})"
                )
        for name, t in self.edge_attributes.items():
            _check_edge_attr(name, t, indices.numel())
        for name, t in self.node_attributes.items():
            if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.size(0) != num_nodes:
                raise ValueError(
                    f"CSCGraph: node attribute '{name}' must be a tensor with num_nodes="
                    f"{num_nodes} rows, got shape {tuple(getattr(t, 'shape', ()))}"
                )

    # ------------------------------------------------------------------ devices
    def pin_memory_(self) -> "CSCGraph":
        """Page-lock every CPU array in place (``cudaHostRegister``, no copy); return self.

        GPU samplers then read the graph from host memory through zero-copy views. Without
        CUDA this is a no-op that warns once per process.
        """
        from .ops.uva_gather import cuda_or_warn_once, pin_in_place

        if not cuda_or_warn_once("CSCGraph.pin_memory_(): CUDA is not available; the graph stays unpinned"):
            return self

        for t in (self.indptr, self.indices, *self.edge_attributes.values(), *self.node_attributes.values()):
            pin_in_place(t)
        return self

    def to(self, device) -> "CSCGraph":
        """A graph with every array on ``device`` (this one if they are all there already)."""
        device = torch.device(device)
        arrays = (self.indptr, self.indices, *self.edge_attributes.values(), *self.node_attributes.values())
        if all(t.device == device for t in arrays):
            return self
        return CSCGraph(
            self.indptr.to(device),
            self.indices.to(device),
            {k: v.to(device) for k, v in self.edge_attributes.items()},
            {k: v.to(device) for k, v in self.node_attributes.items()},
        )

    # ------------------------------------------------------------------ storage
    def save(self, path: str | os.PathLike) -> None:
        """Write the graph with ``torch.save``."""
        torch.save(
            {
                "indptr": self.indptr,
                "indices": self.indices,
                "edge_attributes": self.edge_attributes,
                "node_attributes": self.node_attributes,
            },
            path,
        )

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = False) -> "CSCGraph":
        """Read a graph written by :meth:`save` (``mmap=True`` maps it lazily)."""
        state = torch.load(path, mmap=mmap, weights_only=True)
        return cls(**state)

    def __repr__(self) -> str:
        return (
            f"CSCGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
            f"indptr={self.indptr.dtype}, indices={self.indices.dtype}, "
            f"edge_attributes={list(self.edge_attributes)}, "
            f"node_attributes={list(self.node_attributes)})"
        )


def _check_edge_attr(name: str, t: torch.Tensor, num_edges: int) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.size(0) != num_edges:
        raise ValueError(
            f"CSCGraph: edge attribute '{name}' must be a tensor with num_edges={num_edges} "
            f"rows, got shape {tuple(getattr(t, 'shape', ()))}"
        )
    return t
