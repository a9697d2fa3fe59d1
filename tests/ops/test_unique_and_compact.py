import numpy as np
import pytest
import torch

from graphpipe.ops import unique_and_compact


def _reference(dst, src):
    """Brute force: destinations in order, then the other sources once each, ascending."""
    dst, src = dst.tolist(), src.tolist()
    unique = dst + sorted(set(src) - set(dst))
    local = {x: i for i, x in enumerate(unique)}
    return unique, [local[x] for x in src]


# (num_dst, num_src, id range): dense ranges take the table kernel; sparse ones the serial
# hash kernel when small, else the parallel ranges kernel, whose ranges are ordered by a
# bitmap (30M) or a sort (10**12).
CASES = [
    (0, 0, 10),
    (5, 0, 10),
    (0, 7, 10),
    (3, 40, 20),
    (50, 2000, 300),
    (100, 5000, 10**12),
    (1000, 300_000, 200_000),
    (1000, 200_000, 30_000_000),
    (2000, 40_000, 10**12),
]


@pytest.mark.parametrize("num_dst, num_src, id_range", CASES)
def test_matches_brute_force(num_dst, num_src, id_range, numba_threads):
    rng = np.random.default_rng(num_dst + num_src)
    dst = torch.from_numpy(rng.choice(id_range, size=num_dst, replace=False))
    src = torch.from_numpy(rng.integers(0, id_range, size=num_src))
    if num_dst and num_src:
        src[::3] = dst[rng.integers(0, num_dst, size=src[::3].numel())]  # sources that are destinations
    want_unique, want_local = _reference(dst, src)
    results = []
    for threads in (1, 2):
        with numba_threads(threads):
            results.append(unique_and_compact(dst, src))
            results.append(unique_and_compact(dst, src, num_nodes=id_range))  # bound given
    for unique, local in results:
        assert unique.dtype == local.dtype == torch.int64
        assert unique.tolist() == want_unique
        assert local.tolist() == want_local
        assert torch.equal(unique[local], src)


def test_parallel_sparse_path_with_repeated_ids(numba_threads):
    """Many repeats of few ids spread over a huge range (a hub-heavy input layer of a large
    graph): every range's table sees mostly hits; results equal the brute force."""
    rng = np.random.default_rng(7)
    ids = rng.choice(10**9, size=5000, replace=False)
    dst = torch.from_numpy(ids[:300])
    src = torch.from_numpy(ids[rng.zipf(1.3, size=80_000) % ids.size])
    want_unique, want_local = _reference(dst, src)
    for threads in (1, 2):
        with numba_threads(threads):
            unique, local = unique_and_compact(dst, src, num_nodes=10**9)
        assert unique.tolist() == want_unique
        assert local.tolist() == want_local


def test_int32_inputs_and_dst_order_kept():
    dst = torch.tensor([9, 2, 7], dtype=torch.int32)
    src = torch.tensor([7, 5, 9, 1, 5, 11], dtype=torch.int32)
    unique, local = unique_and_compact(dst, src)
    assert unique.tolist() == [9, 2, 7, 1, 5, 11]
    assert local.tolist() == [2, 4, 0, 3, 4, 5]


def test_negative_ids_rejected():
    with pytest.raises(ValueError, match="node ids must be >= 0, got -3"):
        unique_and_compact(torch.tensor([1, 2]), torch.tensor([0, -3]))


# num_nodes 10: the dense kernel checks the ids; 10**9: too sparse, a bounds pass does.
@pytest.mark.parametrize("num_nodes, bad", [(10, -3), (10, 10), (10, 10**9), (10**9, -3), (10**9, 10**9)])
def test_ids_outside_num_nodes_rejected(num_nodes, bad):
    with pytest.raises(ValueError, match=r"`num_nodes` must be >= 1"):
        unique_and_compact(torch.tensor([5]), torch.tensor([3, 1000000]), num_nodes=0)
    with pytest.raises(ValueError, match="node ids"):
        unique_and_compact(torch.tensor([1, 2]), torch.tensor([0, bad, 4]), num_nodes=num_nodes)
    with pytest.raises(ValueError, match="node ids"):
        unique_and_compact(torch.tensor([1, bad]), torch.tensor([0, 4]), num_nodes=num_nodes)


@pytest.mark.parametrize("num_nodes", [10, 10**9])
def test_the_error_names_a_bad_id_and_num_nodes(num_nodes):
    """E.g. an id read from a corrupted memory-mapped ``indices``: the dense kernel flags
    it in its marking loops, the sparse path in its bounds pass."""
    with pytest.raises(ValueError, match=rf"node id {10**12} is outside \[0, num_nodes\) = \[0, {num_nodes}\)"):
        unique_and_compact(torch.tensor([1, 2]), torch.tensor([0, 10**12, 4]), num_nodes=num_nodes)
    with pytest.raises(ValueError, match=rf"node id -3 is outside \[0, num_nodes\) = \[0, {num_nodes}\)"):
        unique_and_compact(torch.tensor([1, -3]), torch.tensor([0, 4]), num_nodes=num_nodes)
