"""OGB node-property-prediction datasets already on local disk (no download).

For users who downloaded ``ogbn-products``, ``ogbn-arxiv``, ``ogbn-proteins``, ``ogbn-papers100M`` with
the ``ogb`` package: :func:`ogb_node_dataset` reads the dataset folder as OGB left it::

    <root>/raw/edge.csv.gz            "src,dst" per line        (or raw/data.npz with
    <root>/raw/node-feat.csv.gz       one feature row per line    edge_index [2, E],
    <root>/raw/edge-feat.csv.gz       optional                    node_feat, edge_feat:
    <root>/raw/node-label.csv.gz      one label per line, or      the binary layout of
                                      one column per task         papers100M, with
    <root>/raw/num-node-list.csv.gz   the node count              raw/node-label.npz)
    <root>/split/<name>/{train,valid,test}.csv.gz   one node id per line

and converts it once, in bounded memory (CSV and npz members are streamed into ``.npy``
files; the graph is built with :meth:`graphpipe.CSCGraph.from_coo_files`), into a cache
beside it, ``<root>/graphpipe/``. Later calls map the cache: the graph and the features
stay on disk until read.

The folder is read as untrusted input, as :class:`~graphpipe.datasets.OnDiskDataset`
reads one: its files must resolve (symlinks included) inside ``root`` unless the caller
names ``trusted_directories``, npz members are read without unpickling, node ids are
checked before anything is built from them, and the cache is written through a private
scratch directory renamed into a real directory (planted symlinks are replaced, never
followed).

The graph holds OGB's edges as ``PygNodePropPredDataset`` / ``DglNodePropPredDataset``
build them: with ``add_inverse_edge`` (OGB's ``master.csv`` sets it for ogbn-products and
ogbn-proteins) edge ``i`` of the file becomes edges ``2i`` (``u -> v``) and ``2i + 1``
(``v -> u``), and ``graph.original_edge_ids`` are these OGB edge ids.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from typing import List, Optional, Sequence

import numpy as np
import torch

from graphpipe._internal.safe_files import inside, scratch_directory
from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import ItemSet
from graphpipe.ops.csc_build import coo_id_range
from graphpipe.datasets._files import cache_is_fresh, csv_to_npy, fingerprint, make_cache_directory, publish_cache, read_array, read_csv
from graphpipe.datasets._files import trusted_directories as check_trusted_directories
from graphpipe.datasets.base import NodeClassificationDataset, num_classes_of

__all__ = ["ogb_node_dataset"]

# add_inverse_edge from OGB's master.csv, by dataset folder name (ogb names folders
# "ogbn_products" for "ogbn-products").
_ADD_INVERSE_EDGE = {
    "ogbn_products": True,
    "ogbn_proteins": True,
    "ogbn_arxiv": False,
    "ogbn_papers100M": False,
}
_CACHE_VERSION = 3  # 3: every label column kept (2 kept column 0 of ogbn-proteins' 112)
_CHUNK = 1 << 24
_OPT_IN = "ogb_node_dataset(..., trusted_directories=[...])"
_SPLITS = ("train", "valid", "test")


def ogb_node_dataset(
    root: str | os.PathLike,
    split: Optional[str] = None,
    add_inverse_edge: Optional[bool] = None,
    force_preprocess: bool = False,
    cache_dir: Optional[str | os.PathLike] = None,
    *,
    trusted_directories: Sequence[str | os.PathLike] = (),
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
        cache_dir: where the converted files go (default ``<root>/graphpipe``); a real
            directory, not a symlink.
        trusted_directories: directories outside ``root`` that its files may resolve
            into, e.g. where ``raw/`` is a symlink to another disk:
            ``trusted_directories=["/bigdisk/ogbn_papers100M"]``. By default every file
            must resolve inside ``root``.

    Returns:
        A :class:`NodeClassificationDataset`: ``graph`` mapped from the cache,
        ``features["feat"]`` (``[num_nodes, dim]``, memory-mapped: float32 from CSV, the
        npz member's dtype from the binary layout, as OGB keeps it) and, with an
        ``edge-feat`` file, edge feature ``"feat"`` (by OGB edge id), ``labels``
        ``[num_nodes]`` int64 (``-1`` for unlabelled nodes, NaN in OGB's files), or
        ``[num_nodes, num_tasks]`` int64 for a multi-task dataset (ogbn-proteins: 112
        binary tasks, as OGB's ``y`` and its evaluator's ``y_true``), ``num_classes``
        ``labels.max() + 1`` (multi-task: the number of tasks, OGB's ``num_tasks``,
        112 for ogbn-proteins, whose OGB and PyG ``num_classes`` is 2, the classes of
        each task), and ``(seeds, labels)`` item sets from ``train``, ``valid`` and
        ``test`` (labels: the seeds' rows). OGB's additional node files (``node_year``,
        ``node_species``) are not read.
    """
    root = os.path.abspath(os.fspath(root))
    where = f"ogb_node_dataset('{root}')"
    trusted = check_trusted_directories(trusted_directories, where)
    raw = os.path.join(root, "raw")
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"{where}: no raw/ folder (expected OGB's layout: '{raw}/edge.csv.gz', ...)")
    name = os.path.basename(root)
    if add_inverse_edge is None:
        add_inverse_edge = _ADD_INVERSE_EDGE.get(name.replace("-", "_"), False)
    split_dir = _split_dir(root, split, where)
    binary = os.path.isfile(os.path.join(raw, "data.npz"))
    if binary:
        names = ["data.npz", "node-label.npz"]
    else:
        names = ["edge.csv.gz", "num-node-list.csv.gz", "node-label.csv.gz"]
        names += [f for f in ("node-feat.csv.gz", "edge-feat.csv.gz") if os.path.isfile(os.path.join(raw, f))]
    inputs = {f: _input(root, os.path.join("raw", f), trusted, where) for f in names}
    split_relative = os.path.relpath(split_dir, root)
    split_files = [_input(root, os.path.join(split_relative, f"{s}.csv.gz"), trusted, where) for s in _SPLITS]
    default_cache = cache_dir is None
    cache = os.path.join(root, "graphpipe") if default_cache else os.path.abspath(os.fspath(cache_dir))
    stamp = {
        "version": _CACHE_VERSION,
        "add_inverse_edge": bool(add_inverse_edge),
        "split": os.path.basename(split_dir),
        "files": fingerprint(*inputs.values(), *split_files),
    }
    cached = None if force_preprocess else cache_is_fresh(cache, "ogb.json", stamp, where)
    if cached is None:
        make_cache_directory(cache, default_cache, where)
        with scratch_directory(cache, f"{where}: cache") as scratch:
            cached = _convert(inputs, binary, split_files, scratch, bool(add_inverse_edge), where)
            stale = {"node_feat.npy", "edge_feat.npy"} - set(cached)  # of an earlier conversion
            publish_cache(scratch, cache, "ogb.json", stamp, cached, stale)
    return _read_cache(name, cache, cached)


