"""graphpipe set up as a drop-in for PyG's ``NeighborLoader`` and ``LinkNeighborLoader``
(homogeneous graphs; ``LinkNeighborLoader`` on a ``HeteroData`` too), so that PyG's own
loader tests read as they do upstream.

``neighbor_loader(data, num_neighbors, batch_size, ...)`` takes a ``Data`` and PyG's
arguments (``num_neighbors`` seeds first, as PyG lists them) and returns a
``graphpipe.DataLoader`` over ``pipe.transform(MiniBatch.to_pyg)``: each epoch yields one
``Data`` per batch. ``layout`` picks how the batches are sampled: ``"pyg"`` (the
NeighborLoader layout, sampled as such) or ``"block"`` (GraphBolt blocks, pruned by
``to_pyg``); both must give NeighborLoader's subgraph.

Temporal sampling (PyG's ``time_attr``, ``input_time``, ``temporal_strategy``,
``edge_label_time``; ``HeteroData`` too) maps to graphpipe as a user would write it: the
time is a graph attribute (``node_attributes`` / ``edge_attributes`` named ``time_attr``;
the graph sorted by it once, as PyG's ``sort_csc``) and a node / edge feature of that name
(so ``to_pyg()`` carries ``batch.time`` as NeighborLoader slices it); seed times are the
ItemSet field ``timestamp``; ``sample_neighbor(..., layout="pyg", time_attr=...,
temporal_strategy=...)`` samples.
"""

import functools
import math

import torch
from torch_geometric.data import HeteroData

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
    time_attr=None,
    input_time=None,
    temporal_strategy="uniform",
    disjoint=False,
):
    """A graphpipe loader of ``data`` with NeighborLoader's arguments.

    Node attributes ``x`` and ``y`` and edge attributes ``edge_attr`` / ``edge_weight``
    (other than ``weight_attr``) are served from a FeatureStore in the user's order;
    ``y`` becomes a per-node label (``to_pyg``'s default ``label_key``). ``time_attr``
    (a node or an edge attribute) and ``input_time`` (seed times; default: graphpipe's,
    the seeds' node times) sample temporally, see the module docstring. A ``HeteroData``
    goes to :func:`hetero_neighbor_loader`.
    """
    if isinstance(data, HeteroData):
        options = {"time_attr": time_attr, "input_time": input_time, "temporal_strategy": temporal_strategy}
        return hetero_neighbor_loader(
            data, num_neighbors, batch_size, input_nodes, shuffle=shuffle, disjoint=disjoint, seed=seed, **options
        )
    edge_attributes = {weight_attr: data[weight_attr]} if weight_attr else {}
    node_times, edge_times = _homo_times(data, time_attr)
    edge_attributes |= edge_times
    graph = gp.CSCGraph.from_edge_index(data.edge_index, data.num_nodes, edge_attributes, node_attributes=node_times)
    graph = _sorted_by_time(graph, node_times, edge_times)
    node_features = {key: data[key] for key in ("x", "y") if key in data} | node_times
    edge_features = {key: data[key] for key in ("edge_attr", "edge_weight") if key in data and key != weight_attr}
    edge_features |= edge_times
    store = gp.FeatureStore(node_features, edge_features)
    if input_nodes is None:
        input_nodes = torch.arange(data.num_nodes)
    items = _seed_items(input_nodes, input_time)
    pipe = gp.ItemSampler(items, batch_size, shuffle=shuffle, seed=seed)
    fanouts = list(reversed(num_neighbors))  # graphpipe lists the seeds' fanout last
    options = _sampler_options(time_attr, temporal_strategy, disjoint)
    if sampler == "neighbor":
        options |= {"replace": replace}
        pipe = pipe.sample_neighbor(graph, fanouts, weights=weight_attr, seed=seed, layout=layout, **options)
    else:
        pipe = pipe.sample_layer_neighbor(graph, fanouts, weights=weight_attr, seed=seed, layout=layout, **options)
    pipe = pipe.fetch_feature(store, list(node_features), list(edge_features))
    return EveryBatch(gp.DataLoader(pipe.transform(gp.MiniBatch.to_pyg)), math.ceil(len(items) / batch_size))


