"""OwnedRowsFeature: the rows of one part of a feature table, read by their global ids.

A partitioned dataset (:func:`graphpipe.distributed.partition`) stores on each part only
the feature rows of the vertices (edges) that part owns. This feature keeps them in a
``.npy`` file (mapped on first use, after its checksum is checked, for random access) and
maps the ids the samplers produce (node ids, type-local on typed graphs; the user's edge
ids) to its rows.
"""

from __future__ import annotations

import mmap
import os
import zlib
from typing import Optional, Tuple

import torch

from graphpipe.features.store import Feature

__all__ = ["OwnedRowsFeature", "file_checksum"]

_READ_BYTES = 1 << 24


def file_checksum(path: str) -> int:
    """CRC-32 of the whole file at ``path`` (read in 16 MiB pieces)."""
    crc = 0
    with open(path, "rb") as f:
        while piece := f.read(_READ_BYTES):
            crc = zlib.crc32(piece, crc)
    return crc


class OwnedRowsFeature(Feature):
    """Rows ``ids`` of a table of ``num_rows`` rows; reading any other id raises.

    Args:
        path: a ``.npy`` file, ``[len(ids), *row_shape]``: row ``k`` is the row of ``ids[k]``.
        ids: ``[n]`` int64 ascending: the ids this part holds.
        num_rows: rows of the whole table (ids are in ``[0, num_rows)``).
        checksum: ``(size in bytes, CRC-32)`` of the file, checked once before it is
            first mapped (ValueError naming the file on a mismatch); None: not checked.

    The file is mapped with ``MADV_RANDOM`` (no readahead): a rank reads the rows its
    batches reach, scattered over the file, and the kernel's readahead (8 MiB a fault on
    the VM of ``benchmarks/RESULTS.md``) would read thousands of rows it does not need and,
    when the part is larger than the memory the rank may use, evict those it does: under a
    2 GB memory cgroup per rank, 5-8x fewer batches per second ("Partitioned training at
    scale" there). When the part fits, the checksum pass has read the file into the page
    cache and the advice costs nothing measurable.
    """

    def __init__(self, path: str, ids: torch.Tensor, num_rows: int, checksum: Optional[Tuple[int, int]] = None):
        super().__init__(path)
        self.ids = ids
        self._num_rows = num_rows
        self.checksum = checksum

    @property
    def data(self):
        if self._data is None and self.checksum is not None:
            size, crc = self.checksum
            if os.path.getsize(self.path) != size or file_checksum(self.path) != crc:
                raise ValueError(
                    f"OwnedRowsFeature: '{self.path}' does not match its checksum in the partition's manifest: "
                    f"the file is corrupted; partition the dataset again"
                )
            self.checksum = None
        first = self._data is None
        table = super().data
        mapping = getattr(table, "_mmap", None)  # np.load(mmap_mode=...)'s memory map; no madvise on some platforms
        if first and mapping is not None and hasattr(mmap, "MADV_RANDOM"):
            mapping.madvise(mmap.MADV_RANDOM)
        if table.shape[0] != self.ids.numel():
            raise ValueError(f"OwnedRowsFeature: '{self.path}' has {table.shape[0]} rows for {self.ids.numel()} ids")
        return table

    @property
    def num_rows(self) -> int:
        return self._num_rows

    def rows_of(self, ids: torch.Tensor) -> torch.Tensor:
        """``[n]`` int64 rows of the file holding ``ids`` (``[n]`` integer ids); ValueError
        naming the first id this part does not hold."""
        ids = ids.to(torch.int64)
        rows = torch.searchsorted(self.ids, ids).clamp_(max=max(self.ids.numel() - 1, 0))
        held = self.ids[rows] == ids if self.ids.numel() else torch.zeros_like(ids, dtype=torch.bool)
        if not bool(held.all()):
            missing = int(ids[~held][0])
            raise ValueError(
                f"OwnedRowsFeature: id {missing} is not held by this part ('{self.path}'); a part holds the rows "
                f"of the vertices (edges) it owns: read others through their owner (cooperative=True)"
            )
        return rows

    def read_valid(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        return super().read_valid(self.rows_of(ids), out)

    def __repr__(self) -> str:
        return f"OwnedRowsFeature(path='{self.path}', {self.ids.numel()} of {self._num_rows} rows)"

