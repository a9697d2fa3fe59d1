"""graphpipe set up as a drop-in for PyG's ``NeighborLoader`` (homogeneous graphs), so that
PyG's own loader tests read as they do upstream.

``neighbor_loader(data, num_neighbors, batch_size, ...)`` takes a ``Data`` and PyG's
arguments (``num_neighbors`` seeds first, as PyG lists them) and returns a
``graphpipe.DataLoader`` over ``pipe.transform(MiniBatch.to_pyg)``: each epoch yields one
``Data`` per batch. ``layout`` picks how the batches are sampled: ``"pyg"`` (the
NeighborLoader layout, sampled as such) or ``"block"`` (GraphBolt blocks, pruned by
``to_pyg``); both must give NeighborLoader's subgraph.
"""


import torch

import graphpipe as gp

LAYOUTS = ("pyg", "block")


def neighbor_loader(
    data,
    num_neighbors,
    batch_size,
    input_nodes=None,
    shuffle=False,
    replace=False,
    weight_attr=None,
    layout="pyg",
    sampler="neighbor",
    seed=0,
):
    """A graphpipe loader of ``data`` with NeighborLoader's arguments.

    Node attributes ``x`` and ``y`` and edge attributes ``edge_attr`` / ``edge_weight``
    (other than ``weight_attr``) are served from a FeatureStore in the user's order;
    ``y`` becomes a per-node label (``to_pyg``'s default ``label_key``).
    """
    edge_attributes = {weight_attr: data[weight_attr]} if weight_attr else {}
    graph = gp.CSCGraph.from_edge_index(data.edge_index, data.num_nodes, edge_attributes=edge_attributes)
    node_features = {key: data[key] for key in ("x", "y") if key in data}
    edge_features = {key: data[key] for key in ("edge_attr", "edge_weight") if key in data and key != weight_attr}
    store = gp.FeatureStore(node_features, edge_features)
    if input_nodes is None:
        input_nodes = torch.arange(data.num_nodes)
    elif input_nodes.dtype == torch.bool:
        input_nodes = input_nodes.nonzero().flatten()
    pipe = gp.ItemSampler(gp.ItemSet(input_nodes, names="seeds"), batch_size, shuffle=shuffle, seed=seed)
    fanouts = list(reversed(num_neighbors))  # graphpipe lists the seeds' fanout last
    if sampler == "neighbor":
        pipe = pipe.sample_neighbor(graph, fanouts, replace=replace, weights=weight_attr, seed=seed, layout=layout)
    else:
        pipe = pipe.sample_layer_neighbor(graph, fanouts, weights=weight_attr, seed=seed, layout=layout)
    pipe = pipe.fetch_feature(store, list(node_features), list(edge_features))
    return gp.DataLoader(pipe.transform(gp.MiniBatch.to_pyg))


def is_subset(subedge_index, edge_index, src_idx, dst_idx):
    """Every edge of ``subedge_index`` (local ids mapped by ``src_idx`` / ``dst_idx``) is in ``edge_index``."""
    num_nodes = int(edge_index.max()) + 1
    idx = num_nodes * edge_index[0] + edge_index[1]
    subidx = num_nodes * src_idx[subedge_index[0]] + dst_idx[subedge_index[1]]
    return bool(torch.isin(subidx, idx).all())


def hop_ranges(counts):
    """``[(start, end)]`` of each hop from ``num_sampled_nodes`` / ``num_sampled_edges``."""
    bounds = [0]
    for count in counts:
        bounds.append(bounds[-1] + count)
    return list(zip(bounds[:-1], bounds[1:]))