def hetero_neighbor_loader(
    data,
    num_neighbors,
    batch_size,
    input_nodes,
    time_attr=None,
    input_time=None,
    temporal_strategy="uniform",
    shuffle=False,
    disjoint=False,
    seed=0,
):
    """A graphpipe loader of a ``HeteroData`` with NeighborLoader's arguments: one
    ``HeteroData`` per batch (``to_pyg()`` of typed batches, ``layout="pyg"``).

    ``input_nodes``: a node type, or ``(node type, ids or bool mask)``. Node attributes
    ``x`` and ``time_attr`` are fetched per type, edge attributes ``time_attr`` per edge
    type; node types without ``time_attr`` are untimed (PyG samples them without a time
    constraint).
    """
    node_type, ids = (input_nodes, None) if isinstance(input_nodes, str) else input_nodes
    if ids is None:
        ids = torch.arange(data[node_type].num_nodes)
    graph, store, node_keys, edge_keys = _hetero_graph_and_store(data, time_attr)
    items = gp.HeteroItemSet({node_type: _seed_items(ids, input_time)})
    options = _sampler_options(time_attr, temporal_strategy, disjoint)
    pipe = gp.ItemSampler(items, batch_size, shuffle=shuffle, seed=seed)
    pipe = pipe.sample_neighbor(graph, list(reversed(num_neighbors)), layout="pyg", seed=seed, **options)
    pipe = pipe.fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys or None)
    return EveryBatch(gp.DataLoader(pipe.transform(gp.MiniBatch.to_pyg)), math.ceil(len(items) / batch_size))


class EveryBatch:
    """``loader``, asserting that each full pass yields ``num_batches`` batches (the seed
    items over the batch size, rounded up), so that a test's ``for batch in loader`` loop
    cannot pass by running no time."""

    def __init__(self, loader: gp.DataLoader, num_batches: int):
        self.loader, self.num_batches = loader, num_batches

    def __iter__(self):
        count = 0
        for batch in self.loader:
            count += 1
            yield batch
        assert count == self.num_batches, f"an epoch gave {count} batches, expected {self.num_batches}"

    def __len__(self) -> int:
        return len(self.loader)


def _homo_times(data, time_attr):
    """``({time_attr: node times}, {})`` or ``({}, {time_attr: edge times})`` of a ``Data``
    (PyG's ``is_node_attr`` / ``is_edge_attr``); ``({}, {})`` without ``time_attr``."""
    if time_attr is None:
        return {}, {}
    if data.is_edge_attr(time_attr):
        return {}, {time_attr: data[time_attr]}
    return {time_attr: data[time_attr]}, {}


def _sorted_by_time(graph, node_times, edge_times):
    """``graph`` with time-sorted neighbourhoods when it has a time attribute (as PyG
    sorts its CSC by time once, ``sampler/utils.py sort_csc``)."""
    if not node_times and not edge_times:
        return graph
    return graph.sort_by_time(
        node_timestamp_attr_name=next(iter(node_times), None), edge_timestamp_attr_name=next(iter(edge_times), None)
    )


def _seed_items(seeds, times):
    """An ItemSet of node ids ``seeds`` (``[N]`` ids, or a bool mask whose node ids are
    also the items' ``input_id``, PyG's for a mask), with ``times`` ``[N]`` as the field
    ``timestamp`` when given."""
    fields = {"seeds": seeds}
    if seeds.dtype == torch.bool:
        fields["seeds"] = fields["input_id"] = seeds.nonzero().flatten()
    if times is not None:
        fields["timestamp"] = times
    return gp.ItemSet(tuple(fields.values()), names=tuple(fields))


def _sampler_options(time_attr, temporal_strategy, disjoint):
    """``sample_neighbor``'s temporal and disjoint options for PyG's arguments."""
    options = {"disjoint": True} if disjoint else {}
    if time_attr is not None:
        options |= {"time_attr": time_attr, "temporal_strategy": temporal_strategy}
    return options


