"""OnDiskDataset: GraphBolt's on-disk dataset directories, read as they are.

A GraphBolt dataset is a directory with a ``metadata.yaml`` (GraphBolt's documented
layout, ``dgl.graphbolt.OnDiskDataset``)::

    dataset_name: my_graph
    graph:
      nodes:
        - num: 1000
      edges:
        - format: csv          # lines "src,dst", or numpy: a [2, num_edges] .npy
          path: edges/edge.csv
      feature_data:            # optional: attributes the sampler reads (e.g. weights)
        - domain: edge
          name: weight
          format: numpy
          path: edges/weight.npy
    feature_data:
      - domain: node
        name: feat
        format: numpy          # or torch
        in_memory: false       # memory-mapped; default true
        path: data/feat.npy
    tasks:
      - name: node_classification
        num_classes: 10
        train_set:
          - data:
              - name: seeds    # "seed_nodes" in GraphBolt 2.1
                format: numpy
                path: set/train_seeds.npy
              - name: labels
                format: numpy
                path: set/train_labels.npy
        validation_set: [...]
        test_set: [...]

Paths are relative to the directory. The graph is built once from the edge file with
:meth:`graphpipe.CSCGraph.from_coo_files` (bounded memory) and cached in
``<directory>/graphpipe/graph.pt``, rebuilt when the edge files or the ``graph`` section
change; GraphBolt's own ``preprocessed/`` folder is neither read nor written, so both
libraries can share a directory. Features with ``in_memory: false`` stay on disk
(memory-mapped ``.npy``); a 1-D feature is read as ``[n, 1]``, as GraphBolt does.

Heterogeneous datasets (GraphBolt's ``type`` fields) are read too: ``graph.nodes`` lists
``{type: paper, num: N}`` entries, ``graph.edges`` one edge file per ``type:
"src:relation:dst"`` (type-local ids), ``feature_data`` entries carry the node or edge
``type`` (stored under ``(type, name)`` keys), and a task's sets list one entry per node
``type``, read as a :class:`~graphpipe.HeteroItemSet`. The typed graph is built in
memory (:meth:`~graphpipe.CSCGraph.from_hetero_edges`; the bounded-memory builder is
homogeneous) and cached as above; typed ``graph.feature_data`` may give edge attributes
(one file per edge type) but not node attributes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from ..csc_graph import CSCGraph
from ..disk_feature import DiskBasedFeature
from ..feature_store import Feature, FeatureStore
from ..item_set import HeteroItemSet, ItemSet
from ._files import csv_to_npy, fingerprint, read_array, read_csv

__all__ = ["OnDiskDataset", "Task"]

# GraphBolt 2.1 called the seed field of node tasks "seed_nodes"; 2.2 and graphpipe's
# ItemSampler call it "seeds".
_FIELD_RENAMES = {"seed_nodes": "seeds"}
_CACHE_VERSION = 1


@dataclass
class Task:
    """One task of an on-disk dataset, as GraphBolt's ``Task``.

    Attributes:
        metadata: the task's other fields in ``metadata.yaml`` (``name``,
            ``num_classes``, ...).
        train_set, validation_set, test_set: :class:`~graphpipe.ItemSet` s with the
            fields listed under ``data`` (e.g. ``("seeds", "labels")``), or None.
    """

    metadata: Dict[str, Any]
    train_set: Optional[ItemSet] = None
    validation_set: Optional[ItemSet] = None
    test_set: Optional[ItemSet] = None

    @property
    def num_classes(self) -> Optional[int]:
        return self.metadata.get("num_classes")

    def __repr__(self) -> str:
        return (
            f"Task(metadata={self.metadata}, train_set={self.train_set}, "
            f"validation_set={self.validation_set}, test_set={self.test_set})"
        )


class OnDiskDataset:
    """A GraphBolt on-disk dataset directory (see the module docstring for the layout).

    ``OnDiskDataset(path)`` reads ``metadata.yaml``, builds or opens the cached graph,
    maps the features and reads the item sets. ``.load()`` returns the dataset itself,
    so GraphBolt scripts (``gb.OnDiskDataset(path).load()``) work with ``gb`` replaced
    by ``graphpipe.datasets``.

    Args:
        path: the dataset directory (holding ``metadata.yaml``).
        tasks: names of the tasks to read (default all).
        force_preprocess: rebuild the cached graph even if it is up to date.
        cache_dir: where the graph cache goes (default ``<path>/graphpipe``), e.g. for
            a read-only dataset directory.
        disk_based_features: open ``in_memory: false`` numpy features as
            :class:`~graphpipe.DiskBasedFeature` (rows read with ``pread``, no page
            cache with ``O_DIRECT``; wrap them in a :class:`~graphpipe.CPUCachedFeature`)
            instead of memory maps.

    Attributes:
        dataset_name: ``dataset_name`` from the metadata (or the directory's name).
        graph: a :class:`~graphpipe.CSCGraph` mapped from the cache; its
            ``original_edge_ids`` are positions in the edge file (edge features are read
            by them), ``edge_attributes``/``node_attributes`` the ``graph.feature_data``.
        feature: a :class:`~graphpipe.FeatureStore` (also ``features``).
        tasks: the :class:`Task` s.
        all_nodes_set: an :class:`~graphpipe.ItemSet` of every node id.
        metadata: the parsed ``metadata.yaml``.

    Requires PyYAML (``pip install graphpipe[ondisk]`` or ``pip install pyyaml``).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        tasks: Optional[Sequence[str]] = None,
        force_preprocess: bool = False,
        cache_dir: Optional[str | os.PathLike] = None,
        disk_based_features: bool = False,
    ):
        path = os.path.abspath(os.fspath(path))
        where = f"OnDiskDataset('{path}')"
        metadata_path = os.path.join(path, "metadata.yaml")
        if not os.path.isfile(metadata_path):
            raise FileNotFoundError(f"{where}: no metadata.yaml in the directory (expected '{metadata_path}')")
        metadata = _read_yaml(metadata_path, where)
        if not isinstance(metadata, dict) or not isinstance(metadata.get("graph"), dict):
            raise ValueError(f"{where}: metadata.yaml must be a mapping with a `graph` section (nodes and edges)")
        self.path = path
        self.metadata = metadata
        self.dataset_name = str(metadata.get("dataset_name") or os.path.basename(path))
        cache_dir = os.path.abspath(os.fspath(cache_dir)) if cache_dir is not None else os.path.join(path, "graphpipe")
        self.graph = _load_graph(path, metadata["graph"], cache_dir, force_preprocess, where)
        self.feature = _feature_store(path, metadata.get("feature_data") or [], self.graph, disk_based_features, where)
        self.tasks = _tasks(path, metadata.get("tasks") or [], tasks, where)

    def load(self, tasks: Optional[Sequence[str]] = None) -> "OnDiskDataset":
        """GraphBolt's two-step API: the dataset is loaded already; ``tasks`` keeps
        only the named tasks."""
        if tasks is not None:
            tasks = [tasks] if isinstance(tasks, str) else list(tasks)
            self.tasks = [t for t in self.tasks if t.metadata.get("name") in tasks]
        return self

    @property
    def features(self) -> FeatureStore:
        return self.feature

    @property
    def all_nodes_set(self):
        """Every node id: an :class:`~graphpipe.ItemSet`, or a
        :class:`~graphpipe.HeteroItemSet` of every type's ids for a typed graph."""
        if self.graph.is_heterogeneous:
            return HeteroItemSet({t: ItemSet(n, names="seeds") for t, n in self.graph.num_nodes_per_type.items() if n})
        return ItemSet(self.graph.num_nodes, names="seeds")

    def __repr__(self) -> str:
        return (
            f"OnDiskDataset(name='{self.dataset_name}', path='{self.path}', num_nodes={self.graph.num_nodes}, "
            f"num_edges={self.graph.num_edges}, node_features={self.feature.node_keys}, "
            f"edge_features={self.feature.edge_keys}, tasks={[t.metadata.get('name') for t in self.tasks]})"
        )


