"""UVA gather GB/s vs pinned host-to-device memcpy GB/s, and cache hits (HBM gather) GB/s.

    python benchmarks/gpu/bench_uva_gather.py [--table-gb 8] [--row-bytes 128 400 512 2048]
        [--rows 150000 1000000] [--cache-gb 4] [--sweep] [--smoke]

For each row size and batch size, from a pinned table of ``--table-gb`` GB (registered in
place with ``Feature.pin_memory_()``, random ids):

* ``memcpy``: a pinned buffer of the batch's bytes copied to the device (the ceiling);
* ``uva``: ``graphpipe.ops.uva_gather`` (id sort included), the default launch shape;
* ``index_select_view``: ``torch.index_select`` on the zero-copy view (unsorted ids): the
  plain reference gather;
* ``cpu_gather_copy``: the numba CPU gather into pinned memory, then a copy.

Then, with ``--cache-gb`` > 0, for 400-byte rows: ``GPUCachedFeature.read_valid`` (the
fetcher's read of sampled ids) of ids that all hit a static cache of ``--cache-gb`` GB
(``cache_hits``: slot lookup and its host sync included) against ``torch.index_select`` on
the cache's device table (``hbm_index_select``) and a contiguous copy of as many bytes
(``hbm_copy``, the device's copy bandwidth).

``--sweep`` also times ``rows_per_program`` x ``max_programs`` so that the defaults in
``uva_gather.py`` can be tuned. Targets (issue 20, H100): uva >= 30 GB/s and >= 0.9x
index_select_view for 150k x 400 B; uva >= 0.9x memcpy for >= 512k rows; cache hits
>= 700 GB/s.
"""

import argparse

import numpy as np
import torch

from common import cuda_ms, emit, require_cuda, wall_ms
from graphpipe.features.store import Feature
from graphpipe.features.gpu_cache import GPUCachedFeature
from graphpipe.ops.gather import gather_rows
from graphpipe._internal.devices import zero_copy_view
from graphpipe.ops.uva_gather import uva_gather


def uva_runs(args, device, row_bytes):
    """The runs of one row size (its table is freed on return, before the next one's)."""
    num_rows = int(args.table_gb * 2**30) // row_bytes
    table = np.empty((num_rows, row_bytes // 4), dtype=np.float32)
    table[:: max(1, num_rows // 1024)] = 1.0  # touch some pages; contents do not matter
    feature = Feature(table).pin_memory_()
    view = zero_copy_view(feature.data)
    for batch in args.rows:
        ids = torch.randint(0, num_rows, (batch,), device=device)
        ids_cpu = ids.cpu()
        nbytes = batch * row_bytes
        staging = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        dest = torch.empty(nbytes, dtype=torch.uint8, device=device)
        out = torch.empty(batch, row_bytes // 4, device=device)
        results = {
            "memcpy": cuda_ms(lambda: dest.copy_(staging, non_blocking=True)),
            "uva": cuda_ms(lambda: uva_gather(feature.data, ids, out)),
            "index_select_view": cuda_ms(lambda: torch.index_select(view, 0, ids, out=out)),
            "cpu_gather_copy": wall_ms(
                lambda: out.copy_(gather_rows(feature.data, ids_cpu).pin_memory(), non_blocking=True)
            ),
        }
        for name, ms in results.items():
            emit({"bench": "uva_gather", "method": name, "row_bytes": row_bytes, "rows": batch,
                  "table_gb": args.table_gb, "ms": round(ms, 4), "GB/s": round(nbytes / ms / 1e6, 2)})
        got = uva_gather(feature.data, ids)
        assert torch.equal(got.cpu(), torch.from_numpy(table[ids_cpu.numpy()])), "uva_gather differs from CPU"
        if args.sweep:
            sms = torch.cuda.get_device_properties(device).multi_processor_count
            for rows_per_program in (1, 2, 4, 8, 16, 32, 64):
                for programs_per_sm in (1, 2, 4, 8, 16):
                    ms = cuda_ms(lambda: uva_gather(feature.data, ids, out, rows_per_program=rows_per_program,
                                                    max_programs=programs_per_sm * sms))
                    emit({"bench": "uva_gather_sweep", "row_bytes": row_bytes, "rows": batch,
                          "rows_per_program": rows_per_program, "programs_per_sm": programs_per_sm,
                          "GB/s": round(nbytes / ms / 1e6, 2)})


def cache_hit_runs(args, device, row_bytes=400):
    num_rows = int(args.cache_gb * 2**30) // row_bytes
    table = np.zeros((num_rows, row_bytes // 4), dtype=np.float32)
    table[:, 0] = np.arange(num_rows, dtype=np.float32)
    feature = Feature(table).pin_memory_()
    # Every row fits: the static cache loads them all (hottest first), so each read hits.
    cache = GPUCachedFeature(feature, num_rows * row_bytes, "static", torch.arange(num_rows, 0, -1), device=device)
    for batch in args.rows:
        ids = torch.randint(0, num_rows, (batch,), device=device)
        out = torch.empty(batch, row_bytes // 4, device=device)
        slots = cache.slot_of_row[ids].to(torch.int64)
        results = {
            "cache_hits": cuda_ms(lambda: cache.read_valid(ids, out)),  # the fetcher's read of sampled ids
            "hbm_index_select": cuda_ms(lambda: torch.index_select(cache.cache, 0, slots, out=out)),
            # The device's copy bandwidth for as many bytes, read contiguously (the ceiling).
            "hbm_copy": cuda_ms(lambda: out.view(-1).copy_(cache.cache.view(-1)[: out.numel()])),
        }
        for name, ms in results.items():
            emit({"bench": "cache_gather", "method": name, "row_bytes": row_bytes, "rows": batch,
                  "cache_gb": args.cache_gb, "ms": round(ms, 4), "GB/s": round(batch * row_bytes / ms / 1e6, 2)})
        cache.reset_stats()
        got = cache.read(ids)
        assert cache.hit_rate == 1.0, f"expected every id to hit, hit rate {cache.hit_rate}"
        assert torch.equal(got[:, 0].cpu(), ids.cpu().to(torch.float32)), "cache read differs from the table"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--table-gb", type=float, default=8.0)
    parser.add_argument("--row-bytes", type=int, nargs="+", default=[128, 400, 512, 2048])
    parser.add_argument("--rows", type=int, nargs="+", default=[150_000, 1_000_000])
    parser.add_argument("--cache-gb", type=float, default=4.0, help="0: skip the cache-hit gather")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny run (cache hits only on CPU tensors without a GPU)")
    args = parser.parse_args()
    if args.smoke:
        args.table_gb, args.row_bytes, args.rows, args.cache_gb = 0.01, [400], [1000], 0.001
    device = require_cuda(allow_cpu=args.smoke)
    if device.type == "cuda":
        for row_bytes in args.row_bytes:
            uva_runs(args, device, row_bytes)
    if args.cache_gb > 0:
        cache_hit_runs(args, device)


if __name__ == "__main__":
    main()
