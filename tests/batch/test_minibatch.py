import sys
from dataclasses import replace

import pytest
import torch

import graphpipe as gp
from graphpipe import CSCGraph, FeatureStore, ItemSampler, ItemSet, MiniBatch
from hetero_graphs import uniform_typed_edges

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


TYPED_NODES = {"author": 20, "paper": 30}
TYPED_EDGES = {"author:writes:paper": 60, "paper:cites:paper": 80, "paper:written_by:author": 60}


def _typed_batch(layout="block"):
    """A typed node batch of 8 papers with node features ``(t, "feat")`` and edge
    features ``(etype, "w")``, and the graph's edges ``{etype: [2, m]}``."""
    g = torch.Generator().manual_seed(0)
    edges = uniform_typed_edges(TYPED_NODES, TYPED_EDGES, g)
    graph = gp.CSCGraph.from_hetero_edges(edges, TYPED_NODES)
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(TYPED_NODES["paper"]), names="seeds")})
    mb = next(iter(gp.ItemSampler(items, 8, seed=0).sample_neighbor(graph, [3, 2], seed=1, layout=layout)))
    mb.node_features = {(t, "feat"): torch.randn(ids.numel(), 4, generator=g) for t, ids in mb.input_nodes.items()}
    mb.edge_features = [
        {(etype, "w"): torch.randn(ids.numel(), generator=g) for etype, ids in sg.original_edge_ids.items()}
        for sg in mb.sampled_subgraphs
    ]
    return edges, mb


def _any_batch(typed, layout="block"):
    """``(edges, mb)``: a typed batch, or an untyped one with its user edges ``{"_N:_E:_N": [2, m]}``."""
    if typed:
        return _typed_batch(layout)
    return {"_N:_E:_N": torch.stack(_coo())}, _batch(weighted=True, layout=layout)[2]


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


@pytest.mark.parametrize("typed", [False, True])
def test_to_moves_every_tensor_and_keeps_keys(typed):
    _, mb = _any_batch(typed)
    tensors = dict(_tensors(mb))
    if typed:
        assert len(tensors) > 30
    else:  # seeds, labels, item_ids, input_nodes, 1 node feature, 3 layers x (indptr, indices, rows, cols, eids, weights, "w")
        assert len(tensors) == 5 + 3 * 7
    moved = mb.to("meta")
    moved_tensors = dict(_tensors(moved))
    assert moved_tensors.keys() == tensors.keys()
    for path, t in moved_tensors.items():
        assert t.device.type == "meta", path
        assert t.shape == tensors[path].shape and t.dtype == tensors[path].dtype, path
    assert moved.batch_index == mb.batch_index
    assert all(t.device.type == "cpu" for t in tensors.values())  # the original is untouched


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA behaviour")
@pytest.mark.parametrize("typed", [False, True])
def test_pin_memory_without_cuda_is_a_no_op(typed):
    _, mb = _any_batch(typed)
    assert mb.pin_memory() is mb


@pytest.mark.cuda
@pytest.mark.parametrize("typed", [False, True])
def test_pin_memory_pins_every_tensor(typed):
    _, mb = _any_batch(typed)
    pinned = mb.pin_memory()
    for path, t in _tensors(pinned):
        assert t.is_pinned() or t.numel() == 0, path  # an empty tensor has no memory to pin
    for path, t in _tensors(pinned.to("cuda", non_blocking=True)):
        assert t.is_cuda, path


