"""CSCFormat and SampledSubgraph: one sampled GNN layer, as the samplers and
:meth:`CSCGraph.sample_neighbors` return it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Dict, NamedTuple, Optional, Tuple, Union

import torch

from graphpipe._internal.checks import ID_DTYPES, check_bool
from graphpipe._internal.devices import device_or_cpu
from graphpipe._internal.reprs import fields_repr
from graphpipe.graph.edge_types import parse_edge_type

__all__ = ["CSCFormat", "HOMO_EDGE_TYPE", "HOMO_NODE_TYPE", "PyGLayerData", "PyGLayerHeteroData", "SampledSubgraph", "attributes_set", "by_type", "checked_pairs", "field_names", "kept_edges", "map_tensors", "select_edges"]

# Edges given to ``exclude_edges``: ``[N, 2]`` pairs, GraphBolt 2.1's ``(sources, destinations)``, or a dict by edge type.
EdgesToExclude = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor], Dict[str, Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]]]

# The one node type and edge type of an untyped graph seen as a typed one (GraphBolt's names).
HOMO_NODE_TYPE = "_N"
HOMO_EDGE_TYPE = "_N:_E:_N"


@dataclass
class CSCFormat:
    """A CSC adjacency over local ids: ``indices[indptr[j]:indptr[j+1]]`` are the
    sources of destination ``j``. ``indptr``: ``[num_dst + 1]`` int64;
    ``indices``: ``[num_edges]`` int64 local source ids."""

    indptr: torch.Tensor
    indices: torch.Tensor

    def __repr__(self) -> str:
        return fields_repr(self)


class PyGLayerData(NamedTuple):
    """A layer's input to a PyG layer (GraphBolt's): ``x`` ``(h_src, h_dst)``,
    ``edge_index`` ``[2, num_edges]`` int64, ``size`` ``(num_src, num_dst)``."""

    x: Tuple[torch.Tensor, torch.Tensor]
    edge_index: torch.Tensor
    size: Tuple[int, int]


class PyGLayerHeteroData(NamedTuple):
    """A typed layer's input to a PyG heterogeneous layer (GraphBolt's): ``x``
    ``(h_src by node type, h_dst by node type)``, ``edge_index`` and ``size`` by edge type."""

    x: Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]
    edge_index: Dict[str, torch.Tensor]
    size: Dict[str, Tuple[int, int]]


@dataclass
class SampledSubgraph:
    """One sampled GNN layer (a "block"), compacted to local ids.

    Destination nodes are a prefix of the source nodes: local id ``j < num_dst_nodes``
    is the same node as a destination and as a source, so ``h[:num_dst_nodes]`` of the
    layer's input is the destinations' own representation.

    Attributes:
        sampled_csc: local CSC, ``indptr`` ``[num_dst + 1]`` int64 and ``indices``
            ``[num_edges]`` int64 in ``[0, num_src)``.
        original_row_node_ids: ``[num_src]`` int64 global ids of the source nodes.
        original_column_node_ids: ``[num_dst]`` int64 global ids of the destination
            nodes (equal to ``original_row_node_ids[:num_dst]``).
        original_edge_ids: ``[num_edges]`` int64 ids of the sampled edges: the positions
            of the edges in the ``edge_index`` / COO lists the graph was built from
            (``CSCGraph.map_edge_ids`` of their CSC positions), so edge features in the
            user's order are indexed by them.
        edge_weights: ``[num_edges]`` float32 or None. Samplers that weight edges (LABOR)
            set it so that ``sum_e w_e * h_src(e)`` per destination is an unbiased
            estimate of the full-neighbourhood mean.
    """

    sampled_csc: CSCFormat
    original_row_node_ids: torch.Tensor
    original_column_node_ids: torch.Tensor
    original_edge_ids: torch.Tensor
    edge_weights: Optional[torch.Tensor] = None

    def __repr__(self) -> str:
        """Fields with the shapes and dtypes of their tensors, not their values."""
        return fields_repr(self)

    @property
    def is_heterogeneous(self) -> bool:
        """Whether the fields are dicts by node type / edge type (a typed graph's layer)."""
        return isinstance(self.sampled_csc, dict)

    @property
    def num_src_nodes(self) -> Union[int, Dict[str, int]]:
        """The number of source nodes (per node type for a typed layer)."""
        return _per_type(self.original_row_node_ids, torch.Tensor.numel)

    @property
    def num_dst_nodes(self) -> Union[int, Dict[str, int]]:
        """The number of destination nodes (per node type for a typed layer)."""
        return _per_type(self.original_column_node_ids, torch.Tensor.numel)

    @property
    def num_edges(self) -> Union[int, Dict[str, int]]:
        """The number of sampled edges (per edge type for a typed layer)."""
        return _per_type(self.sampled_csc, lambda csc: csc.indices.numel())

    def edge_index(self) -> Union[torch.Tensor, Dict[str, torch.Tensor]]:
        """``[2, num_edges]`` int64 local (source, destination) ids, CSC order; for a
        typed layer ``{edge type: [2, num_edges_of_type]}``, sources local to the source
        type's ``original_row_node_ids`` and destinations to the destination type's
        ``original_column_node_ids``."""
        return _per_type(self.sampled_csc, _csc_edge_index)

    def to_pyg(self, x: Union[torch.Tensor, Dict[str, torch.Tensor]]) -> Union[PyGLayerData, PyGLayerHeteroData]:
        """The layer as a PyG layer's arguments (GraphBolt's ``to_pyg``): ``x`` the
        layer's input, ``[num_src, ...]`` rows of its sources (a dict by node type for a
        typed layer); the destinations' rows are its prefix, ``x[:num_dst]``. For layers
        of ``layout="block"`` batches (GraphBolt's): a ``layout="pyg"`` layer holds in-edges
        only of the nodes its hop added, so give that batch to a model whole with
        :meth:`MiniBatch.to_pyg`."""
        if not self.is_heterogeneous:
            if not isinstance(x, torch.Tensor) or x.size(0) != self.num_src_nodes:
                raise ValueError(f"SampledSubgraph.to_pyg: `x` must be the {self.num_src_nodes} source nodes' rows, got {_rows(x)}")
            num_dst = self.num_dst_nodes
            return PyGLayerData((x, x[:num_dst]), self.edge_index(), (x.size(0), num_dst))
        num_src, num_dst = self.num_src_nodes, self.num_dst_nodes
        types = {t for etype in self.sampled_csc for t in parse_edge_type(etype)[::2]}
        got = {t: _rows(x.get(t)) for t in sorted(types)} if isinstance(x, dict) else type(x).__name__
        if not isinstance(x, dict) or any(got[t] != num_src[t] for t in types):
            want = {t: num_src[t] for t in sorted(types)}
            raise ValueError(f"SampledSubgraph.to_pyg: `x` must be a dict node type -> source nodes' rows ({want}), got {got}")
        x_dst, sizes = {}, {}
        for etype in self.sampled_csc:
            src_type, _, dst_type = parse_edge_type(etype)
            x_dst[dst_type] = x[dst_type][: num_dst[dst_type]]
            sizes[etype] = (x[src_type].size(0), num_dst[dst_type])
        return PyGLayerHeteroData((x, x_dst), self.edge_index(), sizes)

    def to(self, device, non_blocking: bool = False) -> "SampledSubgraph":
        """The layer with every tensor on ``device`` (GraphBolt's; without CUDA a CUDA
        device warns once and the layer stays on the CPU)."""
        device = device_or_cpu(device, "SampledSubgraph.to('cuda'): CUDA is not available; the layer stays on the CPU", "SampledSubgraph.to")
        return map_tensors(self, lambda t: t.to(device, non_blocking=non_blocking))

    def exclude_edges(self, edges: EdgesToExclude, assume_num_node_within_int32: bool = True) -> "SampledSubgraph":
        """GraphBolt's: the layer without every sampled edge ``u -> v`` (parallel ones
        included) whose pair of global ids ``(u, v)`` is in ``edges``.

        ``edges``: ``[N, 2]`` integer ``(source, destination)`` pairs, or GraphBolt 2.1's
        ``(sources, destinations)``, ``[N]`` each; for a typed layer a dict edge type ->
        those, in type-local ids (an edge type absent from ``edges`` keeps its edges; one
        the layer lacks is ignored). The nodes (``original_row_node_ids``,
        ``original_column_node_ids``) are kept as they are, ``sampled_csc`` is rebuilt, and
        ``original_edge_ids`` and ``edge_weights`` keep the entries of the edges kept, in
        order (LABOR's weights are not rescaled). ``assume_num_node_within_int32``: True
        (GraphBolt's default) refuses ids outside ``[0, 2**32)``, whose pairs do not fit
        ``u << 32 | v`` keys; False matches any int64 ids (GraphBolt 2.1 raises there)."""
        return select_edges(self, kept_edges(self, edges, assume_num_node_within_int32))

    def as_typed(self) -> "SampledSubgraph":
        """The layer with every field by type: itself if typed, an untyped layer as the
        one-type case (node type ``"_N"``, edge type ``"_N:_E:_N"``, as GraphBolt's
        ``convert_to_hetero``), sharing its tensors."""
        if self.is_heterogeneous:
            return self
        return SampledSubgraph(
            {HOMO_EDGE_TYPE: self.sampled_csc},
            {HOMO_NODE_TYPE: self.original_row_node_ids},
            {HOMO_NODE_TYPE: self.original_column_node_ids},
            {HOMO_EDGE_TYPE: self.original_edge_ids},
            None if self.edge_weights is None else {HOMO_EDGE_TYPE: self.edge_weights},
        )


def by_type(value, key: str) -> dict:
    """``value`` as a dict by type: itself if it is one, else ``{key: value}`` (the value
    of an untyped batch, whose one type is ``key``)."""
    return value if isinstance(value, dict) else {key: value}


def _per_type(value, fn):
    """``fn(value)``, or ``{key: fn(item)}`` for a dict by type."""
    if isinstance(value, dict):
        return {key: fn(item) for key, item in value.items()}
    return fn(value)


def attributes_set(obj) -> dict:
    """The attributes of a dataclass instance that are not its fields (set by a user)."""
    names = field_names(type(obj))
    return {name: value for name, value in getattr(obj, "__dict__", {}).items() if name not in names}


@functools.lru_cache(maxsize=None)
def field_names(cls: type) -> frozenset:
    """The field names of dataclass ``cls`` (read per batch: looked up once per class)."""
    return frozenset(f.name for f in fields(cls))


def map_tensors(obj, fn, user: bool = False):
    """Apply ``fn`` to every tensor inside a (nested) MiniBatch / SampledSubgraph, and in
    the tensors, dicts, lists, tuples and dataclasses a user's stage set on them as
    attributes (``user``: a dataclass with a field ``replace`` cannot set, e.g. a graph, and
    other objects are kept as they are)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if is_dataclass(obj) and not isinstance(obj, type) and (not user or all(f.init for f in fields(obj))):
        new = replace(obj, **{f.name: map_tensors(getattr(obj, f.name), fn) for f in fields(obj)})
        new.__dict__.update({name: map_tensors(value, fn, True) for name, value in attributes_set(obj).items()})
        return new
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn, user) for k, v in obj.items()}
    if isinstance(obj, list) or type(obj) is tuple:
        return type(obj)(map_tensors(v, fn, user) for v in obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(map_tensors(v, fn, user) for v in obj))
    return obj


def _rows(x) -> object:
    """How many rows ``x`` has, for an error message: its length, or its type."""
    return x.size(0) if isinstance(x, torch.Tensor) and x.dim() else type(x).__name__


def _csc_edge_index(csc: CSCFormat) -> torch.Tensor:
    """``[2, num_edges]`` int64 local (source, destination) ids of ``csc``, CSC order."""
    degrees = csc.indptr.diff().to(torch.int64)
    dst = torch.repeat_interleave(degrees, output_size=csc.indices.numel())  # j, degree(j) times
    return torch.stack([csc.indices, dst])


def kept_edges(layer: SampledSubgraph, edges: EdgesToExclude, within_int32: bool = True, where: str = "SampledSubgraph.exclude_edges"):
    """``[K]`` int64 ascending positions of ``layer``'s edges not in ``edges`` (see
    :meth:`SampledSubgraph.exclude_edges`); typed: a dict by edge type, None for an edge
    type that keeps all its edges."""
    check_bool(within_int32, "assume_num_node_within_int32", where)
    if isinstance(edges, dict) != layer.is_heterogeneous:
        want = "a dict edge type -> [N, 2] pairs (the layer is typed)" if layer.is_heterogeneous else "[N, 2] pairs (the layer is untyped)"
        raise TypeError(f"{where}: `edges` must be {want}, got {type(edges).__name__}")
    if not layer.is_heterogeneous:
        return _kept(layer.sampled_csc, layer.original_row_node_ids, layer.original_column_node_ids, checked_pairs(edges, "edges", where), within_int32, where)
    kept = {}
    for etype, csc in layer.sampled_csc.items():
        if etype not in edges:
            kept[etype] = None
            continue
        src_type, _, dst_type = parse_edge_type(etype, where)
        pairs = checked_pairs(edges[etype], f"edges[{etype!r}]", where)
        rows, columns = ((ids or {}).get(node_type) for ids, node_type in ((layer.original_row_node_ids, src_type), (layer.original_column_node_ids, dst_type)))
        kept[etype] = _kept(csc, rows, columns, pairs, within_int32, where)
    return kept


def select_edges(layer: SampledSubgraph, index) -> SampledSubgraph:
    """``layer`` with only the edges at ``index`` (:func:`kept_edges`' answer): the nodes
    as they are, the CSC, edge ids and weights of those edges."""

    def pick(value, positions):
        if value is None or positions is None:
            return value
        if isinstance(value, CSCFormat):  # positions are ascending: a destination's first kept edge
            return CSCFormat(torch.searchsorted(positions, value.indptr).to(value.indptr.dtype), value.indices[positions])
        return value[positions]

    if not layer.is_heterogeneous:
        fields = {name: pick(getattr(layer, name), index) for name in ("sampled_csc", "original_edge_ids", "edge_weights")}
    else:
        fields = {
            name: None if values is None else {etype: pick(value, index.get(etype)) for etype, value in values.items()}
            for name, values in (("sampled_csc", layer.sampled_csc), ("original_edge_ids", layer.original_edge_ids), ("edge_weights", layer.edge_weights))
        }
    new = replace(layer, **fields)
    new.__dict__.update(attributes_set(layer))  # attributes a user's stage set stay, as through .to()
    return new


def checked_pairs(edges, name: str, where: str) -> torch.Tensor:
    """``edges`` (``[N, 2]`` pairs or a ``(sources, destinations)`` tuple of ``[N]``) as
    ``[N, 2]`` int64, or a TypeError / ValueError naming ``name``."""
    if isinstance(edges, tuple) and len(edges) == 2 and all(isinstance(t, torch.Tensor) and t.dim() == 1 for t in edges):
        if edges[0].shape != edges[1].shape or edges[0].dtype != edges[1].dtype:
            raise ValueError(f"{where}: `{name}` (sources, destinations) must have one shape and dtype, got {_shapes(edges)}")
        edges = torch.stack(edges, dim=1)
    if not isinstance(edges, torch.Tensor) or edges.dim() != 2 or edges.size(1) != 2:
        raise ValueError(f"{where}: `{name}` must be [N, 2] (source, destination) node pairs or a (sources, destinations) tuple, got {_shapes(edges)}")
    if edges.dtype not in ID_DTYPES:
        raise TypeError(f"{where}: `{name}` must hold integer node ids (int64, int32, int16, int8 or uint8), got dtype {edges.dtype}")
    return edges.to(torch.int64)


def _shapes(value) -> str:
    """The shapes in ``value`` (a tensor or a tuple), or its type, for an error message."""
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_shapes(v) for v in value) + ")"
    return type(value).__name__


def _kept(csc: CSCFormat, rows: Optional[torch.Tensor], columns: Optional[torch.Tensor], pairs: torch.Tensor, within_int32: bool, where: str) -> torch.Tensor:
    """``[K]`` int64 ascending positions of the edges of ``csc`` (local ids of ``rows`` /
    ``columns``, global ids; None: the local ids are the ids, as in GraphBolt) whose
    global pair is not one of ``pairs`` ``[N, 2]``."""
    pairs = pairs.to(csc.indices.device)
    src, dst = csc.indices, _csc_edge_index(csc)[1]
    src, dst = (ids if local is None else local[ids] for local, ids in ((rows, src), (columns, dst)))
    src, dst = src.to(torch.int64), dst.to(torch.int64)  # int32 would wrap at << 32
    if all(ids.numel() == 0 or (int(ids.min()) >= 0 and int(ids.max()) < 2**32) for ids in (src, dst, pairs)):
        keys, excluded = src << 32 | dst, pairs[:, 0] << 32 | pairs[:, 1]
    elif within_int32:
        raise ValueError(f"{where}: node ids outside [0, 2**32) (in `edges` or the layer); pass assume_num_node_within_int32=False")
    else:  # number the ids of each side densely, then key the pairs by those numbers
        _, src_ids = torch.unique(torch.cat([src, pairs[:, 0]]), return_inverse=True)
        sides, dst_ids = torch.unique(torch.cat([dst, pairs[:, 1]]), return_inverse=True)
        all_keys = src_ids * sides.numel() + dst_ids
        keys, excluded = all_keys[: src.numel()], all_keys[src.numel() :]
    return torch.nonzero(~torch.isin(keys, excluded)).view(-1)