def _hetero_graph_and_store(data, time_attr, label_type=None):
    """``(graph, store, node_keys, edge_keys)`` of a ``HeteroData``: a typed CSCGraph
    (``time_attr`` as a node or edge attribute of the types that have it, sorted by it;
    the edge type ``label_type`` even without edges) and a FeatureStore of every type's
    ``x``, ``edge_attr`` and ``time_attr``."""
    edges = {":".join(key): data[key].edge_index for key in data.edge_types}
    if label_type is not None:  # the label's edge type may have no edges
        edges.setdefault(":".join(label_type), torch.empty(2, 0, dtype=torch.int64))
    node_times = {t: data[t][time_attr] for t in data.node_types if time_attr in data[t]}  # None is in none
    edge_times = {":".join(k): data[k][time_attr] for k in data.edge_types if time_attr in data[k]}
    node_attributes = {time_attr: node_times} if node_times else {}
    edge_attributes = {time_attr: edge_times} if edge_times else {}
    num_nodes = {t: data[t].num_nodes for t in data.node_types}
    graph = gp.CSCGraph.from_hetero_edges(edges, num_nodes, edge_attributes, node_attributes=node_attributes)
    graph = _sorted_by_time(graph, node_attributes, edge_attributes)
    node_tables = {(t, "x"): data[t].x for t in data.node_types if "x" in data[t]}
    node_tables |= {(t, time_attr): times for t, times in node_times.items()}
    edge_tables = {(":".join(k), "edge_attr"): data[k].edge_attr for k in data.edge_types if "edge_attr" in data[k]}
    edge_tables |= {(etype, time_attr): times for etype, times in edge_times.items()}
    node_keys, edge_keys = {}, {}
    for (t, name) in node_tables:
        node_keys.setdefault(t, []).append(name)
    for (etype, name) in edge_tables:
        edge_keys.setdefault(etype, []).append(name)
    return graph, gp.FeatureStore(node_tables, edge_features=edge_tables), node_keys, edge_keys


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
    time_attr=None,
    edge_label_time=None,
    disjoint=False,
    **sampler_kwargs,
):
    """A graphpipe loader of ``data`` with LinkNeighborLoader's arguments (homogeneous).

    ``edge_label_index`` (default: ``data.edge_index``) becomes an ItemSet of pairs, with
    ``edge_label`` as labels and ``edge_label_time`` as ``timestamp``; a binary
    ``neg_sampling_ratio`` (or ``neg_sampling=dict(mode, amount)``) adds
    ``sample_uniform_negative(graph, amount)`` (see :func:`_negatives`), and ``to_pyg``
    lays the batch out in that mode. As LinkLoader does, binary labels that hold 0 are
    shifted by one so that 0 means negative. ``sampler_kwargs`` go to ``sample_neighbor``
    (seed-edge exclusion, ``comparison``). Node attributes ``x`` and edge attributes
    ``edge_attr`` are fetched, and ``time_attr`` (see the module docstring).
    """
    edge_index = data.edge_index if "edge_index" in data else torch.empty(2, 0, dtype=torch.int64)
    node_times, edge_times = _homo_times(data, time_attr)
    graph = gp.CSCGraph.from_edge_index(edge_index, data.num_nodes, edge_times, node_attributes=node_times)
    graph = _sorted_by_time(graph, node_times, edge_times)
    node_features = {key: data[key] for key in ("x",) if key in data} | node_times
    edge_features = {key: data[key] for key in ("edge_attr",) if key in data} | edge_times
    if edge_label_index is None:
        edge_label_index = edge_index
    mode, amount = _negative_mode(neg_sampling_ratio, neg_sampling)
    if mode == "binary" and amount is not None and edge_label is not None and int(edge_label.min()) == 0:
        edge_label = edge_label + 1
    items = _pair_items(edge_label_index, edge_label, edge_label_time)
    pipe = gp.ItemSampler(items, batch_size, shuffle=shuffle, seed=seed)
    negative_options = _negative_times(time_attr if node_times else None, sampler_kwargs)
    pipe = _negatives(pipe, graph, mode, amount, seed, negative_options)
    options = _sampler_options(time_attr, "uniform", disjoint) | sampler_kwargs
    pipe = pipe.sample_neighbor(graph, list(reversed(num_neighbors)), seed=seed, layout=layout, **options)
    pipe = pipe.fetch_feature(gp.FeatureStore(node_features, edge_features), list(node_features), list(edge_features))
    loader = gp.DataLoader(pipe.transform(functools.partial(gp.MiniBatch.to_pyg, neg_sampling=mode)))
    return EveryBatch(loader, math.ceil(edge_label_index.size(1) / batch_size))