def test_batch_properties_of_every_kind():
    """batch_size, is_link_batch and as_typed() of node and link batches, typed and untyped:
    an untyped batch is the one-type case (node type "_N", edge type "_N:_E:_N")."""
    _, typed = _typed_batch()
    assert typed.is_heterogeneous and not typed.is_link_batch and typed.batch_size == 8 and typed.num_layers == 2
    assert typed.as_typed() is typed
    two_types = MiniBatch(seeds={"paper": torch.arange(3), "author": torch.arange(2)})
    assert two_types.batch_size == 5 and not two_types.is_link_batch
    typed_pairs = MiniBatch(seeds={"a:x:b": torch.zeros(4, 2, dtype=torch.int64), "b:y:a": torch.zeros(3, 2, dtype=torch.int64)})
    assert typed_pairs.is_link_batch and typed_pairs.batch_size == 7
    assert MiniBatch().batch_size == 0 and not MiniBatch().is_link_batch and not MiniBatch().is_heterogeneous
    _, _, nodes = _batch()
    view = nodes.as_typed()
    assert not nodes.is_heterogeneous and view.is_heterogeneous and nodes.batch_size == view.batch_size == BATCH_SIZE
    assert view.seeds["_N"] is nodes.seeds and view.labels["_N"] is nodes.labels and view.item_ids["_N"] is nodes.item_ids
    assert view.input_nodes["_N"] is nodes.input_nodes and view.node_features[("_N", "feat")] is nodes.node_features["feat"]
    assert [set(layer) for layer in view.edge_features] == [{("_N:_E:_N", "w")}] * len(FANOUTS)
    for sg, typed_sg in zip(nodes.sampled_subgraphs, view.sampled_subgraphs):
        assert typed_sg.sampled_csc["_N:_E:_N"] is sg.sampled_csc and typed_sg.original_edge_ids["_N:_E:_N"] is sg.original_edge_ids
        assert typed_sg.num_src_nodes == {"_N": sg.num_src_nodes} and typed_sg.num_edges == {"_N:_E:_N": sg.num_edges}
    pairs = MiniBatch(seeds=torch.zeros(5, 2, dtype=torch.int64), labels=torch.ones(5), compacted_seeds=torch.zeros(5, 2))
    assert pairs.is_link_batch and pairs.batch_size == 5
    assert set(pairs.as_typed().seeds) == set(pairs.as_typed().labels) == set(pairs.as_typed().compacted_seeds) == {"_N:_E:_N"}


@pytest.mark.parametrize("typed", [False, True])
def test_sampled_subgraph_counts_and_edge_index(typed):
    """Counts per type, and local edge_index ids that map back to the user's edges of that
    type through the layer's node ids and edge ids (int for an untyped layer)."""
    edges, mb = _any_batch(typed)
    for sg in mb.sampled_subgraphs:
        assert sg.is_heterogeneous == typed
        view = sg.as_typed()
        assert sg.num_src_nodes == (view.num_src_nodes if typed else view.num_src_nodes["_N"])
        assert view.num_src_nodes == {t: ids.numel() for t, ids in view.original_row_node_ids.items()}
        assert view.num_dst_nodes == {t: ids.numel() for t, ids in view.original_column_node_ids.items()}
        assert view.num_edges == {etype: view.original_edge_ids[etype].numel() for etype in edges}
        assert sum(view.num_edges.values()) > 0
        edge_index = sg.edge_index() if typed else {"_N:_E:_N": sg.edge_index()}
        assert set(edge_index) == set(edges)
        for etype, local in edge_index.items():
            src_type, _, dst_type = etype.split(":")
            assert local.shape == (2, view.num_edges[etype]) and local.dtype == torch.int64
            ids = view.original_edge_ids[etype]
            assert torch.equal(view.original_row_node_ids[src_type][local[0]], edges[etype][0, ids])
            assert torch.equal(view.original_column_node_ids[dst_type][local[1]], edges[etype][1, ids])


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


@pytest.mark.parametrize("typed", [False, True])
def test_pyg_layout_batch_refuses_blocks(typed):
    _, mb = _any_batch(typed, layout="pyg")
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


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_to_pyg_keeps_pygs_edge_attr_and_edge_weight_by_name(layout):
    # from_pyg keeps PyG's `edge_attr` and `edge_weight` as edge features of those names;
    # NeighborLoader slices both, whatever else is fetched.
    _, store, mb = _batch(layout=layout)
    w = mb.to_pyg().edge_attr
    pyg_names = replace(mb, edge_features=[{"edge_attr": 2 * x["w"], "edge_weight": 3 * x["w"]} for x in mb.edge_features])
    data = pyg_names.to_pyg()
    assert torch.equal(data.edge_attr, 2 * w) and torch.equal(data.edge_weight, 3 * w)
    assert torch.equal(pyg_names.to_pyg(edge_feature_key="edge_attr").edge_weight, 3 * w)
    only_weight = replace(mb, edge_features=[{"edge_weight": x["w"]} for x in mb.edge_features]).to_pyg()
    assert torch.equal(only_weight.edge_weight, w) and "edge_attr" not in only_weight
    with pytest.raises(ValueError, match=r"edge feature 'edge_attr' has the name of edge_attr, which edge feature 'w'"):
        replace(mb, edge_features=[{**x, "edge_attr": x["w"]} for x in mb.edge_features]).to_pyg(edge_feature_key="w")
    with pytest.raises(ValueError, match=r"edge feature 'edge_weight' has the name of LABOR's edge_weight"):
        replace(_with_weights(pyg_names), edge_features=pyg_names.edge_features).to_pyg()
    with pytest.raises(ValueError, match=r"edge feature 'e_id' has the name of a field NeighborLoader's batches set"):
        replace(mb, edge_features=[{"e_id": x["w"]} for x in mb.edge_features]).to_pyg()


