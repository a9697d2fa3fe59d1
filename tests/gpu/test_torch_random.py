"""torch_random must reproduce the numba counter-based hash bit for bit."""

import numba
import numpy as np
import pytest
import torch

from graphpipe.ops import random as nrandom
from graphpipe.ops import torch_random


@numba.njit(cache=True)
def _numba_hash_uniform(key, counters):
    n = counters.shape[0]
    hashes = np.empty(n, np.uint64)
    u = np.empty(n, np.float64)
    uo = np.empty(n, np.float64)
    for i in range(n):
        hashes[i] = nrandom.hash2(key, counters[i])
        u[i] = nrandom.uniform(key, counters[i])
        uo[i] = nrandom.uniform_open(key, counters[i])
    return hashes, u, uo


KEYS = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, nrandom.derive_key(7, 3, 1), nrandom.derive_key(123456789)]


@pytest.mark.parametrize("key", KEYS)
def test_bit_identical_to_numba(key):
    gen = torch.Generator().manual_seed(key % 1000)
    counters = torch.cat(
        [
            torch.arange(-5, 2000, dtype=torch.int64),
            torch.randint(-(2**63), 2**63 - 1, (5000,), generator=gen, dtype=torch.int64),
            torch.tensor([2**63 - 1, -(2**63)]),
        ]
    )
    hashes, u, uo = _numba_hash_uniform(np.uint64(key), counters.numpy().view(np.uint64))
    assert torch.equal(torch_random.hash2(key, counters), torch.from_numpy(hashes.view(np.int64)))
    assert torch.equal(torch_random.uniform(key, counters), torch.from_numpy(u))
    assert torch.equal(torch_random.uniform_open(key, counters), torch.from_numpy(uo))


def test_tensor_key_and_int32_counters_match():
    key = nrandom.derive_key(1, 2, 3)
    counters = torch.arange(100, dtype=torch.int32)
    as_tensor = torch.full((100,), torch_random.as_int64_key(key), dtype=torch.int64)
    assert torch.equal(torch_random.uniform(as_tensor, counters), torch_random.uniform(key, counters.long()))


def test_uniform_range_and_mean():
    u = torch_random.uniform(nrandom.derive_key(5), torch.arange(200_000))
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.005
    uo = torch_random.uniform_open(nrandom.derive_key(5), torch.arange(1000))
    assert float(uo.min()) > 0.0


@pytest.mark.cuda
def test_cuda_equals_cpu():
    key = nrandom.derive_key(11)
    counters = torch.randint(-(2**63), 2**63 - 1, (100_000,), dtype=torch.int64)
    assert torch.equal(torch_random.uniform(key, counters.cuda()).cpu(), torch_random.uniform(key, counters))