def _read_yaml(path: str, where: str):
    try:
        import yaml
    except ImportError as error:
        raise ImportError(
            f"{where}: reading metadata.yaml needs PyYAML: pip install pyyaml (or graphpipe[ondisk])"
        ) from error
    with open(path) as f:
        try:
            return yaml.safe_load(f)
        except yaml.YAMLError as error:
            raise ValueError(f"{where}: '{path}' is not valid YAML: {error}") from error


def _entry(entry, keys: Sequence[str], what: str, where: str, typed: Optional[bool] = False) -> dict:
    """A metadata entry checked to be a mapping with ``keys`` and a ``type`` when
    ``typed``, none when not (None: either)."""
    if not isinstance(entry, dict) or any(k not in entry for k in keys):
        raise ValueError(f"{where}: every {what} must be a mapping with {list(keys)}, got {entry!r}")
    has_type = entry.get("type") is not None
    if typed is not None and has_type != typed:
        kind = "a heterogeneous" if typed else "a homogeneous"
        raise ValueError(
            f"{where}: {what} {entry!r} {'lacks' if typed else 'has'} a `type`, but the graph is {kind} one "
            f"(every node, edge, feature and set entry of a heterogeneous dataset names its type, and none of a "
            f"homogeneous one)"
        )
    return entry