def test_to_pyg_chosen_x_and_y_are_not_replaced_by_features_of_those_names():
    node_labels = torch.arange(NUM_NODES) % 5
    extra = {"x": torch.zeros(NUM_NODES, 2), "y": node_labels, "label": node_labels + 1}
    for order in (("x", "feat", "y", "label"), ("feat", "x", "label", "y")):
        _, _, mb = _batch(node_features=order, extra_node_features=extra)
        with pytest.raises(ValueError, match=r"node feature 'x' would be replaced by the feature 'feat' chosen as `x`"):
            mb.to_pyg(node_feature_key="feat")
        with pytest.raises(ValueError, match=r"node feature 'y' would be replaced by the feature 'label' chosen as `y`"):
            mb.to_pyg(node_feature_key="x", label_key="label")
        data = mb.to_pyg()  # "x" and "y" by their names; "feat" and "label" by theirs
        assert torch.equal(data.x, extra["x"][data.n_id]) and torch.equal(data.label, node_labels[data.n_id] + 1)


def test_to_pyg_feature_choice_and_errors(monkeypatch):
    _, store, mb = _batch(node_features=("feat", "other"))
    data = mb.to_pyg()  # "feat" is x (after "x"), every other feature keeps its name
    assert torch.equal(data.x, store["feat"].data[data.n_id]) and torch.equal(data.other, store["other"].data[data.n_id])
    renamed = replace(mb, node_features={"h": mb.node_features["feat"], "other": mb.node_features["other"]})
    with pytest.raises(ValueError, match=r"several features \['h', 'other'\]; pass node_feature_key="):
        renamed.to_pyg()
    data = mb.to_pyg("other")
    assert torch.equal(data.x, store["other"].data[data.n_id]) and torch.equal(data.feat, store["feat"].data[data.n_id])
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
    assert lines[-10:] == [
        "    batch_index=0,", "    layout='block',", "    indexes=None,", "    compacted_seeds=None,",
        f"    item_ids=int64[{mb.seeds.numel()}],", "    input_id=None,", "    subtree_ids=None,", "    timestamp=None,", "    reused=None,", ")",
    ]
    assert repr(MiniBatch()).splitlines()[1:3] == ["    seeds=None,", "    labels=None,"]


def test_typed_repr_shows_shapes_by_key():
    _, mb = _typed_batch()
    text = repr(mb)
    assert "seeds={'paper': int64[8]}" in text
    assert f"('paper', 'feat'): float32[{mb.input_nodes['paper'].numel()}, 4]" in text
    assert "('author:writes:paper', 'w'): float32[" in text
    assert "'paper:cites:paper': CSCFormat(indptr=int64[" in repr(mb.sampled_subgraphs[0])


def _graphbolt21_fields(pairs, negative_dsts=None, negative_srcs=None, labels=None):
    """GraphBolt 2.1's MiniBatch names for ``[P, 2]`` positive ``pairs`` and ``[P, k]``
    negatives, modelled on its minibatch.py: tuples of columns, the side not given None,
    ``negative_node_pairs`` with it filled from the positives, labels 1.0/0.0."""
    k = (negative_dsts if negative_dsts is not None else negative_srcs).size(1)
    srcs = pairs[:, :1].expand(-1, k) if negative_srcs is None else negative_srcs
    dsts = pairs[:, 1:].expand(-1, k) if negative_dsts is None else negative_dsts
    return {
        "seed_nodes": None,
        "node_pairs": (pairs[:, 0], pairs[:, 1]),
        "negative_srcs": negative_srcs,
        "negative_dsts": negative_dsts,
        "negative_node_pairs": (srcs, dsts),
        "node_pairs_with_labels": (
            (torch.cat([pairs[:, 0], srcs.reshape(-1)]), torch.cat([pairs[:, 1], dsts.reshape(-1)])),
            torch.cat([torch.ones(pairs.size(0)), torch.zeros(srcs.numel())]) if labels is None else labels,
        ),
    }


