"""OGB node-property-prediction datasets already on local disk (no download).

For users who downloaded ``ogbn-products``, ``ogbn-arxiv``, ``ogbn-papers100M``... with
the ``ogb`` package: :func:`ogb_node_dataset` reads the dataset folder as OGB left it::

    <root>/raw/edge.csv.gz            "src,dst" per line        (or raw/data.npz with
    <root>/raw/node-feat.csv.gz       one feature row per line    edge_index [2, E],
    <root>/raw/edge-feat.csv.gz       optional                    node_feat, edge_feat:
    <root>/raw/node-label.csv.gz      one label per line          the binary layout of
    <root>/raw/num-node-list.csv.gz   the node count              papers100M, with
                                                                  raw/node-label.npz)
    <root>/split/<name>/{train,valid,test}.csv.gz   one node id per line

and converts it once, in bounded memory (CSV and npz members are streamed into ``.npy``
files; the graph is built with :meth:`graphpipe.CSCGraph.from_coo_files`), into a cache
beside it, ``<root>/graphpipe/``. Later calls map the cache: the graph and the features
stay on disk until read.

The graph holds OGB's edges as ``PygNodePropPredDataset`` / ``DglNodePropPredDataset``
build them: with ``add_inverse_edge`` (OGB's ``master.csv`` sets it for ogbn-products and
ogbn-proteins) edge ``i`` of the file becomes edges ``2i`` (``u -> v``) and ``2i + 1``
(``v -> u``), and ``graph.original_edge_ids`` are these OGB edge ids.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Optional

import numpy as np
import torch

from ..csc_graph import CSCGraph
from ..feature_store import FeatureStore
from ..item_set import ItemSet
from ._files import csv_to_npy, fingerprint, read_csv
from .base import NodeClassificationDataset

__all__ = ["ogb_node_dataset"]

# add_inverse_edge from OGB's master.csv, by dataset folder name (ogb names folders
# "ogbn_products" for "ogbn-products").
_ADD_INVERSE_EDGE = {
    "ogbn_products": True,
    "ogbn_proteins": True,
    "ogbn_arxiv": False,
    "ogbn_papers100M": False,
}
_CACHE_VERSION = 1
_CHUNK = 1 << 24


def ogb_node_dataset(
    root: str | os.PathLike,
    split: Optional[str] = None,
    add_inverse_edge: Optional[bool] = None,
    force_preprocess: bool = False,
    cache_dir: Optional[str | os.PathLike] = None,
) -> NodeClassificationDataset:
    """An OGB node-property-prediction dataset from its folder on local disk.

    Args:
        root: the dataset folder (holding ``raw/`` and ``split/``), e.g.
            ``dataset/ogbn_products``.
        split: the folder under ``split/`` (default: the only one there, e.g.
            ``sales_ranking`` or ``time``).
        add_inverse_edge: store every edge in both directions, as OGB does for
            undirected datasets; default from OGB's table for the known ``ogbn_*``
            folder names, else False.
        force_preprocess: convert again even if the cache is up to date.
        cache_dir: where the converted files go (default ``<root>/graphpipe``).

    Returns:
        A :class:`NodeClassificationDataset`: ``graph`` mapped from the cache,
        ``features["feat"]`` (``[num_nodes, dim]`` float32, memory-mapped) and, with an
        ``edge-feat`` file, edge feature ``"feat"`` (by OGB edge id), ``labels``
        ``[num_nodes]`` int64 (``-1`` for unlabelled nodes, NaN in OGB's files),
        ``num_classes`` ``labels.max() + 1``, and ``(seeds, labels)`` item sets from
        ``train``, ``valid`` and ``test``.
    """
    root = os.path.abspath(os.fspath(root))
    where = f"ogb_node_dataset('{root}')"
    raw = os.path.join(root, "raw")
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"{where}: no raw/ folder (expected OGB's layout: '{raw}/edge.csv.gz', ...)")
    name = os.path.basename(root)
    if add_inverse_edge is None:
        add_inverse_edge = _ADD_INVERSE_EDGE.get(name.replace("-", "_"), False)
    split_dir = _split_dir(root, split, where)
    binary = os.path.isfile(os.path.join(raw, "data.npz"))
    if binary:
        sources = [os.path.join(raw, "data.npz"), _required(os.path.join(raw, "node-label.npz"), where)]
    else:
        sources = [_required(os.path.join(raw, f), where) for f in ("edge.csv.gz", "num-node-list.csv.gz", "node-label.csv.gz")]
        sources += [p for p in (os.path.join(raw, f) for f in ("node-feat.csv.gz", "edge-feat.csv.gz")) if os.path.isfile(p)]
    split_files = [_required(os.path.join(split_dir, f"{s}.csv.gz"), where) for s in ("train", "valid", "test")]
    cache = os.path.abspath(os.fspath(cache_dir)) if cache_dir is not None else os.path.join(root, "graphpipe")
    stamp = {
        "version": _CACHE_VERSION,
        "add_inverse_edge": bool(add_inverse_edge),
        "split": os.path.basename(split_dir),
        "files": fingerprint(*sources, *split_files),
    }
    stamp_file = os.path.join(cache, "ogb.json")
    fresh = False
    if not force_preprocess and os.path.isfile(stamp_file):
        with open(stamp_file) as f:
            fresh = json.load(f) == stamp
    if not fresh:
        os.makedirs(cache, exist_ok=True)
        if os.path.exists(stamp_file):
            os.remove(stamp_file)
        _convert(raw, binary, split_files, cache, bool(add_inverse_edge), where)
        with open(stamp_file, "w") as f:
            json.dump(stamp, f)

    graph = CSCGraph.load(os.path.join(cache, "graph.pt"), mmap=True)
    labels = torch.from_numpy(np.load(os.path.join(cache, "labels.npy")))
    node_features = {"feat": os.path.join(cache, "node_feat.npy")} if os.path.isfile(os.path.join(cache, "node_feat.npy")) else {}
    edge_features = {"feat": os.path.join(cache, "edge_feat.npy")} if os.path.isfile(os.path.join(cache, "edge_feat.npy")) else {}
    sets = []
    for s in ("train", "valid", "test"):
        seeds = torch.from_numpy(np.load(os.path.join(cache, f"{s}.npy")))
        sets.append(ItemSet((seeds, labels[seeds]), names=("seeds", "labels")) if seeds.numel() else None)
    return NodeClassificationDataset(
        name=name,
        graph=graph,
        features=FeatureStore(node_features, edge_features),
        train_set=sets[0],
        validation_set=sets[1],
        test_set=sets[2],
        num_classes=int(labels.max()) + 1 if labels.numel() else 0,
        labels=labels,
    )


def _required(path: str, where: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}: missing file '{path}' (OGB's node-property-prediction layout)")
    return path


def _split_dir(root: str, split: Optional[str], where: str) -> str:
    splits = os.path.join(root, "split")
    names = sorted(d for d in os.listdir(splits) if os.path.isdir(os.path.join(splits, d))) if os.path.isdir(splits) else []
    if split is None:
        if len(names) != 1:
            raise ValueError(f"{where}: give `split`, one of the folders in '{splits}': {names}")
        split = names[0]
    if split not in names:
        raise FileNotFoundError(f"{where}: no split folder '{os.path.join(splits, split)}'; there are {names}")
    return os.path.join(splits, split)


def _convert(raw: str, binary: bool, split_files, cache: str, add_inverse_edge: bool, where: str) -> None:
    """Write graph.pt, node_feat.npy, edge_feat.npy, labels.npy and the split .npy files."""
    edges_file = os.path.join(cache, "edges.npy")
    scratch = [edges_file, os.path.join(cache, "edges_both.npy"), os.path.join(cache, "edge_feat_once.npy")]
    for stale in ("node_feat.npy", "edge_feat.npy"):  # of an earlier conversion
        if os.path.exists(os.path.join(cache, stale)):
            os.remove(os.path.join(cache, stale))
    try:
        if binary:
            npz = os.path.join(raw, "data.npz")
            members = _npz_members(npz)
            _npz_to_npy(npz, "edge_index", edges_file, where)
            num_nodes = int(np.sum(_npz_small(npz, "num_nodes_list")))
            if "node_feat" in members:
                _npz_to_npy(npz, "node_feat", os.path.join(cache, "node_feat.npy"), where)
            if "edge_feat" in members:
                _npz_to_npy(npz, "edge_feat", scratch[2], where)
            labels = _npz_small(os.path.join(raw, "node-label.npz"), "node_label")
        else:
            csv_to_npy(os.path.join(raw, "edge.csv.gz"), edges_file, np.int64, transpose=True)
            num_nodes = int(read_csv(os.path.join(raw, "num-node-list.csv.gz"), np.int64).sum())
            if os.path.isfile(os.path.join(raw, "node-feat.csv.gz")):
                csv_to_npy(os.path.join(raw, "node-feat.csv.gz"), os.path.join(cache, "node_feat.npy"), np.float32)
            if os.path.isfile(os.path.join(raw, "edge-feat.csv.gz")):
                csv_to_npy(os.path.join(raw, "edge-feat.csv.gz"), scratch[2], np.float32)
            labels = read_csv(os.path.join(raw, "node-label.csv.gz"), np.float64)
        if os.path.isfile(scratch[2]):
            _interleave_rows(np.load(scratch[2], mmap_mode="r"), os.path.join(cache, "edge_feat.npy"), add_inverse_edge)
        if add_inverse_edge:
            _interleave_inverse_edges(np.load(edges_file, mmap_mode="r"), scratch[1])
            edges_file = scratch[1]
        labels = np.asarray(labels, dtype=np.float64).reshape(labels.shape[0], -1)[:, 0]
        if labels.shape[0] != num_nodes:
            raise ValueError(f"{where}: the node labels have {labels.shape[0]} rows, the graph {num_nodes} nodes")
        np.save(os.path.join(cache, "labels.npy"), np.where(np.isnan(labels), -1, labels).astype(np.int64))
        for path, s in zip(split_files, ("train", "valid", "test")):
            seeds = read_csv(path, np.int64).reshape(-1)
            if seeds.size and (seeds.min() < 0 or seeds.max() >= num_nodes):
                raise ValueError(f"{where}: '{path}' holds node ids outside 0..{num_nodes - 1}")
            np.save(os.path.join(cache, f"{s}.npy"), seeds)
        try:
            CSCGraph.from_coo_files(os.path.join(cache, "graph.pt"), edges_file, num_nodes=num_nodes)
        except ValueError as error:
            raise ValueError(f"{where}: the edge list: {error}") from error
    finally:
        for path in scratch:
            if os.path.exists(path):
                os.remove(path)


def _interleave_inverse_edges(edges: np.ndarray, out_path: str) -> None:
    """OGB's ``add_inverse_edge``: ``[2, E]`` -> ``[2, 2E]`` with column ``2i`` = edge
    ``i`` and column ``2i + 1`` = edge ``i`` reversed, written ``_CHUNK`` edges at a time."""
    out = np.lib.format.open_memmap(out_path, mode="w+", dtype=edges.dtype, shape=(2, 2 * edges.shape[1]))
    for start in range(0, edges.shape[1], _CHUNK):
        chunk = np.asarray(edges[:, start : start + _CHUNK])
        out[0, 2 * start : 2 * (start + chunk.shape[1]) : 2] = chunk[0]
        out[1, 2 * start : 2 * (start + chunk.shape[1]) : 2] = chunk[1]
        out[0, 2 * start + 1 : 2 * (start + chunk.shape[1]) : 2] = chunk[1]
        out[1, 2 * start + 1 : 2 * (start + chunk.shape[1]) : 2] = chunk[0]
    out.flush()


def _interleave_rows(rows: np.ndarray, out_path: str, twice: bool) -> None:
    """Copy ``rows`` to ``out_path``, each row twice in a row when ``twice`` (edge
    features under ``add_inverse_edge``)."""
    repeat = 2 if twice else 1
    out = np.lib.format.open_memmap(out_path, mode="w+", dtype=rows.dtype, shape=(repeat * rows.shape[0], *rows.shape[1:]))
    for start in range(0, rows.shape[0], _CHUNK):
        chunk = np.asarray(rows[start : start + _CHUNK])
        for k in range(repeat):
            out[repeat * start + k : repeat * (start + chunk.shape[0]) : repeat] = chunk
    out.flush()


def _npz_members(path: str):
    with zipfile.ZipFile(path) as z:
        return {n[:-4] for n in z.namelist() if n.endswith(".npy")}


def _npz_small(path: str, key: str) -> np.ndarray:
    with np.load(path) as data:
        if key not in data:
            raise ValueError(f"'{path}' has no array '{key}' (it holds {sorted(data.files)})")
        return data[key]


def _npz_to_npy(path: str, key: str, out_path: str, where: str) -> None:
    """Stream member ``key`` of the ``.npz`` ``path`` (compressed or not) into ``out_path``
    without holding it in memory: the member is itself a ``.npy`` file."""
    with zipfile.ZipFile(path) as z:
        try:
            member = z.open(f"{key}.npy")
        except KeyError:
            raise ValueError(f"{where}: '{path}' has no array '{key}'") from None
        with member, open(out_path, "wb") as out:
            while True:
                block = member.read(1 << 26)
                if not block:
                    break
                out.write(block)
