import torch

import graphpipe as gp
from graphpipe.datasets import karate_club


def test_karate_facts():
    ds = karate_club()
    g = ds.graph
    assert ds.name == "karate_club" and g.total_num_nodes == 34 and g.total_num_edges == 156
    deg = g.in_degrees()
    assert deg[0] == 16 and deg[33] == 17 and int(deg.sum()) == 156
    src, dst = g.edge_index()
    edges = set(zip(src.tolist(), dst.tolist()))
    assert len(edges) == 156 and all((v, u) in edges for u, v in edges)
    assert all(u != v for u, v in edges)
    assert (0, 1) in edges and (32, 33) in edges and (0, 33) not in edges


def test_karate_labels_features_and_splits():
    ds = karate_club()
    assert ds.num_classes == 2 and torch.bincount(ds.labels).tolist() == [17, 17]
    assert ds.labels[0] == 0 and ds.labels[33] == 1  # the instructor and the administrator
    assert torch.equal(ds.features["feat"].data, torch.eye(34))
    seeds = [s.items[0] for s in (ds.train_set, ds.validation_set, ds.test_set)]
    every = torch.cat(seeds)
    assert sorted(every.tolist()) == list(range(34))
    assert {0, 33} <= set(seeds[0].tolist())
    for item_set in (ds.train_set, ds.validation_set, ds.test_set):
        assert item_set.names == ("seeds", "labels")
        assert torch.equal(item_set.items[1], ds.labels[item_set.items[0]])
    assert isinstance(ds.graph, gp.CSCGraph) and "karate_club" in repr(ds)