@pytest.mark.parametrize("given", ["negative_dsts", "negative_srcs", "sampled"])
def test_graphbolt_21_names_read_the_link_batch(given):
    """GraphBolt 2.1's names on a link batch equal its values (local ones through the last
    layer's destinations); node batches have ``seed_nodes`` only."""
    graph = _graph()
    pairs = torch.stack(_coo(), 1)[:6]
    negatives = torch.randint(0, NUM_NODES, (6, 3), generator=torch.Generator().manual_seed(1))
    items = ItemSet(pairs, names="node_pairs") if given == "sampled" else ItemSet((pairs, negatives), names=("node_pairs", given))
    pipe = ItemSampler(items, 4)
    pipe = (pipe.sample_uniform_negative(graph, 3) if given == "sampled" else pipe).sample_neighbor(graph, [2])
    mb = next(iter(pipe))
    if given == "sampled":  # the sampler's: each negative keeps its positive's source
        negatives = mb.seeds[4:, 1].view(4, 3)
        given = "negative_dsts"
    expected = _graphbolt21_fields(pairs[:4], **{given: negatives[:4]})
    columns = mb.sampled_subgraphs[-1].original_column_node_ids
    for name in ("seed_nodes", "node_pairs", "negative_srcs", "negative_dsts"):
        _assert_same(getattr(mb, name), expected[name], name)
    local = {name: getattr(mb, "compacted_" + name) for name in ("node_pairs", "negative_srcs", "negative_dsts")}
    for name, value in local.items():
        _assert_same(None if value is None else columns[torch.stack(value)] if isinstance(value, tuple) else columns[value],
                     None if expected[name] is None else torch.stack(expected[name]) if isinstance(expected[name], tuple) else expected[name], name)  # fmt: skip
    _assert_same(mb.positive_node_pairs, mb.compacted_node_pairs, "positive_node_pairs")
    _assert_same(columns[torch.stack(mb.negative_node_pairs)], torch.stack(expected["negative_node_pairs"]), "negative_node_pairs")
    (sources, destinations), labels = mb.node_pairs_with_labels
    _assert_same(columns[torch.stack([sources, destinations])], torch.stack(expected["node_pairs_with_labels"][0]), "pairs")
    _assert_same(labels, expected["node_pairs_with_labels"][1], "labels")
    node_batch = next(iter(ItemSampler(ItemSet(torch.arange(5), names="seed_nodes"), 3).sample_neighbor(graph, [2])))
    assert torch.equal(node_batch.seed_nodes, torch.arange(3)) and node_batch.node_pairs is None
    assert node_batch.compacted_negative_dsts is None and node_batch.node_pairs_with_labels is None


def _assert_same(got, expected, name):
    if expected is None or got is None:
        assert got is None and expected is None, name
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), name
        for g, e in zip(got, expected):
            assert torch.equal(g, e), name
    else:
        assert got.dtype == expected.dtype and torch.equal(got, expected), name


def test_graphbolt_21_names_typed_and_refused_layouts():
    """Typed: dicts by edge type. Binary negatives and hyperlinks have no 2.1 form."""
    seeds = {"a:r:b": torch.tensor([[0, 1], [2, 3], [0, 4], [2, 5]])}
    mb = MiniBatch(seeds=seeds, indexes={"a:r:b": torch.tensor([0, 1, 0, 1])}, item_ids={"a:r:b": torch.arange(2)})
    assert mb.node_pairs["a:r:b"][1].tolist() == [1, 3] and mb.negative_srcs is None
    assert mb.negative_dsts["a:r:b"].tolist() == [[4], [5]]
    binary = MiniBatch(seeds=torch.tensor([[0, 1], [2, 3], [4, 5]]), item_ids=torch.arange(2))
    with pytest.raises(ValueError, match=r"MiniBatch.negative_dsts: GraphBolt 2.1's negatives are k per positive pair .* got 1 negative pairs for 2 positives"):
        binary.negative_dsts
    with pytest.raises(ValueError, match=r"MiniBatch.node_pairs: GraphBolt 2.1's node pairs need \[N, 2\] seeds, got shape \(2, 3\)"):
        MiniBatch(seeds=torch.zeros(2, 3, dtype=torch.int64)).node_pairs


