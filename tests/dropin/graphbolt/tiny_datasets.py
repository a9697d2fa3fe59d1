"""Tiny offline datasets of the shape of GraphBolt's built-in ones, written in GraphBolt's
on-disk layout (``metadata.yaml`` and ``.npy`` files) under ``<root>/<name>``, where
``gb.BuiltinDataset(name)`` finds them (``root`` is ``datasets`` in the working directory).

* ``ogbn-products``: homogeneous, undirected, task ``node_classification`` (``num_classes``,
  ``seeds`` / ``labels`` sets), node feature ``feat``;
* ``ogbl-citation2``: homogeneous, task ``link_prediction``: ``train_set`` of ``[N, 2]``
  ``seeds``, validation and test sets of ``seeds`` / ``labels`` / ``indexes`` (each held-out
  edge, then its negatives: GraphBolt 2.2's layout), held-out edges removed from the graph;
* ``ogbn-mag``: node types ``author``, ``field_of_study``, ``institution``, ``paper``, the
  ogbn-mag edge types and their reverses, ``paper`` ``feat``, paper sets by type.

Labels follow planted communities the edges mostly keep (``graphpipe.datasets``' synthetic
generators), and features are noisy community means: a model reads the labels from a
node's neighbourhood far better than from its own features, so beating a feature-only
baseline shows the graph was used.
"""

import os

import numpy as np
import torch
import yaml

import graphpipe as gp

NODE_SPLIT = (0.5, 0.2, 0.3)


def products_like(root, num_nodes=3000, seed=0):
    """``<root>/ogbn-products``; returns the generated dataset (its ``labels`` for baselines)."""
    ds = gp.datasets.synthetic_node_classification(
        num_nodes=num_nodes, avg_degree=20, num_classes=4, feature_dim=16, rewire_fraction=0.9, feature_noise=2.0,
        split=NODE_SPLIT, seed=seed,
    )  # fmt: skip
    src, dst = ds.graph.edge_index()
    sets = {name: {None: getattr(ds, name).items} for name in ("train_set", "validation_set", "test_set")}
    _write(os.path.join(root, "ogbn-products"), {None: num_nodes}, {None: (src, dst)},
           {None: ds.features["feat"].data}, "node_classification", ds.num_classes, sets, ("seeds", "labels"))  # fmt: skip
    return ds


def mag_like(root, num_papers=12000, seed=0):
    """``<root>/ogbn-mag``; returns the generated typed dataset. The script's batches hold
    1024 papers: 12,000 papers (80% for training) give it 10 steps in its epoch."""
    ds = gp.datasets.synthetic_mag(num_papers=num_papers, num_classes=4, feature_dim=16, split=(0.8, 0.1, 0.1), seed=seed)
    graph = ds.graph
    offsets, type_id = graph.node_type_offset.tolist(), graph.node_type_to_id
    src, dst = graph.edge_index()
    per_edge = graph.type_per_edge.to(torch.int64)
    edges = {}
    for etype in graph.edge_types:
        src_type, _, dst_type = gp.etype_str_to_tuple(etype)
        at = per_edge == graph.edge_type_to_id[etype]
        edges[etype] = (src[at] - offsets[type_id[src_type]], dst[at] - offsets[type_id[dst_type]])
    sets = {name: {"paper": getattr(ds, name).item_sets["paper"].items} for name in ("train_set", "validation_set", "test_set")}
    _write(os.path.join(root, "ogbn-mag"), dict(graph.num_nodes), edges, {"paper": ds.features["node", "paper", "feat"].data},
           "node_classification", ds.num_classes, sets, ("seeds", "labels"))  # fmt: skip
    return ds


