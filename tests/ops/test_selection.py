import numba
import numpy as np

from graphpipe.ops.selection import sort_small


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