def test_to_pyg_data_is_graphbolts():
    """GraphBolt 2.1's ``MiniBatch.to_pyg_data`` (a plain model of it: every layer's
    (indices, expanded indptr) pairs, made distinct; x, y, batch_size, n_id = input_nodes).
    It was ``to_pyg()`` here, which drops the edges re-sampled for nodes reached earlier."""
    pytest.importorskip("torch_geometric")
    _, store, mb = _batch()
    rows = torch.cat([layer.sampled_csc.indices for layer in mb.sampled_subgraphs])
    columns = torch.cat([torch.repeat_interleave(torch.arange(c.indptr.numel() - 1), c.indptr.diff()) for c in (l.sampled_csc for l in mb.sampled_subgraphs)])
    edges = sorted(set(zip(rows.tolist(), columns.tolist())))
    data = mb.to_pyg_data()
    assert data.edge_index.dtype == torch.int64 and data.edge_index.t().tolist() == [list(e) for e in edges]
    assert data.edge_index.size(1) > mb.to_pyg().edge_index.size(1)  # more than NeighborLoader's subgraph
    assert torch.equal(data.n_id, mb.input_nodes) and torch.equal(data.x, store["feat"].data[mb.input_nodes])
    assert torch.equal(data.y, mb.labels) and data.batch_size == BATCH_SIZE
    assert replace(mb, node_features=None).to_pyg_data().x is None  # GraphBolt's test (found in review: TypeError)
    for batch, says in [
        (_batch(node_features=("feat", "other"))[2], r"got a untyped 'block' batch with node features \['feat', 'other'\]"),
        (_batch(layout="pyg")[2], r"got a untyped 'pyg' batch"),
        (_typed_batch()[1], r"got a typed 'block' batch"),
    ]:
        match = r"MiniBatch.to_pyg_data\(\): GraphBolt's conversion takes an untyped block batch with at most one node feature, "
        with pytest.raises(ValueError, match=match + says):
            batch.to_pyg_data()


