import numba
import numpy as np

from graphpipe.ops.selection import kth_smallest, sort_small, write_ranked


@numba.njit
def _sort_small(values, n, scratch_size):
    sort_small(values, n, np.empty(scratch_size, values.dtype))


def test_sort_small_sorts_the_prefix_with_ties_and_past_the_scratch():
    rng = np.random.default_rng(0)
    for n in list(range(0, 70)) + [200]:
        for high in (5, 10**9):  # many ties, almost none
            values = rng.integers(0, high, n + 3)
            expected = np.concatenate([np.sort(values[:n]), values[n:]])
            _sort_small(values, n, 64)  # n > 64 takes the sort call
            assert np.array_equal(values, expected), (n, high)


@numba.njit
def _write_ranked(values, n, out, offset):
    write_ranked(values, n, out, offset)


def test_write_ranked_places_distinct_values_in_order():
    rng = np.random.default_rng(1)
    for n in range(0, 70):
        values = rng.permutation(1000)[:n].astype(np.int64)
        out = np.full(n + 2, -1, np.int64)
        _write_ranked(values, n, out, 7)
        assert np.array_equal(out[:n], np.sort(values) + 7) and out[n:].tolist() == [-1, -1]


@numba.njit
def _kth_smallest(score, pos, n, k):
    return kth_smallest(score, pos, n, k, np.empty(k, score.dtype), np.empty(k, pos.dtype))


def test_kth_smallest_is_the_kth_pair_and_leaves_the_input():
    rng = np.random.default_rng(2)
    for n in range(1, 60):
        for high in (3, 10**9):  # many ties (broken by position), almost none
            score = rng.integers(0, high, n + 2)
            pos = np.sort(rng.choice(10 * n + 10, n + 2, replace=False))
            before = score.copy(), pos.copy()
            pairs = sorted(zip(score[:n].tolist(), pos[:n].tolist()))
            for k in {1, (n + 1) // 2, n}:
                assert _kth_smallest(score, pos, n, k) == pairs[k - 1], (n, k, high)
            assert np.array_equal(score, before[0]) and np.array_equal(pos, before[1])
