"""Inputs that once crashed, hung or silently sampled wrong: extreme edge weights,
CSC arrays that disagree, huge fanouts, ids outside the graph."""

from types import SimpleNamespace

import pytest
import torch

from graphpipe.validation import check_edge_weights


# ------------------------------------------------------------------ non-finite weights
def _weights_graph(values, dtype=torch.float32):
    values = torch.tensor(values, dtype=dtype) if not isinstance(values, torch.Tensor) else values
    return SimpleNamespace(edge_attributes={"w": values}, num_edges=4)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_check_edge_weights_rejects_non_finite(bad, dtype):
    with pytest.raises(ValueError, match=r"`weights` attribute 'w' must be finite"):
        check_edge_weights(_weights_graph([1.0, bad, 2.0, 0.0], dtype), "w", "Sampler")


def test_check_edge_weights_accepts_a_boolean_mask_and_checks_the_length():
    probs = check_edge_weights(_weights_graph(torch.tensor([True, False, True, True])), "w", "Sampler")
    assert probs.dtype == torch.float32 and probs.tolist() == [1.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"`weights` attribute 'w' must have num_edges = 4 entries, got 3"):
        check_edge_weights(_weights_graph([1.0, 2.0, 3.0]), "w", "Sampler")
    with pytest.raises(ValueError, match=r"must be non-negative"):
        check_edge_weights(_weights_graph([1.0, -2.0, 3.0, 0.0]), "w", "Sampler")
    with pytest.raises(ValueError, match=r"1-D float or bool tensor"):
        check_edge_weights(_weights_graph(torch.arange(4)), "w", "Sampler")