def _load_graph(root: str, graph_meta: dict, cache_dir: str, force: bool, where: str) -> CSCGraph:
    nodes, edges = graph_meta.get("nodes"), graph_meta.get("edges")
    if not isinstance(nodes, list) or not nodes or not isinstance(edges, list) or not edges:
        raise ValueError(f"{where}: `graph` must list node entries and edge entries, got {graph_meta!r}")
    if any(isinstance(n, dict) and n.get("type") is not None for n in nodes):
        return _load_typed_graph(root, graph_meta, cache_dir, force, where)
    if len(nodes) != 1 or len(edges) != 1:
        raise ValueError(
            f"{where}: a homogeneous `graph` lists one node entry and one edge entry (a heterogeneous one gives "
            f"every entry a `type`), got {len(nodes)} and {len(edges)}"
        )
    num_nodes = _entry(nodes[0], ["num"], "graph node entry", where)["num"]
    edge_entry = _entry(edges[0], ["format", "path"], "graph edge entry", where)
    edge_path = os.path.join(root, edge_entry["path"])
    if edge_entry["format"] not in ("csv", "numpy"):
        raise ValueError(f"{where}: the edge `format` must be 'csv' or 'numpy', got {edge_entry['format']!r}")
    if not os.path.isfile(edge_path):
        hint = ""
        if os.path.isfile(os.path.join(root, "preprocessed", "fused_csc_sampling_graph.pt")):
            hint = (
                "; only GraphBolt's preprocessed graph is there, which needs DGL's C++ library to read: "
                "in an environment with DGL, save its edges with g = torch.load('preprocessed/"
                "fused_csc_sampling_graph.pt'); numpy.save(edge file, numpy.stack([g.indices.numpy(), "
                "numpy.repeat(numpy.arange(g.total_num_nodes), numpy.diff(g.csc_indptr.numpy()))]))"
            )
        raise FileNotFoundError(f"{where}: the edge file is missing: '{edge_path}'{hint}")
    attributes = [_entry(f, ["domain", "name", "format", "path"], "graph feature", where)
                  for f in graph_meta.get("feature_data") or []]  # fmt: skip
    attribute_paths = [os.path.join(root, f["path"]) for f in attributes]
    graph_file, stamp = _cached_graph(graph_meta, [edge_path, *attribute_paths], cache_dir, force)
    if stamp is None:
        return CSCGraph.load(graph_file, mmap=True)
    scratch = os.path.join(cache_dir, "edges.npy")
    try:
        if edge_entry["format"] == "csv":
            csv_to_npy(edge_path, scratch, np.int64, transpose=True)
            edge_path = scratch
        try:
            graph = CSCGraph.from_coo_files(graph_file, edge_path, num_nodes=num_nodes)
        except ValueError as error:
            raise ValueError(f"{where}: edge file '{os.path.join(root, edge_entry['path'])}': {error}") from error
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
    if attributes:
        graph = _with_attributes(graph, attributes, attribute_paths, graph_file, where)
    _write_stamp(cache_dir, stamp)
    return graph


def _cached_graph(graph_meta: dict, paths: List[str], cache_dir: str, force: bool):
    """``(graph file, stamp)``: the stamp to write once the graph is built, or None when the
    cached graph is up to date with the ``graph`` section and the files ``paths``."""
    stamp = {
        "version": _CACHE_VERSION,
        "graph": json.loads(json.dumps(graph_meta, default=str)),
        "files": fingerprint(*[p for p in paths if os.path.isfile(p)]),
    }
    graph_file = os.path.join(cache_dir, "graph.pt")
    stamp_file = os.path.join(cache_dir, "graph.json")
    if not force and os.path.isfile(graph_file) and os.path.isfile(stamp_file):
        with open(stamp_file) as f:
            if json.load(f) == stamp:
                return graph_file, None
    os.makedirs(cache_dir, exist_ok=True)
    if os.path.exists(stamp_file):
        os.remove(stamp_file)
    return graph_file, stamp