def _negative_mode(neg_sampling_ratio, neg_sampling):
    """``(mode, amount)`` of LinkNeighborLoader's negative sampling arguments."""
    if neg_sampling is not None:
        return neg_sampling["mode"], neg_sampling["amount"]
    return "binary", neg_sampling_ratio


def _pair_items(edge_label_index, edge_label, edge_label_time):
    """An ItemSet of the ``[2, N]`` pairs as ``[N, 2]`` ``seeds``, with ``labels`` and
    ``timestamp`` when given."""
    fields, names = [edge_label_index.t()], ["seeds"]
    for field, name in ((edge_label, "labels"), (edge_label_time, "timestamp")):
        if field is not None:
            fields.append(field)
            names.append(name)
    return gp.ItemSet(tuple(fields), names=tuple(names)) if len(fields) > 1 else gp.ItemSet(fields[0], names="seeds")


def _negatives(pipe, graph, mode, amount, seed, options):
    """``pipe`` with ``amount`` negatives: per positive (its source kept, GraphBolt's
    ``sample_uniform_negative``) for a whole ``amount``; a fractional binary ratio, which
    only PyG's form can express, draws PyG's binary pairs (``ceil(P * amount)``).
    ``options``: :func:`_negative_times`."""
    if amount is None:
        return pipe
    if mode == "binary" and amount != int(amount):
        return pipe.sample_uniform_negative(graph, amount, seed=seed, neg_sampling="binary", **options)
    return pipe.sample_uniform_negative(graph, int(amount), seed=seed, **options)


def _negative_times(node_time_attr, sampler_kwargs):
    """``sample_uniform_negative``'s options for a node time ``node_time_attr`` (None: none):
    negatives no later than their pair, by the sampler's ``comparison`` (PyG constrains
    negatives by node time only)."""
    if node_time_attr is None:
        return {}
    comparison = {"comparison": sampler_kwargs["comparison"]} if "comparison" in sampler_kwargs else {}
    return {"node_timestamp_attr_name": node_time_attr, **comparison}


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
    time_attr=None,
    edge_label_time=None,
    disjoint=False,
    drop_last=False,
    **sampler_kwargs,
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
    with its negatives; a fractional binary ratio draws PyG's binary pairs (see
    :func:`_negatives`). Node attributes ``x`` and edge attributes ``edge_attr`` are
    fetched, and ``time_attr`` with ``edge_label_time`` as the pairs' ``timestamp`` (see
    the module docstring).
    """
    edge_type, pairs = edge_label_index if isinstance(edge_label_index[-1], torch.Tensor) else (edge_label_index, None)
    if len(edge_type) == 2:  # PyG's (src, dst) names the one edge type between them, else "to"
        matches = [key for key in data.edge_types if (key[0], key[2]) == tuple(edge_type)]
        edge_type = matches[0] if len(matches) == 1 else (edge_type[0], "to", edge_type[1])
    if pairs is None:
        pairs = data[edge_type].edge_index
    mode, amount = _negative_mode(neg_sampling_ratio, neg_sampling)
    if mode == "binary" and amount is not None and edge_label is not None and int(edge_label.min()) == 0:
        edge_label = edge_label + 1
    graph, store, node_keys, edge_keys = _hetero_graph_and_store(data, time_attr, label_type=edge_type)
    items = gp.HeteroItemSet({":".join(edge_type): _pair_items(pairs, edge_label, edge_label_time)})
    pipe = gp.ItemSampler(items, batch_size, shuffle=shuffle, drop_last=drop_last, seed=seed)
    node_time_attr = time_attr if any(time_attr in data[t] for t in data.node_types) else None
    pipe = _negatives(pipe, graph, mode, amount, seed, _negative_times(node_time_attr, sampler_kwargs))
    options = _sampler_options(time_attr, "uniform", disjoint) | sampler_kwargs
    pipe = pipe.sample_neighbor(graph, list(reversed(num_neighbors)), layout=layout, seed=seed, **options)
    pipe = pipe.fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys or None)
    batches = [mb.to_pyg(neg_sampling=mode) for mb in pipe]
    assert len(batches) == (math.floor if drop_last else math.ceil)(pairs.size(1) / batch_size)
    return batches