def citation2_like(root, num_nodes=2000, held_out=150, num_negatives=50, seed=0):
    """``<root>/ogbl-citation2``; returns ``(features, graph edges [2, E], {split: (pairs,
    labels, indexes)})``: each held-out edge, then its ``num_negatives`` corrupted
    destinations (uniform nodes), its index the held-out edge's position."""
    ds = gp.datasets.synthetic_node_classification(
        num_nodes=num_nodes, avg_degree=20, num_classes=8, feature_dim=16, rewire_fraction=0.9, feature_noise=1.5, seed=seed
    )
    src, dst = ds.graph.edge_index()
    one_way = torch.nonzero(src < dst).flatten()
    gen = torch.Generator().manual_seed(seed)
    one_way = one_way[torch.randperm(one_way.numel(), generator=gen)]
    splits, start = {}, 0
    for name in ("validation_set", "test_set"):
        pairs = torch.stack([src[one_way[start : start + held_out]], dst[one_way[start : start + held_out]]], 1)
        negatives = torch.randint(num_nodes, (held_out, num_negatives), generator=gen)
        seeds = torch.cat([pairs, torch.stack([pairs[:, :1].expand(-1, num_negatives).reshape(-1), negatives.reshape(-1)], 1)])
        labels = torch.cat([torch.ones(held_out, dtype=torch.int64), torch.zeros(held_out * num_negatives, dtype=torch.int64)])
        indexes = torch.cat([torch.arange(held_out), torch.arange(held_out).repeat_interleave(num_negatives)])
        splits[name] = (seeds, labels, indexes)
        start += held_out
    removed = torch.cat([splits[name][0][:held_out] for name in splits])
    key = src * num_nodes + dst
    drop = torch.isin(key, removed[:, 0] * num_nodes + removed[:, 1]) | torch.isin(key, removed[:, 1] * num_nodes + removed[:, 0])
    src, dst = src[~drop], dst[~drop]
    train = torch.stack([src[src < dst], dst[src < dst]], 1)
    sets = {"train_set": {None: (train,)}, **{name: {None: value} for name, value in splits.items()}}
    feat = ds.features["feat"].data
    _write(os.path.join(root, "ogbl-citation2"), {None: num_nodes}, {None: (src, dst)}, {None: feat}, "link_prediction",
           None, sets, ("seeds", "labels", "indexes"))  # fmt: skip
    return torch.as_tensor(feat), torch.stack([src, dst]), splits


def _write(path, num_nodes, edges, feats, task, num_classes, sets, names):
    """One GraphBolt directory: keys None for the untyped case, else node / edge types."""
    os.makedirs(path)

    def save(rel, array):
        np.save(os.path.join(path, rel), np.ascontiguousarray(torch.as_tensor(np.asarray(array)).numpy()))
        return rel

    def typed(entry, key):
        return entry if key is None else {"type": key, **entry}

    def file(key):
        return "all" if key is None else key.replace(":", "__")

    for folder in ("edges", "data", "set"):
        os.makedirs(os.path.join(path, folder))
    task_entry = {"name": task, **({} if num_classes is None else {"num_classes": num_classes})}
    for split, by_type in sets.items():
        task_entry[split] = [
            typed({"data": [{"name": name, "format": "numpy", "path": save(f"set/{split}_{file(key)}_{name}.npy", array)}
                            for name, array in zip(names, arrays)]}, key)
            for key, arrays in by_type.items()
        ]  # fmt: skip
    metadata = {
        "dataset_name": os.path.basename(path),
        "graph": {
            "nodes": [typed({"num": int(n)}, key) for key, n in num_nodes.items()],
            "edges": [typed({"format": "numpy", "path": save(f"edges/{file(key)}.npy", torch.stack(pair))}, key)
                      for key, pair in edges.items()],
        },  # fmt: skip
        "feature_data": [
            typed({"domain": "node", "name": "feat", "format": "numpy", "in_memory": True,
                   "path": save(f"data/{file(key)}_feat.npy", feat)}, key)
            for key, feat in feats.items()
        ],  # fmt: skip
        "tasks": [task_entry],
    }
    with open(os.path.join(path, "metadata.yaml"), "w") as f:
        yaml.safe_dump(metadata, f, sort_keys=False)
