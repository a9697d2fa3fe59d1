import numba
import numpy as np
from scipy import stats

from graphpipe.ops.random import derive_key, hash2, uniform, uniform_bits


@numba.njit
def _uniforms(key, counters):
    out = np.empty(counters.size)
    for i in range(counters.size):
        out[i] = uniform(key, counters[i])
    return out


@numba.njit
def _uniform_bits(key, counters):
    out = np.empty(counters.size, np.int64)
    for i in range(counters.size):
        out[i] = uniform_bits(key, counters[i])
    return out


@numba.njit
def _hash(key, counter):
    return hash2(key, counter)


def test_uniform_is_uniform_and_keyed():
    counters = np.arange(200_000, dtype=np.int64)
    u = _uniforms(np.uint64(derive_key(1)), counters)
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert u.min() >= 0.0 and u.max() < 1.0
    v = _uniforms(np.uint64(derive_key(2)), counters)
    assert abs(np.corrcoef(u, v)[0, 1]) < 0.01
    # a pure function of (key, counter)
    assert np.array_equal(u[::-1], _uniforms(np.uint64(derive_key(1)), counters[::-1]))


def test_derive_key_is_stable_and_order_sensitive():
    assert derive_key(1, 2, 3) == derive_key(1, 2, 3)
    assert derive_key(1, 2, 3) != derive_key(3, 2, 1)
    assert 0 <= derive_key(2**63, -1) < 2**64
    assert _hash(np.uint64(5), 7) != _hash(np.uint64(5), 8)


def test_uniform_bits_are_the_exact_numerators_of_uniform():
    """LABOR-0 orders variates by these integers: they must be uniform * 2**53 exactly."""
    counters = np.arange(100_000, dtype=np.int64)
    key = np.uint64(derive_key(3))
    bits = _uniform_bits(key, counters)
    assert bits.min() >= 0 and bits.max() < 2**53
    assert np.array_equal(bits.astype(np.float64) * 2.0**-53, _uniforms(key, counters))
