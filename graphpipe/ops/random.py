"""Counter-based random numbers: a uniform variate is a pure function of (key, counter).

Samplers never carry RNG state. A batch gets a 64-bit ``key`` (from the sampler seed,
the batch index and the layer), and every random number is ``uniform(key, counter)``
for a counter such as a vertex id or an edge position. Results therefore do not depend
on the number of threads, the worker that runs a batch, or the order of loops; and two
seeds that share a neighbour ``t`` can see the same variate (what LABOR needs).

``hash2(key, counter)`` is SplitMix64 (Steele et al., 2014; passes BigCrush): its output
number ``counter`` from the seed ``key``, one finaliser mix per variate (the kernels that
hash every scanned edge, as LABOR does, are bound by it). ``mix64``/``uniform``/
``uniform_bits`` are numba functions usable inside kernels;
:func:`derive_key` is the Python-side helper that builds keys from integers.

``mix64`` and ``hash2`` are compiled once and called: LLVM inlines them into each loop
(vectorised loops stay vectorised, same speed). Inlined in numba's IR instead, each
kernel copied and typed them at every use, ~70 times in a dependent-LABOR kernel.
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
    """A uint64 hash of (key, counter): SplitMix64's output number ``counter`` for the seed
    ``key`` (one mix of ``key + (counter + 1) * golden``)."""
    return mix64(np.uint64(key) + (np.uint64(counter) + np.uint64(1)) * _GOLDEN)


@numba.njit(inline="always", nogil=True, cache=True)
def uniform(key, counter):
    """A float64 uniform on [0, 1) from (key, counter), 53 random bits."""
    return np.float64(hash2(key, counter) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(inline="always", nogil=True, cache=True)
def uniform_bits(key, counter):
    """``uniform(key, counter) * 2**53`` as an int64 in ``[0, 2**53)``: the same variate as
    an exact integer, so a kernel can compare and order variates without converting them
    (below AVX-512, a vector of uint64 has no one-instruction conversion to float64)."""
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
    """Fold integers into one 64-bit key (e.g. ``derive_key(seed, batch_index, layer)``).

    Uses the same SplitMix64 mixer as the kernels, in pure Python, so keys are stable
    across runs and platforms. Returns a Python int in [0, 2**64).
    """
    key = 0x6A09E667F3BCC909
    golden = 0x9E3779B97F4A7C15
    for part in parts:
        key = _mix64_py(key ^ _mix64_py((int(part) * golden + golden) & _MASK64))
    return key
