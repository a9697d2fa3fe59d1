"""CSCGraph: a graph stored by destination (compressed sparse columns).

``indices[indptr[v]:indptr[v + 1]]`` are the in-neighbours (sources) of ``v``: what
message passing aggregates and a sampler draws from. Samplers work with *CSC positions*
``e`` (``indices[e]`` is the source of edge ``e``), and ``original_edge_ids`` maps them
to the user's edge ids.

Typed graphs use GraphBolt's ``FusedCSCSamplingGraph`` layout: one CSC over global node
ids, the nodes of a type contiguous (``node_type_offset``), each destination's in-edges
grouped by edge type id (``type_per_edge``), so one kernel per layer samples every edge
type. Type-local ids (what ``HeteroItemSet``s, typed MiniBatches and per-type features
use) are global ids minus the type's offset. Building lives in
:mod:`graphpipe.graph.build`, files and pickling in :mod:`graphpipe.graph.storage`.
"""

from __future__ import annotations

import os
import types
from dataclasses import FrozenInstanceError, dataclass, field, fields
from functools import cached_property
from typing import Dict, List, Literal, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch

from graphpipe._internal.devices import cuda_or_warn_once, device_array, device_or_cpu, pin_in_place
from graphpipe._internal.checks import ID_DTYPES
from graphpipe.graph import storage
from graphpipe.graph.build import check_attribute, coo_arrays, coo_files_graph, hetero_arrays, smallest_index_dtype
from graphpipe.graph.edge_types import NO_COLON_IN_TYPE_NAMES, parse_edge_type
from graphpipe.graph.sampling import sample_graph_neighbors
from graphpipe.graph.temporal import sort_by_time
from graphpipe.ops.gather import take_as_int64

__all__ = ["CSCGraph", "ORIGINAL_EDGE_ID", "TypeSchema", "check_graph", "fused_csc_sampling_graph", "smallest_index_dtype"]

#: GraphBolt's name of the edge attribute holding each edge's id (see ``original_edge_ids``).
ORIGINAL_EDGE_ID = "_ORIGINAL_EDGE_ID"

