"""CSCGraph: a graph stored by destination (compressed sparse columns).

Edges are grouped by their target node, so ``indices[indptr[v]:indptr[v + 1]]`` are the
in-neighbours (sources) of ``v``: exactly what message passing aggregates and what a
sampler draws from. Samplers work with *CSC positions* ``e`` (``indices[e]`` is the
source of edge ``e``); ``edge_attributes`` are indexed by them. A graph built from a COO
list or an ``edge_index`` that was not already grouped by target keeps
``original_edge_ids``: CSC position -> the user's edge id (the edge's position in the
input), and :meth:`CSCGraph.map_edge_ids` turns sampled positions into those ids.

A graph is read-only once built (every array passed validation; assigning a field
raises): build a new one, e.g. with ``dataclasses.replace(graph, indices=...)``.

Heterogeneous (typed) graphs, GraphBolt's ``FusedCSCSamplingGraph`` layout: one CSC over
global node ids in which the nodes of a type are contiguous (``node_type_offset``), every
edge has a type (``type_per_edge``) and each destination's in-edges are grouped by edge
type in ascending type id, so one kernel per layer samples every edge type (see
:meth:`CSCGraph.from_hetero_edges`). Node types are names, edge types
``"src_type:relation:dst_type"`` strings; ids of a type (``type-local`` ids, what
``HeteroItemSet``s, typed MiniBatches and per-type features use) are global ids minus the
type's offset, and ``original_edge_ids`` of a typed graph are edge ids within their type.

Files: :meth:`CSCGraph.save` writes a ``torch.save`` archive with a format tag, a
version and a CRC-32 of every array; :meth:`CSCGraph.load` checks them, and with
``mmap=True`` maps the file and only checks ``indptr`` (the ``O(num_edges)`` arrays are
read when sampled). Such a graph is pickled as its path, so worker processes map the
same file instead of copying the graph; likewise an array that is a memory map of a file
(``torch.from_numpy(np.load(path, mmap_mode="r"))``, ``np.memmap``) is pickled as the
file's name, offset, shape and dtype (Linux, where ``/proc/self/maps`` tells), and
checked to be the same file (size, modification time) when it is mapped again.
"""

from __future__ import annotations

import math
import os
import types
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import FrozenInstanceError, dataclass, field, fields
from functools import cached_property
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np
import torch

from graphpipe.graph.edge_types import NO_COLON_IN_TYPE_NAMES, parse_edge_type
from graphpipe.graph.sampling import sample_graph_neighbors

__all__ = ["CSCGraph", "TypeSchema", "check_graph", "smallest_index_dtype"]

_INT_DTYPES = (torch.int32, torch.int64)

# How much of the graph a check reads (see CSCGraph._check).
_SHAPES = 0  # types, shapes, dtypes, indptr[0] and indptr[-1]: O(1)
_INDPTR = 1  # and indptr non-decreasing: O(num_nodes)
_FULL = 2  # and indices and original_edge_ids in range: O(num_nodes + num_edges)

_FORMAT = "graphpipe.CSCGraph"
_VERSION = 2
_LEGACY_KEYS = frozenset({"indptr", "indices", "edge_attributes", "node_attributes"})  # save() before version 1
_KEYS_V1 = _LEGACY_KEYS | {"format", "version", "original_edge_ids", "checksums", "checksum_chunk_bytes"}
_TYPE_KEYS = ("node_type_offset", "type_per_edge", "node_type_to_id", "edge_type_to_id")
_KEYS = {1: _KEYS_V1, 2: _KEYS_V1 | set(_TYPE_KEYS)}
# CRC-32 per chunk of an array's bytes: zlib releases the GIL, so the chunks of a large
# array are checked on all cores (about 1.3 GB/s per core).
_CHECKSUM_CHUNK_BYTES = 1 << 26


def smallest_index_dtype(max_value: int) -> torch.dtype:
    """int32 when every value up to ``max_value`` fits, else int64."""
    return torch.int32 if max_value < 2**31 else torch.int64


class TypeSchema(NamedTuple):
    """A graph's node and edge types as plain Python values, computed once per graph
    (:attr:`CSCGraph.schema`) so that samplers never re-parse or re-sort them per batch.

    An untyped graph is the one-type case (GraphBolt's ``"_N"`` and ``"_N:_E:_N"``).

    Attributes:
        node_types: node type names by id.
        edge_types: ``"src:relation:dst"`` by id.
        node_type_offset: ``num_node_types + 1`` ints: the global ids of type ``i`` are
            ``node_type_offset[i]:node_type_offset[i + 1]``.
        edge_type_ends: ``(src node type id, dst node type id)`` per edge type id.
        edge_types_to: per node type id, the ids (ascending) of the edge types ending there.
        node_type_id: node type name -> id.
        edge_type_id: edge type name -> id.
    """

    node_types: Tuple[str, ...]
    edge_types: Tuple[str, ...]
    node_type_offset: Tuple[int, ...]
    edge_type_ends: Tuple[Tuple[int, int], ...]
    edge_types_to: Tuple[Tuple[int, ...], ...]
    node_type_id: Mapping[str, int]
    edge_type_id: Mapping[str, int]


def _type_schema(node_types: List[str], edge_types: List[str], offsets: List[int]) -> TypeSchema:
    node_id = {t: i for i, t in enumerate(node_types)}
    ends = tuple((node_id[s], node_id[d]) for s, _, d in map(parse_edge_type, edge_types))
    to = tuple(tuple(t for t, (_, d) in enumerate(ends) if d == i) for i in range(len(node_types)))
    edge_id = {t: i for i, t in enumerate(edge_types)}
    return TypeSchema(tuple(node_types), tuple(edge_types), tuple(offsets), ends, to, node_id, edge_id)


