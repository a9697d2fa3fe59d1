"""Building CSCGraph arrays from edge lists (behind the ``CSCGraph.from_*`` builders).

Every builder groups the edges by target with a stable sort, so each target's in-edges
keep their input order and ``original_edge_ids`` is the input position of each CSC
position. Index arrays get the smallest integer dtype that holds their values.
"""

from __future__ import annotations

import os
from itertools import accumulate
from typing import Mapping, Optional, Tuple

import numpy as np
import torch

from graphpipe._internal.checks import ID_DTYPES, check_int
from graphpipe._internal.safe_files import scratch_directory
from graphpipe.graph import storage
from graphpipe.graph.edge_types import NO_COLON_IN_TYPE_NAMES, parse_edge_type
from graphpipe.ops.csc_build import coo_id_range, coo_to_csc_chunked

__all__ = ["check_attribute", "coo_arrays", "coo_files_graph", "hetero_arrays", "smallest_index_dtype"]


def smallest_index_dtype(max_value: int) -> torch.dtype:
    """int32 when every value up to ``max_value`` fits, else int64."""
    return torch.int32 if max_value < 2**31 else torch.int64


def check_attribute(name: str, t: torch.Tensor, rows: int, kind: str = "edge") -> torch.Tensor:
    """``t`` after checking that the ``kind`` (``"edge"`` or ``"node"``) attribute ``name``
    is a tensor with ``rows`` rows (one per edge or node)."""
    if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.size(0) != rows:
        got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else f"a {type(t).__name__} (convert it with torch.as_tensor)"
        raise ValueError(f"CSCGraph: {kind} attribute '{name}' must be a torch.Tensor with num_{kind}s={rows} rows, got {got}")
    return t


