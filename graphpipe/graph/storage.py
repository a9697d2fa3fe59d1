"""CSCGraph files and pickling, behind :meth:`CSCGraph.save` and ``load`` (whose
docstrings give the file contract) and ``__reduce__`` (:func:`reduce`)."""

from __future__ import annotations

import math
import os
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch

from graphpipe._internal.safe_files import publish, scratch_directory

__all__ = ["TYPE_KEYS", "build_arguments", "load", "output_file", "reduce", "save", "write"]

_FORMAT = "graphpipe.CSCGraph"
# Version 3 adds `indptr_nodes`; graphs without it are written as version 2, which older
# graphpipe reads.
_VERSION = 3
_KEYS_V1 = {"indptr", "indices", "edge_attributes", "node_attributes", "format", "version", "original_edge_ids", "checksums", "checksum_chunk_bytes"}
# The four fields of a typed graph (CSCGraph.typed_fields), by name.
TYPE_KEYS = ("node_type_offset", "type_per_edge", "node_type_to_id", "edge_type_to_id")
_KEYS = {1: _KEYS_V1, 2: _KEYS_V1 | set(TYPE_KEYS), 3: _KEYS_V1 | set(TYPE_KEYS) | {"indptr_nodes"}}
# CRC-32 per chunk of an array's bytes: zlib releases the GIL, so the chunks of a large
# array are checked on all cores (about 1.3 GB/s per core).
_CHECKSUM_CHUNK_BYTES = 1 << 26
_AGAIN = "write it again with CSCGraph.save"


def save(graph, path: str | os.PathLike) -> None:
    """:meth:`CSCGraph.save`: write through a private scratch directory beside ``path``."""
    where = "CSCGraph.save"
    destination, directory = output_file(path, where)
    with scratch_directory(directory, f"{where}: the directory of `path`") as scratch:
        write(graph, destination, scratch)


def write(graph, destination: str, scratch: str) -> None:
    """Save ``graph`` into the private directory ``scratch``, then move the file to ``destination``."""

    def on_host(t: torch.Tensor) -> torch.Tensor:
        t = t.detach().cpu()
        # torch.save writes a tensor's whole storage: copy views out of larger ones.
        return t if t.untyped_storage().nbytes() == t.nbytes else t.clone()

    def checksums(value):
        if isinstance(value, dict):
            return {k: _checksum(v) for k, v in value.items()}
        return None if value is None else _checksum(value)

    arrays = build_arguments(graph, on_host)
    typed = arrays.pop("typed") or dict.fromkeys(TYPE_KEYS)
    arrays.update(node_type_offset=typed["node_type_offset"], type_per_edge=typed["type_per_edge"])
    if arrays["indptr_nodes"] is None:
        del arrays["indptr_nodes"]
    state = {
        "format": _FORMAT,
        "version": 2 if "indptr_nodes" not in arrays else _VERSION,
        **arrays,
        "node_type_to_id": typed["node_type_to_id"],
        "edge_type_to_id": typed["edge_type_to_id"],
        "checksum_chunk_bytes": _CHECKSUM_CHUNK_BYTES,
        "checksums": {name: checksums(value) for name, value in arrays.items()},
    }
    written = os.path.join(scratch, "graph.pt")
    torch.save(state, written)
    publish(written, destination)


def load(cls, path: str | os.PathLike, mmap: bool, validate: Optional[bool]):
    """:meth:`CSCGraph.load`: read, check the checksums ``validate`` asks for, build."""
    path = os.path.abspath(os.fspath(path))
    where = f"CSCGraph.load('{path}')"
    state = _read_state(path, where, mmap)
    if validate is None:
        level = "indptr" if mmap else "full"
    else:
        level = "full" if validate else "shapes"
    if level != "shapes":
        _verify_checksums(where, state, everything=level == "full")
    try:
        return cls._build(
            state["indptr"],
            state["indices"],
            state["edge_attributes"],
            state["node_attributes"],
            state.get("original_edge_ids"),
            level=level,
            source_path=path if mmap else None,
            typed=None if state.get("node_type_offset") is None else {name: state[name] for name in TYPE_KEYS},
            indptr_nodes=state.get("indptr_nodes"),
        )
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from error


