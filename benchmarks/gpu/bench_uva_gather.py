"""UVA gather GB/s vs pinned host-to-device memcpy GB/s.

    python benchmarks/gpu/bench_uva_gather.py [--table-gb 8] [--sweep]

For rows of 128/400/512/2048 bytes and 150k / 1M rows per batch, from a pinned table of
``--table-gb`` GB (registered in place with ``Feature.pin_memory_()``, random ids):

* ``memcpy``: a pinned buffer of the batch's bytes copied to the device (the ceiling);
* ``uva``: ``graphpipe.ops.uva_gather`` (id sort included), the default launch shape;
* ``index_select_view``: ``torch.index_select`` on the zero-copy view (unsorted ids);
* ``cpu_gather_copy``: the numba CPU gather into pinned memory, then a copy.

``--sweep`` also times ``rows_per_program`` x ``max_programs`` so that the defaults in
``uva_gather.py`` can be tuned. Targets (issue 6, H100): >= 30 GB/s for 150k x 400 B,
>= 45 GB/s for >= 512k rows.
"""

import argparse

import numpy as np
import torch

from common import cuda_ms, emit, require_cuda, wall_ms
from graphpipe.feature_store import Feature
from graphpipe.ops.gather import gather_rows
from graphpipe.ops.uva_gather import uva_gather, zero_copy_view


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--table-gb", type=float, default=8.0)
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    device = require_cuda()
    for row_bytes in (128, 400, 512, 2048):
        num_rows = int(args.table_gb * 2**30) // row_bytes
        table = np.empty((num_rows, row_bytes // 4), dtype=np.float32)
        table[:: max(1, num_rows // 1024)] = 1.0  # touch some pages; contents do not matter
        feature = Feature(table).pin_memory_()
        view = zero_copy_view(feature.data)
        for batch in (150_000, 1_000_000):
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
                      "ms": round(ms, 4), "GB/s": round(nbytes / ms / 1e6, 2)})
            got = uva_gather(feature.data, ids)
            assert torch.equal(got.cpu(), torch.from_numpy(table[ids_cpu.numpy()])), "uva_gather differs from CPU"
            if args.sweep:
                for rows_per_program in (1, 2, 4, 8, 16, 32, 64):
                    for programs_per_sm in (1, 2, 4, 8, 16):
                        sms = torch.cuda.get_device_properties(device).multi_processor_count
                        ms = cuda_ms(lambda: uva_gather(feature.data, ids, out, rows_per_program=rows_per_program,
                                                        max_programs=programs_per_sm * sms))
                        emit({"bench": "uva_gather_sweep", "row_bytes": row_bytes, "rows": batch,
                              "rows_per_program": rows_per_program, "programs_per_sm": programs_per_sm,
                              "GB/s": round(nbytes / ms / 1e6, 2)})
        del view, feature, table


if __name__ == "__main__":
    main()