def _group_by_target(dst: torch.Tensor, num_nodes: int) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``(indptr, perm)`` of int64 targets ``dst``: ``[num_nodes + 1]`` int64 and the
    stable order of the edges by target, or None when ``dst`` is already sorted (a stable
    sort of it is the identity: skip it, and the per-layer gather through
    ``original_edge_ids`` with it)."""
    perm = None if bool((dst[1:] >= dst[:-1]).all()) else torch.argsort(dst, stable=True)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0, out=indptr[1:])
    return indptr, perm


def _in_csc_order(t: torch.Tensor, perm: Optional[torch.Tensor]) -> torch.Tensor:
    """``t`` (indexed by input position) indexed by CSC position, in new memory."""
    return t.clone(memory_format=torch.contiguous_format) if perm is None else t[perm]


def coo_arrays(src, dst, num_nodes: Optional[int], edge_attributes: Optional[Mapping]) -> dict:
    """The arrays of :meth:`CSCGraph.from_coo` for the edges ``src -> dst``, by field name."""
    src = torch.as_tensor(src)
    dst = torch.as_tensor(dst)
    for name, t in (("src", src), ("dst", dst)):
        if t.dim() != 1 or t.dtype not in ID_DTYPES:
            raise ValueError(
                f"from_coo: `{name}` must be a 1-D integer tensor, got shape {tuple(t.shape)} and dtype {t.dtype}"
            )
    if src.numel() != dst.numel():
        raise ValueError(f"from_coo: `src` and `dst` must have the same length, got {src.numel()} and {dst.numel()}")
    max_id = int(torch.maximum(src.max(), dst.max())) if src.numel() else -1
    num_nodes = max_id + 1 if num_nodes is None else check_int(num_nodes, "num_nodes", "from_coo", minimum=0)
    if src.numel() and int(torch.minimum(src.min(), dst.min())) < 0:
        raise ValueError("from_coo: node ids must be >= 0")
    if max_id >= num_nodes:
        raise ValueError(
            f"from_coo: node id {max_id} out of range for num_nodes={num_nodes} (valid ids are 0..{num_nodes - 1})"
        )
    num_edges = src.numel()
    indptr, perm = _group_by_target(dst.to(torch.int64), num_nodes)
    return dict(
        indptr=indptr.to(smallest_index_dtype(num_edges)),
        indices=_in_csc_order(src, perm).to(smallest_index_dtype(max(num_nodes - 1, 0))),
        edge_attributes={
            name: _in_csc_order(check_attribute(name, t, num_edges), perm)
            for name, t in (edge_attributes or {}).items()
        },
        original_edge_ids=None if perm is None else perm.to(smallest_index_dtype(max(num_edges - 1, 0))),
    )


def hetero_arrays(
    edges: Mapping, num_nodes: Mapping[str, int], edge_attributes: Optional[Mapping], node_attributes: Optional[Mapping] = None
) -> dict:
    """The arrays of :meth:`CSCGraph.from_hetero_edges` by field name (the typed ones
    under ``typed``): the edge lists are concatenated in edge type id
    order, so the stable grouping by target leaves each target's in-edges ascending by
    edge type and, within a type, in input order."""
    where = "CSCGraph.from_hetero_edges"
    counts, typed_edges = _check_hetero_edges(edges, num_nodes, where)
    node_types, edge_types = sorted(counts), sorted(typed_edges)
    node_type_to_id = {t: i for i, t in enumerate(node_types)}
    offsets = list(accumulate((counts[t] for t in node_types), initial=0))
    srcs, dsts, type_ids, local_ids = [], [], [], []
    for t, name in enumerate(edge_types):
        src, dst, src_type, dst_type = typed_edges[name]
        srcs.append(src.to(torch.int64) + offsets[node_type_to_id[src_type]])
        dsts.append(dst.to(torch.int64) + offsets[node_type_to_id[dst_type]])
        type_ids.append(torch.full((src.numel(),), t, dtype=torch.int64))
        local_ids.append(torch.arange(src.numel()))
    src, dst = torch.cat(srcs), torch.cat(dsts)
    total_nodes, num_edges = offsets[-1], src.numel()
    indptr, perm = _group_by_target(dst, total_nodes)
    attributes = {
        attr: _in_csc_order(_typed_edge_attribute(attr, per_type, typed_edges, edge_types, where), perm)
        for attr, per_type in (edge_attributes or {}).items()
    }
    max_local = max((e[0].numel() for e in typed_edges.values()), default=0)
    nodes = {attr: _typed_node_attribute(attr, per_type, counts, node_types, where) for attr, per_type in (node_attributes or {}).items()}
    return dict(
        node_attributes=nodes,
        indptr=indptr.to(smallest_index_dtype(num_edges)),
        indices=_in_csc_order(src, perm).to(smallest_index_dtype(max(total_nodes - 1, 0))),
        edge_attributes=attributes,
        original_edge_ids=_in_csc_order(torch.cat(local_ids), perm).to(smallest_index_dtype(max(max_local - 1, 0))),
        typed=dict(
            node_type_offset=torch.tensor(offsets, dtype=torch.int64),
            type_per_edge=_in_csc_order(torch.cat(type_ids), perm).to(torch.uint8 if len(edge_types) <= 256 else torch.int32),
            node_type_to_id=node_type_to_id,
            edge_type_to_id={t: i for i, t in enumerate(edge_types)},
        ),
    )


def _filler(like: torch.Tensor, rows: int) -> torch.Tensor:
    """``rows`` rows shaped and typed as ``like``'s, for a type an attribute leaves out: the
    dtype's minimum (int64: UNTIMED, no time for temporal sampling), NaN (floats), False."""
    fill = float("nan") if like.is_floating_point() else False if like.dtype == torch.bool else torch.iinfo(like.dtype).min
    return torch.full((rows,) + tuple(like.shape[1:]), fill, dtype=like.dtype)