def _write_stamp(cache_dir: str, stamp: dict) -> None:
    with open(os.path.join(cache_dir, "graph.json"), "w") as f:
        json.dump(stamp, f)


def _load_typed_graph(root: str, graph_meta: dict, cache_dir: str, force: bool, where: str) -> CSCGraph:
    """A heterogeneous ``graph`` section: node counts per type, one edge file per edge type."""
    num_nodes = {}
    for entry in graph_meta["nodes"]:
        entry = _entry(entry, ["type", "num"], "graph node entry", where, typed=True)
        num_nodes[str(entry["type"])] = entry["num"]
    edge_entries = [_entry(e, ["type", "format", "path"], "graph edge entry", where, typed=True) for e in graph_meta["edges"]]
    attributes = [_entry(f, ["domain", "type", "name", "format", "path"], "graph feature", where, typed=True)
                  for f in graph_meta.get("feature_data") or []]  # fmt: skip
    paths = [os.path.join(root, e["path"]) for e in edge_entries + attributes]
    graph_file, stamp = _cached_graph(graph_meta, paths, cache_dir, force)
    if stamp is None:
        return CSCGraph.load(graph_file, mmap=True)
    edges = {}
    for entry in edge_entries:
        path = os.path.join(root, entry["path"])
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{where}: the edge file of edge type {entry['type']!r} is missing: '{path}'")
        if entry["format"] == "csv":
            pairs = read_csv(path, np.int64).T
        elif entry["format"] == "numpy":
            pairs = np.load(path)
        else:
            raise ValueError(f"{where}: the edge `format` must be 'csv' or 'numpy', got {entry['format']!r}")
        if pairs.ndim != 2 or pairs.shape[0] != 2:
            raise ValueError(f"{where}: edge file '{path}' must hold [2, num_edges] (or csv lines 'src,dst'), got {pairs.shape}")
        edges[entry["type"]] = torch.from_numpy(np.ascontiguousarray(pairs))
    edge_attributes: Dict[str, Dict[str, torch.Tensor]] = {}
    for entry, path in zip(attributes, paths[len(edge_entries) :]):
        if entry["domain"] != "edge":
            raise NotImplementedError(
                f"{where}: graph feature '{entry['name']}' of {entry['domain']} type {entry['type']!r}: typed graphs "
                f"take edge attributes only; list node data under the top-level `feature_data`"
            )
        data = torch.as_tensor(np.asarray(read_array(path, entry["format"], True, f"{where}: graph feature: ")))
        edge_attributes.setdefault(entry["name"], {})[entry["type"]] = data
    try:
        graph = CSCGraph.from_hetero_edges(edges, num_nodes, edge_attributes)
    except ValueError as error:
        raise ValueError(f"{where}: graph: {error}") from error
    graph.save(graph_file)
    _write_stamp(cache_dir, stamp)
    return CSCGraph.load(graph_file, mmap=True)


def _with_attributes(graph: CSCGraph, attributes, paths, graph_file: str, where: str) -> CSCGraph:
    """The graph with the ``graph.feature_data`` arrays as node/edge attributes (edge
    arrays are in edge-file order: permuted to CSC order), saved over ``graph_file``."""
    node_attributes, edge_attributes = {}, {}
    for entry, path in zip(attributes, paths):
        data = torch.as_tensor(np.asarray(read_array(path, entry["format"], True, f"{where}: graph feature: ")))
        if entry["domain"] == "node":
            node_attributes[entry["name"]] = data
        elif entry["domain"] == "edge":
            if data.shape[0] != graph.num_edges:
                raise ValueError(
                    f"{where}: graph feature '{path}' has {data.shape[0]} rows, the graph {graph.num_edges} edges"
                )
            edge_attributes[entry["name"]] = data if graph.original_edge_ids is None else data[graph.original_edge_ids.long()]
        else:
            raise ValueError(f"{where}: graph feature `domain` must be 'node' or 'edge', got {entry['domain']!r}")
    try:
        graph = dataclasses.replace(graph, node_attributes=node_attributes, edge_attributes=edge_attributes)
    except ValueError as error:
        raise ValueError(f"{where}: graph feature_data: {error}") from error
    graph.save(graph_file)
    return CSCGraph.load(graph_file, mmap=True)