_INT_DTYPES = (torch.int32, torch.int64)
CheckLevel = Literal["shapes", "indptr", "full"]


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
    """A graph in CSC form, typed or not, validated when built (``O(num_nodes +
    num_edges)``) and read-only: assigning a field raises ``FrozenInstanceError`` (an
    ``AttributeError``); derive a new one, e.g. ``dataclasses.replace(graph,
    edge_attributes={**graph.edge_attributes, "w": w})``. Arrays are stored contiguous.

    Attributes:
        indptr: ``[num_nodes + 1]`` int32/int64, non-decreasing, from 0 to ``num_edges``.
        indices: ``[num_edges]`` int32/int64 source node ids in ``[0, num_nodes)``.
        edge_attributes: name -> ``[num_edges, ...]`` tensor by CSC position (e.g.
            ``"weight"`` for weighted sampling); read-only.
        node_attributes: name -> ``[num_nodes, ...]`` tensor; read-only.
        original_edge_ids: ``[num_edges]`` int32/int64 permutation: CSC position -> the
            user's edge id (its position in the COO list or ``edge_index``); None when
            they are the same. Use :meth:`map_edge_ids`. Typed graphs: ids within the
            edge's type, never None (given none, numbered in CSC order per type). Given
            none, the constructor takes the edge attribute ``"_ORIGINAL_EDGE_ID"``
            (:data:`ORIGINAL_EDGE_ID`, GraphBolt's way to give them); given both, they
            must be equal. The builders (``from_coo``, ...) refuse that attribute.
        node_type_offset: typed graphs only (else None, as the three below):
            ``[num_node_types + 1]`` int64 (other integer dtypes are converted): type
            ``i``'s nodes are ``node_type_offset[i]:node_type_offset[i + 1]``.
        type_per_edge: ``[num_edges]`` uint8 (int32 past 255 types) edge type id per CSC
            position, ascending within each destination's range.
        node_type_to_id: node type name -> id (read-only).
        edge_type_to_id: ``"src_type:relation:dst_type"`` -> id (read-only).
        indptr_nodes: a compact graph (a part of a partitioned dataset): ``[n + 1]`` int64,
            the strictly ascending node ids whose in-edges ``indptr``'s ``n`` rows hold
            (row ``i``: node ``indptr_nodes[i]``), then ``num_nodes``; the other nodes have
            no in-edges. ``indptr`` is then ``[n + 1]``, and everything else (``indices``,
            node attributes, seeds, samples) stays in node ids; :meth:`in_edge_rows` maps
            ids to rows. None (default): ``indptr`` has a row per node.
        source_path: the file this graph was mapped from by ``load(path, mmap=True)``,
            else None; such a graph pickles as this path. Not a constructor argument; a
            graph derived from it has None.
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
    indptr_nodes: Optional[torch.Tensor] = None
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
        indptr_nodes: Optional[torch.Tensor] = None,
    ):
        typed = dict(zip(storage.TYPE_KEYS, (node_type_offset, type_per_edge, node_type_to_id, edge_type_to_id)))
        ids = _edge_ids_of(edge_attributes, original_edge_ids, typed=node_type_offset is not None)
        from_attribute = original_edge_ids is None and ids is not None
        self._store(indptr, indices, edge_attributes, node_attributes, ids, None, typed, indptr_nodes)
        try:
            self._check("full")
        except ValueError as error:
            if not from_attribute:
                raise
            raise ValueError(
                f"{error} (the ids of edge_attributes['{ORIGINAL_EDGE_ID}'], taken as `original_edge_ids`: a permutation "
                f"of the edges' positions, within each edge type on a typed graph)"
            ) from error
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
        level: CheckLevel,
        source_path: Optional[str] = None,
        typed: Optional[dict] = None,
        indptr_nodes: Optional[torch.Tensor] = None,
    ) -> "CSCGraph":
        """A graph checked only up to ``level`` (see :meth:`_check`): for arrays already
        validated (``to()``, unpickling), made from checked ids (the builders) or whose
        ``O(num_edges)`` scans ``load`` leaves out on purpose. ``typed``: the four typed
        fields by name (then ``original_edge_ids`` must be given: only the constructor
        numbers a typed graph's edges), or None for a homogeneous graph."""
        if typed is not None and original_edge_ids is None:
            raise ValueError("CSCGraph: a typed graph needs `original_edge_ids` (each edge's id within its type)")
        graph = cls.__new__(cls)
        graph._store(indptr, indices, edge_attributes, node_attributes, original_edge_ids, source_path, typed, indptr_nodes)
        graph._check(level)
        return graph

    def _store(self, indptr, indices, edge_attributes, node_attributes, original_edge_ids, source_path, typed=None, indptr_nodes=None):
        typed = typed or {}
        offset = typed.get("node_type_offset")
        if isinstance(offset, torch.Tensor) and not (offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool):
            offset = offset.to(torch.int64)  # GraphBolt's are int32
        values = dict(
            indptr=_contiguous(indptr),
            indices=_contiguous(indices),
            edge_attributes=_frozen(edge_attributes, "edge_attributes", "name -> tensor"),
            node_attributes=_frozen(node_attributes, "node_attributes", "name -> tensor"),
            original_edge_ids=_contiguous(original_edge_ids),
            node_type_offset=_contiguous(offset),
            type_per_edge=_contiguous(typed.get("type_per_edge")),
            indptr_nodes=_contiguous(indptr_nodes),
            source_path=source_path,
        )
        for name in ("node_type_to_id", "edge_type_to_id"):
            values[name] = None if typed.get(name) is None else _frozen(typed[name], name, "type name -> id")
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
        """Build from edge lists ``src -> dst`` (1-D integer tensors of equal length),
        stably sorted by ``dst``: ``edge_attributes`` (in COO order) are permuted along and
        ``original_edge_ids`` keeps the permutation (None if ``dst`` was sorted).
        ``num_nodes`` defaults to ``max id + 1``. Shares no memory with the inputs."""
        _refuse_edge_id_attribute(edge_attributes, "CSCGraph.from_coo")
        arrays = coo_arrays(src, dst, num_nodes, edge_attributes)
        copies = {name: t.clone() if isinstance(t, torch.Tensor) else t for name, t in (node_attributes or {}).items()}
        return cls._build(**arrays, node_attributes=copies, level="shapes")

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
        """Build a graph from edge lists in ``.npy`` files without loading them, save it to
        ``path`` and return it mapped (``load(path, mmap=True)``); equal to
        ``from_coo(src, dst, num_nodes)``. For edge lists or CSCs larger than memory
        (:func:`graphpipe.ops.csc_build.coo_to_csc_chunked`): memory about 16 bytes per
        node plus a chunk; disk the CSC twice while the file is written (in a private
        scratch directory beside ``path``), plus 4 or 8 bytes per edge with more than one
        block.

        Args:
            path: the graph file to write (as :meth:`save`); its directory must exist.
            src: a ``.npy`` file (whatever its name) of ``[num_edges]`` source ids, or of ``[2, num_edges]``
                (row 0 sources, row 1 targets) when ``dst`` is None; any native-byte-order
                integer dtype (int32 or int64 best).
            dst: a ``.npy`` file of ``[num_edges]`` target ids.
            num_nodes: defaults to ``max id + 1``.
            chunk_edges: edges read per kernel launch (values below 65,536 are raised to it).
            block_edges: output slots one block writes (the window of the output whose
                pages it dirties; values below 65,536 are raised to it).

        Raises:
            FileNotFoundError: an edge file or the directory of ``path`` is missing.
            ValueError: naming the argument (and file): edge files of the wrong shape or
                dtype, ids out of range, or a ``num_nodes`` (given, or ``max id + 1``)
                whose ``indptr`` would not fit in this machine's memory.
        """
        return coo_files_graph(cls, path, src, dst, num_nodes, chunk_edges, block_edges)

    @classmethod
    def from_edge_index(
        cls,
        edge_index: torch.Tensor,
        num_nodes: Optional[int] = None,
        edge_attributes: Optional[Dict[str, torch.Tensor]] = None,
        node_attributes: Optional[Dict[str, torch.Tensor]] = None,
    ) -> "CSCGraph":
        """Build from a PyG ``edge_index`` ``[2, num_edges]`` (row 0 sources, row 1
        targets, PyG's ``flow="source_to_target"``); an edge's user id is its column."""
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
        node_attributes: Optional[Mapping[str, Mapping]] = None,
    ) -> "CSCGraph":
        """Build a typed graph from edge lists per edge type (PyG's ``edge_index_dict``).

        Node and edge types get ids in sorted name order (edge types by their
        ``"src:rel:dst"`` strings, as GraphBolt's OnDiskDataset; DGL and
        ``gb.from_dglgraph`` sort ``(src, rel, dst)`` tuples, which differ where a name
        holds a character before ``":"``, e.g. ``"r2"`` and ``"r"``), the nodes of a type
        contiguous global ids in that order. A destination's in-edges
        are grouped by edge type and keep their input order within a type.

        Args:
            edges: edge type (``"src:relation:dst"`` or a ``(src, relation, dst)`` tuple)
                -> ``[2, E]`` integer tensor (row 0 sources, row 1 targets) or a
                ``(src, dst)`` pair of ``[E]`` tensors, in type-local node ids.
            num_nodes: node type -> number of nodes (every type an edge type names).
            edge_attributes: name -> {edge type -> ``[E, ...]`` tensor in input order};
                every edge type must have it.
            node_attributes: name -> {node type -> ``[n, ...]`` tensor}, stored over
                global ids; a type left out is filled with the dtype's minimum (int64:
                no timestamp, so temporal sampling leaves that type unconstrained, as
                PyG's) or NaN.

        ``original_edge_ids``: each CSC position's index in its type's input list.
        """
        _refuse_edge_id_attribute(edge_attributes, "CSCGraph.from_hetero_edges")
        return cls._build(**hetero_arrays(edges, num_nodes, edge_attributes, node_attributes), level="shapes")

    # ------------------------------------------------------------------ properties
    @property
    def csc_indptr(self) -> torch.Tensor:
        """GraphBolt's name of :attr:`indptr` (read-only here, as every field)."""
        return self.indptr

    @cached_property
    def total_num_nodes(self) -> int:
        """Number of nodes of every type together."""
        return self.indptr.numel() - 1 if self.indptr_nodes is None else int(self.indptr_nodes[-1])

    @property
    def num_nodes(self) -> Union[int, Dict[str, int]]:
        """GraphBolt's: the number of nodes (untyped), or node type -> its number of nodes (typed)."""
        return self.num_nodes_per_type if self.is_heterogeneous else self.total_num_nodes

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
    def total_num_edges(self) -> int:
        """Number of edges of every type together."""
        return self.indices.numel()

    @property
    def num_edges(self) -> Union[int, Dict[str, int]]:
        """GraphBolt's: the number of edges (untyped), or ``"src:rel:dst"`` -> its number of edges (typed)."""
        if not self.is_heterogeneous:
            return self.total_num_edges
        counts = torch.bincount(self.type_per_edge.to(torch.int64), minlength=len(self.edge_types)).tolist()
        return dict(zip(self.edge_types, counts))

    @cached_property
    def schema(self) -> TypeSchema:
        """The graph's :class:`TypeSchema` (one type ``"_N"`` / ``"_N:_E:_N"`` when untyped)."""
        if not self.is_heterogeneous:
            return _type_schema(["_N"], ["_N:_E:_N"], [0, self.total_num_nodes])
        return _type_schema(self.node_types, self.edge_types, self.node_type_offset.tolist())

    def in_degrees(self) -> torch.Tensor:
        """``[num_nodes]`` int64 in-degree of every node."""
        degrees = (self.indptr[1:] - self.indptr[:-1]).to(torch.int64)
        if self.indptr_nodes is None:
            return degrees
        return degrees.new_zeros(self.total_num_nodes).index_copy_(0, self.indptr_nodes[:-1], degrees)

    def edge_index(self) -> torch.Tensor:
        """``[2, num_edges]`` int64 (sources, targets) in CSC order: column ``e`` is the
        edge at CSC position ``e``, whose user edge id is ``map_edge_ids(e)``."""
        rows = torch.arange(self.indptr.numel() - 1, device=self.indptr.device) if self.indptr_nodes is None else self.indptr_nodes[:-1]
        dst = torch.repeat_interleave(rows, self.indptr.diff().to(torch.int64), output_size=self.total_num_edges)
        return torch.stack([self.indices.to(torch.int64), dst])

    @property
    def _row_per_node(self) -> bool:
        """Whether row ``v`` of ``indptr`` holds node ``v``'s in-edges: not compact, or a
        compact graph holding every node (a single part: its rows are ``0..n - 1``)."""
        return self.indptr_nodes is None or self.indptr.numel() == self.total_num_nodes + 1

    def in_edge_rows(self, nodes: torch.Tensor, where: str) -> torch.Tensor:
        """The rows of ``indptr`` holding the in-edges of ``nodes`` (``[n]`` int64 node
        ids, checked): ``nodes`` itself, or on a compact graph (:attr:`indptr_nodes`)
        their ``[n]`` int64 rows, found by one binary search per batch. ValueError naming
        ``where`` for a node without a row (a part graph's node that another rank owns)."""
        if self._row_per_node:
            return nodes
        rows, held = self.held_rows(nodes)
        if not bool(held.all()):
            node = int(nodes[~held][0])
            raise ValueError(
                f"{where}: node {node} has no in-edges in this graph: it is compact, holding the in-edges of "
                f"{self.indptr_nodes.numel() - 1} of its {self.total_num_nodes} nodes (a part of a partitioned dataset: "
                f"the vertices its rank owns); sample the others on their owners (DistributedItemSampler.from_part upstream)"
            )
        return rows

    def held_rows(self, nodes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``([n] int64 rows of indptr, [n] bool whether the node has one)`` of ``nodes``
        (``[n]`` int64 ids in ``[0, num_nodes)``): a node without a row (compact graphs
        only) has no in-edges, and row 0."""
        if self._row_per_node:
            return nodes, torch.ones(nodes.shape, dtype=torch.bool, device=nodes.device)
        ids = device_array(self.indptr_nodes, nodes.device)
        rows = torch.searchsorted(ids, nodes.contiguous())  # ids ends with num_nodes, so rows <= n: always in range
        held = ids[rows] == nodes
        return rows.masked_fill_(~held, 0), held

    def map_edge_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """The user's edge ids (int64, shaped like ``positions``) of the edges at CSC
        ``positions`` (integers in ``[0, num_edges)`` on the graph's device, or on a CUDA
        device for a pinned graph): ``original_edge_ids[positions]``, or ``positions`` as
        int64 without them. A position out of range raises ValueError (on the CPU)."""
        if not isinstance(positions, torch.Tensor) or positions.dtype not in ID_DTYPES:
            raise TypeError(
                f"CSCGraph.map_edge_ids: `positions` must be an integer tensor (int64, int32, int16, int8 or uint8), "
                f"got {getattr(positions, 'dtype', type(positions).__name__)}"
            )
        if self.original_edge_ids is None and positions.device.type == "cpu" and positions.numel():
            lo, hi = int(positions.numpy().min()), int(positions.numpy().max())
            if lo < 0 or hi >= self.total_num_edges:
                raise ValueError(f"CSCGraph.map_edge_ids: position {lo if lo < 0 else hi} is outside [0, {self.total_num_edges})")
        return self.sampled_edge_ids(positions)

    def sampled_edge_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """:meth:`map_edge_ids` of positions a sampler made (integers in range): not checked
        again per batch (with ``original_edge_ids``, the gather's kernel still refuses one
        outside the map, at no cost). The layer layouts of ``graph.sampling`` call it, also
        on the view remote sampling gives them (``distributed.remote``)."""
        if self.original_edge_ids is None:
            return positions.to(torch.int64)
        # A pinned host graph sampled on the GPU: read the map through a zero-copy view.
        return take_as_int64(device_array(self.original_edge_ids, positions.device), positions, "CSCGraph.map_edge_ids")

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ``ValueError`` naming the array at fault if the graph is malformed
        (``O(num_nodes + num_edges)``, as the constructor)."""
        self._check("full")

    def _check(self, level: CheckLevel) -> None:
        """Checks up to ``level``: ``"shapes"`` (types, shapes, ``indptr``'s ends),
        ``"indptr"`` (and ``indptr`` non-decreasing), ``"full"`` (and ``indices`` and
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
        num_nodes, num_edges = self._check_indptr_nodes(level), indices.numel()
        if int(indptr[-1]) != num_edges:
            raise ValueError(
                f"CSCGraph: length mismatch: `indptr[-1]` is {int(indptr[-1])} but `indices` "
                f"has {num_edges} entries"
            )
        self._check_types(num_nodes, num_edges)  # then the typed fields are all given or all None
        if edge_ids is not None and edge_ids.numel() != num_edges:
            raise ValueError(
                f"CSCGraph: `original_edge_ids` must have num_edges={num_edges} entries, got {edge_ids.numel()}"
            )
        for name, t in self.edge_attributes.items():
            check_attribute(name, t, num_edges)
        for name, t in self.node_attributes.items():
            check_attribute(name, t, num_nodes, "node")
        if level != "shapes" and num_nodes > 0:
            steps = indptr[1:] - indptr[:-1]
            if bool((steps < 0).any()):
                bad = int(torch.nonzero(steps < 0)[0])
                raise ValueError(
                    f"CSCGraph: `indptr` must be non-decreasing, but indptr[{bad + 1}]="
                    f"{int(indptr[bad + 1])} < indptr[{bad}]={int(indptr[bad])}"
                )
        if level != "full" or num_edges == 0:
            return
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"CSCGraph: `indices` holds node id {bad}, out of range for "
                f"num_nodes={num_nodes} (valid ids are 0..{num_nodes - 1})"
            )
        if self.is_heterogeneous:
            self._check_typed_edges()
        if edge_ids is not None and not self.is_heterogeneous:
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

    def _check_indptr_nodes(self, level: CheckLevel) -> int:
        """The number of nodes, after checking ``indptr_nodes`` (if given): its shape and
        dtype, and (past ``"shapes"``, ``O(rows)``) strictly ascending from 0 or more."""
        rows, ids = self.indptr.numel() - 1, self.indptr_nodes
        if ids is None:
            return rows
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64 or ids.shape != (rows + 1,):
            raise ValueError(
                f"CSCGraph: `indptr_nodes` must be a [len(indptr)] = [{rows + 1}] int64 tensor (the node of each row of "
                f"indptr, then num_nodes), got {getattr(ids, 'dtype', type(ids).__name__)} {tuple(getattr(ids, 'shape', ()))}"
            )
        if level != "shapes" and (int(ids[0]) < 0 or bool((ids[1:] <= ids[:-1]).any())):
            raise ValueError("CSCGraph: `indptr_nodes` must rise strictly from a node id >= 0 to num_nodes")
        if int(ids[-1]) < rows:
            raise ValueError(f"CSCGraph: `indptr_nodes` ends with num_nodes={int(ids[-1])}, fewer than its {rows} rows")
        return self.total_num_nodes

    def _check_types(self, num_nodes: int, num_edges: int) -> None:
        """O(types) checks of the typed fields (none on a homogeneous graph)."""
        typed = [getattr(self, name) for name in storage.TYPE_KEYS]
        if all(value is None for value in typed):
            return
        if any(value is None for value in typed):
            raise ValueError(
                "CSCGraph: a typed graph needs all of `node_type_offset`, `type_per_edge`, `node_type_to_id` and "
                "`edge_type_to_id`; got only "
                + str([name for name, value in zip(storage.TYPE_KEYS, typed) if value is not None])
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

    def _check_typed_edges(self) -> None:
        """O(num_edges): edge type ids in range, ascending within each destination, and
        every edge's endpoints of its type's node types; type-local ``original_edge_ids``
        a permutation of ``0..E_t - 1`` within each type."""
        per_edge = self.type_per_edge.to(torch.int64)
        num_edges, num_edge_types = self.total_num_edges, len(self.edge_type_to_id)
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
        node_type = torch.bucketize(torch.stack([src, dst]), torch.tensor(self.schema.node_type_offset[1:]), right=True)
        ends = torch.tensor(self.schema.edge_type_ends, dtype=torch.int64).reshape(-1, 2)
        wrong = (node_type[0] != ends[per_edge, 0]) | (node_type[1] != ends[per_edge, 1])
        if bool(wrong.any()):
            e = int(wrong.nonzero()[0])
            raise ValueError(
                f"CSCGraph: the edge at CSC position {e} ({int(src[e])} -> {int(dst[e])}) has type "
                f"'{self.edge_types[int(per_edge[e])]}', but its endpoints are of node types "
                f"'{self.node_types[int(node_type[0, e])]}' -> '{self.node_types[int(node_type[1, e])]}'"
            )
        edge_ids = self.original_edge_ids
        if edge_ids is None:  # the constructor numbers them next
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
        return {name: getattr(self, name) for name in storage.TYPE_KEYS}

    # ------------------------------------------------------------------ devices
    def _arrays(self) -> List[torch.Tensor]:
        extra = [] if self.original_edge_ids is None else [self.original_edge_ids]
        if self.indptr_nodes is not None:
            extra.append(self.indptr_nodes)
        if self.is_heterogeneous:
            extra.append(self.type_per_edge)  # node_type_offset is small and read on the host
        return [self.indptr, self.indices, *extra, *self.edge_attributes.values(), *self.node_attributes.values()]

    def pin_memory_(self) -> "CSCGraph":
        """Page-lock every CPU array in place (no copy), so GPU samplers read the graph
        through zero-copy views; return self. Without CUDA: warns once, does nothing."""
        if not cuda_or_warn_once("CSCGraph.pin_memory_(): CUDA is not available; the graph stays unpinned"):
            return self
        for t in self._arrays():
            pin_in_place(t)
        return self

    def to(self, device) -> "CSCGraph":
        """A graph with every array on ``device`` (self if they are there already);
        ``"pinned"`` is :meth:`pin_memory_` (GraphBolt's). Without CUDA, ``to("cuda")`` warns
        once and keeps the graph on the CPU."""
        if isinstance(device, str) and device == "pinned":
            return self.pin_memory_()
        device = device_or_cpu(device, "CSCGraph.to('cuda'): CUDA is not available; the graph stays on the CPU", "CSCGraph.to")
        if all(t.device == device for t in self._arrays()):
            return self
        arguments = storage.build_arguments(self, lambda t: t.to(device))
        if self.is_heterogeneous:
            arguments["typed"]["node_type_offset"] = self.node_type_offset  # small: read on the host
        return type(self)._build(**arguments, level="shapes")  # same values as this validated graph

    def __reduce__(self):
        return storage.reduce(self)

    # ------------------------------------------------------------------ storage
    def save(self, path: str | os.PathLike) -> None:
        """Write the graph to ``path`` (``torch.save`` format with a format tag, version
        and a CRC-32 per 64 MiB of each array, which :meth:`load` checks), through a
        private scratch directory beside ``path``: an interrupted save leaves no truncated
        file, a symlink at ``path`` is replaced, not written through, and a process that
        mapped the old file keeps reading it. Raises FileNotFoundError when the directory
        of ``path`` does not exist."""
        storage.save(self, path)

    @classmethod
    def load(
        cls, path: str | os.PathLike, mmap: bool = False, validate: Optional[bool] = None
    ) -> "CSCGraph":
        """Read a graph written by :meth:`save` (a CPU graph).

        Args:
            path: the file.
            mmap: map the file instead of reading it (arrays are paged in when used);
                sets ``source_path``, and the graph pickles as that path.
            validate: ``True``: every checksum and constructor check. ``False``: types,
                shapes and ``indptr``'s ends only (``O(1)``, for files known good).
                ``None`` (default): as ``True`` without ``mmap``; with it ``O(num_nodes)``
                only (structure, ``indptr`` and its checksum: a corrupted ``indices``
                goes unnoticed; ``load(path, validate=True)`` checks a file once). Files
                from before checksums (version 0) are checked in full unless ``False``.

        Raises:
            FileNotFoundError: no file at ``path``.
            ValueError: naming ``path``: empty, truncated, corrupted (checksum mismatch)
                or foreign files, and malformed graphs.
        """
        return storage.load(cls, path, mmap, validate)

    def sample_neighbors(self, seeds, fanouts, replace: bool = False, probs_name: Optional[str] = None):
        """One layer of in-edges of ``seeds``, GraphBolt's
        ``FusedCSCSamplingGraph.sample_neighbors``. Draws follow torch's global generator
        (``torch.manual_seed``).

        Args:
            seeds: ``[n]`` node ids, or for a typed graph a dict node type -> ``[n_t]``
                type-local ids (types left out sample nothing).
            fanouts: a 1-D tensor or list (or an int): one fanout (``>= 0`` or -1), or for a
                typed graph one per edge type in edge type id order. One fanout on a typed
                graph applies to a node's in-edges of all types together, as GraphBolt's.
            replace: draw with replacement.
            probs_name: an edge attribute of the graph to sample proportionally to.

        Returns:
            A :class:`~graphpipe.SampledSubgraph` as GraphBolt returns it, not compacted:
            ``sampled_csc`` (per edge type ``"src:relation:dst"`` for a typed graph) has an
            ``indptr`` over the seeds (of the edge type's destination type) and ``indices``
            that are the sources' ids in the graph (type-local); ``original_edge_ids`` the
            edges' ids (within their type); ``original_row_node_ids`` and
            ``original_column_node_ids`` are None.
        """
        return sample_graph_neighbors(self, seeds, fanouts, replace=replace, probs_name=probs_name)

    def sample_layer_neighbors(self, seeds, fanouts, replace: bool = False, probs_name: Optional[str] = None):
        """One LABOR-0 layer of in-edges of ``seeds``, GraphBolt's
        ``FusedCSCSamplingGraph.sample_layer_neighbors``: as :meth:`sample_neighbors`
        (same arguments and layout; ``replace`` must be False), but a source is kept or
        not by one uniform per source for all its destinations, so the layer reaches fewer
        distinct sources; each edge's probability is still ``min(1, fanout / in-degree)``
        (weighted: LABOR's rule). ``edge_weights`` holds LABOR's float32 importance weights
        (per edge type on a typed graph)."""
        return sample_graph_neighbors(self, seeds, fanouts, replace=replace, probs_name=probs_name, labor=True)

    def temporal_sample_neighbors(
        self,
        seeds,
        seeds_timestamp,
        fanouts,
        replace: bool = False,
        seeds_pre_time_window=None,
        probs_name: Optional[str] = None,
        node_timestamp_attr_name: Optional[str] = None,
        edge_timestamp_attr_name: Optional[str] = None,
    ):
        """GraphBolt's ``temporal_sample_neighbors``: :meth:`sample_neighbors` among the
        in-edges valid for each seed's time: the source's node time and the edge's time
        (whichever are named) ``< seeds_timestamp`` and, with ``seeds_pre_time_window``
        ``w`` (an int or a tensor shaped like the seeds' times), ``> seeds_timestamp - w``.
        ``seeds_timestamp``: ``[n]`` int64 (typed: a dict node type -> ``[n_t]``)."""
        return sample_graph_neighbors(
            self, seeds, fanouts, replace=replace, probs_name=probs_name,
            times=(seeds_timestamp, seeds_pre_time_window, node_timestamp_attr_name, edge_timestamp_attr_name),
        )  # fmt: skip

    def sort_by_time(self, node_timestamp_attr_name: Optional[str] = None, edge_timestamp_attr_name: Optional[str] = None) -> "CSCGraph":
        """A copy whose in-edges of every destination (and edge type) are sorted by time
        (the later of the source's node time and the edge's time, whichever are named;
        ties by edge id), so temporal sampling finds a seed's valid in-edges by binary
        search (``O(log d)``) instead of a scan. Edge ids the user sees
        (``original_edge_ids``) are unchanged. ``O(E log E)``, once."""
        return sort_by_time(self, node_timestamp_attr_name, edge_timestamp_attr_name)

    def __repr__(self) -> str:
        edge_ids = "None" if self.original_edge_ids is None else str(self.original_edge_ids.dtype)
        source = "" if self.source_path is None else f", source_path='{self.source_path}'"
        if self.indptr_nodes is not None:
            source = f", in-edges of {self.indptr.numel() - 1} nodes (indptr_nodes)" + source
        if self.is_heterogeneous:
            source = f", node_types={self.num_nodes_per_type}, edge_types={self.edge_types}" + source
        return (
            f"CSCGraph(num_nodes={self.total_num_nodes}, num_edges={self.total_num_edges}, "
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


def _refuse_edge_id_attribute(edge_attributes, where: str) -> None:
    """The builders number edges by their input position; :data:`ORIGINAL_EDGE_ID` is refused."""
    if isinstance(edge_attributes, Mapping) and ORIGINAL_EDGE_ID in edge_attributes:
        raise ValueError(
            f"{where}: edge_attributes['{ORIGINAL_EDGE_ID}'] (GraphBolt's edge ids) is not taken here: the edge ids are "
            f"the edges' positions in the input lists; for other ids build CSCGraph(indptr, indices, "
            f"edge_attributes={{ORIGINAL_EDGE_ID: ids}})"
        )


def _edge_ids_of(edge_attributes, original_edge_ids, typed: bool):
    """``original_edge_ids``, or GraphBolt's edge attribute :data:`ORIGINAL_EDGE_ID` when
    only that is given (None on an untyped graph where it is every edge's position); both
    given must be equal."""
    given = edge_attributes.get(ORIGINAL_EDGE_ID) if isinstance(edge_attributes, Mapping) else None
    if given is None:
        return original_edge_ids
    if original_edge_ids is None:
        positions = not typed and isinstance(given, torch.Tensor) and given.dim() == 1 and not given.is_floating_point() and bool(
            (given == torch.arange(len(given), device=given.device)).all()
        )
        return None if positions else given
    same = isinstance(given, torch.Tensor) and given.shape == original_edge_ids.shape and bool(
        (given.to(original_edge_ids.device, torch.int64) == original_edge_ids.to(torch.int64)).all()
    )
    if not same:
        raise ValueError(
            f"CSCGraph: `original_edge_ids` and edge_attributes['{ORIGINAL_EDGE_ID}'] (GraphBolt's edge ids) differ; "
            f"give the edge ids once"
        )
    return original_edge_ids


def _contiguous(t):
    return t.contiguous() if isinstance(t, torch.Tensor) else t


def _frozen(mapping, name: str, of: str) -> types.MappingProxyType:
    """A read-only copy of ``mapping`` (None: empty), tensor values made contiguous."""
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise ValueError(f"CSCGraph: `{name}` must be a mapping of {of}, got {type(mapping).__name__}")
    return types.MappingProxyType({key: _contiguous(value) for key, value in mapping.items()})


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


def fused_csc_sampling_graph(
    csc_indptr: torch.Tensor,
    indices: torch.Tensor,
    node_type_offset: Optional[torch.Tensor] = None,
    type_per_edge: Optional[torch.Tensor] = None,
    node_type_to_id: Optional[Mapping[str, int]] = None,
    edge_type_to_id: Optional[Mapping[str, int]] = None,
    node_attributes: Optional[Mapping[str, torch.Tensor]] = None,
    edge_attributes: Optional[Mapping[str, torch.Tensor]] = None,
) -> CSCGraph:
    """GraphBolt's constructor of a graph from its CSC arrays: ``CSCGraph(csc_indptr,
    indices, ...)`` with the same arguments (validated as the constructor validates:
    e.g. a typed graph's ``type_per_edge`` must agree with its destinations' types)."""
    return CSCGraph(
        csc_indptr, indices, edge_attributes=edge_attributes, node_attributes=node_attributes,
        node_type_offset=node_type_offset, type_per_edge=type_per_edge, node_type_to_id=node_type_to_id,
        edge_type_to_id=edge_type_to_id,
    )  # fmt: skip
