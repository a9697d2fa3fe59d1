"""PyG's contract for ``y`` (``torch_geometric/loader/node_loader.py`` ``filter_fn`` ->
``loader/utils.py`` ``filter_data`` / ``filter_node_store_``): every node-level attribute
of the ``Data``, ``y`` included, is ``index_select``-ed by the batch's ``n_id`` (seeds
first), so ``batch.y`` has one row per node of the batch, in ``n_id`` order, with the
attribute's dtype and trailing shape; ``LinkNeighborLoader`` filters the same way.

graphpipe's side of it: node labels are a node label table fetched as a node feature
(``y``, or ``to_pyg(label_key=...)``); ``to_pyg()`` then gives NeighborLoader's ``y``.
Without a label table it keeps its documented fallback, the seeds' ``labels``.
"""

import pytest
import torch

pytest.importorskip("torch_geometric")

import graphpipe as gp

NUM_NODES = 300


def _data(y):
    g = torch.Generator().manual_seed(3)
    edge_index = torch.randint(0, NUM_NODES, (2, 2500), generator=g)
    return gp.CSCGraph.from_edge_index(edge_index, NUM_NODES), torch.randn(NUM_NODES, 4, generator=g), y


LABELS = {
    "class ids [N]": torch.arange(NUM_NODES) % 7,
    "column [N, 1]": (torch.arange(NUM_NODES) % 5).view(-1, 1),
    "multi-label float [N, 3]": torch.rand(NUM_NODES, 3, generator=torch.Generator().manual_seed(1)),
}


@pytest.mark.parametrize("labels", list(LABELS))
@pytest.mark.parametrize("layout", ["pyg", "block"])
@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
def test_y_is_the_label_table_indexed_by_n_id(labels, layout, sampler):
    graph, x, y = _data(LABELS[labels])
    train = torch.arange(0, NUM_NODES, 3)
    pipe = gp.ItemSampler(gp.ItemSet(train, names="seeds"), 32, shuffle=True, seed=0)
    pipe = getattr(pipe, sampler)(graph, [4, 3], seed=1, layout=layout)
    pipe = pipe.fetch_feature(gp.FeatureStore({"x": x, "y": y}), ["x", "y"]).transform(gp.MiniBatch.to_pyg)
    seen = []
    for batch in gp.DataLoader(pipe):
        assert batch.y.shape == (batch.num_nodes,) + y.shape[1:] and batch.y.dtype == y.dtype
        assert torch.equal(batch.y, y[batch.n_id]) and torch.equal(batch.x, x[batch.n_id])
        assert torch.equal(batch.y[: batch.batch_size], y[batch.n_id[: batch.batch_size]])
        seen += batch.n_id[: batch.batch_size].tolist()
    assert sorted(seen) == train.tolist()


def test_a_label_table_under_another_name_and_the_seed_labels_fallback():
    graph, x, y = _data(LABELS["class ids [N]"])
    items = gp.ItemSet((torch.arange(40), y[:40]), names=("seeds", "labels"))
    sampled = gp.ItemSampler(items, 16).sample_neighbor(graph, [3], seed=2, layout="pyg")
    batch = next(iter(sampled.fetch_feature(gp.FeatureStore({"feat": x, "label": y}), ["feat", "label"])))
    data = batch.to_pyg(label_key="label")
    assert torch.equal(data.y, y[data.n_id]) and torch.equal(data.x, x[data.n_id])
    # No label table fetched: y is the seeds' labels only (graphpipe's documented fallback).
    data = next(iter(sampled.fetch_feature(gp.FeatureStore({"feat": x}), ["feat"]))).to_pyg()
    assert torch.equal(data.y, y[data.n_id[: data.batch_size]])


def test_link_batches_carry_a_label_per_node_too():
    graph, x, y = _data(LABELS["class ids [N]"])
    pairs = graph.edge_index().t()[:60]
    pipe = gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 20).sample_uniform_negative(graph, 1, seed=0)
    pipe = pipe.sample_neighbor(graph, [3], seed=1).fetch_feature(gp.FeatureStore({"x": x, "y": y}), ["x", "y"])
    batches = list(pipe)
    assert len(batches) == 3
    for minibatch in batches:
        data = minibatch.to_pyg()
        assert torch.equal(data.y, y[data.n_id]) and data.edge_label_index.max() < data.num_nodes
