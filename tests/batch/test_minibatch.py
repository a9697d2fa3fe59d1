import sys
from dataclasses import replace

import pytest
import torch

from graphpipe import CSCGraph, FeatureStore, ItemSampler, ItemSet, MiniBatch

NUM_NODES = 300
FANOUTS = [4, 3, 2]
BATCH_SIZE = 16


def _with_weights(mb):
    """``mb`` with estimator-like edge weights ``1 / (sampled in-edges of the target)``."""
    subgraphs = []
    for sg in mb.sampled_subgraphs:
        counts = (sg.sampled_csc.indptr[1:] - sg.sampled_csc.indptr[:-1]).float()
        subgraphs.append(replace(sg, edge_weights=(1.0 / counts).repeat_interleave(counts.long())))
    return replace(mb, sampled_subgraphs=subgraphs)


def _coo():
    """Random edges ``src -> dst`` in no particular order: the graph's CSC order differs
    from the user's edge order, so edge ids must be mapped back."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, NUM_NODES, (NUM_NODES * 5,), generator=g)
    dst = torch.randint(0, NUM_NODES, (NUM_NODES * 5,), generator=g)
    return src, dst


def _graph():
    src, dst = _coo()
    return CSCGraph.from_coo(src, dst, num_nodes=NUM_NODES)


def _batch(weighted=False, node_features=("feat",), layout="block", extra_node_features=None):
    graph = _graph()
    src, dst = _coo()
    g = torch.Generator().manual_seed(1)
    labels = torch.arange(NUM_NODES) % 5
    node_tables = {"feat": torch.randn(NUM_NODES, 8, generator=g), "other": torch.randn(NUM_NODES, 2, generator=g)}
    node_tables.update(extra_node_features or {})
    # "w" in the user's edge order, a function of the edge's endpoints (so it can be checked).
    store = FeatureStore(node_tables, {"w": (src * NUM_NODES + dst).float()})
    items = ItemSet((torch.arange(NUM_NODES), labels), names=("seeds", "labels"))
    pipe = (
        ItemSampler(items, BATCH_SIZE, shuffle=True, seed=2)
        .sample_neighbor(graph, FANOUTS, seed=3, layout=layout)
        .fetch_feature(store, node_feature_keys=list(node_features), edge_feature_keys=["w"])
    )
    mb = next(iter(pipe))
    return graph, store, _with_weights(mb) if weighted else mb


def _tensors(obj, path="mb"):
    """(path, tensor) of every tensor inside a MiniBatch, recursively."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{path}[{k!r}]")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{path}[{i}]")
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            yield from _tensors(getattr(obj, name), f"{path}.{name}")


def test_to_moves_every_tensor():
    _, _, mb = _batch(weighted=True)
    tensors = dict(_tensors(mb))
    # seeds, labels, item_ids, input_nodes, 1 node feature, 3 layers x (indptr, indices, rows, cols, eids, weights, "w")
    assert len(tensors) == 5 + 3 * 7
    moved = mb.to("meta")
    moved_tensors = dict(_tensors(moved))
    assert moved_tensors.keys() == tensors.keys()
    for path, t in moved_tensors.items():
        assert t.device.type == "meta", path
        assert t.shape == tensors[path].shape and t.dtype == tensors[path].dtype, path
    assert moved.batch_index == mb.batch_index
    assert all(t.device.type == "cpu" for t in tensors.values())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA behaviour")
def test_pin_memory_without_cuda_is_a_no_op():
    _, _, mb = _batch()
    assert mb.pin_memory() is mb


@pytest.mark.cuda
def test_pin_memory_pins_every_tensor():
    _, _, mb = _batch(weighted=True)
    pinned = mb.pin_memory()
    for path, t in _tensors(pinned):
        assert t.is_pinned(), path
    for path, t in _tensors(pinned.to("cuda", non_blocking=True)):
        assert t.is_cuda, path