def _feature_store(root: str, entries: list, graph: CSCGraph, disk_based: bool, where: str) -> FeatureStore:
    """The top-level ``feature_data``: keyed by name, or by ``(type, name)`` for a typed graph."""
    typed = graph.is_heterogeneous
    tables = {"node": {}, "edge": {}}
    if typed:
        edges_per_type = torch.bincount(graph.type_per_edge.to(torch.int64), minlength=len(graph.edge_types)).tolist()
        rows_of = {"node": graph.num_nodes_per_type, "edge": dict(zip(graph.edge_types, edges_per_type))}
    for entry in entries:
        entry = _entry(entry, ["domain", "name", "format", "path"], "feature_data entry", where, typed=typed)
        domain, name, path = entry["domain"], entry["name"], os.path.join(root, entry["path"])
        if domain not in tables:
            warnings.warn(f"{where}: skipping {domain!r} feature '{name}': graphpipe stores node and edge features")
            continue
        in_memory = entry.get("in_memory", True)
        data = read_array(path, entry["format"], in_memory, f"{where}: feature '{name}': ")
        if data.ndim == 1:  # GraphBolt's TorchBasedFeature reads a [n] table as [n, 1]
            feature = Feature(data.reshape(-1, 1))
        elif isinstance(data, np.memmap):
            # Path-backed: pickles as its path, opened again where used.
            feature = DiskBasedFeature(path) if disk_based else Feature(path)
        else:
            feature = Feature(data)
        if typed:
            if entry["type"] not in rows_of[domain]:
                raise ValueError(
                    f"{where}: {domain} feature '{name}' names unknown {domain} type {entry['type']!r}; the graph's "
                    f"{domain} types: {sorted(rows_of[domain])}"
                )
            rows, key = rows_of[domain][entry["type"]], (entry["type"], name)
        else:
            rows, key = (graph.num_nodes if domain == "node" else graph.num_edges), name
        if feature.num_rows != rows:
            raise ValueError(
                f"{where}: {domain} feature '{name}' ('{path}') has {feature.num_rows} rows, expected {rows}"
            )
        tables[domain][key] = feature
    return FeatureStore(tables["node"], tables["edge"])


def _tasks(root: str, entries: list, selected: Optional[Sequence[str]], where: str) -> List[Task]:
    if isinstance(selected, str):
        selected = [selected]
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: every task must be a mapping, got {entry!r}")
        metadata = {k: v for k, v in entry.items() if k not in ("train_set", "validation_set", "test_set")}
        if selected is not None and metadata.get("name") not in selected:
            continue
        sets = {}
        for set_name in ("train_set", "validation_set", "test_set"):
            sets[set_name] = _item_set(root, entry.get(set_name), f"{where}: task {metadata.get('name')!r} {set_name}")
        out.append(Task(metadata, **sets))
    if selected is not None:
        missing = set(selected) - {t.metadata.get("name") for t in out}
        if missing:
            raise ValueError(f"{where}: no task named {sorted(missing)} in metadata.yaml")
    return out


def _item_set(root: str, entries, where: str):
    """A task's set: an :class:`~graphpipe.ItemSet`, or with one entry per ``type`` a
    :class:`~graphpipe.HeteroItemSet`."""
    if not entries:
        return None
    if not isinstance(entries, list):
        raise ValueError(f"{where}: a set must be a list of entries, got {entries!r}")
    if any(isinstance(e, dict) and e.get("type") is not None for e in entries):
        typed = [_entry(e, ["type", "data"], "set", where, typed=True) for e in entries]
        return HeteroItemSet({str(e["type"]): _one_item_set(root, e, f"{where} type {e['type']!r}") for e in typed})
    if len(entries) != 1:
        raise ValueError(f"{where}: an untyped set has one entry, got {len(entries)} (typed sets give each a `type`)")
    return _one_item_set(root, _entry(entries[0], ["data"], "set", where), where)


def _one_item_set(root: str, entry: dict, where: str) -> ItemSet:
    fields, names = [], []
    for data in entry["data"]:
        data = _entry(data, ["format", "path"], "set data entry", where, typed=None)
        array = read_array(os.path.join(root, data["path"]), data["format"], True, f"{where}: ")
        fields.append(torch.as_tensor(np.asarray(array)) if isinstance(array, np.ndarray) else array)
        name = data.get("name") or "seeds"
        names.append(_FIELD_RENAMES.get(name, name))
    try:
        return ItemSet(tuple(fields), names=tuple(names))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from error
