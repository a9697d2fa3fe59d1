import numba
import numpy as np
import pytest
import torch

from graphpipe.ops import gather_rows


@pytest.mark.parametrize(
    "dtype, row_shape",
    [
        (torch.float32, (7,)),
        (torch.float16, (3,)),
        (torch.bfloat16, (5,)),
        (torch.int64, (2,)),
        (torch.uint8, (3,)),
        (torch.float32, ()),
        (torch.float64, (2, 3)),
    ],
)
def test_equals_index_bit_for_bit(dtype, row_shape):
    g = torch.Generator().manual_seed(0)
    table = (torch.randn((50,) + row_shape, generator=g) * 100).to(dtype)
    ids = torch.randint(0, 50, (200,), generator=g)  # 200 ids from 50 rows: repeats
    got = gather_rows(table, ids)
    assert got.dtype == dtype and got.shape == (200,) + row_shape
    assert torch.equal(got.view(torch.uint8), table[ids].view(torch.uint8))


def test_numpy_and_memmap_tables(tmp_path):
    table = np.random.default_rng(0).standard_normal((40, 6)).astype(np.float32)
    ids = torch.tensor([39, 0, 5, 5, 17], dtype=torch.int32)
    np.save(tmp_path / "t.npy", table)
    memmap = np.load(tmp_path / "t.npy", mmap_mode="r")
    for source in (table, memmap):
        got = gather_rows(source, ids)
        assert got.dtype == torch.float32
        assert np.array_equal(got.numpy(), table[ids.numpy()])


def test_empty_ids_and_out_buffer():
    table = torch.arange(12.0).reshape(6, 2)
    empty = gather_rows(table, torch.empty(0, dtype=torch.int64))
    assert empty.shape == (0, 2) and empty.dtype == torch.float32
    out = torch.full((3, 2), -1.0)
    got = gather_rows(table, torch.tensor([5, 0, 5]), out=out)
    assert got is out
    assert torch.equal(out, table[[5, 0, 5]])


def test_same_result_for_any_thread_count():
    table = torch.randn(1000, 33)
    ids = torch.randint(0, 1000, (5000,), generator=torch.Generator().manual_seed(1))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = gather_rows(table, ids)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = gather_rows(table, ids)
    finally:
        numba.set_num_threads(before)
    assert torch.equal(one, two) and torch.equal(one, table[ids])


def test_bad_ids_errors():
    table = torch.zeros(10, 4)
    with pytest.raises(ValueError, match=r"`ids` holds node id 10, out of range: valid ids are 0\.\.9"):
        gather_rows(table, torch.tensor([1, 10]))
    with pytest.raises(ValueError, match=r"`ids` holds node id -1"):
        gather_rows(table, torch.tensor([-1, 3]))
    with pytest.raises(TypeError, match=r"`ids` must be an integer tensor"):
        gather_rows(table, torch.tensor([1.0]))
    with pytest.raises(ValueError, match=r"`ids` must be 1-D"):
        gather_rows(table, torch.tensor([[1]]))


def test_bad_table_and_out_errors():
    with pytest.raises(TypeError, match=r"`table` must be a torch.Tensor or numpy array, got list"):
        gather_rows([[1.0]], torch.tensor([0]))
    with pytest.raises(ValueError, match=r"`table` must be contiguous"):
        gather_rows(torch.zeros(4, 3).t(), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"`table` must be C-contiguous"):
        gather_rows(np.zeros((4, 3), order="F"), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"`out` must be a contiguous torch.float32 tensor of shape \(2, 3\)"):
        gather_rows(torch.zeros(4, 3), torch.tensor([0, 1]), out=torch.empty(2, 4))


@pytest.mark.cuda
def test_cuda_ids_and_tables():
    table = torch.randn(100, 8)
    ids = torch.randint(0, 100, (64,))
    for t, i in ((table.cuda(), ids.cuda()), (table, ids.cuda()), (table.cuda(), ids)):
        got = gather_rows(t, i)
        assert got.is_cuda
        assert torch.equal(got.cpu(), table[ids])


@pytest.mark.parametrize("table_dtype", [torch.int32, torch.int64])
def test_take_as_int64_equals_torch_indexing_and_refuses_positions_outside(table_dtype):
    from graphpipe.ops.gather import take_as_int64

    table = torch.randint(0, 2**31 - 1, (1000,), generator=torch.Generator().manual_seed(0)).to(table_dtype)
    positions = torch.randint(0, 1000, (7, 300), generator=torch.Generator().manual_seed(1))
    out = take_as_int64(table, positions)
    assert out.dtype == torch.int64 and torch.equal(out, table[positions].to(torch.int64))
    assert torch.equal(take_as_int64(table, positions.to(torch.int32)), out)
    for bad in (1000, -1):
        with pytest.raises(ValueError, match=r"where: 1 position\(s\) are outside \[0, 1000\)"):
            take_as_int64(table, torch.tensor([3, bad, 5]), "where")