def _cumsum(values):
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_to_pyg_is_neighbor_loaders_subgraph_in_hop_order(layout):
    """NeighborLoader's subgraph from either layout: nodes in hop order, each node's
    in-edges sampled once (at the hop where it is first reached, min(fanout, degree)
    of them), every node reached from the seeds, edges grouped by hop, user edge ids."""
    graph, store, mb = _batch(weighted=True, layout=layout)
    assert mb.layout == layout
    data = mb.to_pyg()
    n_id, edge_index = data.n_id, data.edge_index
    assert data.batch_size == BATCH_SIZE and torch.equal(n_id[:BATCH_SIZE], mb.seeds)
    assert n_id.unique().numel() == n_id.numel() == data.num_nodes
    if layout == "pyg":
        assert torch.equal(n_id, mb.input_nodes)
    else:  # the block batch holds more nodes: the ones only its re-sampled edges reach
        assert torch.isin(n_id, mb.input_nodes).all() and n_id.numel() < mb.input_nodes.numel()
    assert torch.equal(data.x, store["feat"].data[n_id]) and torch.equal(data.y, mb.labels)
    assert edge_index.dtype == torch.int64 and edge_index.min() >= 0 and edge_index.max() < data.num_nodes
    # e_id are the user's edge ids: columns of the COO the graph was built from.
    src, dst = _coo()
    assert torch.equal(src[data.e_id], n_id[edge_index[0]]) and torch.equal(dst[data.e_id], n_id[edge_index[1]])
    assert data.e_id.unique().numel() == data.e_id.numel()
    assert len(data.num_sampled_nodes) == len(FANOUTS) + 1 and len(data.num_sampled_edges) == len(FANOUTS)
    nodes_by_hop, edges_by_hop = _cumsum(data.num_sampled_nodes), _cumsum(data.num_sampled_edges)
    assert nodes_by_hop[-1] == data.num_nodes and edges_by_hop[-1] == edge_index.size(1)
    in_degrees = graph.in_degrees()
    for hop in range(1, len(FANOUTS) + 1):
        fanout = FANOUTS[len(FANOUTS) - hop]
        src_local, dst_local = edge_index[:, edges_by_hop[hop - 1] : edges_by_hop[hop]]
        # Targets: the nodes first reached at hop - 1, each with all its sampled in-edges.
        first, end = nodes_by_hop[hop - 1], nodes_by_hop[hop]
        assert bool(((dst_local >= first) & (dst_local < end)).all())
        per_target = torch.bincount(dst_local - first, minlength=end - first)
        assert torch.equal(per_target, in_degrees[n_id[first:end]].clamp(max=fanout))
        # The nodes first reached at this hop are exactly the sources not known before, ascending.
        assert src_local.max() < nodes_by_hop[hop + 1]
        assert torch.equal(src_local[src_local >= end].unique(), torch.arange(end, nodes_by_hop[hop + 1]))
        assert bool((n_id[end : nodes_by_hop[hop + 1]].diff() > 0).all())
        weights = data.edge_weight[edges_by_hop[hop - 1] : edges_by_hop[hop]]
        assert torch.allclose(weights, 1.0 / per_target[dst_local - first].float())


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_to_pyg_trimmed_graphsage_matches_full(layout):
    torch_geometric = pytest.importorskip("torch_geometric")
    _, _, mb = _batch(layout=layout)
    data = mb.to_pyg()
    torch.manual_seed(0)
    model = torch_geometric.nn.GraphSAGE(8, 16, num_layers=len(FANOUTS))
    model.eval()
    full = model(data.x, data.edge_index)[: data.batch_size]
    trimmed = model(
        data.x,
        data.edge_index,
        num_sampled_nodes_per_hop=data.num_sampled_nodes,
        num_sampled_edges_per_hop=data.num_sampled_edges,
    )[: data.batch_size]
    assert full.shape == (BATCH_SIZE, 16)
    assert torch.allclose(full, trimmed, atol=1e-5)
    # The check has teeth: dropping the last hop's edges changes the seeds' outputs.
    cut = sum(data.num_sampled_edges[:-1])
    assert not torch.allclose(full, model(data.x, data.edge_index[:, :cut])[: data.batch_size], atol=1e-5)


def test_pyg_layout_batch_refuses_blocks():
    _, _, mb = _batch(layout="pyg")
    with pytest.raises(ValueError, match=r"layout='pyg'.*sample with layout='block'"):
        mb.blocks