def _read_cache(name: str, cache: str, cached) -> NodeClassificationDataset:
    """The dataset of the converted files ``cached`` in ``cache``, mapped where large."""
    graph = CSCGraph.load(os.path.join(cache, "graph.pt"), mmap=True)
    labels = torch.from_numpy(np.load(os.path.join(cache, "labels.npy")))
    node_features = {"feat": os.path.join(cache, "node_feat.npy")} if "node_feat.npy" in cached else {}
    edge_features = {"feat": os.path.join(cache, "edge_feat.npy")} if "edge_feat.npy" in cached else {}
    sets = []
    for s in _SPLITS:
        seeds = torch.from_numpy(np.load(os.path.join(cache, f"{s}.npy")))
        sets.append(ItemSet((seeds, labels[seeds]), names=("seeds", "labels")) if seeds.numel() else None)
    return NodeClassificationDataset(
        name=name,
        graph=graph,
        features=FeatureStore(node_features, edge_features),
        train_set=sets[0],
        validation_set=sets[1],
        test_set=sets[2],
        num_classes=num_classes_of(None, [labels]),
        labels=labels,
    )


def _input(root: str, relative: str, trusted: List[str], where: str) -> str:
    """The input file ``root/relative`` resolved (refused outside ``root`` and the trusted
    directories)."""
    path = os.path.join(root, relative)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}: missing file '{path}' (OGB's node-property-prediction layout)")
    return inside(root, relative, f"{where}: '{relative}'", trusted, _OPT_IN)


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


def _convert(inputs: dict, binary: bool, split_files, scratch: str, add_inverse_edge: bool, where: str) -> List[str]:
    """Write graph.pt, labels.npy, the split .npy files and, when the dataset has them,
    node_feat.npy and edge_feat.npy into ``scratch``; return their names."""
    out = ["graph.pt", "labels.npy", *(f"{s}.npy" for s in _SPLITS)]
    edges_file = os.path.join(scratch, "edges.npy")
    edge_feat_once = os.path.join(scratch, "edge_feat_once.npy")
    if binary:
        npz = inputs["data.npz"]
        members = _npz_members(npz, where)
        _npz_to_npy(npz, "edge_index", edges_file, where)
        num_nodes = int(np.sum(_npz_small(npz, "num_nodes_list", where)))
        if "node_feat" in members:
            _npz_to_npy(npz, "node_feat", os.path.join(scratch, "node_feat.npy"), where)
            out.append("node_feat.npy")
        if "edge_feat" in members:
            _npz_to_npy(npz, "edge_feat", edge_feat_once, where)
        for name in ("node_feat", "edge_feat"):  # a bool, integer or floating table, no pickled objects
            if name in members:
                read_array(os.path.join(scratch, "node_feat.npy" if name == "node_feat" else edge_feat_once), "numpy",
                           False, f"{where}: '{npz}' member {name}: ")  # fmt: skip
        labels = _npz_small(inputs["node-label.npz"], "node_label", where)
        edge_source = f"'{npz}' (member edge_index)"
    else:
        csv_to_npy(inputs["edge.csv.gz"], edges_file, np.int64, transpose=True, expected_columns=2)
        num_nodes = int(read_csv(inputs["num-node-list.csv.gz"], np.int64).sum())
        if "node-feat.csv.gz" in inputs:
            csv_to_npy(inputs["node-feat.csv.gz"], os.path.join(scratch, "node_feat.npy"), np.float32)
            out.append("node_feat.npy")
        if "edge-feat.csv.gz" in inputs:
            csv_to_npy(inputs["edge-feat.csv.gz"], edge_feat_once, np.float32)
        labels = read_csv(inputs["node-label.csv.gz"], np.float64)
        edge_source = f"'{inputs['edge.csv.gz']}'"
    edges = _checked_edges(edges_file, num_nodes, edge_source, where)  # before anything is built from them
    _check_rows(os.path.join(scratch, "node_feat.npy"), num_nodes, "node", where)
    _check_rows(edge_feat_once, edges.shape[1], "edge", where)
    if os.path.isfile(edge_feat_once):
        _interleave_rows(np.load(edge_feat_once, mmap_mode="r"), os.path.join(scratch, "edge_feat.npy"), add_inverse_edge)
        out.append("edge_feat.npy")
    if add_inverse_edge:
        edges_file = os.path.join(scratch, "edges_both.npy")
        _interleave_inverse_edges(edges, edges_file)
    del edges
    labels = np.asarray(labels, dtype=np.float64).reshape(labels.shape[0], -1)
    if labels.shape[1] == 1:  # single-task (arxiv, products, papers100M): [N]; several tasks stay [N, T]
        labels = labels[:, 0]
    if labels.shape[0] != num_nodes:
        raise ValueError(f"{where}: the node labels have {labels.shape[0]} rows, the graph {num_nodes} nodes")
    np.save(os.path.join(scratch, "labels.npy"), np.where(np.isnan(labels), -1, labels).astype(np.int64))
    for path, s in zip(split_files, _SPLITS):
        seeds = read_csv(path, np.int64).reshape(-1)
        if seeds.size and (seeds.min() < 0 or seeds.max() >= num_nodes):
            raise ValueError(f"{where}: '{path}' holds node ids outside 0..{num_nodes - 1}")
        np.save(os.path.join(scratch, f"{s}.npy"), seeds)
    try:
        CSCGraph.from_coo_files(os.path.join(scratch, "graph.pt"), edges_file, num_nodes=num_nodes)
    except ValueError as error:
        raise ValueError(f"{where}: the edge list: {error}") from error
    return out


def _check_rows(path: str, rows: int, kind: str, where: str) -> None:
    """A converted ``{kind}_feat`` table at ``path`` (if any) has a row per node / file edge."""
    if os.path.isfile(path) and (have := np.load(path, mmap_mode="r").shape[0]) != rows:
        raise ValueError(f"{where}: the {kind} features have {have} rows, the graph {rows} {kind}s")


def _checked_edges(path: str, num_nodes: int, source: str, where: str) -> np.ndarray:
    """The ``[2, E]`` edge list ``path`` (converted from ``source``) mapped, after checking
    its dtype, shape and that every id is in ``[0, num_nodes)``."""
    try:
        edges = np.load(path, mmap_mode="r")
    except ValueError as error:  # e.g. a header claiming more than the file holds
        raise ValueError(f"{where}: the edge list {source} cannot be read: {error}") from error
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
        raise ValueError(f"{where}: the edge list {source} must be [2, num_edges] integers, got {edges.dtype} {edges.shape}")
    lo, hi = coo_id_range(edges[0], edges[1], _CHUNK)
    if lo < 0 or hi >= num_nodes:
        raise ValueError(
            f"{where}: the edge list {source} holds node id {lo if lo < 0 else hi}, outside 0..{num_nodes - 1} "
            f"(num-node-list gives {num_nodes} nodes)"
        )
    return edges


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


def _npz_members(path: str, where: str):
    try:
        with zipfile.ZipFile(path) as z:
            return {n[:-4] for n in z.namelist() if n.endswith(".npy")}
    except zipfile.BadZipFile as error:
        raise ValueError(f"{where}: '{path}' is not a readable .npz (zip) file ({error}); download it again") from error


def _npz_small(path: str, key: str, where: str) -> np.ndarray:
    with np.load(path, allow_pickle=False) as data:
        if key not in data:
            raise ValueError(f"{where}: '{path}' has no array '{key}' (it holds {sorted(data.files)})")
        try:
            return data[key]
        except ValueError as error:  # object arrays (pickles) are not loaded
            raise ValueError(f"{where}: '{path}' member {key}: {error}") from error


def _npz_to_npy(path: str, key: str, out_path: str, where: str) -> None:
    """Stream member ``key`` of the ``.npz`` ``path`` (compressed or not) into ``out_path``
    without holding it in memory: the member is itself a ``.npy`` file."""
    with zipfile.ZipFile(path) as z:
        try:
            member = z.open(f"{key}.npy")
        except KeyError:
            raise ValueError(f"{where}: '{path}' has no array '{key}'") from None
        with member, open(out_path, "xb") as out:
            try:
                while True:
                    block = member.read(1 << 26)
                    if not block:
                        break
                    out.write(block)
            except (zipfile.BadZipFile, zlib.error, EOFError) as error:
                raise ValueError(
                    f"{where}: '{path}' member {key}.npy cannot be read ({error}); download it again"
                ) from error
