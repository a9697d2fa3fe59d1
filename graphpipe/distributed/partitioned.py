"""Partitioned datasets: each rank holds only the vertices it owns, their in-edges and rows.

:func:`partition` splits a graph, its features and item sets into ``num_parts``
directories; :func:`load_partition` maps one of them. A part's graph is a compact
:class:`~graphpipe.CSCGraph` over the GLOBAL ids: its ``indptr`` has one row per owned
vertex (``n_r + 1`` entries, rows in ascending global id order, ``indptr_nodes`` naming
them), so a part's size does not grow with the whole graph's node count; only the owned
vertices have in-edges, in the whole graph's order, with their global source ids, the
user's edge ids (within their type on typed graphs), their edge attributes and types.
Seeds, samples, edge ids and features stay in global ids: the samplers translate a
layer's destinations to rows once per layer (``CSCGraph.in_edge_rows``). Cooperative samplers sample only the
in-edges of the vertices a rank owns and fetchers read only its rows, so a rank whose
:class:`~graphpipe.DistributedItemSampler` uses the part's :class:`Partition` samples
and fetches exactly what it would over the whole dataset; with
``DistributedItemSampler.from_part(part, split, batch_size)`` it also holds only the
part's items.

Layout of ``out_dir``::

    manifest.json            format, version, counts, what each file holds, sizes and CRC-32s
    owners.npy               [num_nodes] owner per global id (not for method="hash"): uint8 up to
                             256 parts, then int16, int32 (older partitions: int64, still read)
    items-<s>-<t>-<f>.npy    every item (field f of type t of split s), for load_item_sets only
    part-<r>/graph.pt        the part's compact graph (CSCGraph.save: checksummed arrays)
    part-<r>/nodes.npy       [n_r] int64 owned global ids, ascending
    part-<r>/node-feat-<k>.npy, edge-feat-<k>.npy, edge-ids-<t>.npy   owned feature rows
    part-<r>/items-<s>-<t>-<f>.npy, items-<s>-<t>-ids.npy             owned items

Files are plain ``.npy`` arrays (read with ``allow_pickle=False``) and JSON, written
through a private scratch directory and renamed into place; the manifest is written last.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from graphpipe._internal.checks import as_int, check_int
from graphpipe._internal.safe_files import publish, real_directory, regular_file, scratch_directory
from graphpipe.batch.item_set import HeteroItemSet, ItemSet
from graphpipe.distributed.partition import Partition, owner_dtype
from graphpipe.features.part import OwnedRowsFeature, file_checksum
from graphpipe.features.store import FeatureStore
from graphpipe.graph.csc_graph import CSCGraph, check_graph, smallest_index_dtype
from graphpipe.graph.edge_types import parse_edge_type

__all__ = ["GraphPart", "check_part_owners", "check_whole_graph", "load_item_sets", "load_partition", "metis_assignment", "part_of", "partition"]

FORMAT = "graphpipe.partition"
VERSION = 2  # 2: compact part graphs (version 1's indptr had a row per node of the whole graph)
_CHUNK_ROWS = 1 << 16  # feature rows copied at a time
# Ids hashed, edge types counted, part edges gathered at a time: their int64
# temporaries (a few arrays of 8 bytes an id) stay near 2 MB each whatever the graph's size.
_CHUNK = 1 << 18
_MANIFEST_LIMIT = 64 << 20
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_AGAIN = "partition the dataset again"
ItemSets = Mapping[str, Union[ItemSet, HeteroItemSet]]
# The part graphs load_partition mapped in this process: graph file -> [its part, the
# partitions found equal to the part's] (a cooperative sampler checks its own once).
_LOADED_PARTS: Dict[str, list] = {}


def partition(
    graph: CSCGraph,
    features: Optional[FeatureStore],
    item_sets: Optional[ItemSets],
    num_parts: int,
    out_dir: Union[str, os.PathLike],
    method: Union[str, torch.Tensor, np.ndarray] = "hash",
) -> dict:
    """Write ``graph``, ``features`` and ``item_sets`` split into ``num_parts`` parts.

    Out of core: parts are written one at a time, each part's edges copied ``_CHUNK`` at a
    time into memory-mapped files, so with a mapped graph and features the memory used is
    about ``num_nodes`` bytes of owners, a part's owned ids, its ``[n_r + 1]`` indptr
    and item sets, and a few tens of MB, whatever the number of edges (METIS excepted).
    Every format graphpipe reads out of core gives such a graph:
    ``CSCGraph.load(path, mmap=True)``; edge lists in ``.npy`` files through
    ``CSCGraph.from_coo_files(path, src, dst)`` (a mapped CSC built in bounded memory,
    whose edge ids are the rows of the files); an ``OnDiskDataset`` as
    ``partition(ds.graph, ds.feature, {"train": ds.tasks[0].train_set, ...}, ...)``
    (features with ``in_memory: false`` stay mapped).

    Args:
        graph: the whole graph, in memory or mapped (see above).
        features: node and edge features (every row), or None. A table may have more
            rows than its type has nodes (edges): padding, as a whole-graph FeatureStore
            allows; rows past them are never sampled and are not written.
        item_sets: split name -> ItemSet / HeteroItemSet (``{"train": ...}``), or None.
            Node seeds go to their owner; node pairs (``[N, 2]`` seeds) to the owner of
            their destination (the second column), with their other fields.
        num_parts: number of parts (ranks), ``>= 1``.
        out_dir: a directory (created if missing; not a symlink).
        method: ``"hash"`` (:class:`Partition`'s hash), ``"metis"`` (METIS on the
            symmetrised graph, fewer cut edges; ``pip install 'graphpipe-gnn[metis]'``;
            the one method not out of core: pymetis needs that adjacency in memory, two
            int64 ids per edge and their temporaries; for a graph larger than memory,
            compute owners elsewhere and pass them), or a ``[num_nodes]`` integer tensor or numpy array
            (e.g. pymetis' membership): the owner of every global id (stored as uint8 up to 256 parts).

    Returns:
        The manifest written to ``out_dir/manifest.json`` (a dict), with ``cut_edges``:
        the edges whose source and destination have different owners.
    """
    graph = check_graph(graph, "graphpipe.distributed.partition")
    if graph.indptr_nodes is not None and graph.indptr.numel() != graph.total_num_nodes + 1:
        raise ValueError(
            f"graphpipe.distributed.partition: `graph` holds the in-edges of only {graph.indptr.numel() - 1} of its "
            f"{graph.total_num_nodes} nodes (`indptr_nodes`: a part of a partitioned dataset); partition the whole graph"
        )
    num_parts = check_int(num_parts, "num_parts", "graphpipe.distributed.partition", minimum=1)
    if features is not None and not isinstance(features, FeatureStore):
        raise TypeError(
            f"graphpipe.distributed.partition: `features` must be a FeatureStore or None, got {type(features).__name__}"
        )
    item_sets = _checked_item_sets(item_sets)
    owners, method_name = _owners(graph, features, num_parts, method)
    item_owners = {split: _item_owners(graph, split, item_set, owners) for split, item_set in item_sets.items()}
    manifest = _manifest_head(graph, features, item_sets, num_parts, method_name)  # checks the features
    out_dir = real_directory(out_dir, "graphpipe.distributed.partition: `out_dir`", create=True)
    manifest_path = os.path.join(out_dir, "manifest.json")
    if regular_file(manifest_path):
        os.unlink(manifest_path)  # the old parts are being replaced
    if method_name != "hash":
        manifest["owners"] = _write_array(out_dir, "owners.npy", owners.numpy())
    manifest["item_files"] = _write_items(item_sets, None, None, out_dir)
    for rank in range(num_parts):
        part_dir = real_directory(os.path.join(out_dir, f"part-{rank}"), "graphpipe.distributed.partition", create=True)
        owned = torch.nonzero(owners == rank).flatten()
        files, part_graph, cut = _write_graph(graph, owners, owned, rank, part_dir)
        files.update(_write_features(features, manifest, part_graph, owned, part_dir))
        files.update(_write_items(item_sets, item_owners, rank, part_dir))
        manifest["parts"].append({"num_nodes": owned.numel(), "num_edges": part_graph.total_num_edges, "files": files})
        manifest["cut_edges"] += cut
    with scratch_directory(out_dir, "graphpipe.distributed.partition: `out_dir`") as scratch:
        written = os.path.join(scratch, "manifest.json")
        with open(written, "w") as f:
            json.dump(manifest, f, indent=1)
        publish(written, manifest_path)  # last: a partition stopped before this has no manifest
    return manifest


def _checked_item_sets(item_sets) -> Dict[str, Union[ItemSet, HeteroItemSet]]:
    if item_sets is None:
        return {}
    if not isinstance(item_sets, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (ItemSet, HeteroItemSet)) for k, v in item_sets.items()
    ):
        raise TypeError(
            "graphpipe.distributed.partition: `item_sets` must be a dict of split name -> ItemSet or HeteroItemSet "
            f"(e.g. {{'train': train_set}}), or None; got {item_sets!r}"
        )
    for split, item_set in item_sets.items():
        for key, one in _by_type(item_set):
            if one.names is None or one.field("seeds") is None:
                raise ValueError(f"graphpipe.distributed.partition: `item_sets['{split}']` ({key}) has no field named 'seeds'")
    return dict(item_sets)


def _owners(graph: CSCGraph, features, num_parts: int, method) -> Tuple[torch.Tensor, str]:
    """``([num_nodes] owner per global id, of :func:`owner_dtype` (uint8 up to 256 parts), method name)``."""
    num_nodes = graph.total_num_nodes
    if isinstance(method, np.ndarray):
        if method.dtype.kind not in "iu":
            raise ValueError(
                f"graphpipe.distributed.partition: `method` as an array must hold integer owners, got dtype {method.dtype}"
            )
        method = torch.from_numpy(np.ascontiguousarray(method, dtype=np.int64))
    if isinstance(method, torch.Tensor):
        if method.dim() != 1 or method.numel() != num_nodes:
            raise ValueError(
                f"graphpipe.distributed.partition: `method` as a tensor must be [num_nodes] = [{num_nodes}] owners, "
                f"got shape {tuple(method.shape)}"
            )
        try:
            return Partition(num_parts, method).assignment, "assignment"
        except ValueError as error:
            raise ValueError(f"graphpipe.distributed.partition: `method`: {error}") from None
    if method == "hash":
        hashed, owners = Partition(num_parts), torch.empty(num_nodes, dtype=owner_dtype(num_parts))
        for start in range(0, num_nodes, _CHUNK):
            owners[start : start + _CHUNK] = hashed.owner(torch.arange(start, min(start + _CHUNK, num_nodes)))
        return owners, "hash"
    if method == "metis":
        return Partition(num_parts, metis_assignment(graph, num_parts, _bytes_per_vertex(graph, features))).assignment, "metis"
    raise ValueError(
        f"graphpipe.distributed.partition: `method` must be 'hash', 'metis' or a [num_nodes] tensor or numpy array of owners, got {method!r}"
    )


def metis_assignment(graph: CSCGraph, num_parts: int, vertex_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``[num_nodes]`` int64 owners from METIS (``pymetis``) on the graph made undirected
    (every edge both ways, self-loops and duplicates dropped), with parts of equal total
    ``vertex_weights`` (``[num_nodes]`` int64 > 0; None: equal vertex counts).
    METIS holds that adjacency in memory (``2 * num_edges`` ids): the one step of
    :func:`partition` that is not out of core."""
    try:
        import pymetis  # an optional dependency: only METIS partitioning needs it
    except ImportError:
        raise ImportError(
            "graphpipe.distributed.partition(method='metis') needs pymetis: pip install 'graphpipe-gnn[metis]'"
        ) from None
    num_nodes = graph.total_num_nodes
    if num_parts == 1 or num_nodes == 0:
        return torch.zeros(num_nodes, dtype=torch.int64)
    src = graph.indices.to(torch.int64)
    dst = torch.repeat_interleave(torch.arange(num_nodes), graph.in_degrees(), output_size=src.numel())
    keep = src != dst
    src, dst = src[keep], dst[keep]
    keys = torch.unique(torch.cat([src * num_nodes + dst, dst * num_nodes + src]))
    del src, dst, keep
    xadj = torch.zeros(num_nodes + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(keys // num_nodes, minlength=num_nodes), 0, out=xadj[1:])
    adjacency = pymetis.CSRAdjacency(xadj.numpy(), (keys % num_nodes).numpy())
    weights = None if vertex_weights is None else vertex_weights.to(torch.int64).numpy()
    _, membership = pymetis.part_graph(num_parts, adjacency=adjacency, vweights=weights)
    return torch.as_tensor(np.asarray(membership, dtype=np.int64))


def _bytes_per_vertex(graph: CSCGraph, features: Optional[FeatureStore]) -> torch.Tensor:
    """``[num_nodes]`` int64 weights for METIS: about the bytes a vertex costs its owner
    (its node feature rows, its in-edges' arrays and edge feature rows at the mean row
    size), scaled so that they add up to at most ``2**30``, each ``>= 1``."""
    schema, keys = graph.schema, features.keys() if features is not None else []
    row_bytes = torch.zeros(len(schema.node_types), dtype=torch.int64)
    edge_bytes = graph.indices.element_size() + smallest_index_dtype(graph.total_num_edges).itemsize + (graph.type_per_edge.element_size() if graph.is_heterogeneous else 0)
    edge_bytes += sum(t[:1].numel() * t.element_size() for t in graph.edge_attributes.values())
    edge_feature_bytes = 0
    for domain, type_name, name in keys:
        feature = features[domain, type_name, name]
        size = math.prod(feature.row_shape) * feature.dtype.itemsize
        t = 0 if type_name is None else schema.node_type_id.get(type_name)
        if domain == "node":
            row_bytes[t] += size
        else:
            edge_feature_bytes += size * feature.num_rows
    per_vertex = torch.repeat_interleave(row_bytes, torch.tensor(schema.node_type_offset).diff())
    mean_edge = edge_bytes + edge_feature_bytes / max(graph.total_num_edges, 1)
    weights = per_vertex + (graph.in_degrees() * mean_edge).to(torch.int64)
    unit = max(1, int(weights.sum()) >> 30)
    return 1 + weights // unit


def _manifest_head(graph, features, item_sets, num_parts: int, method: str) -> dict:
    """The manifest without its parts: what every part's files hold."""
    node_features, edge_features, edge_types = [], [], []
    for domain, type_name, name in features.keys() if features is not None else []:
        if type_name is None and graph.is_heterogeneous:
            raise ValueError(
                f"graphpipe.distributed.partition: the graph is typed, so the {domain} feature '{name}' needs a type"
            )
        if type_name is not None and type_name not in (graph.node_types if domain == "node" else graph.edge_types):
            raise ValueError(f"graphpipe.distributed.partition: the graph has no {domain} type '{type_name}' (feature '{name}')")
        _numpy(torch.empty(0, dtype=features[domain, type_name, name].dtype))  # a dtype .npy holds, checked before writing
        if domain == "node":
            node_features.append({"type": type_name, "name": name, "file": f"node-feat-{len(node_features)}.npy"})
        else:
            if type_name not in edge_types:
                edge_types.append(type_name)
            edge_features.append({"type": type_name, "name": name, "file": f"edge-feat-{len(edge_features)}.npy",
                                  "ids": f"edge-ids-{edge_types.index(type_name)}.npy"})  # fmt: skip
    splits = {}
    for s, (split, item_set) in enumerate(item_sets.items()):
        splits[split] = {
            "typed": isinstance(item_set, HeteroItemSet),
            "types": [
                {"type": key, "names": list(one.names), "files": [f"items-{s}-{t}-{f}.npy" for f in range(len(one.names))],
                 "ids": f"items-{s}-{t}-ids.npy", "num_items": len(one)}  # fmt: skip
                for t, (key, one) in enumerate(_by_type(item_set))
            ],
        }
    return {
        "format": FORMAT, "version": VERSION, "num_parts": num_parts, "method": method,
        "num_nodes": graph.total_num_nodes, "num_edges": graph.total_num_edges, "typed": graph.is_heterogeneous,
        "edges_per_type": _edges_per_type(graph), "cut_edges": 0, "owners": None, "node_features": node_features,
        "edge_features": edge_features, "item_sets": splits, "item_files": {}, "parts": [],
    }  # fmt: skip


def _edges_per_type(graph: CSCGraph) -> Optional[Dict[str, int]]:
    """Edge type -> its number of edges (None when untyped), counted a chunk at a time."""
    if not graph.is_heterogeneous:
        return None
    counts = torch.zeros(len(graph.edge_types), dtype=torch.int64)
    for start in range(0, graph.total_num_edges, _CHUNK):
        chunk = graph.type_per_edge[start : start + _CHUNK].to(torch.int64)
        counts += torch.bincount(chunk, minlength=counts.numel())
    return dict(zip(graph.edge_types, counts.tolist()))


def _by_type(item_set) -> List[Tuple[Optional[str], ItemSet]]:
    """``[(type key or None, ItemSet)]``: one entry per type, ``None`` when untyped."""
    return list(item_set.item_sets.items()) if isinstance(item_set, HeteroItemSet) else [(None, item_set)]


def _item_owners(graph: CSCGraph, split: str, item_set, owners: torch.Tensor) -> List[torch.Tensor]:
    """Per type of ``item_set``, ``[N_t]`` int64 owner of each item: of its node (node
    seeds) or of its destination node (pairs, ``[N, 2]``: the second column); every
    seed an integer id in range for its node type (a pair's source too)."""
    schema, out = graph.schema, []
    if graph.is_heterogeneous and not isinstance(item_set, HeteroItemSet):
        raise ValueError(
            f"graphpipe.distributed.partition: the graph is heterogeneous, so `item_sets['{split}']` must be a "
            f"HeteroItemSet keyed by node type (node seeds) or edge type 'src:rel:dst' (pairs), got an ItemSet; "
            f"node types: {list(schema.node_types)}"
        )
    for key, one in _by_type(item_set):
        where = f"graphpipe.distributed.partition: `item_sets['{split}']`{'' if key is None else f' ({key})'}"
        seeds = one.field("seeds")
        if seeds.is_floating_point() or seeds.is_complex() or seeds.dtype == torch.bool:
            raise ValueError(f"{where} seeds must hold integer node ids, got dtype {seeds.dtype}")
        seeds = seeds.to(torch.int64)
        if key is not None and ":" in key:
            src_type, _, dst_type = parse_edge_type(key)
        else:
            src_type = dst_type = schema.node_types[0] if key is None else key  # None: an untyped graph's one type
        columns = [("", dst_type, seeds)]
        if seeds.dim() != 1:
            columns = [(" (a pair's source)", src_type, seeds[:, 0]), (" (a pair's destination)", dst_type, seeds[:, 1])]
        global_ids = [_global_ids(schema, where, what, key, node_type, nodes) for what, node_type, nodes in columns]
        out.append(owners[global_ids[-1]])  # the destination's owner
    return out


def _global_ids(schema, where: str, what: str, key: Optional[str], node_type: str, nodes: torch.Tensor) -> torch.Tensor:
    """``nodes`` (type-local ids of ``node_type``; ``what`` they are, for errors) as global
    ids, each checked in range."""
    if node_type not in schema.node_type_id:
        raise ValueError(f"{where} has items of type '{key}', but the graph's node types are {list(schema.node_types)}")
    t = schema.node_type_id[node_type]
    offset, end = schema.node_type_offset[t], schema.node_type_offset[t + 1]
    if nodes.numel() and (int(nodes.min()) < 0 or int(nodes.max()) >= end - offset):
        bad = int(nodes.max()) if int(nodes.min()) >= 0 else int(nodes.min())
        raise ValueError(f"{where} holds node id {bad}{what}, out of range for {end - offset} nodes")
    return nodes + offset


def _write_graph(graph: CSCGraph, owners: torch.Tensor, owned: torch.Tensor, rank: int, part_dir: str):
    """Save the compact part graph of the ``owned`` vertices (``[n]`` int64 ascending: its
    rows) and their ids; returns ``(files, the part graph mapped from its file, its cut edges)``. The
    part's edge arrays are filled ``_CHUNK`` edges at a time into memory-mapped scratch
    files (their pages go to disk, not to this process's memory), so memory holds the
    part's ``indptr`` and one chunk, not its edges."""
    part_indptr = _part_indptr(graph, owned)
    total = int(part_indptr[-1])
    path, cut = os.path.join(part_dir, "graph.pt"), 0
    with scratch_directory(part_dir, "graphpipe.distributed.partition") as scratch:

        def mapped(name: str, like: torch.Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
            shape = (total, *like.shape[1:])
            file = os.path.join(scratch, name)
            return torch.from_file(file, shared=True, size=math.prod(shape), dtype=dtype or like.dtype).view(shape)

        largest = max(graph.total_num_edges - 1, 0)  # int32 edge ids where the whole graph's fit: half the bytes
        indices = mapped("indices", graph.indices)
        edge_ids = mapped("edge-ids", graph.indices, smallest_index_dtype(largest))
        attributes = {name: mapped(f"attribute-{i}", t) for i, (name, t) in enumerate(graph.edge_attributes.items())}
        typed = graph.typed_fields()
        if typed is not None:
            typed = {**typed, "type_per_edge": mapped("types", graph.type_per_edge)}
        for lo, hi, positions in _edge_chunks(graph, part_indptr, owned):
            sources = graph.indices[positions]
            indices[lo:hi] = sources
            edge_ids[lo:hi] = graph.map_edge_ids(positions)
            for name, t in attributes.items():
                t[lo:hi] = graph.edge_attributes[name][positions]
            if typed is not None:
                typed["type_per_edge"][lo:hi] = graph.type_per_edge[positions]
            cut += int((owners[sources.to(torch.int64)] != rank).sum())
        rows = torch.cat([owned, torch.tensor([graph.total_num_nodes])])
        part = CSCGraph._build(  # the user's edge ids of a part are not 0..E_r - 1: checks up to indptr
            part_indptr, indices, attributes, dict(graph.node_attributes), edge_ids, level="indptr", typed=typed, indptr_nodes=rows
        )
        part.save(path)
        del part, indices, edge_ids, attributes, typed
    files = {"graph.pt": _describe(path), "nodes.npy": _write_array(part_dir, "nodes.npy", owned.numpy())}
    return files, CSCGraph.load(path, mmap=True, validate=False), cut


def _part_indptr(graph: CSCGraph, owned: torch.Tensor) -> torch.Tensor:
    """``[n + 1]`` indptr of the part of the ``owned`` vertices (``[n]`` int64 ascending):
    row ``i`` holds the in-edges of ``owned[i]``; of the smallest dtype that holds its
    edge count, computed ``_CHUNK`` vertices at a time."""
    degrees = torch.zeros(owned.numel() + 1, dtype=torch.int64)
    for i in range(0, owned.numel(), _CHUNK):
        chunk = owned[i : i + _CHUNK]
        degrees[i + 1 : i + 1 + chunk.numel()] = graph.indptr[chunk + 1] - graph.indptr[chunk]
    part_indptr = torch.cumsum(degrees, 0)
    return part_indptr.to(smallest_index_dtype(int(part_indptr[-1])))


def _edge_chunks(graph: CSCGraph, part_indptr: torch.Tensor, owned: torch.Tensor) -> Iterator[Tuple[int, int, torch.Tensor]]:
    """``(lo, hi, positions)``: the part's edges ``lo:hi`` (of whole vertices, about
    ``_CHUNK`` of them) and their ``[hi - lo]`` int64 CSC positions in ``graph``; the
    part is the ``owned`` vertices' (``[n]`` int64 ascending) with ``part_indptr`` (a row each)."""
    total = int(part_indptr[-1])
    targets = torch.arange(_CHUNK, max(total, _CHUNK), _CHUNK, dtype=part_indptr.dtype)
    rows = torch.searchsorted(part_indptr[1:], targets, right=True)  # rows ending at or before each target
    bounds = torch.unique(torch.cat([torch.tensor([0]), rows, torch.tensor([owned.numel()])]))
    for a, b in zip(bounds.tolist(), bounds[1:].tolist()):
        begins, starts = part_indptr[a:b].to(torch.int64), graph.indptr[owned[a:b]].to(torch.int64)
        lengths = part_indptr[a + 1 : b + 1].to(torch.int64) - begins
        lo, hi = int(begins[0]), int(begins[-1] + lengths[-1])
        yield lo, hi, torch.repeat_interleave(starts - begins, lengths, output_size=hi - lo) + torch.arange(lo, hi)


def _write_features(features, manifest: dict, part: CSCGraph, owned: torch.Tensor, part_dir: str) -> dict:
    """Write the owned rows of every feature: node rows by ascending owned id, edge rows by
    ascending edge id (``edge-ids-<t>.npy``)."""
    files, edge_ids = {}, {}
    for spec in manifest["node_features"]:
        ids, _ = _of_type(part.schema, spec["type"], owned)
        feature = features["node", spec["type"], spec["name"]]
        files[spec["file"]] = _write_rows(part_dir, spec["file"], feature, ids)
    for spec in manifest["edge_features"]:
        if spec["ids"] not in edge_ids:
            files[spec["ids"]], edge_ids[spec["ids"]] = _write_edge_ids(part, spec["type"], part_dir, spec["ids"])
        feature = features["edge", spec["type"], spec["name"]]
        files[spec["file"]] = _write_rows(part_dir, spec["file"], feature, edge_ids[spec["ids"]])
    return files


def _of_type(schema, node_type: Optional[str], nodes: torch.Tensor) -> Tuple[torch.Tensor, int]:
    """``(the type-local ids of those of nodes (global ids) of node_type, that type's number of nodes)``
    (``node_type`` None: an untyped graph's one type)."""
    t = 0 if node_type is None else schema.node_type_id[node_type]
    lo, hi = schema.node_type_offset[t], schema.node_type_offset[t + 1]
    return nodes[(nodes >= lo) & (nodes < hi)] - lo, hi - lo


def _write_edge_ids(part: CSCGraph, edge_type: Optional[str], part_dir: str, name: str) -> Tuple[dict, torch.Tensor]:
    """Save the user's ids of the part's edges (of ``edge_type``; None: all), ``[n]``
    int64 ascending, as ``part_dir/name``: copied ``_CHUNK`` at a time into the mapped
    file and sorted there. Returns ``(file entry, the ids mapped)``."""
    num_edges = part.total_num_edges
    t = None if edge_type is None else part.schema.edge_type_id[edge_type]

    def chunk_ids(start: int) -> torch.Tensor:
        ids = part.map_edge_ids(torch.arange(start, min(start + _CHUNK, num_edges)))
        return ids if t is None else ids[part.type_per_edge[start : start + _CHUNK] == t]

    count = num_edges if t is None else sum(int((part.type_per_edge[i : i + _CHUNK] == t).sum()) for i in range(0, num_edges, _CHUNK))
    with scratch_directory(part_dir, "graphpipe.distributed.partition") as scratch:
        written, at = os.path.join(scratch, name), 0
        ids = np.lib.format.open_memmap(written, mode="w+", dtype=np.int64, shape=(count,))
        for start in range(0, num_edges, _CHUNK):
            chunk = chunk_ids(start).numpy()
            ids[at : at + chunk.size] = chunk
            at += chunk.size
        ids.sort()  # in place, in the mapped file
        ids.flush()
        del ids
        publish(written, os.path.join(part_dir, name))
    path = os.path.join(part_dir, name)
    return _describe(path), torch.from_numpy(np.load(path, mmap_mode="c", allow_pickle=False))


def _write_items(item_sets: dict, item_owners: Optional[dict], rank: Optional[int], directory: str) -> dict:
    """Write every field of the items of every split (``items-<s>-<t>-<f>.npy``); with
    ``item_owners`` (split -> per type ``[N_t]`` owners) only ``rank``'s, and their
    positions in their type's ItemSet (``items-<s>-<t>-ids.npy``). Returns the files."""
    files = {}
    for s, (split, item_set) in enumerate(item_sets.items()):
        for t, (_, one) in enumerate(_by_type(item_set)):
            mine = None if item_owners is None else torch.nonzero(item_owners[split][t] == rank).flatten()
            for f, values in enumerate(one.items):
                name = f"items-{s}-{t}-{f}.npy"
                files[name] = _write_array(directory, name, _numpy(values if mine is None else values[mine]))
            if mine is not None:
                files[f"items-{s}-{t}-ids.npy"] = _write_array(directory, f"items-{s}-{t}-ids.npy", mine.numpy())
    return files


def _numpy(t: torch.Tensor) -> np.ndarray:
    try:
        return t.detach().cpu().contiguous().numpy()
    except TypeError:
        raise TypeError(f"graphpipe.distributed.partition: arrays of dtype {t.dtype} cannot be stored as .npy files") from None


def _write_array(directory: str, name: str, array: np.ndarray) -> dict:
    """Save ``array`` as ``directory/name`` (no pickles) through a scratch directory."""
    with scratch_directory(directory, "graphpipe.distributed.partition") as scratch:
        written = os.path.join(scratch, name)
        np.save(written, array, allow_pickle=False)
        publish(written, os.path.join(directory, name))
    return _describe(os.path.join(directory, name))


def _write_rows(directory: str, name: str, feature, ids: torch.Tensor) -> dict:
    """Save ``feature``'s rows ``ids`` as ``directory/name``, ``_CHUNK_ROWS`` at a time."""
    shape, dtype = (ids.numel(), *feature.row_shape), _numpy(torch.empty(0, dtype=feature.dtype)).dtype
    if math.prod(shape) == 0:
        return _write_array(directory, name, np.zeros(shape, dtype=dtype))
    with scratch_directory(directory, "graphpipe.distributed.partition") as scratch:
        written = os.path.join(scratch, name)
        table = np.lib.format.open_memmap(written, mode="w+", dtype=dtype, shape=shape)
        for start in range(0, ids.numel(), _CHUNK_ROWS):
            table[start : start + _CHUNK_ROWS] = _numpy(feature.read(ids[start : start + _CHUNK_ROWS]))
        table.flush()
        del table
        publish(written, os.path.join(directory, name))
    return _describe(os.path.join(directory, name))


def _describe(path: str) -> dict:
    return {"size": os.path.getsize(path), "crc32": file_checksum(path)}


@dataclass
class GraphPart:
    """One part of a partitioned dataset, as :func:`load_partition` maps it.

    Attributes:
        rank: this part's number; num_parts: the number of parts.
        graph: the part graph, mapped: compact (an ``indptr`` row per owned vertex,
            ``indptr_nodes``), in global ids (only owned vertices have in-edges).
        features: a FeatureStore of :class:`~graphpipe.features.part.OwnedRowsFeature`:
            read by the usual ids, only owned vertices' (edges') rows.
        item_sets: split name -> the items this part owns (ItemSet / HeteroItemSet).
        item_ids: split name -> their positions in the whole split's ItemSet (``[n]``
            int64 ascending; a dict by type for a HeteroItemSet).
        num_items: split name -> the number of items of the whole split (a dict by type
            for a HeteroItemSet): ``DistributedItemSampler.from_part`` permutes them all.
        partition: the :class:`Partition` of every global id (``DistributedItemSampler.from_part``
            uses it; a sampler of the whole item set takes ``partition=part.partition``).
        nodes: ``[n_r]`` int64 owned global ids, ascending (``graph.indptr_nodes[:-1]``).
    """

    rank: int
    num_parts: int
    graph: CSCGraph
    features: FeatureStore
    item_sets: Dict[str, Union[ItemSet, HeteroItemSet]]
    item_ids: Dict[str, Union[torch.Tensor, Dict[str, torch.Tensor]]]
    num_items: Dict[str, Union[int, Dict[str, int]]]
    partition: Partition
    nodes: torch.Tensor


def load_partition(
    out_dir: Union[str, os.PathLike], rank: int, num_parts: Optional[int] = None, validate: Optional[bool] = None
) -> GraphPart:
    """Map part ``rank`` of the partitioned dataset in ``out_dir`` (from :func:`partition`).

    The manifest is checked (format, version, part count, each file of the part present
    with its size). ``validate=True`` checks every file's CRC-32 now, and what the part
    promises (its vertices, only their in-edges, ids in range: ``O(num_nodes + part
    edges)``); ``None`` (default) checks the small files and ``graph.pt`` now (one
    sequential read of the graph file, about 1 GB/s: its pages are mapped, and a flipped
    bit in its edges would otherwise load silently) and each feature file when first read;
    ``False`` checks no CRC. The directory is untrusted: no pickles, no file outside ``out_dir``.

    Args:
        rank: the part, in ``[0, num_parts)``.
        num_parts: the expected number of parts (the job's world size), or None.

    Raises:
        FileNotFoundError: no directory or manifest.
        ValueError: a mismatched ``rank`` / ``num_parts``, a malformed manifest, or a part
            file missing, of the wrong size or corrupted (naming the file).
    """
    where = f"graphpipe.distributed.load_partition('{os.fspath(out_dir)}')"
    out_dir = real_directory(out_dir, where)
    manifest = _read_manifest(out_dir, where)
    total = manifest["num_parts"]
    if num_parts is not None and num_parts != total:
        raise ValueError(f"{where}: the dataset has {total} parts, but `num_parts` is {num_parts!r} (one part per rank)")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < total:
        raise ValueError(f"{where}: `rank` must be an int in [0, {total}) (the dataset has {total} parts), got {rank!r}")
    if not os.path.isdir(os.path.join(out_dir, f"part-{rank}")):
        raise ValueError(
            f"{where}: the part directory 'part-{rank}' is missing (each rank needs its part-<rank>/ on its machine, "
            f"with manifest.json and owners.npy); {_AGAIN}"
        )
    part_dir, listed, verify = f"part-{rank}", dict(manifest["parts"][rank]["files"]), validate is not False
    specs = [*manifest["node_features"], *manifest["edge_features"]]
    lazy = {spec["file"] for spec in specs} if validate is None else set()  # by default, features: CRC-32 on first read
    paths = {n: _checked_file(out_dir, part_dir, n, e, verify and n not in lazy, where) for n, e in listed.items()}
    owners = None
    if manifest["owners"] is not None:
        owners = _npy(_checked_file(out_dir, "", "owners.npy", manifest["owners"], verify, where), "owners.npy", where)
        if owners.dim() != 1 or owners.numel() != manifest["num_nodes"] or owners.is_floating_point():
            raise ValueError(f"{where}: 'owners.npy' must hold one integer owner per node ({manifest['num_nodes']})")
    nodes = _small_array(paths, part_dir, "nodes.npy", where)
    graph = CSCGraph.load(_listed(paths, part_dir, "graph.pt", where), mmap=True, validate=None if verify else False)
    types = list(manifest["edges_per_type"]) if manifest["typed"] else []
    described = {"num_nodes": manifest["num_nodes"], f"parts[{rank}]['num_edges']": manifest["parts"][rank]["num_edges"],
                 "typed": manifest["typed"], "edges_per_type": types}  # fmt: skip
    found = dict(zip(described, (graph.total_num_nodes, graph.total_num_edges, graph.is_heterogeneous, list(graph.edge_types))))
    if found != described:
        differ = ", ".join(f"`{k}` {described[k]!r:.80} (the graph's: {found[k]!r:.80})" for k in described if found[k] != described[k])
        raise ValueError(f"{where}: '{paths['graph.pt']}' does not hold the graph the manifest describes (manifest.json's {differ})")
    rows = graph.indptr_nodes
    if rows is None or rows.numel() != nodes.numel() + 1 or not torch.equal(rows[:-1], nodes.to(torch.int64)):
        raise ValueError(
            f"{where}: part {rank}'s graph does not hold the in-edges of its vertices ('nodes.npy', {nodes.numel()}): "
            f"its indptr has {graph.indptr.numel() - 1} rows, of other vertices; {_AGAIN}"
        )
    nodes = rows[:-1]  # the graph's (mapped): 'nodes.npy' read whole is freed
    try:
        partition_ = Partition(total, owners)
    except ValueError as error:
        raise ValueError(f"{where}: 'owners.npy': {error}") from None
    if validate:
        _check_part(graph, nodes, partition_, rank, manifest, where)
    checksums = {name: (listed[name]["size"], listed[name]["crc32"]) for name in lazy & paths.keys()}
    features = _part_features(manifest, graph, nodes, part_dir, paths, checksums, where)
    item_sets, item_ids, num_items = _part_items(manifest, lambda name: _small_array(paths, part_dir, name, where))
    _check_num_items(manifest, rank, item_ids, where)
    _LOADED_PARTS[paths["graph.pt"]] = [(rank, os.fspath(out_dir)), [partition_]]
    return GraphPart(rank, total, graph, features, item_sets, item_ids, num_items, partition_, nodes)


def _check_part(graph: CSCGraph, nodes: torch.Tensor, partition_: Partition, rank: int, manifest: dict, where: str):
    """``load_partition(validate=True)``'s O(num_nodes + part edges) checks of what the
    part promises: its vertices (the rows of its graph) are those the partition gives
    ``rank``, sources in range, edge ids within their type's count."""
    everyone = torch.arange(graph.total_num_nodes)
    if not torch.equal(nodes.to(torch.int64), everyone[partition_.owner(everyone) == rank]):
        raise ValueError(f"{where}: part {rank}'s 'nodes.npy' is not the vertices its owners assign to it")
    indices = graph.indices
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= graph.total_num_nodes):
        raise ValueError(f"{where}: part {rank}'s graph has source ids out of range for {graph.total_num_nodes} nodes")
    ids = graph.map_edge_ids(torch.arange(graph.total_num_edges))
    if graph.is_heterogeneous:
        types = graph.type_per_edge.to(torch.int64)
        if types.numel() and (int(types.min()) < 0 or int(types.max()) >= len(graph.edge_types)):
            raise ValueError(f"{where}: part {rank}'s graph has edge type ids out of range")
        limit = torch.tensor([manifest["edges_per_type"][t] for t in graph.edge_types])[types]
    else:
        limit = manifest["num_edges"]
    if bool(((ids < 0) | (ids >= limit)).any()):
        raise ValueError(f"{where}: part {rank}'s graph has edge ids out of range for the whole graph's edges")


def _check_num_items(manifest: dict, rank: int, item_ids: dict, where: str) -> None:
    """Refuse an item set whose ``num_items`` is not the number of items its parts hold:
    part ``r``'s ``items-<s>-<t>-ids.npy`` (``[n_r]`` int64) is ``n_r`` rows after a
    ``.npy`` header as long as this part's (the same on every part: only ``n_r`` differs)."""
    for split, spec in manifest["item_sets"].items():
        for entry in spec["types"]:
            ids = item_ids[split][entry["type"]] if spec["typed"] else item_ids[split]
            header = manifest["parts"][rank]["files"][entry["ids"]]["size"] - ids.numel() * ids.element_size()  # 128 bytes
            sizes = [part["files"].get(entry["ids"], {}).get("size") for part in manifest["parts"]]
            width = ids.element_size()
            rows = [(size - header) // width for size in sizes if isinstance(size, int) and size >= header and (size - header) % width == 0]
            if len(rows) != len(sizes) or sum(rows) != entry["num_items"]:
                kind = "" if entry["type"] is None else f" ({entry['type']})"
                raise ValueError(
                    f"{where}: manifest.json's item_sets['{split}']{kind} `num_items` is {entry['num_items']}, but the "
                    f"parts' '{entry['ids']}' files hold {sum(rows) if len(rows) == len(sizes) else 'a different number of'} "
                    f"items; {_AGAIN}"
                )


def _read_manifest(out_dir: str, where: str) -> dict:
    """The manifest, after checking its format, version and the fields load reads."""
    path = os.path.join(out_dir, "manifest.json")
    if os.path.islink(path):
        raise ValueError(f"{where}: manifest.json is a symlink; a partition's files stay inside its directory (copy it)")
    if not regular_file(path):
        raise FileNotFoundError(f"{where}: no manifest.json (not a partitioned dataset, or its partition did not finish)")
    if os.path.getsize(path) > _MANIFEST_LIMIT:
        raise ValueError(f"{where}: manifest.json is larger than {_MANIFEST_LIMIT} bytes")
    try:
        with open(path) as f:
            manifest = json.load(f)
        if manifest.get("format") != FORMAT:
            raise ValueError(f"format tag {manifest.get('format')!r}, expected {FORMAT!r}")
        if manifest.get("version") != VERSION:
            raise ValueError(
                f"format version {manifest.get('version')!r}; this graphpipe reads version {VERSION}: partition the "
                f"graph again with graphpipe.distributed.partition"
            )
        num_parts, parts = manifest["num_parts"], manifest["parts"]
        if not isinstance(num_parts, int) or num_parts < 1 or not isinstance(parts, list) or len(parts) != num_parts:
            raise ValueError(f"{num_parts!r} parts, {len(parts) if isinstance(parts, list) else 'no'} part entries")
        for part in parts:
            if not isinstance(part["files"], dict) or not all(isinstance(e, dict) for e in part["files"].values()):
                raise ValueError("a part's `files` is not a dict of file -> {size, crc32}")
            if not isinstance(part["num_nodes"], int) or not isinstance(part["num_edges"], int):
                raise ValueError("a part's `num_nodes` or `num_edges` is not an int")
        _check_fields(manifest)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:  # RecursionError: deep nesting
        reason = f"no field {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(f"{where}: manifest.json is not a graphpipe partition manifest ({reason})") from None
    return manifest


def _check_fields(manifest: dict) -> None:
    """Refuse what load reads from the manifest when it is not as :func:`partition` writes
    it: a ValueError naming the field (a KeyError: a field missing)."""
    manifest["owners"], manifest["item_files"]
    for key in ("num_nodes", "num_edges"):
        _expect(_count(manifest[key]), key, "an int >= 0", manifest[key])
    typed, per_type = manifest["typed"], manifest["edges_per_type"]
    _expect(isinstance(typed, bool), "typed", "a bool", typed)
    if typed:
        counts = isinstance(per_type, dict) and all(_count(n) for n in per_type.values())
        _expect(counts and sum(per_type.values()) == manifest["num_edges"], "edges_per_type",
                "a dict of edge type -> int >= 0 adding up to `num_edges`", per_type)  # fmt: skip
    for domain in ("node", "edge"):
        specs, field = manifest[f"{domain}_features"], f"{domain}_features"
        _expect(isinstance(specs, list) and all(isinstance(spec, dict) for spec in specs), field, "a list of feature entries", specs)
        for i, spec in enumerate(specs):
            spec["type"]
            for key in ("name", "file", "ids") if domain == "edge" else ("name", "file"):
                _expect(isinstance(spec[key], str), f"{field}[{i}]['{key}']", "a str", spec[key])
    _expect(isinstance(manifest["item_sets"], dict), "item_sets", "a dict of split -> item set", manifest["item_sets"])
    for split, spec in manifest["item_sets"].items():
        _check_item_set(spec, f"item_sets['{split}']")


def _check_item_set(spec, field: str) -> None:
    """:func:`_check_fields` of the item set ``field`` (``item_sets['<split>']``)."""
    _expect(isinstance(spec, dict), field, "a dict", spec)
    typed, types = spec["typed"], spec["types"]
    _expect(isinstance(typed, bool), f"{field}['typed']", "a bool", typed)
    _expect(isinstance(types, list) and all(isinstance(e, dict) for e in types), f"{field}['types']", "a list of dicts", types)
    keys = [entry["type"] for entry in types]
    distinct = all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys)
    _expect(distinct if typed else keys == [None], f"{field}['types'][:]['type']", "distinct str" if typed else "[None] (untyped)", keys)
    for i, entry in enumerate(types):
        at, names, files = f"{field}['types'][{i}]", entry["names"], entry["files"]
        _expect(_strings(names) and "seeds" in names and len(set(names)) == len(names), f"{at}['names']",
                "a list of distinct str with 'seeds'", names)  # fmt: skip
        _expect(_strings(files) and len(files) == len(names), f"{at}['files']", "a list of str, one per name", files)
        _expect(isinstance(entry["ids"], str), f"{at}['ids']", "a str", entry["ids"])
        _expect(_count(entry["num_items"]), f"{at}['num_items']", "an int >= 0", entry["num_items"])


def _expect(ok: bool, field: str, expected: str, value) -> None:
    if not ok:
        raise ValueError(f"`{field}` must be {expected}, got {value!r:.80}")


def _count(value) -> bool:
    """Whether ``value`` (read from JSON) is an int >= 0, not a bool."""
    return as_int(value) is not None and value >= 0


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _checked_file(out_dir: str, directory: str, name: str, entry: dict, verify: Optional[bool], where: str) -> str:
    """The path of ``directory/name`` (checked inside ``out_dir``, present, its size as
    listed; its CRC-32 too when ``verify``); ValueError naming it otherwise."""
    relative = _relative(directory, name)
    if not _FILE_NAME.match(name) or not isinstance(entry, dict) or not all(isinstance(entry.get(k), int) for k in ("size", "crc32")):
        raise ValueError(f"{where}: manifest.json lists a malformed file entry {name!r}: {entry!r}")
    path = os.path.realpath(os.path.join(out_dir, relative))
    if os.path.commonpath([os.path.realpath(out_dir), path]) != os.path.realpath(out_dir):
        raise ValueError(
            f"{where}: the part file '{relative}' resolves to '{path}', outside the directory: a partition's files stay "
            f"inside it (a planted symlink?)"
        )
    if not os.path.isfile(path):
        raise ValueError(f"{where}: the part file '{relative}' is missing; {_AGAIN}")
    if os.path.getsize(path) != entry["size"]:
        raise ValueError(
            f"{where}: the part file '{relative}' is {os.path.getsize(path)} bytes, the manifest says {entry['size']} "
            f"(truncated or replaced); {_AGAIN}"
        )
    if verify and file_checksum(path) != entry["crc32"]:
        raise ValueError(f"{where}: the part file '{relative}' does not match its checksum: it is corrupted; {_AGAIN}")
    return path


def _relative(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _listed(paths: dict, directory: str, name: str, where: str) -> str:
    """The checked path (:func:`_checked_file`) of the file ``name`` of ``directory``
    (``part-<r>``; ``""``: the top one); ValueError when the manifest lists none."""
    if name not in paths:
        raise ValueError(f"{where}: manifest.json lists no part file '{_relative(directory, name)}'")
    return paths[name]


def _small_array(paths: dict, directory: str, name: str, where: str) -> torch.Tensor:
    """A small array of the part (ids, items) in ``directory``, read whole."""
    return _npy(_listed(paths, directory, name, where), name, where)


def _npy(path: str, name: str, where: str) -> torch.Tensor:
    """The array of the ``.npy`` file ``path`` (no pickles), read whole."""
    try:
        return torch.from_numpy(np.load(path, allow_pickle=False))
    except (ValueError, TypeError, OSError) as error:
        raise ValueError(f"{where}: the file '{name}' is not a plain .npy array ({error})") from None


def _part_features(manifest, graph, nodes, part_dir, paths, checksums, where) -> FeatureStore:
    """The part's FeatureStore of OwnedRowsFeatures, the files in ``paths`` (of directory
    ``part_dir``); those in ``checksums`` (file -> (size, CRC-32)) checked on first read."""
    features = {"node": {}, "edge": {}}
    for domain, by_key in features.items():
        types = (graph.node_types if domain == "node" else graph.edge_types) if graph.is_heterogeneous else [None]
        for spec in manifest[f"{domain}_features"]:
            if spec["type"] not in types:
                raise ValueError(
                    f"{where}: manifest.json's {domain}_features entry '{spec['name']}' has `type` {spec['type']!r}, "
                    f"not one of the part graph's {domain} types {types}"
                )
            if domain == "node":
                ids, num_rows = _of_type(graph.schema, spec["type"], nodes)
            else:
                ids = _small_array(paths, part_dir, spec["ids"], where)
                num_rows = manifest["num_edges"] if spec["type"] is None else manifest["edges_per_type"][spec["type"]]
            path = _listed(paths, part_dir, spec["file"], where)
            key = spec["name"] if spec["type"] is None else (spec["type"], spec["name"])
            by_key[key] = OwnedRowsFeature(path, ids, num_rows, checksums.get(spec["file"]))
    return FeatureStore(features["node"], features["edge"])


def _part_items(manifest: dict, read, with_ids: bool = True):
    """``(item sets, item ids, numbers of items of the whole splits)`` by split (a dict by
    type when typed), their arrays read by ``read(file name)`` (without ``with_ids``: no item ids)."""
    item_sets, item_ids, num_items = {}, {}, {}
    for split, spec in manifest["item_sets"].items():
        sets, ids, counts = {}, {}, {}
        for entry in spec["types"]:
            sets[entry["type"]] = ItemSet(tuple(read(name) for name in entry["files"]), names=tuple(entry["names"]))
            ids[entry["type"]] = read(entry["ids"]) if with_ids else None
            counts[entry["type"]] = entry["num_items"]
        if spec["typed"]:
            item_sets[split], item_ids[split], num_items[split] = HeteroItemSet(sets), ids, counts
        else:
            item_sets[split], item_ids[split], num_items[split] = sets[None], ids[None], counts[None]
    return item_sets, item_ids, num_items

def part_of(graph: CSCGraph) -> Optional[Tuple[int, str]]:
    """``(rank, out_dir)`` when ``graph`` is a part graph :func:`load_partition` mapped in
    this process (only the vertices ``rank`` owns have in-edges), else None."""
    entry = _LOADED_PARTS.get(graph.source_path) if graph.source_path is not None else None
    return None if entry is None else entry[0]


def check_whole_graph(graph: CSCGraph, where: str, instead: Optional[str] = None) -> None:
    """Raise ValueError when ``graph`` is a part graph (:func:`part_of`): a stage that
    reads it alone would silently miss the in-edges of the vertices other ranks own.
    ``instead``: what to do (default: the ways a sampler reads a part)."""
    part = part_of(graph)
    if part is not None:
        instead = instead or (
            "put DistributedItemSampler.from_part(part, split, batch_size) upstream (each rank then asks the owners "
            "for the others), or pass cooperative=True"
        )
        raise ValueError(
            f"{where}: the graph is part {part[0]} of the partitioned dataset '{part[1]}', which holds only the "
            f"in-edges of the vertices rank {part[0]} owns: read alone it would miss the others'; {instead}"
        )


def check_part_owners(graph: CSCGraph, partition_: Partition, rank: int, where: str) -> None:
    """Raise ValueError when ``graph`` is a part graph :func:`load_partition` mapped and
    ``rank`` / ``partition_`` (a cooperative sampler's) are not that part's: its owners
    would sample vertices whose in-edges the part does not hold. Other graphs pass."""
    entry = _LOADED_PARTS.get(graph.source_path) if graph.source_path is not None else None
    if entry is None or (entry[0][0] == rank and any(p is partition_ for p in entry[1])):
        return
    (part_rank, out_dir), (own, *_) = entry
    if part_rank != rank:
        raise ValueError(
            f"{where}: the graph is part {part_rank} of the partitioned dataset '{out_dir}', but this is rank {rank}: "
            f"load part {rank} (load_partition(out_dir, dist.get_rank()))"
        )
    mine, theirs = own.assignment, partition_.assignment
    same = mine is None if theirs is None else mine is not None and torch.equal(mine, theirs)
    if own.num_parts != partition_.num_parts or not same:
        raise ValueError(
            f"{where}: the graph is part {part_rank} of the partitioned dataset '{out_dir}', whose vertex owners are "
            f"{own!r}, but the DistributedItemSampler's partition is {partition_!r}: pass "
            f"DistributedItemSampler(..., partition=part.partition)"
        )
    entry[1].append(partition_)


def load_item_sets(out_dir: Union[str, os.PathLike], validate: bool = True) -> Dict[str, Union[ItemSet, HeteroItemSet]]:
    """Every item of every split of the partitioned dataset in ``out_dir``, as given to
    :func:`partition` (split name -> ItemSet / HeteroItemSet), for a process that needs
    them all (evaluation on one process); training ranks use
    ``DistributedItemSampler.from_part``, which holds only the part's items. Files are
    checked as :func:`load_partition` checks them (their CRC-32 unless ``validate=False``)."""
    where = f"graphpipe.distributed.load_item_sets('{os.fspath(out_dir)}')"
    out_dir = real_directory(out_dir, where)
    manifest = _read_manifest(out_dir, where)
    listed = manifest["item_files"]
    if not isinstance(listed, dict):
        raise ValueError(f"{where}: manifest.json is not a graphpipe partition manifest (`item_files` is not a dict)")
    paths = {name: _checked_file(out_dir, "", name, entry, validate, where) for name, entry in listed.items()}
    item_sets, _, _ = _part_items(manifest, lambda name: _small_array(paths, "", name, where), with_ids=False)
    return item_sets
