"""Counter-based random numbers: a uniform variate is a pure function of (key, counter).

Samplers carry no RNG state: a batch gets a 64-bit ``key`` (:func:`derive_key` of the seed,
batch index and layer) and every variate is ``uniform(key, counter)`` for a counter such as
a vertex id or an edge position, so results do not depend on threads, workers or loop
order, and two seeds sharing a neighbour ``t`` can see the same variate (what LABOR needs).
``hash2`` is SplitMix64 (Steele et al., 2014; passes BigCrush). ``mix64`` and ``hash2`` are
called, not inlined in numba's IR: LLVM inlines them anyway, and the kernels compile faster
(benchmarks/RESULTS.md, "Test suite time (issue 19), second step").
"""

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1


@numba.njit(nogil=True, cache=True)
def mix64(x):
    """SplitMix64 finaliser: a bijective avalanche of a uint64."""
    x = np.uint64(x)
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@numba.njit(nogil=True, cache=True)
def hash2(key, counter):
    """A uint64 hash of (key, counter): SplitMix64's output number ``counter`` from seed ``key``."""
    return mix64(np.uint64(key) + (np.uint64(counter) + np.uint64(1)) * _GOLDEN)


@numba.njit(inline="always", nogil=True, cache=True)
def uniform(key, counter):
    """A float64 uniform on [0, 1) from (key, counter), 53 random bits."""
    return np.float64(hash2(key, counter) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(inline="always", nogil=True, cache=True)
def uniform_bits(key, counter):
    """``uniform(key, counter) * 2**53`` as an exact int64 in ``[0, 2**53)``: kernels order
    variates without converting them (below AVX-512, uint64 -> float64 does not vectorise)."""
    return np.int64(hash2(key, counter) >> np.uint64(11))


@numba.njit(inline="always", nogil=True, cache=True)
def uniform_open(key, counter):
    """A float64 uniform on (0, 1): safe for log() and division."""
    return (np.float64(hash2(key, counter) >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


def _mix64_py(x: int) -> int:
    x &= _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def derive_key(*parts: int) -> int:
    """Fold integers into one 64-bit key, a Python int in [0, 2**64) (e.g. ``derive_key(seed,
    batch_index, layer)``): the kernels' SplitMix64 mixer in pure Python, stable across runs
    and platforms."""
    key = 0x6A09E667F3BCC909
    golden = 0x9E3779B97F4A7C15
    for part in parts:
        key = _mix64_py(key ^ _mix64_py((int(part) * golden + golden) & _MASK64))
    return key
