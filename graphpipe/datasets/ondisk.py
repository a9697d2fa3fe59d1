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
:meth:`graphpipe.CSCGraph.from_coo_files` (bounded memory) and cached BESIDE the directory,
in ``<directory>.graphpipe/graph.pt`` (or ``cache_dir``), rebuilt when the edge files, the
``graph`` section or the options change. Beside, not inside: GraphBolt 2.1 hashes every
file under the dataset directory (``preprocessed/`` included) and preprocesses the whole
dataset again when any changes, so a cache inside would make the two libraries undo each
other's work; graphpipe writes nothing into the directory and reads nothing GraphBolt
writes there unless asked, so both share a directory. Features with ``in_memory: false``
stay on disk (memory-mapped ``.npy``); a 1-D feature is read as ``[n, 1]``, as GraphBolt does.

GraphBolt's own output opens too: ``OnDiskDataset("<directory>/preprocessed")`` reads its
``metadata.yaml`` (features and sets as GraphBolt converted them; its paths are relative
to ``<directory>``, as GraphBolt writes them, and must stay inside it). Its graph
(``graph_topology``, a ``fused_csc_sampling_graph.pt``) is a pickled DGL C++ object, which
graphpipe never unpickles: the graph is built from the ``graph`` section of
``<directory>/metadata.yaml`` (the edges GraphBolt built it from), with the same cache
as ``OnDiskDataset("<directory>")``.

A dataset directory is untrusted input (it may come from a download): every path in
``metadata.yaml`` is resolved, symlinks included, and must stay inside the directory
(``trusted_directories`` names more places it may point into); arrays are read without
unpickling (``allow_pickle=False``, ``weights_only=True``, YAML safe loading); the cache
is written only into a real directory (a symlinked cache directory is refused), through a
private scratch directory and a rename, so no planted symlink is written through.

