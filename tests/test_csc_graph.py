import pytest
import torch

from graphpipe import CSCGraph


def test_from_edge_index_groups_by_target():
    # edges: 0->1, 1->2, 2->0, 2->1
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    g = CSCGraph.from_edge_index(edge_index)
    assert g.num_nodes == 3 and g.num_edges == 4
    assert g.indptr.tolist() == [0, 1, 3, 4]
    # in-neighbours of node 1 are 0 and 2, in COO order (stable sort)
    assert g.indices[1:3].tolist() == [0, 2]
    assert g.in_degrees().tolist() == [1, 2, 1]
    assert g.indices.dtype == torch.int32 and g.indptr.dtype == torch.int32


def test_edge_index_roundtrip_and_attribute_permutation():
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 50, (300,), generator=gen)
    dst = torch.randint(0, 50, (300,), generator=gen)
    w = torch.rand(300, generator=gen)
    g = CSCGraph.from_coo(src, dst, num_nodes=60, edge_attributes={"w": w})
    assert g.num_nodes == 60
    ei = g.edge_index()
    # each CSC edge is a COO edge carrying its own attribute
    coo = {(int(s), int(d), float(x)) for s, d, x in zip(src, dst, w)}
    csc = {(int(s), int(d), float(x)) for s, d, x in zip(ei[0], ei[1], g.edge_attributes["w"])}
    assert coo == csc
    assert bool((ei[1][1:] >= ei[1][:-1]).all())


def test_int64_when_ids_do_not_fit():
    from graphpipe.csc_graph import smallest_index_dtype

    assert smallest_index_dtype(2**31 - 1) == torch.int32
    assert smallest_index_dtype(2**31) == torch.int64


def test_save_load(tmp_path):
    g = CSCGraph.from_edge_index(
        torch.tensor([[0, 1, 2], [1, 2, 0]]), edge_attributes={"w": torch.tensor([1.0, 2.0, 3.0])}
    )
    g.save(tmp_path / "g.pt")
    h = CSCGraph.load(tmp_path / "g.pt")
    assert torch.equal(g.indptr, h.indptr) and torch.equal(g.indices, h.indices)
    assert torch.equal(g.edge_attributes["w"], h.edge_attributes["w"])
    assert h.num_edges == 3


@pytest.mark.parametrize(
    "indptr, indices, match",
    [
        (torch.tensor([0, 2, 1, 3]), torch.tensor([0, 1, 2]), "non-decreasing"),
        (torch.tensor([0, 1, 3]), torch.tensor([0, 1]), "length mismatch"),
        (torch.tensor([1, 2, 3]), torch.tensor([0, 1]), r"indptr\[0\]"),
        (torch.tensor([0, 1, 2]), torch.tensor([0, 5]), "node id 5, out of range"),
        (torch.tensor([0, 1, 2]), torch.tensor([0, -1]), "node id -1"),
        (torch.tensor([0.0, 1.0]), torch.tensor([0]), "`indptr` must be a 1-D int32 or int64"),
    ],
)
def test_validation_errors(indptr, indices, match):
    with pytest.raises(ValueError, match=match):
        CSCGraph(indptr, indices)


def test_attribute_length_errors():
    with pytest.raises(ValueError, match="edge attribute 'w'"):
        CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), edge_attributes={"w": torch.ones(3)})
    with pytest.raises(ValueError, match="node attribute 'x'"):
        CSCGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), node_attributes={"x": torch.ones(3)})


def test_from_coo_errors():
    with pytest.raises(ValueError, match="same length"):
        CSCGraph.from_coo(torch.tensor([0, 1]), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"node id 4 out of range for num_nodes=3"):
        CSCGraph.from_coo(torch.tensor([0, 4]), torch.tensor([1, 2]), num_nodes=3)
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        CSCGraph.from_edge_index(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="integer tensor"):
        CSCGraph.from_coo(torch.tensor([0.0]), torch.tensor([1.0]))
