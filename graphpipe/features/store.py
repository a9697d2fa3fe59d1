"""FeatureStore: named node and edge feature tables (:class:`Feature`), read by row id."""

from __future__ import annotations

import copy
import math
import os
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from graphpipe.graph.edge_types import parse_edge_type
from graphpipe._internal.checks import check_int, check_node_ids
from graphpipe._internal.devices import cuda_or_warn_once, device_or_cpu, pin_in_place
from graphpipe.ops.gather import gather_valid_rows, numpy_to_torch_dtype
from graphpipe.ops.uva_gather import check_out

__all__ = ["BasicFeatureStore", "Feature", "FeatureStore", "TorchBasedFeature"]

FeatureData = Union[torch.Tensor, np.ndarray, str, os.PathLike]


class Feature:
    """One feature table, ``[num_rows, *row_shape]``, read by row id.

    Stages use only ``read`` / ``read_valid``, ``num_rows``, ``row_shape``, ``dtype``,
    ``nbytes`` and ``pin_memory_``: other storages (disk, caches) subclass and override
    them (``read_valid``, not ``read``, which checks the ids and calls it).

    Args:
        data: a tensor (CPU or CUDA), a numpy array / ``numpy.memmap``, or the path of a
            ``.npy`` file, memory-mapped read-only on first use (so a store is cheap to
            build and pickles as paths; its header and length are checked at once, by
            :func:`npy_layout`, and its shape and dtype must be the same when it is mapped,
            in this process or in one it was pickled to). Rows must be C-contiguous.
        metadata: a dict that :meth:`metadata` returns (GraphBolt's ``metadata``
            argument; an OnDiskDataset gives a feature entry's extra fields).
    """

    # Class-level defaults, so that a subclass that wraps another store needs no super().__init__.
    # Whether ``read`` may run in several threads at once (a whole-batch pool fetches each
    # batch in its own thread); a subclass whose reads change unlocked state sets False. A
    # user's class overriding ``read`` is read in one thread unless it sets this itself.
    concurrent_reads = True
    path: Optional[str] = None  # the .npy file of a path-backed feature
    _layout: Optional[Tuple[Tuple[int, ...], np.dtype]] = None  # its shape and dtype when checked by the constructor
    _data: Union[torch.Tensor, np.ndarray, None] = None  # the table, once opened
    # A .npy path (mapped read-only) or a non-writable array: update(value, ids) is refused,
    # also once pin_memory_ has wrapped the table as a tensor (a write would fault).
    _read_only = False
    _metadata: Optional[Dict[str, Any]] = None  # what metadata() returns (a copy of), None: {}

    def __init__(self, data: FeatureData, metadata: Optional[Mapping[str, Any]] = None):
        self._metadata = checked_metadata(metadata, type(self).__name__)
        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
            if not path.endswith(".npy"):
                raise ValueError(f"Feature: a path must name a .npy file, got '{path}'")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Feature: no such .npy file: '{path}'")
            shape, dtype, _ = npy_layout(path, f"Feature: '{path}'")  # a file it cannot map fails here, not at first read
            self.path, self._layout, self._read_only = path, (shape, dtype), True
        elif isinstance(data, (torch.Tensor, np.ndarray)):
            self._data = _checked_table(data, "`data`")
            self._read_only = isinstance(data, np.ndarray) and not data.flags.writeable
        else:
            raise TypeError(
                "Feature: `data` must be a torch.Tensor, a numpy array/memmap or a path to a "
                f".npy file, got {type(data).__name__}"
            )

    @property
    def data(self) -> Union[torch.Tensor, np.ndarray]:
        """The table itself (a path-backed feature maps its file here, once)."""
        if self._data is None:
            table = np.load(self.path, mmap_mode="r")
            if (table.shape, table.dtype) != self._layout:  # e.g. in a worker process, after unpickling
                raise ValueError(
                    f"Feature: '{self.path}' changed after the feature was made (the rows pipes were built for): it "
                    f"now holds {table.shape} {table.dtype}, it held {self._layout[0]} {self._layout[1]}; make the "
                    f"feature (and what reads it) again from the new file"
                )
            self._data = _checked_table(table, f"'{self.path}'")
        return self._data

    @property
    def num_rows(self) -> int:
        return self.data.shape[0]

    @property
    def row_shape(self) -> Tuple[int, ...]:
        return tuple(self.data.shape[1:])

    @property
    def dtype(self) -> torch.dtype:
        data = self.data
        return data.dtype if isinstance(data, torch.Tensor) else numpy_to_torch_dtype(data.dtype)

    @property
    def nbytes(self) -> int:
        data = self.data
        return data.numel() * data.element_size() if isinstance(data, torch.Tensor) else data.nbytes

    def read(self, ids: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Rows ``ids`` (``[n]`` integer tensor): ``[n, *row_shape]``, on the GPU if the
        table or ``ids`` is on one, written into ``out`` when given. ``ids`` are checked
        (user input): every kind of feature raises a ValueError naming the id out of range.
        ``ids=None``: the whole table, as GraphBolt's ``read()`` (a tensor table itself, no
        copy; a copy of a numpy or mapped one; a cache's fallback's table, the cache untouched).
        """
        if ids is None:
            return self.read_all(out)
        return self.read_valid(check_node_ids(ids, self.num_rows, "ids", f"{type(self).__name__}.read", "row"), out)

    def read_valid(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """:meth:`read` of ``[n]`` int32/int64 ids the library made and knows to be in
        ``[0, num_rows)`` (a sampler's ``input_nodes``): no check. A storage overrides this."""
        return gather_valid_rows(self.data, ids, out)

    def read_all(self, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """:meth:`read` of every row: a tensor table itself (no copy), else a copy."""
        if type(self) is Feature and out is None and isinstance(self.data, torch.Tensor):
            return self.data
        return self.read_valid(torch.arange(self.num_rows), out)

    def metadata(self) -> Dict[str, Any]:
        """GraphBolt's: the feature's metadata (a copy), ``{}`` if none was given. An
        OnDiskDataset feature's are its entry's extra fields (e.g. ``num_categories``)."""
        return copy.deepcopy(self._metadata) if self._metadata is not None else {}

    def size(self) -> torch.Size:
        """GraphBolt's: the shape of one row, ``row_shape`` as a ``torch.Size``."""
        return torch.Size(self.row_shape)

    def count(self) -> int:
        """GraphBolt's: the number of rows."""
        return self.num_rows

    def update(self, value: torch.Tensor, ids: Optional[torch.Tensor] = None) -> None:
        """GraphBolt's: replace the table by ``value`` (``ids`` None; as many rows, any row
        shape and dtype: layer-wise inference writes each layer's output there), or write
        ``value[i]`` (``[n, *row_shape]``) into row ``ids[i]`` of a writable table.

        In place, so pipes built on this feature read the new rows (with ``num_workers=0``:
        worker processes keep the copy they started with). In-memory tables only, or a
        cache over one (:meth:`CachedFeature.update`: its cached rows too).
        """
        where = f"{type(self).__name__}.update"
        if type(self) is not Feature:
            raise TypeError(f"{where}: only in-memory features (graphpipe.Feature) can be updated")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{where}: `value` must be a torch.Tensor, got {type(value).__name__}")
        if ids is None:
            if value.dim() < 1 or value.shape[0] != self.num_rows:
                raise ValueError(f"{where}: `value` must have the table's {self.num_rows} rows, got shape {tuple(value.shape)}")
            self._data, self.path, self._read_only = _checked_table(value.contiguous(), "`value`"), None, False
            return
        ids = check_node_ids(ids, self.num_rows, "ids", where, "row")
        if tuple(value.shape) != (ids.numel(),) + self.row_shape:
            raise ValueError(
                f"{where}: `value` must be [len(ids), *row_shape] = {[ids.numel(), *self.row_shape]}, got {list(value.shape)}"
            )
        if value.dtype != self.dtype:
            raise TypeError(f"{where}: `value` must have the table's dtype {self.dtype}, got {value.dtype}")
        if self._read_only or (isinstance(self.data, np.ndarray) and not self.data.flags.writeable):
            raise ValueError(
                f"{where}: the table is read-only (a .npy path, mapped read-only, or a non-writable array, pinned or "
                f"not); update(value) replaces it whole"
            )
        table = torch.as_tensor(self.data)
        table[ids.to(device=table.device, dtype=torch.int64)] = value.to(table.device)

    def to(self, device) -> "Feature":
        """GraphBolt's: this feature with its table on ``device`` (self when it is there
        already; ``"pinned"``: :meth:`pin_memory_`). Without CUDA, a CUDA device warns once
        and keeps the table on the CPU. Disk-based and cached features stay where they are."""
        if device == "pinned":
            return self.pin_memory_()
        device = device_or_cpu(device, "Feature.to('cuda'): CUDA is not available; features stay on the CPU", "Feature.to")
        if type(self) is not Feature:  # disk-based and cached ones have no single table to move
            return self
        data = self.data
        here = data.device if isinstance(data, torch.Tensor) else torch.device("cpu")
        if here == device:
            return self
        return Feature(torch.as_tensor(data).to(device), self._metadata)

    def pin_memory_(self) -> "Feature":
        """Page-lock a CPU table in place (``cudaHostRegister``, no copy) and return self,
        so the GPU reads rows in place (UVA) and copies them asynchronously.

        A numpy table is wrapped as a tensor (no copy); a memory map is registered
        read-only, locking the file's pages in RAM (it must fit), or, where that is
        refused, stays unpinned with a warning (rows gathered on the CPU and copied).
        Without CUDA a no-op that warns once per process.
        """
        if not cuda_or_warn_once("Feature.pin_memory_(): CUDA is not available; features stay unpinned"):
            return self
        data = table = self.data
        if isinstance(data, np.ndarray):
            with warnings.catch_warnings():
                # A read-only map: torch warns that writes would be undefined; nothing writes it.
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                table = torch.from_numpy(data)
        try:
            pin_in_place(table)
        except RuntimeError as error:
            if not isinstance(data, np.memmap):
                raise
            warnings.warn(
                f"Feature.pin_memory_(): a memory-mapped table stays unpinned (its rows are gathered "
                f"on the CPU and copied): {error}"
            )
            return self
        self._data = table
        return self

    def __getstate__(self):
        # A mapped file travels as its path.
        state = dict(self.__dict__)
        if self.path is not None:
            state["_data"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.path is None:  # an array arrives as a writable copy
            self._read_only = isinstance(self._data, np.ndarray) and not self._data.flags.writeable

    def __repr__(self) -> str:
        if self._data is None:
            return f"Feature(path='{self.path}', not opened yet)"
        kind = "tensor" if isinstance(self._data, torch.Tensor) else "numpy"
        where = f", path='{self.path}'" if self.path is not None else ""
        return f"Feature(num_rows={self.num_rows}, row_shape={self.row_shape}, dtype={self.dtype}, {kind}{where})"


def check_feature(value, name: str, where: str) -> None:
    """TypeError naming ``name`` unless ``value`` is a :class:`Feature`, saying how to wrap a table."""
    if not isinstance(value, Feature):
        raise TypeError(
            f"{where}: `{name}` must be a graphpipe Feature, got {type(value).__name__} (wrap a tensor, array or "
            f".npy path as gp.Feature(data))"
        )


def checked_metadata(metadata, where: str) -> Optional[Dict[str, Any]]:
    """``metadata`` as a deep copy of its own (None stays None), so the caller's dict and
    its lists stay the caller's (shared parts stay shared); TypeError unless a mapping
    with string keys."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping) or not all(isinstance(key, str) for key in metadata):
        raise TypeError(f"{where}: `metadata` must be a dict with string keys, got {type(metadata).__name__}")
    return copy.deepcopy(dict(metadata))


def wrap_with_cache(fallback_features, max_cache_size_in_bytes, where: str, make) -> Union[Feature, Dict]:
    """GraphBolt's form of ``gpu_cached_feature`` / ``cpu_cached_feature``: ``make(feature,
    budget)`` of a :class:`Feature`, or a dict of the same keys with each feature of a dict
    wrapped. GraphBolt shares one cache of ``max_cache_size_in_bytes`` between a dict's
    features; here each has a cache of its own, the budget split in proportion to their sizes."""
    budget = check_int(max_cache_size_in_bytes, "max_cache_size_in_bytes", where, minimum=0)
    if isinstance(fallback_features, Feature):
        return make(fallback_features, budget)
    if not isinstance(fallback_features, Mapping):
        raise TypeError(
            f"{where}: `fallback_features` must be a Feature or a dict of key -> Feature, got "
            f"{type(fallback_features).__name__}"
        )
    for key, feature in fallback_features.items():
        check_feature(feature, f"fallback_features[{key!r}]", where)
    total = sum(feature.nbytes for feature in fallback_features.values())
    return {
        key: make(feature, budget * feature.nbytes // total if feature.nbytes else budget)
        for key, feature in fallback_features.items()
    }


class CachedFeature(Feature):
    """A cache in front of ``fallback`` (a :class:`Feature`): its rows, row shape, dtype
    and size are the fallback's; subclasses implement ``read_valid``."""

    fallback: Feature

    def update(self, value: torch.Tensor, ids: Optional[torch.Tensor] = None) -> None:
        """GraphBolt's cached ``update``: the fallback's :meth:`Feature.update`, then the
        cache's rows: those of ``ids`` it holds take ``value``'s rows; a whole new table
        (``ids`` None, maybe of another row shape or dtype) empties it."""
        if ids is not None:
            ids = check_node_ids(ids, self.num_rows, "ids", f"{type(self).__name__}.update", "row")
        self.fallback.update(value, ids)
        if ids is None:
            self._empty()
        else:
            self._replace(ids, value)

    def _empty(self) -> None:
        """Drop every cached row (the fallback's table was replaced)."""
        raise NotImplementedError

    def _replace(self, ids: torch.Tensor, value: torch.Tensor) -> None:
        """Write ``value[i]`` into the cached copy of row ``ids[i]``, where cached."""
        raise NotImplementedError

    def metadata(self) -> Dict[str, Any]:
        """The fallback's :meth:`Feature.metadata` (GraphBolt's caches answer ``{}``)."""
        return self.fallback.metadata()

    def read_all(self, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Every row: the fallback's, the cache untouched (GraphBolt's cached ``read()``)."""
        return self.fallback.read_all(out)

    @property
    def num_rows(self) -> int:
        return self.fallback.num_rows

    @property
    def row_shape(self) -> Tuple[int, ...]:
        return self.fallback.row_shape

    @property
    def dtype(self) -> torch.dtype:
        return self.fallback.dtype

    @property
    def nbytes(self) -> int:
        return self.fallback.nbytes


class FeatureStore:
    """Named node and edge features, homogeneous or per node / edge type.

    A key is GraphBolt's ``(domain, type, name)``: ``store["node", "paper", "feat"]`` has
    a row per ``paper`` node (type-local ids), ``store["edge", "author:writes:paper",
    "w"]`` a row per edge of that type (as ``SampledSubgraph.original_edge_ids[etype]``).
    Homogeneous is the one-type case, type None: ``store["node", None, "feat"]``, also
    ``store["feat"]`` or ``store["node", "feat"]``; ``store["edge", "w"]`` by edge id.
    An edge type is ``"src:relation:dst"`` or PyG's ``(src, relation, dst)`` (stored as
    the string). ``store[kind, key]`` also takes a key as :attr:`node_keys` lists it, and
    ``store[node_type, name]`` a typed node feature as the constructor names it.

    Args:
        node_features: ``name`` or ``(node_type, name)`` -> table (see :class:`Feature`)
            with one row per node (of that type).
        edge_features: ``name`` or ``(edge_type, name)`` -> table with one row per edge
            (of that type).
    """

    def __init__(
        self,
        node_features: Mapping[Union[str, Tuple[str, str]], Union[Feature, FeatureData]],
        edge_features: Optional[Mapping[Union[str, Tuple[object, str]], Union[Feature, FeatureData]]] = None,
    ):
        self._features: Dict[Key, Feature] = {}
        for kind, features in (("node", node_features), ("edge", edge_features or {})):
            self._add(kind, features)

    @property
    def node_keys(self) -> List[FeatureKey]:
        """Node feature keys: names (homogeneous) and ``(node_type, name)`` pairs (typed)."""
        return [listed_key(key) for key in self._features if key[0] == "node"]

    @property
    def edge_keys(self) -> List[FeatureKey]:
        """Edge feature keys: names and ``("src:relation:dst", name)`` pairs."""
        return [listed_key(key) for key in self._features if key[0] == "edge"]

    def __getitem__(self, key) -> Feature:
        key = feature_key(key, "FeatureStore")
        if key not in self._features:
            kind = key[0]
            raise KeyError(
                f"FeatureStore: unknown {kind} feature {describe(key)}; known {kind} features: "
                f"{self.node_keys if kind == 'node' else self.edge_keys}"
            )
        return self._features[key]

    def __contains__(self, key) -> bool:
        return feature_key(key, "FeatureStore") in self._features

    def with_feature(self, key, feature: Feature) -> "FeatureStore":
        """A new store with the feature at ``key`` (any form of :meth:`__getitem__`, the
        feature must exist) replaced by ``feature``; the other features are shared, and
        this store is not modified (``gpu_cached_feature`` is built on it)."""
        check_feature(feature, "feature", "FeatureStore.with_feature")
        self[key]  # a KeyError naming the known features if there is none at `key`
        store = FeatureStore({})
        store._features = {**self._features, feature_key(key, "FeatureStore"): feature}
        return store

    def pin_memory_(self) -> "FeatureStore":
        """Pin every feature in place (see :meth:`Feature.pin_memory_`); return self."""
        for feature in self._features.values():
            feature.pin_memory_()
        return self

    # GraphBolt's FeatureStore methods: a feature is named (domain, type_name, feature_name),
    # domain "node" or "edge", type_name None when homogeneous.
    def keys(self) -> List[Key]:
        """Every feature's ``(domain, type_name or None, feature_name)``, as GraphBolt's."""
        return list(self._features)

    def read(self, domain: str, type_name: Optional[str], feature_name: str, ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Rows ``ids`` (None: all) of a feature: ``[n, *row_shape]`` (:meth:`Feature.read`)."""
        return self[domain, type_name, feature_name].read(ids)

    def metadata(self, domain: str, type_name: Optional[str], feature_name: str) -> Dict[str, Any]:
        """A feature's :meth:`Feature.metadata` (GraphBolt's), e.g. an OnDiskDataset
        entry's ``num_categories``: ``store.metadata("node", "Query", "categoryId")``."""
        return self[domain, type_name, feature_name].metadata()

    def size(self, domain: str, type_name: Optional[str], feature_name: str) -> torch.Size:
        """The row shape of a feature (GraphBolt's ``size``: without the row dimension)."""
        return self[domain, type_name, feature_name].size()

    def count(self, domain: str, type_name: Optional[str], feature_name: str) -> int:
        """The number of rows of a feature."""
        return self[domain, type_name, feature_name].count()

    def update(
        self, domain: str, type_name: Optional[str], feature_name: str, value: torch.Tensor, ids: Optional[torch.Tensor] = None
    ) -> None:
        """Replace a feature's table by ``value``, or its rows ``ids`` (:meth:`Feature.update`)."""
        self[domain, type_name, feature_name].update(value, ids)

    def to(self, device) -> "FeatureStore":
        """A store with every feature on ``device`` (:meth:`Feature.to`; ``"pinned"``
        pins in place); features already there are shared, this store is not modified."""
        store = FeatureStore({})
        store._features = {key: feature.to(device) for key, feature in self._features.items()}
        return store

    def __repr__(self) -> str:
        lines = [f"    {key[0]} {describe(key)}: {feature!r}," for key, feature in self._features.items()]
        return "FeatureStore(\n" + "\n".join(lines) + "\n)" if lines else "FeatureStore()"

    def _add(self, kind: str, features) -> None:
        """Add the features of a constructor argument (``name`` or ``(type, name)`` -> table)."""
        argument = f"{kind}_features"
        where = f"FeatureStore: `{argument}`"
        if not isinstance(features, Mapping):
            raise TypeError(f"{where} must be a dict of name -> table, got {type(features).__name__}")
        for listed, data in features.items():
            if isinstance(listed, str):
                key = (kind, None, listed)
            elif isinstance(listed, tuple) and len(listed) == 2 and isinstance(listed[1], str):
                try:
                    key = (kind, type_name(kind, listed[0], where), listed[1])
                except ValueError as err:
                    raise TypeError(f"{where} has key {listed!r}: {err.args[0]}") from err
            else:
                type_form = "edge_type" if kind == "edge" else "node_type"
                raise TypeError(f"{where} keys must be 'name' or ({type_form}, 'name'), got {listed!r}")
            if key in self._features:
                raise ValueError(f"{where} gives {kind} feature {describe(key)} twice")
            try:
                self._features[key] = data if isinstance(data, Feature) else Feature(data)
            except (TypeError, ValueError, FileNotFoundError) as err:
                raise type(err)(f"FeatureStore: `{argument}[{listed!r}]`: {err}") from err


Key = Tuple[str, Optional[str], str]  # (kind, type or None, name): how the library names a feature
FeatureKey = Union[str, Tuple[str, str]]  # a key as node_keys / edge_keys list it: name or (type, name)


def listed_key(key: Key) -> FeatureKey:
    """``key`` as :attr:`FeatureStore.node_keys` lists it: the name, or ``(type, name)``."""
    return key[2] if key[1] is None else key[1:]


def describe(key: Key) -> str:
    return f"'{key[2]}'" if key[1] is None else f"'{key[2]}' of type '{key[1]}'"


def type_name(kind: str, name, where: str) -> str:
    """A node type as given (a str), an edge type as its ``"src:relation:dst"`` string;
    ValueError otherwise."""
    if kind == "edge":
        return "{}:{}:{}".format(*parse_edge_type(name, where))
    if not isinstance(name, str):
        raise ValueError(f"{where}: a node type must be a str, got {name!r}")
    return name


def feature_key(key, where: str) -> Key:
    """``(kind, type or None, name)`` of a lookup key in any of the forms of
    :class:`FeatureStore`; KeyError for another form."""
    if isinstance(key, str):
        return "node", None, key
    if isinstance(key, tuple) and len(key) == 2 and key[0] not in ("node", "edge") and isinstance(key[1], str):
        key = ("node", key)  # (node type, name), as the constructor takes it
    if isinstance(key, tuple) and len(key) in (2, 3) and key[0] in ("node", "edge"):
        kind = key[0]
        if len(key) == 2 and isinstance(key[1], tuple) and len(key[1]) == 2:
            key = (kind, *key[1])  # (kind, (type, name)), as node_keys lists it
        if len(key) == 2:
            key = (kind, None, key[1])
        if isinstance(key[2], str):
            try:
                return kind, None if key[1] is None else type_name(kind, key[1], where), key[2]
            except ValueError as err:
                raise KeyError(str(err)) from err
    raise KeyError(
        f"{where}: a key is 'name', (node_type, 'name'), ('node' | 'edge', 'name') or ('node' | 'edge', type, 'name') (type None "
        f"when homogeneous, an edge type 'src:relation:dst' or a (src, relation, dst) tuple), got {key!r}"
    )


def output_rows(out: Optional[torch.Tensor], shape: tuple, dtype: torch.dtype, device, where: str) -> torch.Tensor:
    """``out`` after checking it is a contiguous ``dtype`` tensor of ``shape`` on ``device``;
    a new one when ``out`` is None."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    check_out(out, shape, dtype, device, where)
    return out


def npy_layout(path: str, where: str) -> Tuple[Tuple[int, ...], np.dtype, int]:
    """``(shape, dtype, data_offset)`` from a ``.npy`` header, after checking it describes a
    C-ordered table of a torch dtype that the file is long enough to hold (the file is a
    user's: ValueError / TypeError naming ``where``)."""
    try:
        with open(path, "rb") as f:
            npy = np.lib.format
            read_header = npy.read_array_header_1_0 if npy.read_magic(f) == (1, 0) else npy.read_array_header_2_0
            shape, fortran_order, dtype = read_header(f)
            offset = f.tell()
    except Exception as error:
        raise ValueError(f"{where}: not a readable .npy file ({error})") from error
    if fortran_order and len(shape) > 1:
        raise ValueError(f"{where}: in Fortran order, not C-contiguously; save it in C order (numpy.ascontiguousarray)")
    if len(shape) < 1:
        raise ValueError(f"{where}: the array must have a row dimension, got a scalar")
    if any(not isinstance(s, int) or s < 0 for s in shape):
        raise ValueError(f"{where}: the header's shape {shape} has a negative dimension; not a valid .npy table")
    try:
        numpy_to_torch_dtype(dtype)  # TypeError for object arrays too, as for an in-memory table
    except TypeError as error:
        raise TypeError(f"{where}: {error}") from error
    expected, size = offset + math.prod(shape) * dtype.itemsize, os.path.getsize(path)  # Python ints: exact
    if size < expected:
        raise ValueError(
            f"{where}: the file is {size} bytes, shorter than the {expected} its header promises "
            f"({shape} {dtype}); it is truncated"
        )
    return shape, dtype, offset


def _checked_table(data: Union[torch.Tensor, np.ndarray], what: str):
    """``data`` after checking it has rows and stores them C-contiguously."""
    if data.ndim < 1:
        raise ValueError(f"Feature: {what} must have a row dimension, got a scalar")
    contiguous = data.is_contiguous() if isinstance(data, torch.Tensor) else data.flags.c_contiguous
    if not contiguous:
        fix = (
            "save it in C order (numpy.save(path, numpy.ascontiguousarray(array)))"
            if isinstance(data, np.memmap)
            else "pass a contiguous copy (tensor.contiguous() or numpy.ascontiguousarray)"
        )
        raise ValueError(f"Feature: {what} must store its rows C-contiguously; {fix}")
    if isinstance(data, np.ndarray):
        try:
            numpy_to_torch_dtype(data.dtype)
        except TypeError as err:
            raise TypeError(f"Feature: {what}: {err}") from err
    return data


#: GraphBolt's name of an in-memory (or memory-mapped) feature: :class:`Feature`.
TorchBasedFeature = Feature


class BasicFeatureStore(FeatureStore):
    """GraphBolt's store class: a :class:`FeatureStore` of ``features``, a dict
    ``(domain, type_name, feature_name) -> Feature`` (domain ``"node"`` or ``"edge"``;
    ``type_name`` None on an untyped graph)."""

    def __init__(self, features: Mapping[Tuple[str, Optional[str], str], Feature]):
        if not isinstance(features, Mapping):
            raise TypeError(f"BasicFeatureStore: `features` must be a dict (domain, type_name, feature_name) -> Feature, got {type(features).__name__}")
        tables: Dict[str, dict] = {"node": {}, "edge": {}}
        for key, feature in features.items():
            if not (isinstance(key, tuple) and len(key) == 3 and key[0] in tables):
                raise ValueError(
                    f"BasicFeatureStore: `features` keys must be (domain, type_name, feature_name) with domain 'node' or "
                    f"'edge', got {key!r}"
                )
            domain, type_name, name = key
            tables[domain][name if type_name is None else (type_name, name)] = feature
        super().__init__(tables["node"], tables["edge"])