@dataclass(init=False)
class CSCGraph:
    """A homogeneous graph in CSC form. Read-only: assigning a field raises
    ``dataclasses.FrozenInstanceError`` (an ``AttributeError``); build a new graph instead,
    e.g. ``dataclasses.replace(graph, edge_attributes={**graph.edge_attributes, "w": w})``.

    Every array is stored contiguous (the constructor copies strided inputs once, not
    every sampled layer). ``CSCGraph(...)`` validates everything (``O(num_nodes +
    num_edges)``).

    Attributes:
        indptr: ``[num_nodes + 1]`` int32/int64, non-decreasing, ``indptr[0] == 0``,
            ``indptr[-1] == num_edges``.
        indices: ``[num_edges]`` int32/int64 source node ids, each in ``[0, num_nodes)``;
            ``indices[e]`` is the source of the edge at CSC position ``e``.
        edge_attributes: name -> ``[num_edges, ...]`` tensor indexed by CSC position
            (e.g. ``"weight"`` for weighted sampling); a read-only mapping.
        node_attributes: name -> ``[num_nodes, ...]`` tensor; a read-only mapping.
        original_edge_ids: ``[num_edges]`` int32/int64 (int32 when ``num_edges`` fits),
            a permutation of ``0..num_edges - 1``: CSC position ``e`` -> the user's edge
            id, i.e. the edge's position in the COO list / ``edge_index`` it was built
            from. None when they are the same (input already grouped by target). Use
            :meth:`map_edge_ids`. Typed graphs: ids within the edge's type, never None
            (given none, each type's edges are numbered in CSC order).
        node_type_offset: typed graphs only (else None, as the three below):
            ``[num_node_types + 1]`` int64 (given as another integer dtype, e.g.
            GraphBolt's int32, converted once), nodes of type ``i`` are the global ids
            ``node_type_offset[i]:node_type_offset[i + 1]``.
        type_per_edge: ``[num_edges]`` uint8 (int32 past 255 types) edge type id of the
            edge at each CSC position, ascending within each destination's range.
        node_type_to_id: node type name -> id (a read-only mapping).
        edge_type_to_id: ``"src_type:relation:dst_type"`` -> id (a read-only mapping);
            an edge of type ``t`` goes from a ``src_type`` node to a ``dst_type`` node.
        source_path: absolute path of the file this graph was mapped from by
            ``load(path, mmap=True)``, else None. Such a graph pickles as this path
            (worker processes map the file; nothing is copied). Not a constructor
            argument: a graph derived from this one (``to()``, ``dataclasses.replace``)
            is not backed by the file and has None.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    edge_attributes: Mapping[str, torch.Tensor] = field(default_factory=dict)
    node_attributes: Mapping[str, torch.Tensor] = field(default_factory=dict)
    original_edge_ids: Optional[torch.Tensor] = None
    node_type_offset: Optional[torch.Tensor] = None
    type_per_edge: Optional[torch.Tensor] = None
    node_type_to_id: Optional[Mapping[str, int]] = None
    edge_type_to_id: Optional[Mapping[str, int]] = None
    source_path: Optional[str] = field(default=None, init=False, compare=False)

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        edge_attributes: Optional[Mapping[str, torch.Tensor]] = None,
        node_attributes: Optional[Mapping[str, torch.Tensor]] = None,
        original_edge_ids: Optional[torch.Tensor] = None,
        node_type_offset: Optional[torch.Tensor] = None,
        type_per_edge: Optional[torch.Tensor] = None,
        node_type_to_id: Optional[Mapping[str, int]] = None,
        edge_type_to_id: Optional[Mapping[str, int]] = None,
    ):
        typed = dict(
            node_type_offset=node_type_offset,
            type_per_edge=type_per_edge,
            node_type_to_id=node_type_to_id,
            edge_type_to_id=edge_type_to_id,
        )
        self._store(indptr, indices, edge_attributes, node_attributes, original_edge_ids, None, typed)
        self._check(_FULL)
        if self.is_heterogeneous and self.original_edge_ids is None:
            # Edge ids of a typed graph are ids within their type (what per-type edge
            # features are indexed by); CSC positions are not, so number them here.
            object.__setattr__(self, "original_edge_ids", _rank_within_type(self.type_per_edge, len(self.edge_type_to_id)))

    @classmethod
    def _build(
        cls,
        indptr,
        indices,
        edge_attributes=None,
        node_attributes=None,
        original_edge_ids=None,
        *,
        level: int,
        source_path: Optional[str] = None,
        typed: Optional[dict] = None,
    ) -> "CSCGraph":
        """A graph checked only up to ``level`` (``_SHAPES``, ``_INDPTR`` or ``_FULL``):
        for arrays already validated (``to()``, unpickling) or whose ``O(num_edges)``
        scans the caller leaves out on purpose (``load``). ``typed``: the four typed
        fields by name, or None for a homogeneous graph."""
        graph = cls.__new__(cls)
        graph._store(indptr, indices, edge_attributes, node_attributes, original_edge_ids, source_path, typed)
        graph._check(level)
        return graph

    def _store(self, indptr, indices, edge_attributes, node_attributes, original_edge_ids, source_path, typed=None):
        def contiguous(t):
            return t.contiguous() if isinstance(t, torch.Tensor) else t

        def read_only(name, attributes):
            if attributes is None:
                attributes = {}
            if not isinstance(attributes, Mapping):
                raise ValueError(
                    f"CSCGraph: `{name}` must be a mapping of name -> tensor, got {type(attributes).__name__}"
                )
            return types.MappingProxyType({key: contiguous(t) for key, t in attributes.items()})

        values = dict(
            indptr=contiguous(indptr),
            indices=contiguous(indices),
            edge_attributes=read_only("edge_attributes", edge_attributes),
            node_attributes=read_only("node_attributes", node_attributes),
            original_edge_ids=contiguous(original_edge_ids),
            source_path=source_path,
        )
        typed = typed or {}
        for name in ("node_type_offset", "type_per_edge"):
            values[name] = contiguous(typed.get(name))
        offset = values["node_type_offset"]
        if isinstance(offset, torch.Tensor) and not (offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool):
            values["node_type_offset"] = offset.to(torch.int64)  # GraphBolt's are int32
        for name in ("node_type_to_id", "edge_type_to_id"):
            mapping = typed.get(name)
            if mapping is not None and not isinstance(mapping, Mapping):
                raise ValueError(f"CSCGraph: `{name}` must be a mapping of type name -> id, got {type(mapping).__name__}")
            values[name] = None if mapping is None else types.MappingProxyType(dict(mapping))
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        if name in {f.name for f in fields(self) if f.init}:
            hint = f"e.g. dataclasses.replace(graph, {name}=...)"
        else:
            hint = "e.g. with dataclasses.replace(graph, ...)"
        raise FrozenInstanceError(
            f"CSCGraph is read-only, so that every graph has been validated: cannot assign `{name}`; "
            f"build a new CSCGraph instead, {hint}"
        )

    def __delattr__(self, name):
        raise FrozenInstanceError(f"CSCGraph is read-only: cannot delete `{name}`")

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
        permuted along (they are indexed by CSC position), and ``original_edge_ids``
        keeps the permutation (COO position of each CSC position; None if the input was
        already sorted by ``dst``). ``num_nodes`` defaults to ``max id + 1``. The graph
        does not share memory with the inputs.
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
        # A stable sort of input already grouped by target is the identity: skip it,
        # and the per-layer gather through original_edge_ids with it.
        if bool((dst64[1:] >= dst64[:-1]).all()):
            perm = None
        else:
            perm = torch.argsort(dst64, stable=True)
        counts = torch.bincount(dst64, minlength=num_nodes)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        indptr = indptr.to(smallest_index_dtype(num_edges))

        def in_csc_order(t: torch.Tensor) -> torch.Tensor:
            return t.clone(memory_format=torch.contiguous_format) if perm is None else t[perm]

        indices = in_csc_order(src).to(smallest_index_dtype(max(num_nodes - 1, 0)))
        edge_attributes = {
            name: in_csc_order(_check_edge_attr(name, t, num_edges)) for name, t in (edge_attributes or {}).items()
        }
        original_edge_ids = None if perm is None else perm.to(smallest_index_dtype(max(num_edges - 1, 0)))
        return cls(indptr, indices, edge_attributes, node_attributes, original_edge_ids)

    @classmethod
    def from_coo_files(
        cls,
        path: str | os.PathLike,
        src: str | os.PathLike,
        dst: Optional[str | os.PathLike] = None,
        num_nodes: Optional[int] = None,
        *,
        chunk_edges: int = 1 << 24,
        block_edges: int = 1 << 28,
    ) -> "CSCGraph":
        """Build a graph from edge lists on disk without loading them, save it to ``path``
        and return it mapped lazily (``CSCGraph.load(path, mmap=True)``).

        For graphs whose edge list or CSC is larger than the memory the process may use:
        the edges are read ``chunk_edges`` at a time from memory-mapped ``.npy`` files and
        the CSC arrays are written into memory-mapped files in a private scratch
        directory beside ``path`` (removed at the end, and by the next build if this
        process is killed), ``block_edges`` output slots at a time (see
        :func:`graphpipe.ops.csc_build.coo_to_csc_chunked`; the cost is linear in the
        number of edges for any ``chunk_edges`` and ``block_edges``). Process memory stays
        at about 16 bytes per node plus a chunk; disk needs room for the CSC twice while
        the file is written, plus 4 or 8 bytes per edge when the CSC takes more than one
        block of ``block_edges``. The result equals ``from_coo(src, dst, num_nodes)``: same
        ``indptr``, ``indices`` and ``original_edge_ids`` (int32 where they fit). The file
        is moved into place at the end (a symlink at ``path`` is replaced, not written
        through).

        Args:
            path: the graph file to write (as :meth:`save`); its directory must exist.
            src: a ``.npy`` file of ``[num_edges]`` source ids, or of ``[2, num_edges]``
                (row 0 sources, row 1 targets, GraphBolt's and PyG's layout) when ``dst``
                is None; integers (int32 or int64 best; any native-byte-order integer
                dtype works).
            dst: a ``.npy`` file of ``[num_edges]`` target ids.
            num_nodes: defaults to ``max id + 1``.
            chunk_edges: edges read per kernel launch; values below 65,536 are raised
                to it (a chunk is a view of the mapped input, not a buffer).
            block_edges: output slots one block writes (the window of the output whose
                pages it dirties); values below 65,536 are raised to it.

        Raises:
            FileNotFoundError: an edge file or the directory of ``path`` is missing.
            ValueError: naming the argument (and file): edge files of the wrong shape or
                dtype, ids out of range, or a ``num_nodes`` (given, or ``max id + 1``)
                whose ``indptr`` would not fit in this machine's memory.
        """
        from graphpipe._internal.safe_files import scratch_directory
        from graphpipe.ops.csc_build import coo_id_range, coo_to_csc_chunked
        from graphpipe._internal.checks import check_int

        import numpy as np

        where = "CSCGraph.from_coo_files"
        chunk_edges = check_int(chunk_edges, "chunk_edges", where, minimum=1)
        block_edges = check_int(block_edges, "block_edges", where, minimum=1)
        destination, directory = _output_file(path, where)
        src_array = _open_edge_file(src, "src", where)
        if dst is None:
            if src_array.ndim != 2 or src_array.shape[0] != 2:
                raise ValueError(
                    f"{where}: without `dst`, `src` ('{os.fspath(src)}') must hold a [2, num_edges] array, "
                    f"got shape {src_array.shape}"
                )
            src_array, dst_array = src_array[0], src_array[1]
        else:
            dst_array = _open_edge_file(dst, "dst", where)
            for name, array, file in (("src", src_array, src), ("dst", dst_array, dst)):
                if array.ndim != 1:
                    raise ValueError(
                        f"{where}: `{name}` ('{os.fspath(file)}') must hold a 1-D array, got shape {array.shape}"
                    )
            if src_array.shape != dst_array.shape:
                raise ValueError(
                    f"{where}: `src` and `dst` must have the same length, got {src_array.shape[0]} "
                    f"('{os.fspath(src)}') and {dst_array.shape[0]} ('{os.fspath(dst)}')"
                )
        lo, hi = coo_id_range(src_array, dst_array, chunk_edges)
        if lo < 0:
            raise ValueError(f"{where}: node ids must be >= 0, the edge files hold {lo}")
        inferred = num_nodes is None
        if inferred:
            num_nodes = hi + 1
        num_nodes = check_int(num_nodes, "num_nodes", where, minimum=0)
        if hi >= num_nodes:
            raise ValueError(
                f"{where}: node id {hi} out of range for num_nodes={num_nodes} (valid ids are 0..{num_nodes - 1})"
            )
        _check_indptr_fits(num_nodes, hi if inferred else None, where)
        num_edges = src_array.shape[0]
        index_dtype = _numpy_index_dtype(max(num_nodes - 1, 0))
        edge_id_dtype = _numpy_index_dtype(max(num_edges - 1, 0))
        with scratch_directory(directory, f"{where}: the directory of `path`") as scratch:

            def scratch_array(name, dtype):  # a sparse file: disk is used only where written
                return np.lib.format.open_memmap(os.path.join(scratch, name), mode="w+", dtype=dtype, shape=(num_edges,))

            indices = scratch_array("indices.npy", index_dtype)
            edge_ids = scratch_array("edge_ids.npy", edge_id_dtype)
            positions = scratch_array("positions.npy", edge_id_dtype)
            indptr, already_sorted = coo_to_csc_chunked(
                src_array, dst_array, num_nodes, indices, edge_ids, chunk_edges, block_edges, positions
            )
            graph = cls._build(
                torch.from_numpy(indptr).to(smallest_index_dtype(num_edges)),
                torch.from_numpy(indices),
                original_edge_ids=None if already_sorted else torch.from_numpy(edge_ids),
                level=_INDPTR,  # ids were range-checked above; the fill places each edge once
            )
            graph._write(destination, scratch)
            del graph, indices, edge_ids, positions
        return cls.load(destination, mmap=True)

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
        node samples among its in-neighbours. The user's edge id of an edge is its
        column in ``edge_index`` (see ``original_edge_ids``).
        """
        edge_index = torch.as_tensor(edge_index)
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(
                f"from_edge_index: `edge_index` must have shape [2, num_edges], got "
                f"{tuple(edge_index.shape)}"
            )
        return cls.from_coo(edge_index[0], edge_index[1], num_nodes, edge_attributes, node_attributes)

    @classmethod
    def from_hetero_edges(
        cls,
        edges: Mapping,
        num_nodes: Mapping[str, int],
        edge_attributes: Optional[Mapping[str, Mapping]] = None,
    ) -> "CSCGraph":
        """Build a typed graph from edge lists per edge type (PyG's ``edge_index_dict``).

        Node types get ids in sorted name order (as DGL and GraphBolt number them) and
        their nodes contiguous global ids in that order; edge types likewise, by sorted
        ``"src:relation:dst"`` string. Each destination's in-edges are grouped by edge
        type, and within a type keep their input order.

        Args:
            edges: edge type (``"src:relation:dst"`` or a ``(src, relation, dst)`` tuple)
                -> ``[2, E]`` integer tensor (row 0 sources, row 1 targets) or a
                ``(src, dst)`` pair of ``[E]`` tensors, in type-local node ids.
            num_nodes: node type -> number of nodes (every type an edge type names).
            edge_attributes: name -> {edge type -> ``[E, ...]`` tensor in input order};
                every edge type must have it. Stored per CSC position.

        ``original_edge_ids`` maps each CSC position to the edge's position in its
        type's input list, so edge features per edge type are read by them.
        """
        where = "CSCGraph.from_hetero_edges"
        if not isinstance(edges, Mapping) or not edges:
            raise ValueError(f"{where}: `edges` must be a non-empty dict of edge type -> edge list, got {edges!r}")
        if not isinstance(num_nodes, Mapping) or not num_nodes:
            raise ValueError(f"{where}: `num_nodes` must be a non-empty dict of node type -> count, got {num_nodes!r}")
        from graphpipe._internal.checks import check_int

        counts = {str(t): check_int(n, f"num_nodes['{t}']", where, minimum=0) for t, n in num_nodes.items()}
        for node_type in counts:
            if ":" in node_type:
                raise ValueError(f"{where}: node type '{node_type}' in `num_nodes` contains ':'; {NO_COLON_IN_TYPE_NAMES}")
        node_types = sorted(counts)
        node_type_to_id = {t: i for i, t in enumerate(node_types)}
        offsets = [0]
        for t in node_types:
            offsets.append(offsets[-1] + counts[t])
        typed_edges = {}
        for etype, pair in edges.items():
            src_type, relation, dst_type = parse_edge_type(etype, where)
            name = f"{src_type}:{relation}:{dst_type}"
            if name in typed_edges:
                raise ValueError(f"{where}: edge type '{name}' is given twice in `edges`")
            for node_type in (src_type, dst_type):
                if node_type not in counts:
                    raise ValueError(
                        f"{where}: edge type '{name}' names node type '{node_type}', which `num_nodes` lacks; "
                        f"known node types: {node_types}"
                    )
            src, dst = _edge_pair(pair, f"edges['{name}']", where)
            for ids, node_type, end in ((src, src_type, "sources"), (dst, dst_type, "targets")):
                if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= counts[node_type]):
                    bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
                    raise ValueError(
                        f"{where}: `edges['{name}']` {end} hold {node_type} id {bad}, out of range for "
                        f"num_nodes['{node_type}']={counts[node_type]} (valid ids are 0..{counts[node_type] - 1})"
                    )
            typed_edges[name] = (src, dst, src_type, dst_type)
        edge_types = sorted(typed_edges)
        edge_type_to_id = {t: i for i, t in enumerate(edge_types)}
        srcs, dsts, type_ids, local_ids = [], [], [], []
        for t, name in enumerate(edge_types):
            src, dst, src_type, dst_type = typed_edges[name]
            srcs.append(src.to(torch.int64) + offsets[node_type_to_id[src_type]])
            dsts.append(dst.to(torch.int64) + offsets[node_type_to_id[dst_type]])
            type_ids.append(torch.full((src.numel(),), t, dtype=torch.int64))
            local_ids.append(torch.arange(src.numel()))
        src, dst = torch.cat(srcs), torch.cat(dsts)
        total_nodes, num_edges = offsets[-1], src.numel()
        # A stable sort by target keeps each target's in-edges in edge type order (the
        # lists were concatenated by type id) and each type's in input order.
        perm = torch.argsort(dst, stable=True)
        counts_per_dst = torch.bincount(dst, minlength=total_nodes)
        indptr = torch.zeros(total_nodes + 1, dtype=torch.int64)
        torch.cumsum(counts_per_dst, 0, out=indptr[1:])
        attributes = {}
        for attr, per_type in (edge_attributes or {}).items():
            if not isinstance(per_type, Mapping):
                raise ValueError(f"{where}: `edge_attributes['{attr}']` must be a dict of edge type -> tensor")
            given = {"{}:{}:{}".format(*parse_edge_type(t, where)): v for t, v in per_type.items()}
            missing = [t for t in edge_types if t not in given]
            if missing:
                raise ValueError(f"{where}: `edge_attributes['{attr}']` lacks edge type(s) {missing}")
            columns = []
            for name in edge_types:
                value = torch.as_tensor(given[name])
                _check_edge_attr(f"{attr}['{name}']", value, typed_edges[name][0].numel())
                columns.append(value)
            attributes[attr] = torch.cat(columns)[perm]
        type_per_edge = torch.cat(type_ids)[perm].to(torch.uint8 if len(edge_types) <= 256 else torch.int32)
        max_local = max((e[0].numel() for e in typed_edges.values()), default=0)
        return cls(
            indptr.to(smallest_index_dtype(num_edges)),
            src[perm].to(smallest_index_dtype(max(total_nodes - 1, 0))),
            attributes,
            original_edge_ids=torch.cat(local_ids)[perm].to(smallest_index_dtype(max(max_local - 1, 0))),
            node_type_offset=torch.tensor(offsets, dtype=torch.int64),
            type_per_edge=type_per_edge,
            node_type_to_id=node_type_to_id,
            edge_type_to_id=edge_type_to_id,
        )

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def is_heterogeneous(self) -> bool:
        """Whether the graph has node and edge types (``node_type_offset`` and the rest)."""
        return self.node_type_offset is not None

    @property
    def node_types(self) -> List[str]:
        """Node type names by id (``[]`` for a homogeneous graph)."""
        ids = self.node_type_to_id or {}
        return sorted(ids, key=ids.__getitem__)

    @property
    def edge_types(self) -> List[str]:
        """Edge type strings ``"src:relation:dst"`` by id (``[]`` for a homogeneous graph)."""
        ids = self.edge_type_to_id or {}
        return sorted(ids, key=ids.__getitem__)

    @property
    def num_nodes_per_type(self) -> Dict[str, int]:
        """Node type -> number of nodes of that type."""
        offsets = self.node_type_offset.tolist() if self.is_heterogeneous else []
        return {t: offsets[i + 1] - offsets[i] for i, t in enumerate(self.node_types)}

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    @cached_property
    def schema(self) -> TypeSchema:
        """The graph's :class:`TypeSchema` (one type ``"_N"`` / ``"_N:_E:_N"`` when untyped)."""
        if not self.is_heterogeneous:
            return _type_schema(["_N"], ["_N:_E:_N"], [0, self.num_nodes])
        return _type_schema(self.node_types, self.edge_types, self.node_type_offset.tolist())

    def in_degrees(self) -> torch.Tensor:
        """``[num_nodes]`` int64 in-degree of every node."""
        return (self.indptr[1:] - self.indptr[:-1]).to(torch.int64)

    def edge_index(self) -> torch.Tensor:
        """``[2, num_edges]`` int64 (sources, targets) in CSC order: column ``e`` is the
        edge at CSC position ``e``, whose user edge id is ``map_edge_ids(e)``."""
        dst = torch.repeat_interleave(
            torch.arange(self.num_nodes, device=self.indptr.device), self.in_degrees(), output_size=self.num_edges
        )
        return torch.stack([self.indices.to(torch.int64), dst])

    def map_edge_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """The user's edge ids of the edges at CSC ``positions``.

        Args:
            positions: integer tensor of any shape, values in ``[0, num_edges)``, on the
                graph's device, or on a CUDA device for a pinned graph (e.g. a sampler's
                ``LayerSample.edge_ids``).

        Returns:
            int64 tensor shaped like ``positions``: ``original_edge_ids[positions]``, or
            ``positions`` itself (as int64, no copy if it is one) when the graph has no
            ``original_edge_ids``.

        Raises:
            ValueError: a position outside ``[0, num_edges)`` (CPU; a CUDA index raises
                torch's device-side error).
        """
        if self.original_edge_ids is None:
            return positions.to(torch.int64)
        from graphpipe.ops.gather import take_as_int64
        from graphpipe.ops.gpu_sampling import device_array

        # A pinned host graph sampled on the GPU: read the map through a zero-copy view.
        return take_as_int64(device_array(self.original_edge_ids, positions.device), positions, "CSCGraph.map_edge_ids")

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ``ValueError`` naming the array at fault if the graph is malformed.

        Reads every array (``O(num_nodes + num_edges)``); the constructor calls it.
        """
        self._check(_FULL)

    def _check(self, level: int) -> None:
        """Checks up to ``level``: ``_SHAPES`` (types, shapes, ``indptr``'s ends),
        ``_INDPTR`` (and ``indptr`` non-decreasing), ``_FULL`` (and ``indices`` and
        ``original_edge_ids`` in range, ``original_edge_ids`` a permutation)."""
        indptr, indices, edge_ids = self.indptr, self.indices, self.original_edge_ids
        named = [("indptr", indptr), ("indices", indices)]
        if edge_ids is not None:
            named.append(("original_edge_ids", edge_ids))
        for name, t in named:
            if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype not in _INT_DTYPES:
                raise ValueError(
                    f"CSCGraph: `{name}` must be a 1-D int32 or int64 tensor, got "
                    f"{type(t).__name__} {getattr(t, 'dtype', '')} shape {tuple(getattr(t, 'shape', ()))}"
                )
        if indptr.numel() < 1:
            raise ValueError("CSCGraph: `indptr` must have num_nodes + 1 >= 1 entries")
        if int(indptr[0]) != 0:
            raise ValueError(f"CSCGraph: `indptr[0]` must be 0, got {int(indptr[0])}")
        num_nodes, num_edges = indptr.numel() - 1, indices.numel()
        if int(indptr[-1]) != num_edges:
            raise ValueError(
                f"CSCGraph: length mismatch: `indptr[-1]` is {int(indptr[-1])} but `indices` "
                f"has {num_edges} entries"
            )
        typed_sizes = self._check_types(num_nodes, num_edges)
        if edge_ids is not None and edge_ids.numel() != num_edges:
            raise ValueError(
                f"CSCGraph: `original_edge_ids` must have num_edges={num_edges} entries, got {edge_ids.numel()}"
            )
        for name, t in self.edge_attributes.items():
            _check_edge_attr(name, t, num_edges)
        for name, t in self.node_attributes.items():
            if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.size(0) != num_nodes:
                raise ValueError(
                    f"CSCGraph: node attribute '{name}' must be a tensor with num_nodes="
                    f"{num_nodes} rows, got shape {tuple(getattr(t, 'shape', ()))}"
                )
        if level >= _INDPTR and num_nodes > 0:
            steps = indptr[1:] - indptr[:-1]
            if bool((steps < 0).any()):
                bad = int(torch.nonzero(steps < 0)[0])
                raise ValueError(
                    f"CSCGraph: `indptr` must be non-decreasing, but indptr[{bad + 1}]="
                    f"{int(indptr[bad + 1])} < indptr[{bad}]={int(indptr[bad])}"
                )
        if level < _FULL or num_edges == 0:
            return
        if typed_sizes is not None:
            self._check_typed_edges(*typed_sizes)
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"CSCGraph: `indices` holds node id {bad}, out of range for "
                f"num_nodes={num_nodes} (valid ids are 0..{num_nodes - 1})"
            )
        if edge_ids is not None and typed_sizes is None:
            lo, hi = int(edge_ids.min()), int(edge_ids.max())
            if lo < 0 or hi >= num_edges:
                raise ValueError(
                    f"CSCGraph: `original_edge_ids` holds edge id {lo if lo < 0 else hi}, out of range "
                    f"for num_edges={num_edges} (valid ids are 0..{num_edges - 1})"
                )
            seen = torch.zeros(num_edges, dtype=torch.bool, device=edge_ids.device)
            seen[edge_ids] = True
            if not bool(seen.all()):
                missing = int(torch.nonzero(~seen)[0])
                raise ValueError(
                    f"CSCGraph: `original_edge_ids` must be a permutation of 0..{num_edges - 1}, but "
                    f"edge id {missing} is missing (another one appears twice)"
                )

    def _check_types(self, num_nodes: int, num_edges: int):
        """O(types) checks of the typed fields; returns ``(node offsets, edges per type)``
        for the O(num_edges) checks, or None for a homogeneous graph."""
        typed = [self.node_type_offset, self.type_per_edge, self.node_type_to_id, self.edge_type_to_id]
        if all(value is None for value in typed):
            return None
        if any(value is None for value in typed):
            raise ValueError(
                "CSCGraph: a typed graph needs all of `node_type_offset`, `type_per_edge`, `node_type_to_id` and "
                "`edge_type_to_id`; got only "
                + str([name for name, value in zip(_TYPE_KEYS, typed) if value is not None])
            )
        offset, per_edge = self.node_type_offset, self.type_per_edge
        for name, mapping in (("node_type_to_id", self.node_type_to_id), ("edge_type_to_id", self.edge_type_to_id)):
            ids = sorted(mapping.values()) if all(isinstance(v, int) and not isinstance(v, bool) for v in mapping.values()) else None
            if ids != list(range(len(mapping))) or not all(isinstance(k, str) for k in mapping):
                raise ValueError(f"CSCGraph: `{name}` must map type names to the ids 0..{len(mapping) - 1}, got {dict(mapping)}")
        for node_type in self.node_type_to_id:
            if ":" in node_type:
                raise ValueError(f"CSCGraph: `node_type_to_id` names node type '{node_type}', which contains ':'; {NO_COLON_IN_TYPE_NAMES}")
        for name in self.edge_type_to_id:
            src_type, _, dst_type = parse_edge_type(name)
            for node_type in (src_type, dst_type):
                if node_type not in self.node_type_to_id:
                    raise ValueError(f"CSCGraph: edge type '{name}' names node type '{node_type}', not in `node_type_to_id`")
        num_types = len(self.node_type_to_id)
        if not isinstance(offset, torch.Tensor) or offset.dtype != torch.int64 or offset.shape != (num_types + 1,):
            raise ValueError(
                f"CSCGraph: `node_type_offset` must be a [num_node_types + 1] = [{num_types + 1}] integer tensor "
                f"(int64; other integer dtypes are converted to it), got "
                f"{getattr(offset, 'dtype', type(offset).__name__)} {tuple(getattr(offset, 'shape', ()))}"
            )
        offsets = offset.tolist()
        if offsets[0] != 0 or offsets[-1] != num_nodes or any(a > b for a, b in zip(offsets, offsets[1:])):
            raise ValueError(
                f"CSCGraph: `node_type_offset` must rise from 0 to num_nodes={num_nodes}, got {offsets}"
            )
        if (
            not isinstance(per_edge, torch.Tensor)
            or per_edge.dtype not in (torch.uint8, torch.int16, torch.int32, torch.int64)
            or per_edge.shape != (num_edges,)
        ):
            raise ValueError(
                f"CSCGraph: `type_per_edge` must be a [num_edges] = [{num_edges}] integer tensor, got "
                f"{getattr(per_edge, 'dtype', type(per_edge).__name__)} {tuple(getattr(per_edge, 'shape', ()))}"
            )
        return offsets, num_edges

    def _check_typed_edges(self, offsets: List[int], num_edges: int) -> None:
        """O(num_edges): edge type ids in range, ascending within each destination, and
        every edge's endpoints of its type's node types; type-local ``original_edge_ids``
        a permutation of ``0..E_t - 1`` within each type."""
        per_edge = self.type_per_edge.to(torch.int64)
        num_edge_types = len(self.edge_type_to_id)
        if int(per_edge.min()) < 0 or int(per_edge.max()) >= num_edge_types:
            bad = int(per_edge.min()) if int(per_edge.min()) < 0 else int(per_edge.max())
            raise ValueError(f"CSCGraph: `type_per_edge` holds {bad}, not an edge type id (0..{num_edge_types - 1})")
        starts = torch.zeros(num_edges, dtype=torch.bool)
        starts[self.indptr[:-1][self.indptr[:-1] < num_edges].to(torch.int64)] = True
        falls = (per_edge[1:] < per_edge[:-1]) & ~starts[1:]
        if bool(falls.any()):
            e = int(falls.nonzero()[0]) + 1
            raise ValueError(
                f"CSCGraph: `type_per_edge` must be ascending within each destination's in-edges, but CSC position "
                f"{e} has type {int(per_edge[e])} after {int(per_edge[e - 1])}"
            )
        src, dst = self.edge_index()
        node_type = torch.bucketize(torch.stack([src, dst]), torch.tensor(offsets[1:]), right=True)
        node_type_to_id = self.node_type_to_id
        ends = torch.tensor(
            [[node_type_to_id[parse_edge_type(name)[i]] for i in (0, 2)] for name in self.edge_types], dtype=torch.int64
        ).reshape(-1, 2)
        wrong = (node_type[0] != ends[per_edge, 0]) | (node_type[1] != ends[per_edge, 1])
        if bool(wrong.any()):
            e = int(wrong.nonzero()[0])
            raise ValueError(
                f"CSCGraph: the edge at CSC position {e} ({int(src[e])} -> {int(dst[e])}) has type "
                f"'{self.edge_types[int(per_edge[e])]}', but its endpoints are of node types "
                f"'{self.node_types[int(node_type[0, e])]}' -> '{self.node_types[int(node_type[1, e])]}'"
            )
        edge_ids = self.original_edge_ids
        if edge_ids is None:
            return
        per_type = torch.bincount(per_edge, minlength=num_edge_types)
        first = torch.cumsum(per_type, 0) - per_type
        local = edge_ids.to(torch.int64)
        if int(local.min()) < 0 or bool((local >= per_type[per_edge]).any()):
            raise ValueError(
                "CSCGraph: `original_edge_ids` of a typed graph must be edge ids within their type, in "
                "0..E_t - 1 for E_t edges of type t"
            )
        seen = torch.zeros(num_edges, dtype=torch.bool)
        seen[first[per_edge] + local] = True
        if not bool(seen.all()):
            raise ValueError(
                "CSCGraph: `original_edge_ids` of a typed graph must number each type's edges 0..E_t - 1, each once"
            )

    def typed_fields(self) -> Optional[dict]:
        """The four typed fields by name (``node_type_offset`` ... ``edge_type_to_id``),
        or None for a homogeneous graph."""
        if not self.is_heterogeneous:
            return None
        return {name: getattr(self, name) for name in _TYPE_KEYS}

    # ------------------------------------------------------------------ devices
    def _arrays(self) -> List[torch.Tensor]:
        extra = [] if self.original_edge_ids is None else [self.original_edge_ids]
        if self.is_heterogeneous:
            extra.append(self.type_per_edge)  # node_type_offset is small and read on the host
        return [self.indptr, self.indices, *extra, *self.edge_attributes.values(), *self.node_attributes.values()]

    def pin_memory_(self) -> "CSCGraph":
        """Page-lock every CPU array in place (``cudaHostRegister``, no copy); return self.

        GPU samplers then read the graph from host memory through zero-copy views. Without
        CUDA this is a no-op that warns once per process.
        """
        from graphpipe.ops.uva_gather import cuda_or_warn_once, pin_in_place

        if not cuda_or_warn_once("CSCGraph.pin_memory_(): CUDA is not available; the graph stays unpinned"):
            return self

        for t in self._arrays():
            pin_in_place(t)
        return self

    def to(self, device) -> "CSCGraph":
        """A graph with every array on ``device`` (this one if they are all there already).

        Without CUDA, ``to("cuda")`` warns once per process and returns the graph on the
        CPU, as :meth:`pin_memory_` does, so CPU code keeps working.
        """
        from graphpipe.ops.uva_gather import cuda_or_warn_once, resolve_device

        device = resolve_device(device)
        if device.type == "cuda" and not cuda_or_warn_once(
            "CSCGraph.to('cuda'): CUDA is not available; the graph stays on the CPU"
        ):
            device = torch.device("cpu")
        if all(t.device == device for t in self._arrays()):
            return self

        def moved(t):
            return None if t is None else t.to(device)

        return type(self)._build(
            moved(self.indptr),
            moved(self.indices),
            {k: moved(v) for k, v in self.edge_attributes.items()},
            {k: moved(v) for k, v in self.node_attributes.items()},
            moved(self.original_edge_ids),
            level=_SHAPES,  # same values as this validated graph
            typed=None if not self.is_heterogeneous else {
                **self.typed_fields(),
                "node_type_offset": self.node_type_offset,  # small: read on the host
                "type_per_edge": moved(self.type_per_edge),
            },
        )

    # ------------------------------------------------------------------ pickling
    def __reduce__(self):
        # A graph mapped by load(mmap=True) travels as its path, and an array that is a
        # memory map of a file (np.memmap, np.load(mmap_mode=...)) as that file's name,
        # offset, shape and dtype: worker processes map the same file. Any other array
        # travels by value, as a dataclass would (torch's multiprocessing reductions then
        # share it), without scanning it again on arrival.
        if self.source_path is not None:
            return _map_saved_graph, (self.source_path, self.num_nodes, self.num_edges)
        mappings = _FileMappings()

        def by_file(t):
            return mappings.backing(t) or t

        typed = None
        if self.is_heterogeneous:
            typed = {k: by_file(v) if isinstance(v, torch.Tensor) else dict(v) for k, v in self.typed_fields().items()}
        return _unpickle_graph, (
            type(self),
            by_file(self.indptr),
            by_file(self.indices),
            {k: by_file(v) for k, v in self.edge_attributes.items()},
            {k: by_file(v) for k, v in self.node_attributes.items()},
            None if self.original_edge_ids is None else by_file(self.original_edge_ids),
            typed,
        )

    # ------------------------------------------------------------------ storage
    def save(self, path: str | os.PathLike) -> None:
        """Write the graph to ``path`` (``torch.save`` format, from host memory).

        The file holds a format tag and version, every array, and a CRC-32 per 64 MiB of
        each array, which :meth:`load` checks. It is written in a private scratch
        directory beside ``path`` and moved over it at the end, so an interrupted save
        leaves no truncated file (a killed one's scratch directory is removed by the
        next save there), a symlink at ``path`` is replaced rather than written through,
        and a process that has mapped the old file keeps reading the old one.

        Raises:
            FileNotFoundError: the directory of ``path`` does not exist.
        """
        from graphpipe._internal.safe_files import scratch_directory

        where = "CSCGraph.save"
        destination, directory = _output_file(path, where)
        with scratch_directory(directory, f"{where}: the directory of `path`") as scratch:
            self._write(destination, scratch)

    def _write(self, destination: str, scratch: str) -> None:
        """Save into the private directory ``scratch``, then move the file to ``destination``."""
        from graphpipe._internal.safe_files import publish

        def on_host(t: torch.Tensor) -> torch.Tensor:
            t = t.detach().cpu()
            # torch.save writes a tensor's whole storage: copy views out of larger ones.
            return t if t.untyped_storage().nbytes() == t.nbytes else t.clone()

        arrays = {
            "indptr": on_host(self.indptr),
            "indices": on_host(self.indices),
            "original_edge_ids": None if self.original_edge_ids is None else on_host(self.original_edge_ids),
            "edge_attributes": {k: on_host(v) for k, v in self.edge_attributes.items()},
            "node_attributes": {k: on_host(v) for k, v in self.node_attributes.items()},
        }
        checksums = {
            "indptr": _checksum(arrays["indptr"]),
            "indices": _checksum(arrays["indices"]),
            "original_edge_ids": None if arrays["original_edge_ids"] is None else _checksum(arrays["original_edge_ids"]),
            "edge_attributes": {k: _checksum(v) for k, v in arrays["edge_attributes"].items()},
            "node_attributes": {k: _checksum(v) for k, v in arrays["node_attributes"].items()},
        }
        typed = self.typed_fields() or dict.fromkeys(_TYPE_KEYS)
        for name in ("node_type_offset", "type_per_edge"):
            arrays[name] = None if typed[name] is None else on_host(typed[name])
            checksums[name] = None if arrays[name] is None else _checksum(arrays[name])
        state = {
            "format": _FORMAT,
            "version": _VERSION,
            **arrays,
            "node_type_to_id": None if typed["node_type_to_id"] is None else dict(typed["node_type_to_id"]),
            "edge_type_to_id": None if typed["edge_type_to_id"] is None else dict(typed["edge_type_to_id"]),
            "checksum_chunk_bytes": _CHECKSUM_CHUNK_BYTES,
            "checksums": checksums,
        }
        written = os.path.join(scratch, "graph.pt")
        torch.save(state, written)
        publish(written, destination)

    @classmethod
    def load(
        cls, path: str | os.PathLike, mmap: bool = False, validate: Optional[bool] = None
    ) -> "CSCGraph":
        """Read a graph written by :meth:`save` (a CPU graph).

        Args:
            path: the file.
            mmap: map the file instead of reading it: arrays are paged in when used,
                the graph's ``source_path`` is set, and it pickles as that path.
            validate: how much to check.

                * ``None`` (default): with ``mmap=False`` everything, as ``True``; with
                  ``mmap=True`` only ``O(num_nodes)`` work: the structure, ``indptr``
                  (non-decreasing, ends at ``num_edges``) and its checksum; ``indices``
                  and the attributes are not read, so a corrupted ``indices`` goes
                  unnoticed (``load(path, validate=True)`` checks a file once).
                * ``True``: every checksum and every check of the constructor.
                * ``False``: types, shapes and ``indptr``'s two ends only (``O(1)``); for
                  files known to be good.

                Files written by graphpipe before checksums (format version 0) are
                validated in full unless ``validate=False``; save them again to get
                checksums and lazy mapping.

        Raises:
            FileNotFoundError: no file at ``path``.
            ValueError: naming ``path`` and what is wrong, for empty, truncated,
                corrupted (checksum mismatch) or foreign files and malformed graphs.
        """
        path = os.path.abspath(os.fspath(path))
        where = f"CSCGraph.load('{path}')"
        again = "write it again with CSCGraph.save"
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{where}: no such file")
        if os.path.getsize(path) == 0:
            raise ValueError(f"{where}: the file is empty (an interrupted copy or save?); {again}")
        try:
            state = torch.load(path, mmap=mmap, weights_only=True, map_location="cpu")
        except Exception as error:
            reason = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            raise ValueError(
                f"{where}: cannot be read as a graph file written by CSCGraph.save: it is truncated, "
                f"corrupted or of another kind ({reason}); {again}"
            ) from error
        if not isinstance(state, dict):
            raise ValueError(f"{where}: holds a {type(state).__name__}, not a graph written by CSCGraph.save")
        legacy = "format" not in state and set(state) == _LEGACY_KEYS
        if not legacy:
            if state.get("format") != _FORMAT:
                raise ValueError(
                    f"{where}: not a graph written by CSCGraph.save (its keys are {sorted(map(str, state))}, "
                    f"format tag {state.get('format')!r}, expected {_FORMAT!r})"
                )
            version = state.get("version")
            if not isinstance(version, int) or version not in _KEYS:
                newer = isinstance(version, int) and version > _VERSION
                raise ValueError(
                    f"{where}: graph file format version {version!r}, but this graphpipe reads version "
                    f"{_VERSION} and older" + ("; upgrade graphpipe to read it" if newer else "")
                )
            keys = _KEYS[version]
            if set(state) != keys:
                raise ValueError(
                    f"{where}: wrong keys for a version {version} graph file: missing "
                    f"{sorted(keys - set(state))}, unexpected {sorted(map(str, set(state) - keys))}; {again}"
                )
        for name in ("edge_attributes", "node_attributes"):
            if not isinstance(state[name], dict):
                raise ValueError(f"{where}: `{name}` is a {type(state[name]).__name__}, not a dict")

        if validate is None:
            level = _INDPTR if mmap and not legacy else _FULL
        else:
            level = _FULL if validate else _SHAPES
        if not legacy and level > _SHAPES:
            _verify_checksums(where, state, everything=level == _FULL)
        try:
            return cls._build(
                state["indptr"],
                state["indices"],
                state["edge_attributes"],
                state["node_attributes"],
                state.get("original_edge_ids"),
                level=level,
                source_path=path if mmap else None,
                typed=None if state.get("node_type_offset") is None else {name: state[name] for name in _TYPE_KEYS},
            )
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from error

    def sample_neighbors(self, seeds, fanouts, replace: bool = False, probs_name: Optional[str] = None):
        """One layer of in-edges of ``seeds`` (a tensor, or node type -> ids for a typed
        graph) with ``fanouts`` (one, or one per edge type), as GraphBolt's
        ``FusedCSCSamplingGraph.sample_neighbors``: a not-compacted
        :class:`~graphpipe.SampledSubgraph` whose ``sampled_csc`` holds the sources' ids
        in the graph. See :func:`graphpipe.graph.sampling.sample_graph_neighbors`."""
        return sample_graph_neighbors(self, seeds, fanouts, replace=replace, probs_name=probs_name)

    def __repr__(self) -> str:
        edge_ids = "None" if self.original_edge_ids is None else str(self.original_edge_ids.dtype)
        source = "" if self.source_path is None else f", source_path='{self.source_path}'"
        if self.is_heterogeneous:
            source = f", node_types={self.num_nodes_per_type}, edge_types={self.edge_types}" + source
        return (
            f"CSCGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
            f"indptr={self.indptr.dtype}, indices={self.indices.dtype}, "
            f"edge_attributes={list(self.edge_attributes)}, "
            f"node_attributes={list(self.node_attributes)}, "
            f"original_edge_ids={edge_ids}{source})"
        )


def check_graph(graph, where: str):
    """``graph`` if it is a :class:`graphpipe.CSCGraph`; else a TypeError naming ``where``
    and the constructor that builds one from what was passed (a PyG ``Data``, an
    ``edge_index`` tensor, a networkx or DGL graph, a graphpipe dataset)."""
    if isinstance(graph, CSCGraph):
        return graph
    kind = type(graph)
    module = kind.__module__.split(".")[0]
    name = kind.__name__ if module in ("builtins", "graphpipe") else f"{kind.__name__} ({module})"
    if module == "torch_geometric":
        hint = (
            "graphpipe.datasets.from_pyg(data) builds the graph with its features, labels and splits "
            "(its .graph is the CSCGraph); for the graph alone, CSCGraph.from_edge_index(data.edge_index, "
            "num_nodes=data.num_nodes)"
        )
        if kind.__name__ == "HeteroData":
            hint += " (a HeteroData: from_pyg, or CSCGraph.from_hetero_edges(data.edge_index_dict, num_nodes))"
    elif module == "dgl":
        hint = "graphpipe.datasets.from_dgl(graph) (its .graph is the CSCGraph)"
    elif module == "networkx":
        hint = (
            "number its nodes 0..n-1 (networkx.convert_node_labels_to_integers), then CSCGraph.from_coo(src, dst, "
            "num_nodes=G.number_of_nodes()) with src, dst = torch.tensor(list(G.edges)).T (add the reversed edges "
            "of an undirected graph); or PyG's torch_geometric.utils.from_networkx, then graphpipe.datasets.from_pyg"
        )
    elif isinstance(graph, (torch.Tensor, np.ndarray)):
        hint = (
            "a [2, num_edges] edge_index (row 0 sources, row 1 targets) becomes one with "
            "CSCGraph.from_edge_index(edge_index, num_nodes=...); separate source and target lists with "
            "CSCGraph.from_coo(src, dst, num_nodes=...)"
        )
    elif isinstance(getattr(graph, "graph", None), CSCGraph):
        hint = "this is a dataset: pass dataset.graph"
    else:
        hint = (
            "build one with CSCGraph.from_edge_index (PyG's [2, num_edges] edge_index), CSCGraph.from_coo "
            "(source and target lists), graphpipe.datasets.from_pyg / from_dgl, or CSCGraph.load (a saved graph)"
        )
    raise TypeError(f"{where}: `graph` must be a graphpipe.CSCGraph, got {name}; {hint}")


def _unpickle_graph(cls, indptr, indices, edge_attributes, node_attributes, original_edge_ids, typed=None) -> CSCGraph:
    def mapped(value):
        return value.open() if isinstance(value, _MappedArray) else value

    return cls._build(
        mapped(indptr),
        mapped(indices),
        {k: mapped(v) for k, v in edge_attributes.items()},
        {k: mapped(v) for k, v in node_attributes.items()},
        mapped(original_edge_ids),
        level=_SHAPES,
        typed=None if typed is None else {k: mapped(v) for k, v in typed.items()},
    )


class _MappedArray(NamedTuple):
    """A CPU tensor that is a memory map of a file, pickled as where it lies in the file."""

    path: str
    offset: int  # of its first byte in the file
    shape: Tuple[int, ...]
    dtype: torch.dtype
    writable: bool  # whether the original mapping was (then this one is copy-on-write)
    identity: Tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns) when pickled

    def open(self) -> torch.Tensor:
        import numpy as np

        try:
            info = os.stat(self.path)
        except OSError as error:
            raise ValueError(f"CSCGraph: cannot map '{self.path}' again to unpickle the graph ({error})") from error
        if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != self.identity:
            raise ValueError(
                f"CSCGraph: '{self.path}' changed after the graph was pickled (another file, size or modification "
                f"time); the graph's arrays were memory maps of it: build the graph again"
            )
        nbytes = math.prod(self.shape) * self.dtype.itemsize
        mode = "c" if self.writable else "r"  # "c": private, as the by-value copy would be
        data = np.memmap(self.path, dtype=np.uint8, mode=mode, offset=self.offset, shape=(nbytes,))
        with warnings.catch_warnings():  # a read-only map stays read-only, as the original
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(data).view(self.dtype).reshape(self.shape)


class _FileMappings:
    """This process's memory maps of files (Linux's ``/proc/self/maps``), read once, to
    find which tensors lie in one; empty elsewhere."""

    def __init__(self):
        self._areas: Optional[list] = None
        self._written: Optional[Dict[int, bool]] = None

    def _read_areas(self) -> list:
        areas = []
        try:
            with open("/proc/self/maps") as maps:
                lines = maps.read().splitlines()
        except OSError:
            return areas
        for line in lines:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or not parts[5].startswith("/") or parts[5].endswith(" (deleted)"):
                continue
            if parts[5].startswith("/dev/shm/torch_"):
                continue  # torch's own shared memory (file_system strategy): torch's reductions pass it on
            start, end = (int(x, 16) for x in parts[0].split("-"))
            areas.append((start, end, parts[1], int(parts[2], 16), int(parts[4]), parts[5]))
        return areas

    def _copied_on_write(self, start: int) -> bool:
        """Whether the private mapping starting at ``start`` has pages no longer the file's."""
        if self._written is None:
            self._written = {}
            current = None
            try:
                with open("/proc/self/smaps") as smaps:
                    for line in smaps:
                        if line.startswith("Anonymous:"):
                            if current is not None:
                                self._written[current] = int(line.split()[1]) > 0
                        elif "-" in line.split(maxsplit=1)[0]:
                            current = int(line.split("-", 1)[0], 16)
            except OSError:
                pass
        return self._written.get(start, True)

    def backing(self, t: torch.Tensor) -> Optional[_MappedArray]:
        """Where the contiguous CPU tensor ``t`` lies in a file, or None if it does not
        lie in one mapping (of a file that still has that name) whose pages are all
        the file's."""
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or t.numel() == 0 or not t.is_contiguous():
            return None
        if self._areas is None:
            self._areas = self._read_areas()
        begin = t.data_ptr()
        end = begin + t.numel() * t.element_size()
        covering = [a for a in self._areas if a[0] < end and a[1] > begin]
        covering.sort()
        if not covering or covering[0][0] > begin or covering[-1][1] < end:
            return None
        first = covering[0]
        for previous, area in zip(covering, covering[1:]):  # one file, contiguous in memory and in the file
            if area[0] != previous[1] or area[4:] != first[4:] or area[3] != previous[3] + previous[1] - previous[0]:
                return None
        for area in covering:
            private_and_writable = "p" in area[2] and "w" in area[2]
            if private_and_writable and self._copied_on_write(area[0]):
                return None
        path = first[5]
        try:
            info = os.stat(path)
        except OSError:
            return None
        if info.st_ino != first[4]:
            return None  # the name now names another file
        return _MappedArray(
            path=path,
            offset=first[3] + begin - first[0],
            shape=tuple(t.shape),
            dtype=t.dtype,
            writable="w" in first[2],
            identity=(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns),
        )


