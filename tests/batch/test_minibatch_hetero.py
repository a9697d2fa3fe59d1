"""MiniBatch and SampledSubgraph with typed (dict) fields: counts, edge_index, repr, moves."""

import pytest
import torch

import graphpipe as gp
from hetero_graphs import uniform_typed_edges
from graphpipe import MiniBatch

NUM_NODES = {"author": 20, "paper": 30}
NUM_EDGES = {"author:writes:paper": 60, "paper:cites:paper": 80, "paper:written_by:author": 60}


def _typed_batch(layout="block"):
    g = torch.Generator().manual_seed(0)
    edges = uniform_typed_edges(NUM_NODES, NUM_EDGES, g)
    graph = gp.CSCGraph.from_hetero_edges(edges, NUM_NODES)
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(NUM_NODES["paper"]), names="seeds")})
    mb = next(iter(gp.ItemSampler(items, 8, seed=0).sample_neighbor(graph, [3, 2], seed=1, layout=layout)))
    mb.node_features = {(t, "feat"): torch.randn(ids.numel(), 4, generator=g) for t, ids in mb.input_nodes.items()}
    mb.edge_features = [
        {(etype, "w"): torch.randn(ids.numel(), generator=g) for etype, ids in sg.original_edge_ids.items()}
        for sg in mb.sampled_subgraphs
    ]
    return edges, mb


def test_typed_batch_properties():
    _, mb = _typed_batch()
    assert mb.is_heterogeneous and not mb.is_link_batch
    assert mb.batch_size == 8 and mb.num_layers == 2
    two_types = MiniBatch(seeds={"paper": torch.arange(3), "author": torch.arange(2)})
    assert two_types.batch_size == 5 and not two_types.is_link_batch
    assert MiniBatch(seeds={"paper": torch.zeros(4, 2, dtype=torch.int64)}).is_link_batch
    plain = MiniBatch(seeds=torch.arange(4))
    assert not plain.is_heterogeneous and plain.batch_size == 4 and not plain.is_link_batch
    assert MiniBatch().batch_size == 0 and not MiniBatch().is_link_batch


def test_typed_sampled_subgraph_counts_and_edge_index():
    edges, mb = _typed_batch()
    for sg in mb.sampled_subgraphs:
        assert sg.is_heterogeneous
        assert sg.num_src_nodes == {t: ids.numel() for t, ids in sg.original_row_node_ids.items()}
        assert sg.num_dst_nodes == {t: ids.numel() for t, ids in sg.original_column_node_ids.items()}
        assert sg.num_edges == {etype: sg.original_edge_ids[etype].numel() for etype in NUM_EDGES}
        assert sum(sg.num_edges.values()) > 0
        edge_index = sg.edge_index()
        assert set(edge_index) == set(NUM_EDGES)
        for etype, local in edge_index.items():
            src_type, _, dst_type = etype.split(":")
            assert local.shape == (2, sg.num_edges[etype]) and local.dtype == torch.int64
            # Local ids map back to the graph's edges of that type, named by the edge ids.
            ids = sg.original_edge_ids[etype]
            assert torch.equal(sg.original_row_node_ids[src_type][local[0]], edges[etype][0, ids])
            assert torch.equal(sg.original_column_node_ids[dst_type][local[1]], edges[etype][1, ids])


def test_typed_repr_shows_shapes_by_key():
    _, mb = _typed_batch()
    text = repr(mb)
    assert "seeds={'paper': int64[8]}" in text
    assert f"('paper', 'feat'): float32[{mb.input_nodes['paper'].numel()}, 4]" in text
    assert "('author:writes:paper', 'w'): float32[" in text
    assert "'paper:cites:paper': CSCFormat(indptr=int64[" in repr(mb.sampled_subgraphs[0])


def _tensors(obj):
    """Every tensor inside a (nested) MiniBatch, with its path."""
    if isinstance(obj, torch.Tensor):
        yield "", obj
    elif isinstance(obj, (MiniBatch, gp.SampledSubgraph, gp.CSCFormat)):
        for name in obj.__dataclass_fields__:
            for path, t in _tensors(getattr(obj, name)):
                yield f".{name}{path}", t
    elif isinstance(obj, dict):
        for key, value in obj.items():
            for path, t in _tensors(value):
                yield f"[{key!r}]{path}", t
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            for path, t in _tensors(value):
                yield f"[{i}]{path}", t


def test_to_moves_every_typed_tensor_and_keeps_keys():
    _, mb = _typed_batch()
    moved = mb.to("meta")
    before, after = dict(_tensors(mb)), dict(_tensors(moved))
    assert before.keys() == after.keys() and len(after) > 30
    assert all(t.device.type == "meta" for t in after.values())
    assert all(a.shape == before[path].shape for path, a in after.items())
    assert all(t.device.type == "cpu" for t in before.values())  # the original is untouched
    pinned = mb.pin_memory()
    if torch.cuda.is_available():
        # An empty tensor has no memory to pin (its data pointer is null).
        assert all(t.is_pinned() or t.numel() == 0 for _, t in _tensors(pinned))
    else:
        assert pinned is mb


def test_typed_pyg_layout_has_no_blocks():
    _, mb = _typed_batch(layout="pyg")
    with pytest.raises(ValueError, match="layout='pyg'"):
        mb.blocks