def _read_state(path: str, where: str, mmap: bool) -> dict:
    """The saved dict, after checking the file is one ``save`` wrote: format tag, a
    version this code reads, its keys."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}: no such file")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{where}: the file is empty (an interrupted copy or save?); {_AGAIN}")
    try:
        state = torch.load(path, mmap=mmap, weights_only=True, map_location="cpu")
    except Exception as error:
        reason = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        raise ValueError(
            f"{where}: cannot be read as a graph file written by CSCGraph.save: it is truncated, "
            f"corrupted or of another kind ({reason}); {_AGAIN}"
        ) from error
    if not isinstance(state, dict):
        raise ValueError(f"{where}: holds a {type(state).__name__}, not a graph written by CSCGraph.save")
    if state.get("format") != _FORMAT:
        raise ValueError(
            f"{where}: not a graph written by CSCGraph.save (its keys are {sorted(map(str, state))}, "
            f"format tag {state.get('format')!r}, expected {_FORMAT!r})"
        )
    version = state.get("version")
    if not isinstance(version, int) or version not in _KEYS:
        newer = isinstance(version, int) and version > _VERSION
        raise ValueError(
            f"{where}: graph file format version {version!r}, but this graphpipe reads version "
            f"{_VERSION} and older" + ("; upgrade graphpipe to read it" if newer else "")
        )
    keys = _KEYS[version]
    if set(state) != keys:
        raise ValueError(
            f"{where}: wrong keys for a version {version} graph file: missing "
            f"{sorted(keys - set(state))}, unexpected {sorted(map(str, set(state) - keys))}; {_AGAIN}"
        )
    for name in ("edge_attributes", "node_attributes"):
        if not isinstance(state[name], dict):
            raise ValueError(f"{where}: `{name}` is a {type(state[name]).__name__}, not a dict")
    return state


def reduce(graph):
    """``CSCGraph.__reduce__``: a graph mapped by ``load(mmap=True)`` travels as its path,
    and an array that is a memory map of a file (``np.memmap``, ``np.load(mmap_mode=...)``)
    as that file's name, offset, shape and dtype (Linux, where ``/proc/self/maps`` tells),
    checked to be the same file (size, modification time) when mapped again: worker
    processes map the same file instead of copying the graph. Any other array travels
    by value (torch's multiprocessing reductions then share it), not scanned again on
    arrival."""
    cls = type(graph)
    if graph.source_path is not None:
        return _map_saved_graph, (cls, graph.source_path, graph.total_num_nodes, graph.total_num_edges)
    mappings = _FileMappings()
    return _unpickle_graph, (cls, build_arguments(graph, lambda t: mappings.backing(t) or t))


def _unpickle_graph(cls, arguments: dict):
    def mapped(value):
        if isinstance(value, dict):
            return {k: mapped(v) for k, v in value.items()}
        return value.open() if isinstance(value, _MappedArray) else value

    return cls._build(**mapped(arguments), level="shapes")


def build_arguments(graph, fn) -> dict:
    """``CSCGraph._build``'s arguments for ``graph``: ``fn`` applied to every tensor, the
    type maps copied to dicts."""

    def apply(value):
        return None if value is None else fn(value) if isinstance(value, torch.Tensor) else dict(value)

    typed = graph.typed_fields()
    return dict(
        indptr=apply(graph.indptr),
        indices=apply(graph.indices),
        edge_attributes={k: apply(v) for k, v in graph.edge_attributes.items()},
        node_attributes={k: apply(v) for k, v in graph.node_attributes.items()},
        original_edge_ids=apply(graph.original_edge_ids),
        typed=None if typed is None else {k: apply(v) for k, v in typed.items()},
        indptr_nodes=apply(graph.indptr_nodes),
    )


def _map_saved_graph(cls, path: str, num_nodes: int, num_edges: int):
    """Unpickle a mapped graph: map its file again (the pickling process validated it)."""
    graph = cls.load(path, mmap=True, validate=False)
    if (graph.total_num_nodes, graph.total_num_edges) != (num_nodes, num_edges):
        raise ValueError(
            f"CSCGraph: '{path}' changed after it was loaded: it now holds {graph.total_num_nodes} nodes and "
            f"{graph.total_num_edges} edges, the pickled graph had {num_nodes} and {num_edges}"
        )
    return graph


class _MappedArray(NamedTuple):
    """A CPU tensor that is a memory map of a file, pickled as where it lies in the file."""

    path: str
    offset: int  # of its first byte in the file
    shape: Tuple[int, ...]
    dtype: torch.dtype
    writable: bool  # whether the original mapping was (then this one is copy-on-write)
    identity: Tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns) when pickled

    def open(self) -> torch.Tensor:
        try:
            info = os.stat(self.path)
        except OSError as error:
            raise ValueError(f"CSCGraph: cannot map '{self.path}' again to unpickle the graph ({error})") from error
        if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != self.identity:
            raise ValueError(
                f"CSCGraph: '{self.path}' changed after the graph was pickled (another file, size or modification "
                f"time); the graph's arrays were memory maps of it: build the graph again"
            )
        nbytes = math.prod(self.shape) * self.dtype.itemsize
        mode = "c" if self.writable else "r"  # "c": private, as the by-value copy would be
        data = np.memmap(self.path, dtype=np.uint8, mode=mode, offset=self.offset, shape=(nbytes,))
        with warnings.catch_warnings():  # a read-only map stays read-only, as the original
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(data).view(self.dtype).reshape(self.shape)


class _FileMappings:
    """This process's memory maps of files (Linux's ``/proc/self/maps``), read once, to
    find which tensors lie in one; empty elsewhere."""

    def __init__(self):
        self._areas: Optional[list] = None
        self._written: Optional[Dict[int, bool]] = None

    def _read_areas(self) -> list:
        areas = []
        try:
            with open("/proc/self/maps") as maps:
                lines = maps.read().splitlines()
        except OSError:
            return areas
        for line in lines:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or not parts[5].startswith("/") or parts[5].endswith(" (deleted)"):
                continue
            if parts[5].startswith("/dev/shm/torch_"):
                continue  # torch's own shared memory (file_system strategy): torch's reductions pass it on
            start, end = (int(x, 16) for x in parts[0].split("-"))
            areas.append((start, end, parts[1], int(parts[2], 16), int(parts[4]), parts[5]))
        return areas

    def _copied_on_write(self, start: int) -> bool:
        """Whether the private mapping starting at ``start`` has pages no longer the file's."""
        if self._written is None:
            self._written = {}
            current = None
            try:
                with open("/proc/self/smaps") as smaps:
                    for line in smaps:
                        if line.startswith("Anonymous:"):
                            if current is not None:
                                self._written[current] = int(line.split()[1]) > 0
                        elif "-" in line.split(maxsplit=1)[0]:
                            current = int(line.split("-", 1)[0], 16)
            except OSError:
                pass
        return self._written.get(start, True)

    def backing(self, t: torch.Tensor) -> Optional[_MappedArray]:
        """Where the contiguous CPU tensor ``t`` lies in a file, or None if it does not
        lie in one mapping (of a file that still has that name) whose pages are all
        the file's."""
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or t.numel() == 0 or not t.is_contiguous():
            return None
        if self._areas is None:
            self._areas = self._read_areas()
        begin = t.data_ptr()
        end = begin + t.numel() * t.element_size()
        covering = [a for a in self._areas if a[0] < end and a[1] > begin]
        covering.sort()
        if not covering or covering[0][0] > begin or covering[-1][1] < end:
            return None
        first = covering[0]
        for previous, area in zip(covering, covering[1:]):  # one file, contiguous in memory and in the file
            if area[0] != previous[1] or area[4:] != first[4:] or area[3] != previous[3] + previous[1] - previous[0]:
                return None
        for area in covering:
            private_and_writable = "p" in area[2] and "w" in area[2]
            if private_and_writable and self._copied_on_write(area[0]):
                return None
        path = first[5]
        try:
            info = os.stat(path)
        except OSError:
            return None
        if info.st_ino != first[4]:
            return None  # the name now names another file
        return _MappedArray(
            path=path,
            offset=first[3] + begin - first[0],
            shape=tuple(t.shape),
            dtype=t.dtype,
            writable="w" in first[2],
            identity=(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns),
        )