def _file_backing(t: torch.Tensor) -> Optional[_MappedArray]:
    """Where the CPU tensor ``t`` lies in a memory-mapped file (see :class:`_FileMappings`)."""
    return _FileMappings().backing(t)


def _map_saved_graph(path: str, num_nodes: int, num_edges: int) -> CSCGraph:
    """Unpickle a mapped graph: map its file again (the pickling process validated it)."""
    graph = CSCGraph.load(path, mmap=True, validate=False)
    if (graph.num_nodes, graph.num_edges) != (num_nodes, num_edges):
        raise ValueError(
            f"CSCGraph: '{path}' changed after it was loaded: it now holds {graph.num_nodes} nodes and "
            f"{graph.num_edges} edges, the pickled graph had {num_nodes} and {num_edges}"
        )
    return graph


def _checksum(t: torch.Tensor, chunk_bytes: int = _CHECKSUM_CHUNK_BYTES) -> List[int]:
    """CRC-32 of each ``chunk_bytes`` of a CPU tensor's bytes (one value for an empty one)."""
    data = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
    chunks = [data[start : start + chunk_bytes] for start in range(0, max(data.size, 1), chunk_bytes)]
    if len(chunks) == 1:
        return [zlib.crc32(chunks[0])]
    with ThreadPoolExecutor(min(len(chunks), os.cpu_count() or 1)) as pool:
        return list(pool.map(zlib.crc32, chunks))


