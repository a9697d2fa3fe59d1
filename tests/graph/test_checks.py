"""Issue 29 for shared argument checks: a foreign object passed as `graph` gets a pointer
to the constructor that builds a CSCGraph from it; `reverse_edge_ids` as a numpy array."""

import numpy as np
import pytest
import torch

from graphpipe import CSCGraph
from graphpipe._internal.checks import check_reverse_edge_ids
from graphpipe.graph.csc_graph import check_graph


# ---------------------------------------------------------------- item 11: a foreign `graph`
def test_check_graph_points_to_the_constructor_to_use():
    graph = CSCGraph.from_coo(torch.tensor([0]), torch.tensor([0]))
    assert check_graph(graph, "Sampler") is graph
    with pytest.raises(TypeError, match=r"Sampler: `graph` must be a graphpipe.CSCGraph, got Tensor.*CSCGraph.from_edge_index"):
        check_graph(torch.tensor([[0, 1], [1, 0]]), "Sampler")
    torch_geometric = pytest.importorskip("torch_geometric")
    data = torch_geometric.data.Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(TypeError, match=r"got Data.*graphpipe.datasets.from_pyg\(data\).*CSCGraph.from_edge_index"):
        check_graph(data, "Sampler")


def test_check_graph_on_networkx_and_a_dataset():
    from graphpipe.datasets import karate_club
    with pytest.raises(TypeError, match=r"got .*Dataset.*dataset.graph"):
        check_graph(karate_club(), "Sampler")
    networkx = pytest.importorskip("networkx")
    with pytest.raises(TypeError, match=r"got Graph \(networkx\).*CSCGraph.from_coo"):
        check_graph(networkx.path_graph(3), "Sampler")


def test_check_graph_on_anything_else_lists_the_constructors():
    with pytest.raises(TypeError, match=r"got dict; build one with CSCGraph.from_edge_index .* CSCGraph.load"):
        check_graph({"edge_index": [[0], [1]]}, "Sampler")


# ---------------------------------------------------------------- item 10: reverse_edge_ids
@pytest.mark.parametrize("form", [torch.tensor, np.array, list, lambda x: np.array(x, dtype=np.int32)])
def test_reverse_edge_ids_in_every_integer_form(form):
    reverse = check_reverse_edge_ids(form([1, 0, 3, 2]), 4, "Sampler")
    assert reverse.dtype == torch.int64 and reverse.tolist() == [1, 0, 3, 2]


@pytest.mark.parametrize(
    "value, error, message",
    [
        (np.array([1.0, 0.0]), TypeError, r"numpy array of dtype float64"),
        (np.array([1, 0, 0]), ValueError, r"got shape \(3,\)"),
        (torch.tensor([[1, 0]]), ValueError, r"got shape \(1, 2\)"),
        (torch.tensor([1.0, 0.0]), TypeError, r"got dtype torch.float32"),
        ("01", TypeError, r"got str"),
        (np.array([1, 2]), ValueError, r"edge id 2, out of range"),
    ],
)
def test_bad_reverse_edge_ids_name_the_argument_and_the_form(value, error, message):
    with pytest.raises(error, match=r"Sampler: `reverse_edge_ids`"):
        check_reverse_edge_ids(value, 2, "Sampler")
    with pytest.raises(error, match=message):
        check_reverse_edge_ids(value, 2, "Sampler")
