"""UVA gather: the Triton kernel (on a GPU, or in Triton's interpreter on CPU) equals
``table[ids]`` bit for bit; zero-copy views need pinned memory."""

import os

import numpy as np
import pytest
import torch

from graphpipe._internal import devices
from graphpipe.ops import uva_gather as uva

has_cuda = torch.cuda.is_available()
try:
    import triton  # noqa: F401

    has_triton = True
except ImportError:
    has_triton = False
interpreted = os.environ.get("TRITON_INTERPRET") == "1"
runs_kernel = pytest.mark.skipif(
    not has_triton or not (has_cuda or interpreted),
    reason="needs Triton with CUDA, or TRITON_INTERPRET=1 to run the kernel on CPU",
)
device = "cuda" if has_cuda else "cpu"

CASES = [
    (torch.float32, (100,)),  # 400 B rows: 8-byte words not aligned to lines
    (torch.float32, (32,)),  # 128 B rows
    (torch.bfloat16, (3,)),  # 6 B rows: 2-byte words
    (torch.uint8, (5,)),  # 5 B rows: byte words
    (torch.int64, (2, 3)),  # multi-dimensional rows
    (torch.float64, ()),  # scalar rows
]


def _table(dtype, row_shape, num_rows=257, seed=0):
    gen = torch.Generator().manual_seed(seed)
    bits = torch.randint(0, 256, (num_rows * int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize,), generator=gen)
    return bits.to(torch.uint8).view(dtype).reshape((num_rows,) + row_shape)


@runs_kernel
@pytest.mark.parametrize("dtype,row_shape", CASES)
def test_equals_index_select_bitwise(dtype, row_shape):
    table = _table(dtype, row_shape)
    if has_cuda:
        table = table.pin_memory()
    gen = torch.Generator().manual_seed(1)
    ids = torch.cat([torch.randint(0, 257, (300,), generator=gen), torch.tensor([0, 256, 256, 5])])
    got = uva.uva_gather(table, ids.to(device))
    assert got.device.type == device and got.dtype == dtype and got.shape == (ids.numel(),) + row_shape
    assert torch.equal(got.cpu().view(torch.uint8), table[ids].view(torch.uint8))


@runs_kernel
def test_tile_shapes_and_grid_cap_do_not_change_the_result():
    table = _table(torch.float32, (100,), num_rows=1000)
    if has_cuda:
        table = table.pin_memory()
    ids = torch.randint(0, 1000, (777,), generator=torch.Generator().manual_seed(2))
    want = table[ids].view(torch.uint8)
    for rows, programs in [(1, 1), (4, 3), (16, None), (64, 2)]:
        got = uva.uva_gather(table, ids.to(device), rows_per_program=rows, max_programs=programs)
        assert torch.equal(got.cpu().view(torch.uint8), want)


@runs_kernel
def test_out_buffer_and_empty_ids():
    table = torch.randn(257, 7)
    if has_cuda:
        table = table.pin_memory()
    ids = torch.tensor([3, 1, 3], device=device)
    out = torch.empty(3, 7, device=device)
    assert uva.uva_gather(table, ids, out) is out
    assert torch.equal(out.cpu(), table[[3, 1, 3]])
    assert uva.uva_gather(table, ids[:0]).shape == (0, 7)
    with pytest.raises(ValueError, match="`out` must be a contiguous torch.float32 tensor of shape"):
        uva.uva_gather(table, ids, torch.empty(3, 8, device=device))


@pytest.mark.skipif(has_cuda, reason="checks the CPU-only answer")
def test_without_cuda_nothing_is_pinned_and_views_refuse():
    table = torch.zeros(4, 4)
    assert not devices.is_pinned(table) and not devices.is_pinned(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="`table` must be pinned CPU memory"):
        devices.zero_copy_view(table)


@pytest.mark.cuda
def test_zero_copy_view_aliases_registered_numpy_memory():
    from graphpipe.features.store import Feature

    array = np.arange(64 * 10, dtype=np.float32).reshape(64, 10)
    feature = Feature(array).pin_memory_()
    view = devices.zero_copy_view(feature.data)
    assert view.is_cuda and view.shape == (64, 10) and view.dtype == torch.float32
    array[3, 2] = -1.0
    torch.cuda.synchronize()
    assert float(view[3, 2]) == -1.0
    ids = torch.tensor([63, 3, 0], device="cuda")
    assert torch.equal(uva.uva_gather(feature.data, ids).cpu(), torch.from_numpy(array[[63, 3, 0]]))


@pytest.mark.cuda
def test_unpinned_table_is_refused_by_view():
    with pytest.raises(ValueError, match="must be pinned"):
        devices.zero_copy_view(torch.zeros(3, 3))