Heterogeneous datasets (GraphBolt's ``type`` fields) are read too: ``graph.nodes`` lists
``{type: paper, num: N}`` entries, ``graph.edges`` one edge file per ``type:
"src:relation:dst"`` (type-local ids), ``feature_data`` entries carry the node or edge
``type`` (stored under ``(type, name)`` keys), and a task's sets list one entry per node
``type``, read as a :class:`~graphpipe.HeteroItemSet`. The typed graph is built in
memory (:meth:`~graphpipe.CSCGraph.from_hetero_edges`; the bounded-memory builder is
homogeneous) and cached as above. Typed ``graph.feature_data`` entries become graph
attributes as in GraphBolt: a node attribute lists one file per node type and is stored
over all nodes (type after type, in the graph's node type order), an edge attribute one
file per edge type, stored per CSC position.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import reprlib
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from graphpipe._internal.safe_files import inside, scratch_directory
from graphpipe.graph.build import is_npy_file
from graphpipe.graph.csc_graph import ORIGINAL_EDGE_ID, CSCGraph
from graphpipe.features.disk import DiskBasedFeature
from graphpipe.features.store import Feature, FeatureStore
from graphpipe.batch.item_set import HeteroItemSet, ItemSet
from graphpipe.datasets._files import cache_is_fresh, csv_to_npy, fingerprint, make_cache_directory, publish_cache, read_array, read_csv
from graphpipe.datasets._files import trusted_directories as check_trusted_directories

__all__ = ["BuiltinDataset", "OnDiskDataset", "Task", "ORIGINAL_EDGE_ID"]

_CACHE_VERSION = 2
_OPT_IN = "OnDiskDataset(..., trusted_directories=[...])"
# Metadata values in messages: bounded, since YAML aliases can nest a small file into a
# huge structure ("billion laughs"), which a plain repr would expand.
_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxdict, _SHOW.maxlist, _SHOW.maxstring, _SHOW.maxother = 3, 8, 8, 120, 120


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
            f"Task(metadata={_SHOW.repr(self.metadata)}, train_set={self.train_set}, "  # bounded: YAML aliases nest
            f"validation_set={self.validation_set}, test_set={self.test_set})"
        )


class OnDiskDataset:
    """A GraphBolt on-disk dataset directory (see the module docstring for the layout).

    ``OnDiskDataset(path)`` reads ``metadata.yaml``, builds or opens the cached graph,
    checks and maps the features and reads the item sets; numpy tables read into memory
    (``format: numpy``, ``in_memory: true``) are read by ``.load()`` or on first use of
    :attr:`feature` (``format: torch`` ones when the dataset is opened). ``.load()`` returns the
    dataset itself, so GraphBolt scripts (``gb.OnDiskDataset(path).load()``) work with
    ``gb`` replaced by ``graphpipe.datasets``; as in GraphBolt, edits to :attr:`yaml_data`
    before ``load()`` (``feature["in_memory"] = False``, an entry removed) are what
    ``load()`` reads, checked as the file is (the graph is built before: its section is
    not editable). A feature entry's other fields are its ``metadata()``.

    Args:
        path: the dataset directory (holding ``metadata.yaml``).
        tasks: names of the tasks to read (default all).
        force_preprocess: rebuild the cached graph even if it is up to date (a stale
            cache is always rebuilt; None, GraphBolt's default, is False).
        cache_dir: where the graph cache goes (default ``<path>.graphpipe``, beside the
            dataset directory, where GraphBolt does not look; for GraphBolt's
            ``<dataset>/preprocessed``: ``<dataset>.graphpipe``). It must be a real
            directory, not a symlink.
        disk_based_features: open ``in_memory: false`` numpy features as
            :class:`~graphpipe.DiskBasedFeature` (rows read with ``pread``, no page
            cache with ``O_DIRECT``; wrap them in a :class:`~graphpipe.CPUCachedFeature`)
            instead of memory maps. Not a 1-D one: it is read as ``[n, 1]``, as GraphBolt
            reads it, and stays a memory map (a DiskBasedFeature reads its file as ``[n]``).
        include_original_edge_id: GraphBolt's option: also store each edge's position
            in its edge file (within its edge type) as the edge attribute
            ``"_ORIGINAL_EDGE_ID"`` (:data:`ORIGINAL_EDGE_ID`, GraphBolt's name). The
            graph has these ids as ``graph.original_edge_ids`` either way (graphpipe's
            samplers and edge features use them); the attribute is for scripts that read
            ``graph.edge_attributes[gb.ORIGINAL_EDGE_ID]``.
        auto_cast_to_optimal_dtype: GraphBolt's option: with True (the default) the
            graph's ``indptr``, ``indices`` and ``original_edge_ids`` are int32 where
            their values fit, else int64; with False always int64. Unlike GraphBolt,
            item sets keep the dtype of their files either way (GraphBolt casts seeds to
            int32), and a typed graph's ``node_type_offset`` is int64.
        trusted_directories: directories outside ``path`` that paths in
            ``metadata.yaml`` may point into (directly or through symlinks), e.g. a
            shared feature store: ``trusted_directories=["/data/features"]``. By default
            every path must stay inside ``path``; one that leaves it is refused with an
            error naming the entry. Only arguments grant this, never a dataset file.

    Attributes:
        dataset_name: ``dataset_name`` from the metadata (or the directory's name).
        graph: a :class:`~graphpipe.CSCGraph` mapped from the cache; its
            ``original_edge_ids`` are positions in the edge file (edge features are read
            by them), ``edge_attributes``/``node_attributes`` the ``graph.feature_data``.
        feature: a :class:`~graphpipe.FeatureStore` (also ``features``).
        tasks: the :class:`Task` s.
        all_nodes_set: an :class:`~graphpipe.ItemSet` of every node id.
        yaml_data: the parsed ``metadata.yaml`` (GraphBolt's name).
        metadata: the same dict (assigning it replaces only this attribute).
        cache_dir: the directory of the graph cache.

    Requires PyYAML (``pip install 'graphpipe-gnn[ondisk]'`` or ``pip install pyyaml``).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        tasks: Optional[Sequence[str]] = None,
        force_preprocess: Optional[bool] = False,
        cache_dir: Optional[str | os.PathLike] = None,
        disk_based_features: bool = False,
        *,
        include_original_edge_id: bool = False,
        auto_cast_to_optimal_dtype: bool = True,
        trusted_directories: Sequence[str | os.PathLike] = (),
    ):
        path = os.path.abspath(os.fspath(path))
        where = f"OnDiskDataset('{path}')"
        force_preprocess = False if force_preprocess is None else force_preprocess
        for name, value in (("force_preprocess", force_preprocess), ("disk_based_features", disk_based_features),
                            ("include_original_edge_id", include_original_edge_id),
                            ("auto_cast_to_optimal_dtype", auto_cast_to_optimal_dtype)):  # fmt: skip
            if not isinstance(value, bool):
                raise TypeError(f"{where}: `{name}` must be True or False, got {_SHOW.repr(value)}")
        trusted = check_trusted_directories(trusted_directories, where)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{where}: no such directory")
        metadata_path = os.path.join(path, "metadata.yaml")
        if not os.path.isfile(metadata_path):
            ogb = all(os.path.isdir(os.path.join(path, d)) for d in ("raw", "split"))
            raise FileNotFoundError(
                f"{where}: no metadata.yaml in the directory (expected '{metadata_path}')"
                + ("; it looks like a folder of the ogb package: read it with graphpipe.datasets.ogb_node_dataset(path)" if ogb else "")
            )
        metadata = _read_yaml(inside(path, "metadata.yaml", f"{where}: metadata.yaml", trusted, _OPT_IN), where)
        root, graph_section = path, metadata.get("graph") if isinstance(metadata, dict) else None
        graphbolt_output = isinstance(metadata, dict) and graph_section is None and "graph_topology" in metadata
        if graphbolt_output:
            root, graph_section = _graphbolt_output_source(path, trusted, where)
        if not isinstance(graph_section, dict):
            raise ValueError(
                f"{where}: metadata.yaml must be a mapping with a `graph` section (nodes and edges), or GraphBolt's "
                "preprocessed metadata (with `graph_topology`) in the `preprocessed` folder of its dataset"
            )
        self.path, self._where, self._disk_based = path, where, disk_based_features
        self._yaml_data, self._selected = metadata, _task_names(tasks, where)
        self.metadata = metadata  # the same dict as yaml_data (an attribute: scripts may set it)
        # GraphBolt's output names files relative to its dataset: they must stay in `preprocessed/`.
        self._files = _Files(root, trusted, where, boundary=path if graphbolt_output else None)
        options = {
            "include_original_edge_id": include_original_edge_id,
            "auto_cast_to_optimal_dtype": auto_cast_to_optimal_dtype,
        }
        default_cache = cache_dir is None
        if default_cache and os.path.dirname(root) == root:
            raise ValueError(f"{where}: a dataset at the file system's root has no place beside it for the cache; pass `cache_dir`")
        self.cache_dir = root + ".graphpipe" if default_cache else os.path.abspath(os.fspath(cache_dir))
        self.graph = _load_graph(_Files(root, trusted, where), graph_section, self.cache_dir, default_cache, options, force_preprocess)
        self._read_contents()

    def _read_contents(self) -> None:
        """Read the name, features and tasks of a copy of :attr:`yaml_data` (checked as
        untrusted); numpy tables read into memory wait for :attr:`feature`'s first use."""
        where, snapshot = self._where, _copy_yaml(self._yaml_data, self._where)
        name = snapshot.get("dataset_name")
        if name is not None and not isinstance(name, (str, int, float)):
            raise ValueError(f"{where}: metadata.yaml: `dataset_name` must be a string, got {_SHOW.repr(name)}")
        openers = _open_features(self._files, _list(snapshot, "feature_data", "", where), self.graph, self._disk_based)
        self.tasks = _tasks(self._files, _list(snapshot, "tasks", "", where), self._selected)
        self.dataset_name = str(name or os.path.basename(self.path))
        with self._guard():
            self._openers, self._feature, self._read_from = openers, None, snapshot

    def load(self, tasks: Optional[Sequence[str]] = None) -> "OnDiskDataset":
        """GraphBolt's second step; returns the dataset. Edits made to :attr:`yaml_data`
        since it was read (``feature_data``, ``tasks``, ``dataset_name``) are read now, with
        the same checks; the graph was built by the constructor. ``tasks`` keeps only the
        named tasks. Numpy tables with ``in_memory: true`` are read into memory here (or on
        first use of :attr:`feature`); ``format: torch`` ones were read with the entries."""
        selected = _task_names(tasks, "OnDiskDataset.load")
        if not _same_yaml(self._yaml_data, self._read_from):
            if not isinstance(self._yaml_data, dict) or not _same_yaml(self._yaml_data.get("graph"), self._read_from.get("graph")):
                raise ValueError(
                    f"{self._where}.load(): `yaml_data['graph']` was changed, but the graph is built when the dataset is "
                    f"opened (GraphBolt preprocesses it then too); edit metadata.yaml and open the dataset again"
                )
            self._read_contents()
        if selected is not None:
            self.tasks = _check_selected([t for t in self.tasks if t.metadata.get("name") in selected], selected, "OnDiskDataset.load")
        self.feature  # noqa: B018 - reads the in-memory tables now, as GraphBolt's load() does
        return self

    @property
    def yaml_data(self) -> Dict[str, Any]:
        """GraphBolt's: the parsed ``metadata.yaml``, editable before :meth:`load` (e.g.
        ``feature["in_memory"] = False`` for each of ``yaml_data["feature_data"]``)."""
        return self._yaml_data

    @property
    def feature(self) -> FeatureStore:
        """The :class:`~graphpipe.FeatureStore`; numpy tables with ``in_memory: true`` are
        read on first use (or by :meth:`load`), once, however many threads ask at once."""
        if self._openers is not None:
            with self._guard():
                openers = self._openers
                if openers is not None:
                    self._feature = FeatureStore(*({key: opener() for key, opener in openers[d].items()} for d in ("node", "edge")))
                    self._openers = None
        return self._feature

    @feature.setter
    def feature(self, store: FeatureStore) -> None:
        """Replace the store (e.g. a subclass wrapping its features); an edit of
        :attr:`yaml_data` read by a later :meth:`load` builds a new one."""
        with self._guard():
            self._feature, self._openers = store, None

    def _guard(self) -> threading.Lock:
        """The lock of :attr:`feature`'s first build (made when first needed: also after
        unpickling, as locks do not pickle)."""
        return self.__dict__.setdefault("_lock", threading.Lock())

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    @property
    def features(self) -> FeatureStore:
        return self.feature

    @features.setter
    def features(self, store: FeatureStore) -> None:
        self.feature = store

    @property
    def all_nodes_set(self):
        """Every node id: an :class:`~graphpipe.ItemSet`, or a
        :class:`~graphpipe.HeteroItemSet` of every type's ids for a typed graph."""
        if self.graph.is_heterogeneous:
            return HeteroItemSet({t: ItemSet(n, names="seeds") for t, n in self.graph.num_nodes_per_type.items() if n})
        return ItemSet(self.graph.total_num_nodes, names="seeds")

    def _feature_keys(self, domain: str) -> list:
        """The keys of ``domain``'s features, without reading them (for the repr)."""
        openers = self._openers
        if openers is not None:
            return list(openers[domain])
        return getattr(self._feature, f"{domain}_keys", "?")

    def __repr__(self) -> str:
        return (
            f"OnDiskDataset(name='{self.dataset_name}', path='{self.path}', num_nodes={self.graph.total_num_nodes}, "
            f"num_edges={self.graph.total_num_edges}, node_features={self._feature_keys('node')}, "
            f"edge_features={self._feature_keys('edge')}, tasks={[t.metadata.get('name') for t in self.tasks]})"
        )


class BuiltinDataset(OnDiskDataset):
    """GraphBolt's ``BuiltinDataset(name, root="datasets")``: the dataset directory
    ``<root>/<name>`` (e.g. ``datasets/ogbn-products``, as GraphBolt downloads it), opened
    as an :class:`OnDiskDataset`. graphpipe downloads nothing: the directory must be there.
    """

    def __init__(self, name: str, root: str | os.PathLike = "datasets"):
        if not isinstance(name, str) or name in ("", ".", "..") or any(sep and sep in name for sep in (os.sep, os.altsep)):
            raise ValueError(f"BuiltinDataset: `name` must be a dataset directory's name, e.g. 'ogbn-products', got {name!r}")
        path = os.path.join(os.fspath(root), name)
        if not os.path.isdir(path):
            raise FileNotFoundError(
                f"BuiltinDataset('{name}'): no directory '{os.path.abspath(path)}'; graphpipe downloads nothing: put "
                f"the dataset there (GraphBolt's download, or any directory with a metadata.yaml), or pass `root`"
            )
        super().__init__(path)


def _graphbolt_output_source(path: str, trusted: List[str], where: str) -> Tuple[str, Any]:
    """``(dataset directory, its graph section)`` for GraphBolt's preprocessed output at
    ``path``: its paths are relative to the dataset it came from (``path``'s parent), whose
    ``metadata.yaml`` names the edges its pickled graph was built from."""
    if os.path.basename(path) != "preprocessed":
        raise ValueError(
            f"{where}: metadata.yaml is GraphBolt's preprocessed output (it has `graph_topology`, no `graph`), "
            f"which graphpipe opens only in the `preprocessed` folder of a GraphBolt dataset"
        )
    root = os.path.dirname(path)
    if not os.path.isfile(os.path.join(root, "metadata.yaml")):
        raise FileNotFoundError(
            f"{where}: metadata.yaml is GraphBolt's preprocessed output, whose graph is a pickled DGL object graphpipe "
            f"does not unpickle; graphpipe builds the graph from the edges of the dataset it came from, but there is "
            f"no '{os.path.join(root, 'metadata.yaml')}'"
        )
    source = _read_yaml(inside(root, "metadata.yaml", f"{where}: ../metadata.yaml", trusted, _OPT_IN), where)
    return root, source.get("graph") if isinstance(source, dict) else None


def _read_yaml(path: str, where: str):
    try:
        import yaml
    except ImportError as error:
        raise ImportError(
            f"{where}: reading metadata.yaml needs PyYAML: pip install 'graphpipe-gnn[ondisk]' (or pip install pyyaml)"
        ) from error
    with open(path, "rb") as f:
        try:
            return yaml.safe_load(f)
        except yaml.YAMLError as error:
            raise ValueError(f"{where}: '{path}' is not valid YAML: {error}") from error
        except RecursionError:  # PyYAML composes nested collections recursively
            raise ValueError(f"{where}: '{path}' nests too deeply for PyYAML to read") from None


def _copy_yaml(data, where: str):
    """A deep copy of parsed YAML (shared parts stay shared, so aliases stay small)."""
    try:
        return copy.deepcopy(data)
    except RecursionError as error:
        raise ValueError(f"{where}: metadata.yaml nests too deeply") from error


def _same_yaml(a, b) -> bool:
    """Whether parsed YAML ``a`` equals ``b`` (its copy, maybe edited since). Walked with a
    stack, not recursion (a file may nest deeper than Python's recursion limit); each pair
    of containers is compared once, so shared parts (aliases) cost no more than once."""
    stack, seen = [(a, b)], set()
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        if type(a) is not type(b):
            return False
        if not isinstance(a, (dict, list, tuple)):  # tuples: PyYAML's !!omap pairs and sequence keys
            if a != b:
                return False
            continue
        if (id(a), id(b)) in seen:
            continue
        seen.add((id(a), id(b)))
        if isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            stack.extend((a[k], b[k]) for k in a)
        elif len(a) != len(b):
            return False
        else:
            stack.extend(zip(a, b))
    return True


# ---------------------------------------------------------------- metadata.yaml schema
# Each field: (check, the expected form in words). Required fields must not be null;
# optional ones may be absent or null (GraphBolt writes `type: null` for untyped sets).
_Spec = Tuple[Callable[[Any], bool], str]


def _is_name(v) -> bool:
    return isinstance(v, str) and v != ""


_PATH: _Spec = (_is_name, "a path relative to the dataset directory (a non-empty string)")
_EDGE_FORMAT: _Spec = (lambda v: v in ("csv", "numpy"), "'csv' or 'numpy'")
_EDGE_FILE_FORM = {"csv": "lines 'src,dst'", "numpy": "a .npy file of a [2, num_edges] integer array"}
_ARRAY_FORMAT: _Spec = (lambda v: v in ("numpy", "torch"), "'numpy' or 'torch'")
_DOMAIN: _Spec = (lambda v: v in ("node", "edge", "graph"), "'node', 'edge' or 'graph' (GraphBolt's domains)")
_COUNT: _Spec = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0")
_NAME: _Spec = (_is_name, "a non-empty string")
_BOOL: _Spec = (lambda v: isinstance(v, bool), "true or false")
_NODE_TYPE: _Spec = (
    lambda v: _is_name(v) and ":" not in v,
    "a node type name: a non-empty string without ':' (':' separates the parts of an edge type)",
)
_EDGE_TYPE: _Spec = (
    lambda v: isinstance(v, str) and len(v.split(":")) == 3 and all(v.split(":")),
    "an edge type 'src_type:relation:dst_type' (three non-empty names)",
)
_SET_TYPE: _Spec = (
    lambda v: _NODE_TYPE[0](v) or _EDGE_TYPE[0](v),
    "a node type (no ':') or an edge type 'src_type:relation:dst_type'",
)
_ITEMS: _Spec = (lambda v: isinstance(v, list) and len(v) > 0, "a non-empty list of entries")


def _list(section: dict, key: str, at: str, where: str) -> list:
    """``section[key]`` as a list (absent or null: empty)."""
    value = section.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(
            f"{where}: metadata.yaml{' ' + at if at else ''}: `{key}` must be a list of entries, got {_SHOW.repr(value)}"
        )
    return value


def _entry(entry, at: str, where: str, required: Dict[str, _Spec], optional: Dict[str, _Spec] = {},
           typed: Optional[bool] = False, other_fields: bool = False) -> dict:  # fmt: skip
    """A metadata entry (``at`` names it, e.g. ``graph.edges[0]``) checked to be a mapping
    whose ``required`` and present ``optional`` fields have their expected form, and with
    a ``type`` when ``typed``, none when not (None: either); other fields are warned of
    (a misspelt ``in_memory`` was ignored unseen) unless ``other_fields``."""
    if not isinstance(entry, dict):
        raise ValueError(
            f"{where}: metadata.yaml {at} must be a mapping with fields {list(required)}, got {_SHOW.repr(entry)}"
        )
    has_type = entry.get("type") is not None
    if typed is not None and has_type != typed:
        kind = "a heterogeneous" if typed else "a homogeneous"
        raise ValueError(
            f"{where}: metadata.yaml {at} {'lacks' if typed else 'has'} a `type`, but the graph is {kind} one "
            f"(every node, edge, feature and set entry of a heterogeneous dataset names its type, and none of a "
            f"homogeneous one); the entry is {_SHOW.repr(entry)}"
        )
    for key, (check, form) in required.items():
        if entry.get(key) is None:
            raise ValueError(f"{where}: metadata.yaml {at} lacks `{key}` ({form}); the entry is {_SHOW.repr(entry)}")
    for key, (check, form) in {**required, **optional}.items():
        value = entry.get(key)
        if value is not None and not check(value):
            raise ValueError(f"{where}: metadata.yaml {at}: `{key}` must be {form}, got {_SHOW.repr(value)}")
    known = {"type", *required, *optional}
    unknown = [key for key in entry if key not in known]
    if unknown and not other_fields:
        warnings.warn(
            f"{where}: metadata.yaml {at}: ignoring unknown field(s) {_SHOW.repr(unknown)}; the fields read here are "
            f"{sorted(known)}"
        )
    return entry


def _named(at: str, entry, kind: str) -> str:
    """``at`` with the entry's name, for messages: ``feature_data[2] (node feature 'feat')``
    (``kind`` may use the entry's ``{domain}``)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        return at
    return f"{at} ({kind.format(domain=entry.get('domain', ''))} '{entry['name']}')".replace("( ", "(")


class _Files:
    """Paths named in ``metadata.yaml``, relative to ``root`` and resolved inside
    ``boundary`` (default ``root``: the dataset directory) or a trusted directory."""

    def __init__(self, root: str, trusted: List[str], where: str, boundary: Optional[str] = None):
        self.root, self.trusted, self.where, self.boundary = root, trusted, where, boundary

    def path(self, entry: dict, at: str) -> str:
        """The resolved ``path`` of ``entry`` (refused outside the boundary and the
        trusted directories)."""
        what = f"{self.where}: metadata.yaml {at} `path`"
        resolved = inside(self.root, entry["path"], what, self.trusted, _OPT_IN)
        return resolved if self.boundary is None else inside(self.boundary, resolved, what, self.trusted, _OPT_IN)


# ---------------------------------------------------------------- the graph and its cache
def _load_graph(
    files: _Files, graph_meta: dict, cache_dir: str, default_cache: bool, options: dict, force: bool
) -> CSCGraph:
    where = files.where
    nodes, edges = graph_meta.get("nodes"), graph_meta.get("edges")
    for key, value in (("nodes", nodes), ("edges", edges)):
        if not _ITEMS[0](value):
            raise ValueError(f"{where}: metadata.yaml graph: `{key}` must be {_ITEMS[1]}, got {_SHOW.repr(value)}")
    attributes = _list(graph_meta, "feature_data", "graph", where)
    typed = any(isinstance(n, dict) and n.get("type") is not None for n in nodes)
    if typed:
        node_entries = [_entry(n, f"graph.nodes[{i}]", where, {"type": _NODE_TYPE, "num": _COUNT}, typed=True)
                        for i, n in enumerate(nodes)]  # fmt: skip
        edge_entries = [_entry(e, f"graph.edges[{i}]", where, {"type": _EDGE_TYPE, "format": _EDGE_FORMAT, "path": _PATH},
                               typed=True) for i, e in enumerate(edges)]  # fmt: skip
    else:
        if len(nodes) != 1 or len(edges) != 1:
            raise ValueError(
                f"{where}: metadata.yaml: a homogeneous `graph` lists one node entry and one edge entry (a "
                f"heterogeneous one gives every entry a `type`), got {len(nodes)} and {len(edges)}"
            )
        node_entries = [_entry(nodes[0], "graph.nodes[0]", where, {"num": _COUNT})]
        edge_entries = [_entry(edges[0], "graph.edges[0]", where, {"format": _EDGE_FORMAT, "path": _PATH})]
    attribute_at = [_named(f"graph.feature_data[{i}]", f, "{domain} attribute") for i, f in enumerate(attributes)]
    attributes = [
        _entry(f, at, where, {"domain": (lambda v: v in ("node", "edge"), "'node' or 'edge'"), "name": _NAME,
                              "format": _ARRAY_FORMAT, "path": _PATH},
               {"type": _NODE_TYPE if isinstance(f, dict) and f.get("domain") == "node" else _EDGE_TYPE, "in_memory": _BOOL},
               typed=typed)
        for f, at in zip(attributes, attribute_at)
    ]  # fmt: skip
    edge_paths = [files.path(e, f"graph.edges[{i}]") for i, e in enumerate(edge_entries)]
    attribute_paths = [files.path(f, at) for f, at in zip(attributes, attribute_at)]
    for i, (entry, path) in enumerate(zip(edge_entries, edge_paths)):
        if os.path.exists(path) and not os.path.isfile(path):
            kind = "a directory, not a file" if os.path.isdir(path) else "not a regular file (a pipe or a device?)"
            raise ValueError(
                f"{where}: metadata.yaml graph.edges[{i}] `path` '{path}' is {kind}; expected the edge file "
                f"({_EDGE_FILE_FORM[entry['format']]})"
            )
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{where}: metadata.yaml graph.edges[{i}]: the edge file is missing: '{path}'"
                                    + ("" if typed else _preprocessed_hint(files.root)))  # fmt: skip
    stamp = {
        "version": _CACHE_VERSION,
        # the fields the build reads (not the whole section: extra fields change nothing)
        "graph": [[[e.get(k) for k in ("type", "num")] for e in node_entries],
                  [[e.get(k) for k in ("type", "format", "path")] for e in edge_entries],
                  [[f.get(k) for k in ("domain", "type", "name", "format", "path")] for f in attributes]],  # fmt: skip
        "options": options,
        "files": fingerprint(*[p for p in edge_paths + attribute_paths if os.path.isfile(p)]),
    }
    graph_file = os.path.join(cache_dir, "graph.pt")
    if not force and cache_is_fresh(cache_dir, "graph.json", stamp, where) == ["graph.pt"]:
        return CSCGraph.load(graph_file, mmap=True)
    make_cache_directory(cache_dir, default_cache, where)
    with scratch_directory(cache_dir, f"{where}: cache") as scratch:
        built = os.path.join(scratch, "graph.pt")
        if typed:
            base = None
            graph = _build_typed_graph(
                files, node_entries, edge_entries, edge_paths, attributes, attribute_at, attribute_paths
            )
        else:  # saved to `built` by the builder; saved again only if attributes or options change it
            base = _build_graph(files, node_entries[0], edge_entries[0], edge_paths[0], scratch, built)
            graph = _with_attributes(base, attributes, attribute_at, attribute_paths, where)
        graph = _with_options(graph, **options)
        if graph is not base:
            graph.save(built)
        del graph, base
        publish_cache(scratch, cache_dir, "graph.json", stamp, ["graph.pt"])
    return CSCGraph.load(graph_file, mmap=True)


def _preprocessed_hint(root: str) -> str:
    if not os.path.isfile(os.path.join(root, "preprocessed", "fused_csc_sampling_graph.pt")):
        return ""
    return (
        "; only GraphBolt's preprocessed graph is there, which needs DGL's C++ library to read: "
        "in an environment with DGL, save its edges with g = torch.load('preprocessed/"
        "fused_csc_sampling_graph.pt'); numpy.save(edge file, numpy.stack([g.indices.numpy(), "
        "numpy.repeat(numpy.arange(g.total_num_nodes), numpy.diff(g.csc_indptr.numpy()))]))"
    )


def _build_graph(files: _Files, node_entry: dict, edge_entry: dict, edge_path: str, scratch: str, built: str) -> CSCGraph:
    """The homogeneous graph of the edge file, built with bounded memory into ``built``."""
    where = files.where
    at = f"metadata.yaml graph.edges[0] ('{edge_path}')"
    edges = edge_path
    try:
        if edge_entry["format"] == "csv":
            edges = os.path.join(scratch, "edges.npy")
            csv_to_npy(edge_path, edges, np.int64, transpose=True, expected_columns=2)
        elif not is_npy_file(edge_path):  # any name, as GraphBolt reads it: the content tells
            raise ValueError(
                "`format` is 'numpy', but the file is not a .npy file (numpy.save's format: a [2, num_edges] "
                "integer array); for lines 'src,dst' set `format: csv`"
            )
        return CSCGraph.from_coo_files(built, edges, num_nodes=node_entry["num"])
    except ValueError as error:
        raise ValueError(f"{where}: {at}: {error}") from error


def _build_typed_graph(
    files: _Files, node_entries, edge_entries, edge_paths, attributes, attribute_at, attribute_paths
) -> CSCGraph:
    """A heterogeneous graph: node counts per type, one edge file per edge type, and
    ``graph.feature_data`` attributes per type (in memory)."""
    where = files.where
    num_nodes = {}
    for i, entry in enumerate(node_entries):
        if entry["type"] in num_nodes:
            raise ValueError(f"{where}: metadata.yaml graph.nodes[{i}]: node type {entry['type']!r} is listed twice")
        num_nodes[entry["type"]] = entry["num"]
    edges = {}
    for i, (entry, path) in enumerate(zip(edge_entries, edge_paths)):
        at = f"metadata.yaml graph.edges[{i}] ({entry['type']!r}, '{path}')"
        if entry["type"] in edges:
            raise ValueError(f"{where}: {at}: edge type {entry['type']!r} is listed twice (one file per edge type)")
        try:
            pairs = read_csv(path, np.int64, expected_columns=2).T if entry["format"] == "csv" else read_array(path, "numpy", True)
        except ValueError as error:
            raise ValueError(f"{where}: {at}: {error}") from error
        if pairs.ndim != 2 or pairs.shape[0] != 2 or pairs.dtype.kind not in "iu":
            raise ValueError(
                f"{where}: {at} must hold [2, num_edges] integer node ids (or csv lines 'src,dst'), got "
                f"{pairs.dtype} {pairs.shape}"
            )
        edges[entry["type"]] = torch.from_numpy(np.ascontiguousarray(pairs))
    per_type: Dict[str, Dict[str, Dict[str, torch.Tensor]]] = {"node": {}, "edge": {}}
    for entry, at, path in zip(attributes, attribute_at, attribute_paths):
        data = torch.as_tensor(np.asarray(read_array(path, entry["format"], True, f"{where}: metadata.yaml {at}: ")))
        if entry["type"] in per_type[entry["domain"]].setdefault(entry["name"], {}):
            raise ValueError(f"{where}: metadata.yaml {at} is listed twice")
        per_type[entry["domain"]][entry["name"]][entry["type"]] = data
    try:
        graph = CSCGraph.from_hetero_edges(edges, num_nodes, per_type["edge"])
    except ValueError as error:
        raise ValueError(f"{where}: metadata.yaml graph: {error}") from error
    if per_type["node"]:
        node_attributes = {
            name: _over_all_node_types(graph, name, tables, where) for name, tables in per_type["node"].items()
        }
        graph = dataclasses.replace(graph, node_attributes=node_attributes)
    return graph


def _over_all_node_types(graph: CSCGraph, name: str, tables: Dict[str, torch.Tensor], where: str) -> torch.Tensor:
    """GraphBolt's layout of a typed node attribute: ``[num_nodes, ...]`` over all nodes,
    each type's rows at its ``node_type_offset``; every node type must give one."""
    at = f"metadata.yaml graph.feature_data: node attribute '{name}'"
    counts = graph.num_nodes_per_type
    unknown = sorted(set(tables) - set(counts))
    missing = [t for t in graph.node_types if t not in tables]
    if unknown or missing:
        raise ValueError(
            f"{where}: {at} must list one file per node type (as GraphBolt requires): "
            + (f"unknown type(s) {unknown}; " if unknown else "")
            + (f"missing type(s) {missing}; " if missing else "")
            + f"the graph's node types are {graph.node_types}"
        )
    first = tables[graph.node_types[0]]
    for node_type in graph.node_types:
        table = tables[node_type]
        expected = (counts[node_type], *first.shape[1:])
        if table.dim() == 0 or tuple(table.shape) != expected or table.dtype != first.dtype:
            raise ValueError(
                f"{where}: {at} of node type {node_type!r} has dtype {table.dtype} shape {tuple(table.shape)}, expected "
                f"{list(expected)} {first.dtype} (one row per node, every type alike)"
            )
    return torch.cat([tables[t] for t in graph.node_types])


def _with_attributes(graph: CSCGraph, attributes, attribute_at, paths, where: str) -> CSCGraph:
    """The graph with the homogeneous ``graph.feature_data`` arrays as node/edge
    attributes (edge arrays are in edge-file order: permuted to CSC order)."""
    if not attributes:
        return graph
    node_attributes, edge_attributes = {}, {}
    for entry, at, path in zip(attributes, attribute_at, paths):
        data = torch.as_tensor(np.asarray(read_array(path, entry["format"], True, f"{where}: metadata.yaml {at}: ")))
        if entry["name"] in (node_attributes if entry["domain"] == "node" else edge_attributes):
            raise ValueError(f"{where}: metadata.yaml {at} is listed twice")
        if entry["domain"] == "node":
            node_attributes[entry["name"]] = data
        else:
            if data.dim() == 0 or data.shape[0] != graph.total_num_edges:
                raise ValueError(
                    f"{where}: metadata.yaml {at} ('{path}') has shape {tuple(data.shape)}, expected one row per "
                    f"edge ({graph.total_num_edges})"
                )
            edge_ids = graph.original_edge_ids
            edge_attributes[entry["name"]] = data if edge_ids is None else data[edge_ids.long()]
    try:
        return dataclasses.replace(graph, node_attributes=node_attributes, edge_attributes=edge_attributes)
    except ValueError as error:
        raise ValueError(f"{where}: metadata.yaml graph.feature_data: {error}") from error


def _with_options(graph: CSCGraph, include_original_edge_id: bool, auto_cast_to_optimal_dtype: bool) -> CSCGraph:
    """GraphBolt's two build options (see :class:`OnDiskDataset`)."""
    changes: Dict[str, Any] = {}
    edge_ids = graph.original_edge_ids
    if not auto_cast_to_optimal_dtype:
        changes.update(indptr=graph.indptr.to(torch.int64), indices=graph.indices.to(torch.int64))
        if edge_ids is not None:
            edge_ids = changes["original_edge_ids"] = edge_ids.to(torch.int64)
    if include_original_edge_id:
        if edge_ids is None:  # the file was in CSC order already: positions are the ids
            dtype = torch.int32 if auto_cast_to_optimal_dtype and graph.total_num_edges <= 2**31 else torch.int64
            edge_ids = torch.arange(graph.total_num_edges, dtype=dtype)
        changes["edge_attributes"] = {**graph.edge_attributes, ORIGINAL_EDGE_ID: edge_ids}
    return dataclasses.replace(graph, **changes) if changes else graph


# ---------------------------------------------------------------- features and tasks
_FEATURE_FIELDS = {"domain": _DOMAIN, "name": _NAME, "format": _ARRAY_FORMAT, "path": _PATH}


def _open_features(files: _Files, entries: list, graph: CSCGraph, disk_based: bool) -> Dict[str, Dict[Any, Callable[[], Feature]]]:
    """The top-level ``feature_data``, checked: per domain, key (name, or ``(type, name)``
    for a typed graph) -> a function giving its :class:`Feature`. Numpy tables read into
    memory are checked through a memory map, and read when the function is called; torch
    tables are read here."""
    where = files.where
    typed = graph.is_heterogeneous
    openers: Dict[str, Dict[Any, Callable[[], Feature]]] = {"node": {}, "edge": {}}
    if typed:
        edges_per_type = torch.bincount(graph.type_per_edge.to(torch.int64), minlength=len(graph.edge_types)).tolist()
        rows_of = {"node": graph.num_nodes_per_type, "edge": dict(zip(graph.edge_types, edges_per_type))}
    for i, entry in enumerate(entries):
        at = _named(f"feature_data[{i}]", entry, "{domain} feature")
        domain = entry.get("domain") if isinstance(entry, dict) else None
        optional = {"type": _NODE_TYPE if domain == "node" else _EDGE_TYPE, "in_memory": _BOOL}
        entry = _entry(entry, at, where, _FEATURE_FIELDS, optional, typed=typed, other_fields=True)
        domain, name = entry["domain"], entry["name"]
        if domain == "graph":
            warnings.warn(
                f"{where}: skipping metadata.yaml {at}: {domain!r} features are not read (graphpipe stores node "
                f"and edge features)"
            )
            continue
        if ((entry["type"], name) if typed else name) in openers[domain]:
            raise ValueError(f"{where}: metadata.yaml {at} is listed twice")
        if typed and entry["type"] not in rows_of[domain]:
            raise ValueError(
                f"{where}: metadata.yaml {at}: {domain} feature '{name}' names unknown {domain} type "
                f"{entry['type']!r}; the graph's {domain} types: {sorted(rows_of[domain])}"
            )
        if typed:
            rows, key = rows_of[domain][entry["type"]], (entry["type"], name)
        else:
            rows, key = (graph.total_num_nodes if domain == "node" else graph.total_num_edges), name
        extra = _extra_fields(entry, {"type", *_FEATURE_FIELDS, *optional}, at, where)
        openers[domain][key] = _FeatureFile(files, entry, at, rows, disk_based, extra)
    return openers


class _FeatureFile:
    """One checked ``feature_data`` entry; calling it gives its :class:`Feature`. A numpy
    table read into memory is checked through a memory map, which is then dropped (a
    dataset of many tables holds no file open), and read when called, from the file that
    was checked: one replaced since (renamed over, or a symlink to a file outside the
    dataset) or changed in size or header is refused, naming the file."""

    def __init__(self, files: _Files, entry: dict, at: str, rows: int, disk_based: bool, extra: dict):
        self.path, self.format, self.domain, self.name = files.path(entry, at), entry["format"], entry["domain"], entry["name"]
        self.prefix, self.rows, self.disk_based, self.extra = f"{files.where}: metadata.yaml {at}", rows, disk_based, extra
        self.feature: Optional[Feature] = None
        self.checked_file: Optional[tuple] = None
        in_memory = entry.get("in_memory", True) is not False
        later = in_memory and self.format == "numpy"
        data = self.checked(in_memory and not later)
        if later:  # the file's identity and the header's table, for the read to compare
            self.checked_file = (_file_identity(os.stat(self.path)), _table_layout(data))
        else:
            self.feature = _feature(data, self.path, disk_based, f"{self.prefix} ('{self.path}')", extra)

    def checked(self, in_memory: bool) -> Union[np.ndarray, torch.Tensor]:
        """The table, read (``in_memory``) or mapped, after checking its rows."""
        data = read_array(self.path, self.format, in_memory, f"{self.prefix}: ")
        if data.ndim == 0:
            raise ValueError(f"{self.prefix} ('{self.path}') holds a scalar, expected one row per {self.domain}")
        if data.shape[0] < self.rows:  # more rows are allowed (padding, nodes added later), as in GraphBolt
            raise ValueError(
                f"{self.prefix}: {self.domain} feature '{self.name}' ('{self.path}') has {data.shape[0]} rows, "
                f"expected {self.rows} (one per {self.domain}; more are allowed)"
            )
        return data

    def __call__(self) -> Feature:
        if self.feature is not None:
            return self.feature
        return _feature(self.read(), self.path, self.disk_based, f"{self.prefix} ('{self.path}')", self.extra)

    def read(self) -> np.ndarray:
        """The checked table read into memory (then made C-contiguous by ``_feature``, as
        ``read_array(path, "numpy", in_memory=True)`` gives it), from the file opened now,
        refused when it is not the file that was checked or its header changed."""
        try:
            file = open(self.path, "rb")
        except OSError as error:
            raise ValueError(f"{self.prefix} ('{self.path}') cannot be read since the dataset was opened: {error}") from error
        with file:
            if _file_identity(os.fstat(file.fileno())) != self.checked_file[0]:
                raise ValueError(f"{self.prefix} ('{self.path}') was replaced or changed after the dataset was opened; open the dataset again")
            try:
                data = np.load(file, allow_pickle=False)
            except ValueError as error:
                raise ValueError(f"{self.prefix} ('{self.path}') is no longer a readable .npy file: {error}") from error
        if _table_layout(data) != self.checked_file[1]:
            raise ValueError(f"{self.prefix} ('{self.path}') was rewritten after the dataset was opened; open the dataset again")
        return data

    def __getstate__(self) -> Dict[str, Any]:
        # Pickled before it is read: the table in memory, so the unpickled copy never
        # opens the path (another process, maybe another machine).
        if self.checked_file is not None:
            self.feature, self.checked_file = self(), None  # read once, here and in the copy
        return dict(self.__dict__)


def _file_identity(stat: os.stat_result) -> tuple:
    """``(device, inode, size)``: a file replaced or resized since differs."""
    return stat.st_dev, stat.st_ino, stat.st_size


def _table_layout(data: np.ndarray) -> tuple:
    """``(shape, dtype, Fortran order)`` of a .npy table, as its header gives them."""
    return data.shape, data.dtype, bool(data.flags.f_contiguous and not data.flags.c_contiguous)


def _extra_fields(entry: dict, known, at: str, where: str) -> Dict[str, Any]:
    """The fields of ``entry`` besides ``known`` (GraphBolt's ``extra_fields``, which a
    feature's ``metadata()`` gives): strings, numbers, booleans, nulls and flat lists of
    them; any other value (a mapping, a nested list, a date, bytes) is dropped with a warning.
    Values are kept as they are, not copied: ``entry`` is a private copy of ``yaml_data``,
    and a YAML alias named by many fields stays one list."""
    kept, dropped = {}, []
    misspelt = [key for key in entry if key not in known and isinstance(key, str) and difflib.get_close_matches(key, known, 1, 0.8)]
    if misspelt:  # a misspelt `in_memory` would pass unseen as metadata
        warnings.warn(
            f"{where}: metadata.yaml {at}: field(s) {_SHOW.repr(misspelt)} are kept as extra fields (metadata()), not "
            f"read; a misspelling? The fields read here are {sorted(known)}"
        )
    for key, value in entry.items():
        if key in known:
            continue
        if isinstance(key, str) and (_plain(value) or (isinstance(value, list) and all(_plain(v) for v in value))):
            kept[key] = value  # as parsed: aliases stay one list (the Feature keeps a deep copy)
        else:
            dropped.append(key)
    if dropped:
        warnings.warn(
            f"{where}: metadata.yaml {at}: dropping field(s) {_SHOW.repr(dropped)}: a feature's extra fields (its "
            f"metadata()) keep strings, numbers, booleans, nulls and flat lists of them"
        )
    return kept


def _plain(value) -> bool:
    return value is None or type(value) in (str, int, float, bool)


def _feature(data: Union[np.ndarray, torch.Tensor], path: str, disk_based: bool, what: str, extra: dict) -> Feature:
    """The :class:`Feature` of ``data`` read from ``path``; errors begin with ``what``.

    A table read into memory is made C-contiguous (a Fortran-order ``.npy``, as
    ``numpy.save(path, dataframe.values)`` writes, or a tensor saved as a view), as
    GraphBolt reads it; a memory-mapped one (``in_memory: false``) is read in place, so
    it must be in C order already."""
    if isinstance(data, np.memmap):
        if not data.flags.c_contiguous:
            raise ValueError(
                f"{what} is stored in Fortran (column-major) order, which `in_memory: false` cannot map row by row; "
                f"save it in C order: numpy.save(path, numpy.ascontiguousarray(numpy.load(path))), or set "
                f"`in_memory: true`"
            )
    elif isinstance(data, np.ndarray):
        data = data if data.flags.c_contiguous else np.ascontiguousarray(data)
    else:
        data = data.contiguous()
    try:
        if data.ndim == 1:  # GraphBolt's TorchBasedFeature reads a [n] table as [n, 1]
            return Feature(data.reshape(-1, 1), extra)
        if isinstance(data, np.memmap):
            # Path-backed (the resolved path): pickles as its path, opened again where used.
            return DiskBasedFeature(path, metadata=extra) if disk_based else Feature(path, extra)
        return Feature(data, extra)
    except (ValueError, TypeError) as error:
        raise type(error)(f"{what}: {error}") from error


def _tasks(files: _Files, entries: list, selected: Optional[Sequence[str]]) -> List[Task]:
    where = files.where
    selected = _task_names(selected, where)
    out, names = [], set()
    for i, entry in enumerate(entries):
        at = f"tasks[{i}]"
        entry = _entry(entry, _named(at, entry, "task"), where, {}, {"name": _NAME}, typed=None, other_fields=True)
        metadata = {k: v for k, v in entry.items() if k not in ("train_set", "validation_set", "test_set")}
        if metadata.get("name") in names:
            raise ValueError(f"{where}: metadata.yaml {at} is named {metadata['name']!r} like an earlier task; give each task its own name")
        if metadata.get("name") is not None:
            names.add(metadata["name"])
        if selected is not None and metadata.get("name") not in selected:
            continue
        sets = {}
        for set_name in ("train_set", "validation_set", "test_set"):
            sets[set_name] = _item_set(files, entry.get(set_name), f"{at}.{set_name}")
        out.append(Task(metadata, **sets))
    return out if selected is None else _check_selected(out, selected, where)


def _task_names(selected, where: str) -> Optional[List[str]]:
    """The task names ``selected`` (a name or a list of names) as a list; None stays None."""
    if isinstance(selected, str):
        return [selected]
    if selected is not None and (not isinstance(selected, (list, tuple)) or not all(isinstance(t, str) for t in selected)):
        raise TypeError(f"{where}: `tasks` must be a task name or a list of task names, got {selected!r}")
    return selected if selected is None else list(selected)


def _check_selected(tasks: List[Task], selected: List[str], where: str) -> List[Task]:
    """``tasks``, after checking that every name in ``selected`` names one of them."""
    missing = set(selected) - {t.metadata.get("name") for t in tasks}
    if missing:
        raise ValueError(f"{where}: no task named {sorted(missing)} in metadata.yaml")
    return tasks


def _item_set(files: _Files, entries, at: str):
    """A task's set: an :class:`~graphpipe.ItemSet`, or with one entry per ``type`` a
    :class:`~graphpipe.HeteroItemSet`."""
    where = files.where
    if not entries:
        return None
    if not isinstance(entries, list):
        raise ValueError(f"{where}: metadata.yaml {at} must be a list of entries, got {_SHOW.repr(entries)}")
    if any(isinstance(e, dict) and e.get("type") is not None for e in entries):
        typed = {}
        for i, e in enumerate(entries):
            e = _entry(e, f"{at}[{i}]", where, {"type": _SET_TYPE, "data": _ITEMS}, typed=True)
            if e["type"] in typed:
                raise ValueError(f"{where}: metadata.yaml {at}[{i}]: type {e['type']!r} is listed twice")
            typed[e["type"]] = _one_item_set(files, e, f"{at}[{i}]")
        return HeteroItemSet(typed)
    if len(entries) != 1:
        raise ValueError(
            f"{where}: metadata.yaml {at}: an untyped set has one entry, got {len(entries)} (typed sets give each "
            f"a `type`)"
        )
    return _one_item_set(files, _entry(entries[0], f"{at}[0]", where, {"data": _ITEMS}), f"{at}[0]")


def _one_item_set(files: _Files, entry: dict, at: str) -> ItemSet:
    where = files.where
    fields, names = [], []
    for i, data in enumerate(entry["data"]):
        data_at = _named(f"{at}.data[{i}]", data, "field")
        data = _entry(
            data, data_at, where, {"format": _ARRAY_FORMAT, "path": _PATH}, {"name": _NAME, "in_memory": _BOOL}, typed=None
        )
        array = read_array(files.path(data, data_at), data["format"], True, f"{where}: metadata.yaml {data_at}: ")
        fields.append(torch.as_tensor(np.asarray(array)) if isinstance(array, np.ndarray) else array)
        names.append(data.get("name"))  # GraphBolt 2.1's names (seed_nodes, node_pairs, negative_dsts) are ItemSet's too
    try:
        return ItemSet(tuple(fields), names=tuple(name or "seeds" for name in names))
    except (TypeError, ValueError) as error:
        unnamed = " (a field without `name` is seeds)" if None in names else ""
        raise ValueError(f"{where}: metadata.yaml {at}: {error}{unnamed}") from error
