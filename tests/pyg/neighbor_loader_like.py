"""graphpipe set up as a drop-in for PyG's ``NeighborLoader`` and ``LinkNeighborLoader``
(homogeneous graphs; ``LinkNeighborLoader`` on a ``HeteroData`` too), so that PyG's own
loader tests read as they do upstream.

``neighbor_loader(data, num_neighbors, batch_size, ...)`` takes a ``Data`` and PyG's
arguments (``num_neighbors`` seeds first, as PyG lists them) and returns a
``graphpipe.DataLoader`` over ``pipe.transform(MiniBatch.to_pyg)``: each epoch yields one
``Data`` per batch. ``layout`` picks how the batches are sampled: ``"pyg"`` (the
NeighborLoader layout, sampled as such) or ``"block"`` (GraphBolt blocks, pruned by
``to_pyg``); both must give NeighborLoader's subgraph.
"""

import functools

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


def link_neighbor_loader(
    data,
    num_neighbors,
    batch_size,
    edge_label_index=None,
    edge_label=None,
    neg_sampling_ratio=None,
    neg_sampling=None,
    shuffle=False,
    layout="pyg",
    seed=0,
    **sampler_kwargs,
):
    """A graphpipe loader of ``data`` with LinkNeighborLoader's arguments (homogeneous).

    ``edge_label_index`` (default: ``data.edge_index``) becomes an ItemSet of pairs, with
    ``edge_label`` as labels; a binary ``neg_sampling_ratio`` (or ``neg_sampling=dict(mode,
    amount)``) adds ``sample_uniform_negative(graph, amount)``, and ``to_pyg`` lays the
    batch out in that mode. As LinkLoader does, binary labels that hold 0 are shifted by
    one so that 0 means negative. ``sampler_kwargs`` go to ``sample_neighbor`` (seed-edge
    exclusion). Node attributes ``x`` and edge attributes ``edge_attr`` are fetched.
    """
    edge_index = data.edge_index if "edge_index" in data else torch.empty(2, 0, dtype=torch.int64)
    graph = gp.CSCGraph.from_edge_index(edge_index, data.num_nodes)
    node_features = {key: data[key] for key in ("x",) if key in data}
    edge_features = {key: data[key] for key in ("edge_attr",) if key in data}
    if edge_label_index is None:
        edge_label_index = edge_index
    mode, amount = "binary", neg_sampling_ratio
    if neg_sampling is not None:
        mode, amount = neg_sampling["mode"], neg_sampling["amount"]
    if mode == "binary" and amount is not None and edge_label is not None and int(edge_label.min()) == 0:
        edge_label = edge_label + 1
    pairs = edge_label_index.t()
    items = gp.ItemSet(pairs, names="seeds") if edge_label is None else gp.ItemSet((pairs, edge_label), names=("seeds", "labels"))
    pipe = gp.ItemSampler(items, batch_size, shuffle=shuffle, seed=seed)
    if amount is not None:
        pipe = pipe.sample_uniform_negative(graph, int(amount), seed=seed)
    pipe = pipe.sample_neighbor(graph, list(reversed(num_neighbors)), seed=seed, layout=layout, **sampler_kwargs)
    pipe = pipe.fetch_feature(gp.FeatureStore(node_features, edge_features), list(node_features), list(edge_features))
    return gp.DataLoader(pipe.transform(functools.partial(gp.MiniBatch.to_pyg, neg_sampling=mode)))


def hetero_link_neighbor_loader(
    data,
    num_neighbors,
    edge_label_index,
    batch_size,
    edge_label=None,
    neg_sampling_ratio=None,
    neg_sampling=None,
    shuffle=False,
    layout="pyg",
    seed=0,
):
    """One ``HeteroData`` per batch of ``data`` (a ``HeteroData``), with LinkNeighborLoader's
    arguments: ``to_pyg()`` of the typed link MiniBatches graphpipe's samplers make
    (``HeteroItemSet`` keyed by the edge type, ``sample_uniform_negative``, ``sample_neighbor``,
    ``fetch_feature``).

    ``edge_label_index``: an edge type (``(src, dst)`` or ``(src, rel, dst)``), or a pair
    (edge type, ``[2, N]`` type-local pairs; default: that edge type's edges). Negatives
    are ``sample_uniform_negative``'s: each positive's source with uniform destinations of
    the destination type, labels True/False (or ``edge_label`` then zeros; binary labels
    holding 0 are shifted by one, as LinkLoader does), ``indexes`` grouping each positive
    with its negatives. Node attributes ``x`` and edge attributes ``edge_attr`` are fetched.
    """
    edge_type, pairs = edge_label_index if isinstance(edge_label_index[-1], torch.Tensor) else (edge_label_index, None)
    if len(edge_type) == 2:  # PyG's (src, dst) names the one edge type between them, else "to"
        matches = [key for key in data.edge_types if (key[0], key[2]) == tuple(edge_type)]
        edge_type = matches[0] if len(matches) == 1 else (edge_type[0], "to", edge_type[1])
    etype = ":".join(edge_type)
    if pairs is None:
        pairs = data[edge_type].edge_index
    mode, amount = "binary", neg_sampling_ratio
    if neg_sampling is not None:
        mode, amount = neg_sampling["mode"], neg_sampling["amount"]
    if mode == "binary" and amount is not None and edge_label is not None and int(edge_label.min()) == 0:
        edge_label = edge_label + 1
    edges = {":".join(key): data[key].edge_index for key in data.edge_types}
    edges.setdefault(etype, torch.empty(2, 0, dtype=torch.int64))  # the label's edge type may have no edges
    graph = gp.CSCGraph.from_hetero_edges(edges, {t: data[t].num_nodes for t in data.node_types})
    store = gp.FeatureStore(
        {(t, "x"): data[t].x for t in data.node_types if "x" in data[t]},
        edge_features={(":".join(key), "edge_attr"): data[key].edge_attr for key in data.edge_types if "edge_attr" in data[key]},
    )
    fields, names = (pairs.t(),), ("seeds",)
    if edge_label is not None:
        fields, names = (pairs.t(), edge_label), ("seeds", "labels")
    items = gp.HeteroItemSet({etype: gp.ItemSet(fields, names=names)})
    pipe = gp.ItemSampler(items, batch_size, shuffle=shuffle, seed=seed)
    if amount is not None:
        pipe = pipe.sample_uniform_negative(graph, int(amount), seed=seed)
    pipe = pipe.sample_neighbor(graph, list(reversed(num_neighbors)), layout=layout, seed=seed)
    node_keys = {t: ["x"] for t in data.node_types if "x" in data[t]}
    edge_keys = {":".join(key): ["edge_attr"] for key in data.edge_types if "edge_attr" in data[key]}
    pipe = pipe.fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys or None)
    batches = [mb.to_pyg(neg_sampling=mode) for mb in pipe]
    return batches