def _verify_checksums(where: str, state: dict, everything: bool) -> None:
    """Compare the stored CRCs with the arrays': ``indptr`` only, or every array."""
    chunk_bytes, stored = state["checksum_chunk_bytes"], state["checksums"]
    if not isinstance(chunk_bytes, int) or chunk_bytes <= 0 or not isinstance(stored, dict):
        raise ValueError(f"{where}: the checksum table is malformed; write it again with CSCGraph.save")
    arrays = [("indptr", state["indptr"], stored.get("indptr"))]
    if everything:
        arrays.append(("indices", state["indices"], stored.get("indices")))
        for name in ("original_edge_ids", "type_per_edge", "node_type_offset"):
            if state.get(name) is not None:
                arrays.append((name, state[name], stored.get(name)))
        for group in ("edge_attributes", "node_attributes"):
            table = stored.get(group) if isinstance(stored.get(group), dict) else {}
            arrays += [(f"{group}['{k}']", t, table.get(k)) for k, t in state[group].items()]
    for name, t, expected in arrays:
        if not isinstance(t, torch.Tensor):
            continue  # reported by the structural checks, with its type
        if not isinstance(expected, list):
            raise ValueError(f"{where}: no checksum for `{name}`; write it again with CSCGraph.save")
        actual = _checksum(t, chunk_bytes)
        if actual != expected:
            bad = next((i for i, (a, e) in enumerate(zip(actual, expected)) if a != e), min(len(actual), len(expected)))
            raise ValueError(
                f"{where}: checksum mismatch in `{name}` (bytes {bad * chunk_bytes}.."
                f"{min((bad + 1) * chunk_bytes, t.nbytes)} of {t.nbytes}): the file is corrupted; "
                f"write it again with CSCGraph.save from the original data"
            )


