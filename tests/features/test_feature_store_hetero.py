"""Typed FeatureStore keys: (node_type, name) and (edge_type, name), as GraphBolt's
TorchBasedFeatureStore keys (domain, type, name)."""

import pickle
import warnings

import numpy as np
import pytest
import torch

from graphpipe import FeatureStore

WRITES = "author:writes:paper"


def _store():
    return FeatureStore(
        {("paper", "feat"): torch.randn(5, 3), ("author", "feat"): torch.randn(4, 3), "x": torch.arange(9)},
        {(("author", "writes", "paper"), "w"): torch.rand(6), "w": torch.rand(2)},
    )


def test_typed_lookup_in_every_form():
    store = _store()
    paper = store["node", "paper", "feat"]
    assert paper.num_rows == 5 and store["node", "author", "feat"].num_rows == 4
    # A key as node_keys lists it, and the 3-tuple, name the same feature.
    assert store["node", ("paper", "feat")] is paper
    # A PyG tuple edge type is stored and looked up as its "src:rel:dst" string.
    writes = store["edge", WRITES, "w"]
    assert writes.num_rows == 6 and store["edge", ("author", "writes", "paper"), "w"] is writes
    assert store.node_keys == [("paper", "feat"), ("author", "feat"), "x"]
    assert store.edge_keys == [(WRITES, "w"), "w"]
    # Homogeneous keys are unchanged next to typed ones; None as the type is GraphBolt's homogeneous form.
    assert store["x"] is store["node", "x"] is store["node", None, "x"]
    assert store["edge", "w"].num_rows == 2 and store["edge", None, "w"].num_rows == 2
    assert ("node", "paper", "feat") in store and ("edge", ("author", "writes", "paper"), "w") in store
    assert ("node", "author", "w") not in store and ("edge", "paper:cites:paper", "w") not in store
    assert ("node", "feat") not in store  # only typed tables are called "feat"


def test_unknown_and_malformed_keys_name_the_known_keys():
    store = _store()
    with pytest.raises(KeyError, match=r"unknown node feature 'feat' of type 'venue'; known node features: "
                       r"\[\('paper', 'feat'\), \('author', 'feat'\), 'x'\]"):
        store["node", "venue", "feat"]
    with pytest.raises(KeyError, match=r"unknown edge feature 'w' of type 'paper:cites:paper'; known edge features"):
        store["edge", ("paper", "cites", "paper"), "w"]
    with pytest.raises(KeyError, match=r"an edge type must be 'src_type:relation:dst_type'.*got 'writes'"):
        store["edge", "writes", "w"]
    with pytest.raises(KeyError, match=r"a typed feature is \('node', node_type, 'name'\)"):
        store["graph", "paper", "feat"]
    with pytest.raises(KeyError, match=r"a node type must be a str, got 3"):
        store["node", 3, "feat"]


def test_constructor_normalises_edge_types_and_rejects_bad_keys():
    with pytest.raises(ValueError, match=r"gives edge feature 'w' of type 'author:writes:paper' twice"):
        FeatureStore({}, {(WRITES, "w"): torch.zeros(2), (("author", "writes", "paper"), "w"): torch.zeros(2)})
    with pytest.raises(TypeError, match=r"`edge_features` has key \('writes', 'w'\): .*an edge type must be"):
        FeatureStore({}, {("writes", "w"): torch.zeros(2)})
    with pytest.raises(TypeError, match=r"`node_features` keys must be 'name' or \(node_type, 'name'\), got 3"):
        FeatureStore({3: torch.zeros(2)})
    with pytest.raises(ValueError, match=r"`node_features\[\('paper', 'feat'\)\]`: .*C-contiguously"):
        FeatureStore({("paper", "feat"): torch.zeros(3, 2).t()})


def test_repr_pickle_and_pin_keep_typed_keys(tmp_path):
    path = tmp_path / "paper_feat.npy"
    np.save(path, np.arange(10, dtype=np.float32).reshape(5, 2))
    store = FeatureStore({("paper", "feat"): str(path)}, {(WRITES, "w"): torch.rand(6)})
    text = repr(store)
    assert "node 'feat' of type 'paper': Feature(path=" in text
    assert "edge 'w' of type 'author:writes:paper': Feature(num_rows=6" in text
    copy = pickle.loads(pickle.dumps(store))
    assert copy.node_keys == [("paper", "feat")] and copy.edge_keys == [(WRITES, "w")]
    assert copy["node", "paper", "feat"].read(torch.tensor([4, 0])).tolist() == [[8.0, 9.0], [0.0, 1.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # without CUDA: "features stay unpinned", once per process
        assert store.pin_memory_() is store