def _checksum(t: torch.Tensor, chunk_bytes: int = _CHECKSUM_CHUNK_BYTES) -> List[int]:
    """CRC-32 of each ``chunk_bytes`` of a CPU tensor's bytes (one value for an empty one)."""
    data = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
    chunks = [data[start : start + chunk_bytes] for start in range(0, max(data.size, 1), chunk_bytes)]
    if len(chunks) == 1:
        return [zlib.crc32(chunks[0])]
    with ThreadPoolExecutor(min(len(chunks), os.cpu_count() or 1)) as pool:
        return list(pool.map(zlib.crc32, chunks))


def _verify_checksums(where: str, state: dict, everything: bool) -> None:
    """Compare the stored CRCs with the arrays': ``indptr`` only, or every array."""
    chunk_bytes, stored = state["checksum_chunk_bytes"], state["checksums"]
    if not isinstance(chunk_bytes, int) or chunk_bytes <= 0 or not isinstance(stored, dict):
        raise ValueError(f"{where}: the checksum table is malformed; {_AGAIN}")
    arrays = [(name, state[name], stored.get(name)) for name in ("indptr", "indptr_nodes") if state.get(name) is not None]
    if everything:
        arrays.append(("indices", state["indices"], stored.get("indices")))
        for name in ("original_edge_ids", "type_per_edge", "node_type_offset"):
            if state.get(name) is not None:
                arrays.append((name, state[name], stored.get(name)))
        for group in ("edge_attributes", "node_attributes"):
            table = stored.get(group) if isinstance(stored.get(group), dict) else {}
            arrays += [(f"{group}['{k}']", t, table.get(k)) for k, t in state[group].items()]
    for name, t, expected in arrays:
        if not isinstance(t, torch.Tensor):
            continue  # reported by the structural checks, with its type
        if not isinstance(expected, list):
            raise ValueError(f"{where}: no checksum for `{name}`; {_AGAIN}")
        actual = _checksum(t, chunk_bytes)
        if actual != expected:
            bad = next((i for i, (a, e) in enumerate(zip(actual, expected)) if a != e), min(len(actual), len(expected)))
            raise ValueError(
                f"{where}: checksum mismatch in `{name}` (bytes {bad * chunk_bytes}.."
                f"{min((bad + 1) * chunk_bytes, t.nbytes)} of {t.nbytes}): the file is corrupted; "
                f"write it again with CSCGraph.save from the original data"
            )


def output_file(path, where: str) -> Tuple[str, str]:
    """``(file, directory)``: the absolute path of the output ``path`` with its directory
    resolved through symlinks, after checking the directory exists and ``path`` is not one."""
    given = os.path.abspath(os.fspath(path))
    directory = os.path.realpath(os.path.dirname(given))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"{where}: `path` '{given}': its directory '{os.path.dirname(given)}' does not exist; create it first"
        )
    file = os.path.join(directory, os.path.basename(given))
    if os.path.isdir(file) and not os.path.islink(file):
        raise IsADirectoryError(f"{where}: `path` '{given}' is a directory; name the graph file to write")
    return file, directory
