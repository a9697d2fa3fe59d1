"""Feature.metadata() and FeatureStore.metadata(domain, type_name, feature_name), as GraphBolt's."""

import pickle

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.features import CPUCachedFeature, DiskBasedFeature, GPUCachedFeature
from graphpipe.features.store import Feature, FeatureStore


@pytest.mark.filterwarnings("ignore:GPUCachedFeature. CUDA is not available")
def test_every_feature_kind_answers_its_metadata_and_caches_their_fallbacks(tmp_path):
    path = str(tmp_path / "t.npy")
    np.save(path, np.arange(12, dtype=np.float32).reshape(6, 2))
    meta = {"num_categories": 7, "names": ["a", "b"]}
    plain, mapped, disk = Feature(torch.zeros(6, 2), meta), Feature(path, meta), DiskBasedFeature(path, metadata=meta)
    for feature in (plain, mapped, disk, CPUCachedFeature(plain, 64), GPUCachedFeature(mapped, 64)):
        assert feature.metadata() == meta
    assert Feature(torch.zeros(3)).metadata() == {} and DiskBasedFeature(path).metadata() == {}
    # After pickling and moving, as before.
    assert pickle.loads(pickle.dumps(disk)).metadata() == meta
    assert pickle.loads(pickle.dumps(mapped)).metadata() == meta
    assert plain.to("cpu").metadata() == meta


def test_metadata_is_a_copy_and_must_be_a_dict_of_string_keys():
    meta = {"ids": [1, 2]}
    feature = Feature(torch.zeros(2, 1), meta)
    meta["ids"].append(3)  # the caller's dict stays the caller's, its lists too
    meta["other"] = 1
    assert feature.metadata() == {"ids": [1, 2]}
    shared = [1, 2]
    aliased = Feature(torch.zeros(2, 1), {"a": shared, "b": shared}).metadata()
    assert aliased["a"] is aliased["b"]  # kept shared (a YAML alias stays one list)
    got = feature.metadata()
    got["ids"].append(4)
    assert feature.metadata()["ids"] != got["ids"]
    for bad in ([("a", 1)], {1: "a"}):
        with pytest.raises(TypeError, match="metadata"):
            Feature(torch.zeros(2, 1), bad)


def test_store_metadata_takes_graphbolt_keys():
    store = FeatureStore(
        {("Query", "categoryId"): Feature(torch.zeros(4, 1), {"num_categories": 5})},
        {(("Query", "clicks", "Product"), "w"): Feature(torch.zeros(3, 1), {"unit": "s"})},
    )
    assert store.metadata("node", "Query", "categoryId") == {"num_categories": 5}
    assert store.metadata("edge", "Query:clicks:Product", "w") == {"unit": "s"}
    assert store.metadata("edge", ("Query", "clicks", "Product"), "w") == {"unit": "s"}
    homogeneous = FeatureStore({"feat": torch.zeros(2, 1)})
    assert homogeneous.metadata("node", None, "feat") == {}
    with pytest.raises(KeyError, match="unknown node feature"):
        homogeneous.metadata("node", None, "missing")
    cached = gp.cpu_cached_feature(store["node", "Query", "categoryId"], 64)
    assert store.with_feature(("node", "Query", "categoryId"), cached).metadata("node", "Query", "categoryId") == {
        "num_categories": 5
    }