def _numpy_index_dtype(max_value: int):
    """numpy's :func:`smallest_index_dtype`: int32 when ``max_value`` fits, else int64."""
    import numpy as np

    return np.int32 if smallest_index_dtype(max_value) == torch.int32 else np.int64


def _output_file(path, where: str) -> Tuple[str, str]:
    """``(file, directory)``: the absolute path of the output ``path`` with its directory
    resolved through symlinks, after checking the directory exists and ``path`` is not one."""
    given = os.path.abspath(os.fspath(path))
    directory = os.path.realpath(os.path.dirname(given))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"{where}: `path` '{given}': its directory '{os.path.dirname(given)}' does not exist; create it first"
        )
    file = os.path.join(directory, os.path.basename(given))
    if os.path.isdir(file) and not os.path.islink(file):
        raise IsADirectoryError(f"{where}: `path` '{given}' is a directory; name the graph file to write")
    return file, directory


def _check_indptr_fits(num_nodes: int, max_id: Optional[int], where: str) -> None:
    """Refuse a ``num_nodes`` whose ``indptr`` and cursor (16 bytes per node) exceed this
    machine's memory, naming ``num_nodes`` (``max_id``: the id it was inferred from)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return  # unknown here: numpy's MemoryError says it
    needed = 16 * (num_nodes + 1)
    if needed <= memory:
        return
    size = f"{needed / 2**30:.3g} GiB for `indptr` and its cursor (16 bytes per node), more than this machine's {memory / 2**30:.3g} GiB of memory"
    if max_id is not None:
        raise ValueError(
            f"{where}: `num_nodes` was not given, so it is the largest node id in the edge files + 1 = {num_nodes}, "
            f"which needs {size}. An id of {max_id} is likely not a node id of this graph (ids must be "
            f"0..num_nodes - 1): renumber the nodes, or pass `num_nodes` (ids at or beyond it are refused)"
        )
    raise ValueError(f"{where}: `num_nodes`={num_nodes} needs {size}")


def _open_edge_file(file, name: str, where: str):
    """Map the ``.npy`` file ``file`` read-only, checking that it holds integers."""
    import numpy as np

    if not isinstance(file, (str, os.PathLike)) or not os.fspath(file).endswith(".npy"):
        raise ValueError(f"{where}: `{name}` must be the path of a .npy file, got {file!r}")
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{where}: `{name}`: no such file: '{os.fspath(file)}'")
    try:
        array = np.load(file, mmap_mode="r")
    except Exception as error:
        raise ValueError(f"{where}: `{name}`: '{os.fspath(file)}' is not a readable .npy file ({error})") from error
    if array.dtype.kind not in "iu" or not array.dtype.isnative:
        raise ValueError(
            f"{where}: `{name}`: '{os.fspath(file)}' must hold integers (int32 or int64; any int/uint dtype of this "
            f"machine's byte order), got dtype {array.dtype.str if array.dtype.kind in 'iu' else array.dtype}"
            + ("; convert it with array.astype(array.dtype.newbyteorder('='))" if array.dtype.kind in "iu" else "")
        )
    return array


def _check_edge_attr(name: str, t: torch.Tensor, num_edges: int) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.size(0) != num_edges:
        raise ValueError(
            f"CSCGraph: edge attribute '{name}' must be a tensor with num_edges={num_edges} "
            f"rows, got shape {tuple(getattr(t, 'shape', ()))}"
        )
    return t


def _rank_within_type(type_per_edge: torch.Tensor, num_edge_types: int) -> torch.Tensor:
    """``[num_edges]`` type-local edge ids of a typed graph given none: the rank of each
    CSC position among the positions of its edge type (int32 when it fits)."""
    per_edge = type_per_edge.to(torch.int64)
    counts = torch.bincount(per_edge, minlength=num_edge_types)
    order = torch.argsort(per_edge, stable=True)
    first = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    ranks = torch.empty_like(per_edge)
    ranks[order] = torch.arange(per_edge.numel()) - first
    largest = int(counts.max()) if counts.numel() else 0
    return ranks.to(smallest_index_dtype(max(largest - 1, 0)))


def _edge_pair(pair, name: str, where: str):
    """``(src, dst)`` 1-D integer tensors of an edge list given as ``[2, E]`` or a pair."""
    if isinstance(pair, (tuple, list)) and len(pair) == 2:
        src, dst = torch.as_tensor(pair[0]), torch.as_tensor(pair[1])
    else:
        pair = torch.as_tensor(pair)
        if pair.dim() != 2 or pair.size(0) != 2:
            raise ValueError(f"{where}: `{name}` must be a [2, num_edges] tensor or a (src, dst) pair, got shape {tuple(pair.shape)}")
        src, dst = pair[0], pair[1]
    for end, ids in (("sources", src), ("targets", dst)):
        if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise ValueError(f"{where}: `{name}` {end} must be a 1-D integer tensor, got {ids.dtype} of shape {tuple(ids.shape)}")
    if src.numel() != dst.numel():
        raise ValueError(f"{where}: `{name}` has {src.numel()} sources and {dst.numel()} targets")
    return src, dst