def test_graphbolts_calls_of_its_examples():
    """Found in review: GraphBolt 2.1's examples call ``mb.node_ids()`` (its pyg example),
    ``gb.DataLoader(..., overlap_graph_fetch=...)``, read ``gb.ORIGINAL_EDGE_ID``, and a
    third positional ItemSampler argument is its ``minibatcher`` (here it was ``shuffle``:
    a minibatcher silently shuffled); a loader given an unknown keyword printed an error
    from ``__del__`` besides its TypeError."""
    _, _, mb = _batch()
    assert mb.node_ids() is mb.input_nodes
    assert all(mb.edge_ids(i) is layer.original_edge_ids for i, layer in enumerate(mb.sampled_subgraphs))
    assert mb.edge_ids(-1) is mb.sampled_subgraphs[-1].original_edge_ids  # Python's indexing, as GraphBolt's
    for layer_id in (mb.num_layers, -mb.num_layers - 1, 1.0):
        with pytest.raises(IndexError, match=rf"MiniBatch.edge_ids: `layer_id` must be an int in \[0, {mb.num_layers}\)"):
            mb.edge_ids(layer_id)
    assert gp.ORIGINAL_EDGE_ID == "_ORIGINAL_EDGE_ID"
    items = gp.ItemSet(torch.arange(8), names="seeds")
    with pytest.raises(TypeError, match=r"ItemSampler: pass the options after `batch_size` by keyword .* GraphBolt's third positional argument is `minibatcher`"):
        gp.ItemSampler(items, 4, lambda batch, names: batch)
    pipe = gp.ItemSampler(items, 4, shuffle=False)
    loader = gp.DataLoader(pipe, overlap_graph_fetch=True, overlap_feature_fetch=True, persistent_workers=False, max_uva_threads=1024)
    assert [mb.seeds.tolist() for mb in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # GraphBolt's positional forms (found in review): DataLoader(datapipe, num_workers) as in its
    # multi-GPU example, CopyTo(datapipe, device, extra_attrs) as in its test_base.py
    assert [str(where) for where in gp.DataLoader(pipe, 2).placement] == ["workers(2)"]
    assert [mb.seeds.tolist() for mb in gp.DataLoader(pipe.copy_to("cpu", None), 0)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(list(gp.pipes.CopyTo(pipe, "cpu", ["seed_nodes"]))) == 2
    with pytest.raises(TypeError, match=r"`extra_attrs` \(GraphBolt 2.1's third argument\) .* got True; pass `non_blocking=` by keyword"):
        pipe.copy_to("cpu", True)
    with pytest.raises(TypeError, match=r"DataLoader: `overlap_graph_fetch` must be a bool \(GraphBolt's flag"):
        gp.DataLoader(pipe, overlap_graph_fetch="yes")
    unraisable = []
    sys.unraisablehook, hook = unraisable.append, sys.unraisablehook
    try:
        with pytest.raises(TypeError, match="unexpected keyword argument 'minibatcher'"):
            gp.DataLoader(pipe, minibatcher=None)
    finally:
        sys.unraisablehook = hook
    assert unraisable == []


@pytest.mark.parametrize("typed", [False, True])
def test_a_layer_to_pyg_is_graphbolts(typed):
    """``SampledSubgraph.to_pyg(x)`` (GraphBolt's; its PyG examples call it in the model)
    against a plain model of GraphBolt's: ``(x, x[:num_dst])``, the local edges
    ``(indices, expanded indptr)``, ``(num_src, num_dst)``; per edge type when typed."""
    _, mb = _typed_batch() if typed else (None, _batch()[2])
    h = {t: torch.randn(n, 3) for t, n in mb.sampled_subgraphs[0].num_src_nodes.items()} if typed else torch.randn(mb.sampled_subgraphs[0].num_src_nodes, 3)
    for sg in mb.sampled_subgraphs:
        x = {t: v[: sg.num_src_nodes[t]] for t, v in h.items()} if typed else h[: sg.num_src_nodes]
        layer = sg.to_pyg(x)
        for etype, csc in (sg.sampled_csc.items() if typed else [(None, sg.sampled_csc)]):
            src_type, _, dst_type = etype.split(":") if typed else (None, None, None)
            xs, num_dst = (x[src_type], sg.num_dst_nodes[dst_type]) if typed else (x, sg.num_dst_nodes)
            dst = torch.cat([torch.full((int(csc.indptr[j + 1] - csc.indptr[j]),), j) for j in range(len(csc.indptr) - 1)] + [torch.zeros(0, dtype=torch.int64)])
            expected = torch.stack([csc.indices, dst])
            edge_index, size = (layer.edge_index[etype], layer.size[etype]) if typed else (layer.edge_index, layer.size)
            assert edge_index.dtype == torch.int64 and torch.equal(edge_index, expected)
            assert size == (xs.size(0), num_dst)
            x_src, x_dst = (layer.x[0], layer.x[1][dst_type]) if typed else layer.x
            assert x_src is x and torch.equal(x_dst, (x[dst_type] if typed else x)[:num_dst])
        h = {t: v[: sg.num_dst_nodes[t]] for t, v in x.items() if t in sg.num_dst_nodes} if typed else x[: sg.num_dst_nodes]
    with pytest.raises(ValueError, match=r"SampledSubgraph.to_pyg: `x` must be"):
        mb.sampled_subgraphs[0].to_pyg(torch.zeros(1, 3) if not typed else {"paper": torch.zeros(1, 3)})


def test_a_layer_to_pyg_feeds_pygs_sage_conv():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    _, _, mb = _batch()
    sg = mb.sampled_subgraphs[0]
    x = torch.randn(sg.num_src_nodes, 4)
    conv = pyg_nn.SAGEConv(4, 2, aggr="mean")
    out = conv(*sg.to_pyg(x)[:2])
    src, dst = sg.edge_index()
    mean = torch.zeros(sg.num_dst_nodes, 4).index_add_(0, dst, x[src]) / torch.bincount(dst, minlength=sg.num_dst_nodes).clamp(min=1)[:, None]
    assert out.shape == (sg.num_dst_nodes, 2) and torch.allclose(out, conv.lin_l(mean) + conv.lin_r(x[: sg.num_dst_nodes]), atol=1e-5)
