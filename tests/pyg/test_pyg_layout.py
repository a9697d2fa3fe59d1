"""layout="pyg" samples exactly what to_pyg() keeps of a layout="block" batch.

Both layouts draw a node's in-edges from variates keyed by (seed, batch, layer, vertex),
and a node first reached at hop k is a destination of the same layer in both, so for
neighbor sampling and LABOR-0 the PyG-layout batch must equal the pruned block batch
field by field, while sampling fewer nodes and reading fewer feature rows.
"""

import pytest
import torch

pytest.importorskip("torch_geometric")

import graphpipe as gp

NUM_NODES = 2000


def _setup():
    src, dst = gp.datasets.rmat_edges(NUM_NODES, 12 * NUM_NODES, seed=5)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(src.numel(), generator=g)
    src, dst = src[perm].long(), dst[perm].long()
    weight = torch.rand(src.numel(), generator=g)
    weight[weight < 0.2] = 0.0
    graph = gp.CSCGraph.from_coo(src, dst, num_nodes=NUM_NODES, edge_attributes={"weight": weight})
    store = gp.FeatureStore(
        {"x": torch.randn(NUM_NODES, 4, generator=g), "y": torch.arange(NUM_NODES) % 7},
        {"edge_attr": torch.randn(src.numel(), 3, generator=g)},
    )
    labels = torch.arange(NUM_NODES) % 7
    items = gp.ItemSet((torch.arange(NUM_NODES), labels), names=("seeds", "labels"))
    return graph, store, items


GRAPH, STORE, ITEMS = _setup()

SAMPLERS = {
    "neighbor": ("sample_neighbor", {}),
    "neighbor-replace": ("sample_neighbor", {"replace": True}),
    "neighbor-weighted": ("sample_neighbor", {"weights": "weight"}),
    "labor-0": ("sample_layer_neighbor", {}),
    "labor-0-weighted": ("sample_layer_neighbor", {"weights": "weight"}),
    "labor-0-kappa": ("sample_layer_neighbor", {"batch_dependency": 4}),
    "labor-0-layer-dependency": ("sample_layer_neighbor", {"layer_dependency": True}),
}


def _batches(name, layout, fanouts=(8, 4, 3), num_batches=4):
    method, kwargs = SAMPLERS[name]
    pipe = gp.ItemSampler(ITEMS, 64, shuffle=True, seed=1)
    pipe = getattr(pipe, method)(GRAPH, list(fanouts), seed=9, layout=layout, **kwargs)
    pipe = pipe.fetch_feature(STORE, ["x", "y"], ["edge_attr"])
    batches = []
    for mb in pipe:
        batches.append(mb)
        if len(batches) == num_batches:
            return batches


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_pyg_layout_equals_the_pruned_block_layout(name):
    for block, pyg in zip(_batches(name, "block"), _batches(name, "pyg")):
        assert block.layout == "block" and pyg.layout == "pyg"
        a, b = block.to_pyg(), pyg.to_pyg()
        assert set(a.keys()) == set(b.keys())
        for key in a.keys():
            if isinstance(a[key], torch.Tensor):
                assert torch.equal(a[key], b[key]), key
            else:
                assert a[key] == b[key], key
        assert ("edge_weight" in b) == name.startswith("labor")
        # Less work: fewer nodes sampled and feature rows read than the block batch holds.
        assert pyg.input_nodes.numel() == b.num_nodes < block.input_nodes.numel()
        assert pyg.node_features["x"].size(0) == b.num_nodes


def test_labor_with_importance_sampling_gives_neighbor_loaders_structure():
    """LABOR-k's vertex probabilities depend on the nodes a layer samples (the frontier
    in pyg layout, every destination in block layout), so the layouts differ; each is
    still NeighborLoader-shaped: every node reached, edges into the previous hop only."""
    for layout in ("block", "pyg"):
        pipe = gp.ItemSampler(ITEMS, 64, seed=1).sample_layer_neighbor(GRAPH, [6, 4], importance_sampling=2, seed=9, layout=layout)
        data = next(iter(pipe)).to_pyg()
        bounds = [0]
        for count in data.num_sampled_nodes:
            bounds.append(bounds[-1] + count)
        lo = 0
        for hop, count in enumerate(data.num_sampled_edges):
            src, dst = data.edge_index[:, lo : lo + count]
            assert bool((dst >= bounds[hop]).all()) and bool((dst < bounds[hop + 1]).all())
            new = src[src >= bounds[hop + 1]]
            assert torch.equal(new.unique(), torch.arange(bounds[hop + 1], bounds[hop + 2]))
            lo += count
        assert data.edge_weight.numel() == data.num_edges