def _typed_node_attribute(attr: str, per_type, counts: Mapping[str, int], node_types: list, where: str) -> torch.Tensor:
    """``[num_nodes, ...]``: node attribute ``attr`` given per node type, in global id
    order; a type left out is filled (:func:`_filler`)."""
    if not isinstance(per_type, Mapping) or not per_type:
        raise ValueError(f"{where}: node_attributes[{attr!r}] must be a dict node type -> [n, ...] tensor, got {type(per_type).__name__}")
    unknown = [t for t in per_type if t not in counts]
    if unknown:
        raise ValueError(f"{where}: node_attributes[{attr!r}] names node types {unknown} the graph lacks; its node types: {node_types}")
    first = next(iter(per_type.values()))
    pieces = []
    for t in node_types:
        value = per_type.get(t)
        if value is None:
            value = _filler(first, counts[t])
        if not isinstance(value, torch.Tensor) or value.shape[:1] != (counts[t],) or value.shape[1:] != first.shape[1:] or value.dtype != first.dtype:
            raise ValueError(
                f"{where}: node_attributes[{attr!r}][{t!r}] must be a [{counts[t]}, ...] tensor like the other types' "
                f"({first.dtype}, {list(first.shape[1:])} per node)"
            )
        pieces.append(value)
    return torch.cat(pieces)


def _check_hetero_edges(edges, num_nodes, where: str):
    """``(node type -> count, "src:rel:dst" -> (src, dst, src_type, dst_type))`` after
    checking the types and that every id is within its node type's count."""
    if not isinstance(edges, Mapping) or not edges:
        raise ValueError(f"{where}: `edges` must be a non-empty dict of edge type -> edge list, got {edges!r}")
    if not isinstance(num_nodes, Mapping) or not num_nodes:
        raise ValueError(f"{where}: `num_nodes` must be a non-empty dict of node type -> count, got {num_nodes!r}")
    counts = {str(t): check_int(n, f"num_nodes['{t}']", where, minimum=0) for t, n in num_nodes.items()}
    for node_type in counts:
        if ":" in node_type:
            raise ValueError(f"{where}: node type '{node_type}' in `num_nodes` contains ':'; {NO_COLON_IN_TYPE_NAMES}")
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
                    f"known node types: {sorted(counts)}"
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
    return counts, typed_edges


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
        if ids.dim() != 1 or ids.dtype not in ID_DTYPES:
            raise ValueError(f"{where}: `{name}` {end} must be a 1-D integer tensor, got {ids.dtype} of shape {tuple(ids.shape)}")
    if src.numel() != dst.numel():
        raise ValueError(f"{where}: `{name}` has {src.numel()} sources and {dst.numel()} targets")
    return src, dst


def _typed_edge_attribute(attr: str, per_type, typed_edges: dict, edge_types: list, where: str) -> torch.Tensor:
    """One edge attribute given per edge type, concatenated in edge type id order; a type
    left out is filled (:func:`_filler`: edge times on some types only, as pyg-lib's)."""
    if not isinstance(per_type, Mapping) or not per_type:
        raise ValueError(f"{where}: `edge_attributes['{attr}']` must be a non-empty dict of edge type -> tensor")
    given = {"{}:{}:{}".format(*parse_edge_type(t, where)): v for t, v in per_type.items()}
    unknown = sorted(t for t in given if t not in typed_edges)
    if unknown:
        raise ValueError(f"{where}: `edge_attributes['{attr}']` names edge types {unknown} the graph lacks; its edge types: {edge_types}")
    checked = {t: check_attribute(f"{attr}['{t}']", torch.as_tensor(v), typed_edges[t][0].numel()) for t, v in given.items()}
    (first_type, first), *others = checked.items()
    for name, piece in others:
        if piece.dtype != first.dtype or piece.shape[1:] != first.shape[1:]:
            raise ValueError(
                f"{where}: `edge_attributes['{attr}']['{name}']` is {piece.dtype} with {list(piece.shape[1:])} per edge, "
                f"unlike '{first_type}' ({first.dtype}, {list(first.shape[1:])}): give every edge type the same dtype and row shape"
            )
    return torch.cat([checked[t] if t in checked else _filler(first, typed_edges[t][0].numel()) for t in edge_types])