def test_to_pyg_y_has_a_row_per_node_when_labels_are_a_node_feature():
    node_labels = (torch.arange(NUM_NODES) % 5)[:, None]
    for layout in ("block", "pyg"):
        _, store, mb = _batch(layout=layout, node_features=("feat", "y"), extra_node_features={"y": node_labels})
        data = mb.to_pyg()  # "y" is the labels, and not a candidate for x
        assert torch.equal(data.x, store["feat"].data[data.n_id])
        assert torch.equal(data.y, node_labels[data.n_id]) and data.y.size(0) == data.num_nodes
        assert torch.equal(data.y[: data.batch_size, 0], mb.labels)
        # another label feature by name; x is then chosen among the others
        _, _, mb = _batch(layout=layout, node_features=("feat", "label"), extra_node_features={"label": node_labels})
        data = mb.to_pyg(label_key="label")
        assert torch.equal(data.y, node_labels[data.n_id]) and torch.equal(data.x, store["feat"].data[data.n_id])
        assert torch.equal(mb.to_pyg("feat").y, mb.labels)  # no label feature: the seeds' labels
        with pytest.raises(KeyError, match=r"unknown label_key 'z'"):
            mb.to_pyg(label_key="z")


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_to_pyg_edge_attr_follows_edge_index(layout):
    graph, store, mb = _batch(layout=layout)
    data = mb.to_pyg()
    # "w" of an edge is src * NUM_NODES + dst in the user's order: edge_attr belongs to its edge.
    src, dst = data.n_id[data.edge_index]
    assert torch.equal(data.edge_attr, (src * NUM_NODES + dst).float())
    assert torch.equal(data.edge_attr, store["edge", "w"].data[data.e_id])
    assert torch.equal(mb.to_pyg(edge_feature_key="w").edge_attr, data.edge_attr)
    with pytest.raises(KeyError, match=r"unknown edge_feature_key 'v'; known keys: \['w'\]"):
        mb.to_pyg(edge_feature_key="v")
    assert "edge_attr" not in replace(mb, edge_features=[]).to_pyg()
    two = replace(mb, edge_features=[{**layer, "v": 2 * layer["w"]} for layer in mb.edge_features])
    assert "edge_attr" not in two.to_pyg()  # several and no key: left out
    assert torch.equal(two.to_pyg(edge_feature_key="v").edge_attr, 2 * data.edge_attr)


def test_to_pyg_feature_choice_and_errors(monkeypatch):
    _, store, mb = _batch(node_features=("feat", "other"))
    with pytest.raises(ValueError, match=r"several features \['feat', 'other'\]; pass node_feature_key="):
        mb.to_pyg()
    data = mb.to_pyg("other")
    assert torch.equal(data.x, store["other"].data[data.n_id])
    with pytest.raises(KeyError, match=r"unknown node_feature_key 'x'"):
        mb.to_pyg("x")
    with pytest.raises(ValueError, match=r"has no sampled_subgraphs"):
        MiniBatch(seeds=torch.arange(3)).to_pyg()
    broken = replace(mb, sampled_subgraphs=[mb.sampled_subgraphs[0], mb.sampled_subgraphs[2]])
    with pytest.raises(ValueError, match=r"the layers do not chain"):
        broken.to_pyg("feat")
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    with pytest.raises(ImportError, match=r"needs PyTorch Geometric: pip install 'graphpipe-gnn\[pyg\]'"):
        mb.to_pyg("feat")


def test_repr_shows_shapes_and_dtypes_not_values():
    _, _, mb = _batch(weighted=True)
    mb = replace(mb, node_features={"feat": torch.full((mb.input_nodes.numel(), 300), 123456.0)})
    text = repr(mb)
    assert "123456" not in text and "tensor(" not in text
    assert text.startswith("MiniBatch(\n    seeds=int64[16],\n")
    assert f"node_features={{'feat': float32[{mb.input_nodes.numel()}, 300]}}," in text
    sg = mb.sampled_subgraphs[0]
    assert repr(sg) in text and text.count("SampledSubgraph(") == len(FANOUTS)
    assert repr(sg).startswith(f"SampledSubgraph(sampled_csc=CSCFormat(indptr=int64[{sg.num_dst_nodes + 1}], ")
    assert f"edge_weights=float32[{sg.num_edges}])" in repr(sg)
    lines = text.splitlines()
    assert sum(line.startswith("        SampledSubgraph(") for line in lines) == len(FANOUTS)  # a layer a line
    assert f"        {{'w': float32[{sg.num_edges}]}}," in lines
    assert lines[-6:] == [
        "    batch_index=0,", "    layout='block',", "    indexes=None,", "    compacted_seeds=None,",
        f"    item_ids=int64[{mb.seeds.numel()}],", ")",
    ]
    assert repr(MiniBatch()).splitlines()[1:3] == ["    seeds=None,", "    labels=None,"]
