"""FeatureStore: node and edge feature tables, read by row id.

A :class:`Feature` is one ``[num_rows, *row_shape]`` table; its ``read(ids)`` is the
whole protocol that stages use, so other storages (a GPU cache, a remote store) can
implement it and sit in the same :class:`FeatureStore`. Tables may be tensors, numpy
arrays, ``numpy.memmap`` or paths of ``.npy`` files, which are memory-mapped on first
use (so a store is cheap to build and pickles as paths, e.g. into worker processes).
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, Optional, Tuple, Union

import numpy as np
import torch

from .ops.gather import gather_rows, numpy_to_torch_dtype
from .ops.uva_gather import cuda_or_warn_once, pin_in_place

__all__ = ["Feature", "FeatureStore"]

FeatureData = Union[torch.Tensor, np.ndarray, str, os.PathLike]



class Feature:
    """One feature table, ``[num_rows, *row_shape]``, read by row id.

    The protocol stages rely on is ``read``, ``num_rows``, ``row_shape``, ``dtype``,
    ``nbytes`` and ``pin_memory_``; other storages (a GPU cache) subclass and override it.

    Args:
        data: a tensor (CPU or CUDA), a numpy array / ``numpy.memmap``, or the path of a
            ``.npy`` file, opened with ``numpy.load(mmap_mode="r")`` on first use. Rows
            must be C-contiguous.
    """

    # Class-level defaults, so that a subclass that wraps another store needs no super().__init__.
    path: Optional[str] = None  # the .npy file of a path-backed feature
    _data: Union[torch.Tensor, np.ndarray, None] = None  # the table, once opened

    def __init__(self, data: FeatureData):
        if isinstance(data, (str, os.PathLike)):
            path = os.fspath(data)
            if not path.endswith(".npy"):
                raise ValueError(f"Feature: a path must name a .npy file, got '{path}'")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Feature: no such .npy file: '{path}'")
            self.path = path
        elif isinstance(data, (torch.Tensor, np.ndarray)):
            self._data = _checked_table(data, "`data`")
        else:
            raise TypeError(
                "Feature: `data` must be a torch.Tensor, a numpy array/memmap or a path to a "
                f".npy file, got {type(data).__name__}"
            )

    @property
    def data(self) -> Union[torch.Tensor, np.ndarray]:
        """The table itself (a path-backed feature maps its file here, once)."""
        if self._data is None:
            self._data = _checked_table(np.load(self.path, mmap_mode="r"), f"'{self.path}'")
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

    def read(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Rows ``ids`` (``[n]`` int32/int64): ``[n, *row_shape]``, on the GPU if the table
        or ``ids`` is on one.

        ``out`` is an optional preallocated result, written in place and returned.
        """
        return gather_rows(self.data, ids, out)

    def pin_memory_(self) -> "Feature":
        """Page-lock a CPU table in place (``cudaHostRegister``, no copy) and return self.

        The GPU can then read rows in place (UVA) and copy them asynchronously; the
        registration lasts as long as the table. A numpy table is wrapped as a tensor
        (no copy). A read-only memory map (a ``.npy`` path) cannot be registered: pass
        ``numpy.load(path, mmap_mode="r+")`` instead. Without CUDA this is a no-op that
        warns once per process.
        """
        if not cuda_or_warn_once("Feature.pin_memory_(): CUDA is not available; features stay unpinned"):
            return self
        data = self.data
        if isinstance(data, np.ndarray):
            if not data.flags.writeable:
                raise ValueError(
                    "Feature.pin_memory_(): the table is read-only (a .npy path is mapped with "
                    "mmap_mode='r'); pass numpy.load(path, mmap_mode='r+') to pin a file in place"
                )
            data = self._data = torch.from_numpy(data)
        pin_in_place(data)
        return self

    def __getstate__(self):
        # A mapped file travels as its path.
        state = dict(self.__dict__)
        if self.path is not None:
            state["_data"] = None
        return state

    def __repr__(self) -> str:
        if self._data is None:
            return f"Feature(path='{self.path}', not opened yet)"
        kind = "tensor" if isinstance(self._data, torch.Tensor) else "numpy"
        where = f", path='{self.path}'" if self.path is not None else ""
        return f"Feature(num_rows={self.num_rows}, row_shape={self.row_shape}, dtype={self.dtype}, {kind}{where})"