def coo_files_graph(cls, path, src, dst, num_nodes: Optional[int], chunk_edges: int, block_edges: int):
    """:meth:`CSCGraph.from_coo_files`: build into memory maps in a scratch directory
    beside ``path``, write the graph file, return it mapped."""
    where = "CSCGraph.from_coo_files"
    chunk_edges = check_int(chunk_edges, "chunk_edges", where, minimum=1)
    block_edges = check_int(block_edges, "block_edges", where, minimum=1)
    destination, directory = storage.output_file(path, where)
    src_array, dst_array = _open_edge_files(src, dst, where)
    num_nodes = _num_nodes_of_files(src_array, dst_array, num_nodes, chunk_edges, where)
    num_edges = src_array.shape[0]
    index_dtype = np.int32 if smallest_index_dtype(max(num_nodes - 1, 0)) == torch.int32 else np.int64
    edge_id_dtype = np.int32 if smallest_index_dtype(max(num_edges - 1, 0)) == torch.int32 else np.int64
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
            level="indptr",  # ids were range-checked above; the fill places each edge once
        )
        storage.write(graph, destination, scratch)
        del graph, indices, edge_ids, positions
    return cls.load(destination, mmap=True)


def _open_edge_files(src, dst, where: str) -> Tuple[np.ndarray, np.ndarray]:
    """The mapped ``[num_edges]`` source and target arrays of ``src`` (and ``dst``)."""
    src_array = _open_edge_file(src, "src", where)
    if dst is None:
        if src_array.ndim != 2 or src_array.shape[0] != 2:
            raise ValueError(
                f"{where}: without `dst`, `src` ('{os.fspath(src)}') must hold a [2, num_edges] array, "
                f"got shape {src_array.shape}"
            )
        return src_array[0], src_array[1]
    dst_array = _open_edge_file(dst, "dst", where)
    for name, array, file in (("src", src_array, src), ("dst", dst_array, dst)):
        if array.ndim != 1:
            raise ValueError(f"{where}: `{name}` ('{os.fspath(file)}') must hold a 1-D array, got shape {array.shape}")
    if src_array.shape != dst_array.shape:
        raise ValueError(
            f"{where}: `src` and `dst` must have the same length, got {src_array.shape[0]} "
            f"('{os.fspath(src)}') and {dst_array.shape[0]} ('{os.fspath(dst)}')"
        )
    return src_array, dst_array


def _open_edge_file(file, name: str, where: str) -> np.ndarray:
    """Map the ``.npy`` file ``file`` (whatever its name: its content is checked) read-only,
    checking that it holds integers."""
    if not isinstance(file, (str, os.PathLike)):
        raise ValueError(f"{where}: `{name}` must be the path of a .npy file, got {file!r}")
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{where}: `{name}`: no such file: '{os.fspath(file)}'")
    if not is_npy_file(file):
        raise ValueError(
            f"{where}: `{name}` must be the path of a .npy file (numpy.save's format), got '{os.fspath(file)}', "
            f"which does not begin as one"
        )
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


def is_npy_file(file) -> bool:
    """Whether ``file`` begins with the ``.npy`` format's magic bytes."""
    prefix = np.lib.format.MAGIC_PREFIX
    with open(file, "rb") as f:
        return f.read(len(prefix)) == prefix


def _num_nodes_of_files(src: np.ndarray, dst: np.ndarray, num_nodes, chunk_edges: int, where: str) -> int:
    """``num_nodes`` (given, or ``max id + 1``) after checking every id is in range and
    that its ``indptr`` fits in memory."""
    lo, hi = coo_id_range(src, dst, chunk_edges)
    if lo < 0:
        raise ValueError(f"{where}: node ids must be >= 0, the edge files hold {lo}")
    inferred = num_nodes is None
    num_nodes = check_int(hi + 1 if inferred else num_nodes, "num_nodes", where, minimum=0)
    if hi >= num_nodes:
        raise ValueError(
            f"{where}: node id {hi} out of range for num_nodes={num_nodes} (valid ids are 0..{num_nodes - 1})"
        )
    _check_indptr_fits(num_nodes, hi if inferred else None, where)
    return num_nodes


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