class FeatureStore:
    """Named node and edge features.

    ``store["feat"]`` or ``store["node", "feat"]`` is a node :class:`Feature`,
    ``store["edge", "w"]`` an edge feature (rows indexed by edge id).

    Args:
        node_features: name -> table (see :class:`Feature`) with one row per node.
        edge_features: name -> table with one row per edge.
    """

    def __init__(
        self,
        node_features: Mapping[str, Union[Feature, FeatureData]],
        edge_features: Optional[Mapping[str, Union[Feature, FeatureData]]] = None,
    ):
        self._features: Dict[str, Dict[str, Feature]] = {
            "node": _as_features(node_features, "node_features"),
            "edge": _as_features(edge_features or {}, "edge_features"),
        }

    @property
    def node_keys(self):
        return list(self._features["node"])

    @property
    def edge_keys(self):
        return list(self._features["edge"])

    def __getitem__(self, key) -> Feature:
        kind, name = _split_key(key)
        features = self._features[kind]
        if name not in features:
            raise KeyError(f"FeatureStore: unknown {kind} feature '{name}'; known {kind} features: {list(features)}")
        return features[name]

    def __contains__(self, key) -> bool:
        kind, name = _split_key(key)
        return name in self._features[kind]

    def pin_memory_(self) -> "FeatureStore":
        """Pin every feature in place (see :meth:`Feature.pin_memory_`); return self."""
        for features in self._features.values():
            for feature in features.values():
                feature.pin_memory_()
        return self

    def __repr__(self) -> str:
        lines = [
            f"    {kind} '{name}': {feature!r},"
            for kind, features in self._features.items()
            for name, feature in features.items()
        ]
        return "FeatureStore(\n" + "\n".join(lines) + "\n)" if lines else "FeatureStore()"


def _split_key(key) -> Tuple[str, str]:
    if isinstance(key, str):
        return "node", key
    if isinstance(key, tuple) and len(key) == 2 and key[0] in ("node", "edge") and isinstance(key[1], str):
        return key
    raise KeyError(f"FeatureStore: a key is 'name' or ('node' | 'edge', 'name'), got {key!r}")


def _as_features(features, name: str) -> Dict[str, Feature]:
    if not isinstance(features, Mapping):
        raise TypeError(f"FeatureStore: `{name}` must be a dict of name -> table, got {type(features).__name__}")
    out = {}
    for key, data in features.items():
        if not isinstance(key, str):
            raise TypeError(f"FeatureStore: `{name}` keys must be str, got {key!r}")
        try:
            out[key] = data if isinstance(data, Feature) else Feature(data)
        except (TypeError, ValueError, FileNotFoundError) as err:
            raise type(err)(f"FeatureStore: `{name}['{key}']`: {err}") from err
    return out


def _checked_table(data: Union[torch.Tensor, np.ndarray], what: str):
    """``data`` after checking it has rows and stores them C-contiguously."""
    if data.ndim < 1:
        raise ValueError(f"Feature: {what} must have a row dimension, got a scalar")
    contiguous = data.is_contiguous() if isinstance(data, torch.Tensor) else data.flags.c_contiguous
    if not contiguous:
        raise ValueError(
            f"Feature: {what} must store its rows C-contiguously; pass a contiguous copy "
            "(tensor.contiguous() or numpy.ascontiguousarray)"
        )
    if isinstance(data, np.ndarray):
        try:
            numpy_to_torch_dtype(data.dtype)
        except TypeError as err:
            raise TypeError(f"Feature: {what} has numpy dtype {data.dtype}, which torch cannot hold") from err
    return data
