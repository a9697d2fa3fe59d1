import pytest
import torch

import graphpipe as gp
from graphpipe import CSCGraph, Feature, FeatureStore, GPUCachedFeature, ItemSampler, ItemSet, MiniBatch
from graphpipe.pipes import CopyTo


class _Recorder:
    def __init__(self, value):
        self.value = value
        self.calls = []

    def to(self, device, non_blocking=False):
        self.calls.append((device, non_blocking))
        return (self.value, device)


def test_calls_to_with_device_and_non_blocking():
    items = [_Recorder(1), _Recorder(2)]
    pipe = CopyTo(items, "cpu", non_blocking=True)
    assert list(pipe) == [(1, torch.device("cpu")), (2, torch.device("cpu"))]
    assert [item.calls for item in items] == [[(torch.device("cpu"), True)], [(torch.device("cpu"), True)]]
    assert len(pipe) == 2


def test_minibatches_arrive_on_the_device():
    store = FeatureStore({"x": torch.randn(10, 2)})
    pipe = ItemSampler(ItemSet(10), batch_size=4).fetch_feature(store, ["x"]).copy_to("meta")
    assert isinstance(pipe, CopyTo)
    batches = list(pipe)
    assert len(batches) == 3
    for mb in batches:
        assert isinstance(mb, MiniBatch)
        assert mb.seeds.device.type == "meta" and mb.node_features["x"].device.type == "meta"


def test_bad_device():
    with pytest.raises(ValueError, match=r"`device` must be a torch device or a name like 'cuda:0', got 'gpu0'"):
        CopyTo([], "gpu0")
    with pytest.raises(ValueError, match=r"CopyTo: `device` must be a torch device .*, got None"):
        CopyTo([], None)
    # was: torch's message, naming no argument, from the graph, the feature and the cache
    graph = CSCGraph(torch.tensor([0, 1]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"CSCGraph.to: `device` must be a torch device or a name like 'cuda:0', got 'gpu'"):
        graph.to("gpu")
    with pytest.raises(ValueError, match=r"Feature.to: `device` must be a torch device .*, got 'tpu0'"):
        Feature(torch.zeros(2, 3)).to("tpu0")
    with pytest.raises(ValueError, match=r"GPUCachedFeature: `device` must be a torch device .*, got 'tpu'"):
        GPUCachedFeature(Feature(torch.zeros(2, 3)), max_bytes=100, device="tpu")


@pytest.mark.cuda
def test_copy_pinned_batch_to_cuda():
    mb = MiniBatch(seeds=torch.arange(4)).pin_memory()
    (out,) = list(CopyTo([mb], "cuda", non_blocking=True))
    assert out.seeds.is_cuda and torch.equal(out.seeds.cpu(), torch.arange(4))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback without CUDA")
@pytest.mark.parametrize("non_blocking", [False, True])
def test_copy_to_cuda_without_cuda_warns_once_and_keeps_batches_on_the_cpu(non_blocking):
    import warnings

    import graphpipe as gp
    from graphpipe._internal import devices

    devices._warned_without_cuda.clear()
    data = gp.datasets.karate_club()

    def chain(*device):
        pipe = gp.ItemSampler(data.train_set, 4, shuffle=True, seed=1).sample_neighbor(data.graph, [3, 2], seed=2)
        pipe = pipe.fetch_feature(data.features, ["feat"])
        return pipe.copy_to(*device, non_blocking=non_blocking) if device else pipe

    with pytest.warns(UserWarning, match=r"copy_to\('cuda'\): CUDA is not available; batches stay on the CPU"):
        pipe = chain("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        chain("cuda")
        expected = list(chain())
        loader = gp.DataLoader(pipe)  # the default placement (pinned copies, side streams on CUDA) included
        batches = list(loader)
        loader.close()
    assert len(batches) == len(expected) > 0
    for got, want in zip(batches, expected):
        assert got.seeds.device.type == "cpu" and got.node_features["feat"].device.type == "cpu"
        assert torch.equal(got.seeds, want.seeds) and torch.equal(got.input_nodes, want.input_nodes)
        assert torch.equal(got.node_features["feat"], want.node_features["feat"])


def test_graphbolt_21s_extra_attrs_are_accepted_and_every_field_is_copied():
    """GraphBolt 2.1's node_classification.py calls copy_to(device, extra_attrs=["seed_nodes"])."""
    seeds = torch.tensor([3, 1, 2])
    (mb,) = list(CopyTo(ItemSampler(ItemSet(seeds, names="seed_nodes"), 3), "cpu", extra_attrs=["seed_nodes"]))
    assert torch.equal(mb.seed_nodes, seeds)
    with pytest.raises(TypeError, match=r"copy_to: `extra_attrs` .* must be a list of MiniBatch field names, got 'seed_nodes'"):
        CopyTo(ItemSampler(ItemSet(seeds), 3), "cpu", extra_attrs="seed_nodes")


def _tag(mb):
    mb.seed_degree, mb.note, mb.pair, mb.graph = mb.seeds * 10, "mine", (mb.seeds, [mb.seeds + 1]), _GRAPH
    return mb


def _keep_layers(mb):
    mb.layers = list(mb.sampled_subgraphs)  # dataclasses whose fields replace() sets
    return mb


_GRAPH = gp.CSCGraph.from_coo(torch.arange(6), (torch.arange(6) + 1) % 6, num_nodes=6)


def test_attributes_a_users_stage_sets_survive_every_stage():
    """Found in review: fetch_feature, copy_to (even naming them in extra_attrs) and
    MiniBatch.to dropped them (GraphBolt's stages change a MiniBatch in place and keep
    them); tensors in them, in dicts, lists and tuples, are copied like the fields, other
    objects (a graph) kept as they are."""
    graph = _GRAPH
    store = gp.FeatureStore({"feat": torch.arange(6.0).view(6, 1)})
    nodes, pairs = torch.tensor([0, 1]), torch.tensor([[0, 1], [2, 3]])
    for seeds, pipe in (
        (nodes, gp.ItemSampler(gp.ItemSet(nodes, names="seeds"), 2).transform(_tag).sample_neighbor(graph, [1]).transform(_keep_layers)),
        (pairs, gp.ItemSampler(gp.ItemSet(pairs, names="seeds"), 2).transform(_tag).sample_uniform_negative(graph, 1).sample_neighbor(graph, [1]).transform(_keep_layers)),
    ):
        pipe = pipe.fetch_feature(store, ["feat"]).copy_to("cpu", extra_attrs=["seed_degree"])
        for mb in (next(iter(pipe)), next(iter(gp.DataLoader(pipe, num_workers=1)))):
            marked = mb.to("meta")  # the meta device shows what moved
            assert marked.seed_degree.is_meta and marked.pair[0].is_meta and marked.pair[1][0].is_meta
            assert marked.layers and all(layer.original_row_node_ids.is_meta for layer in marked.layers)
            assert marked.graph.indptr.device.type == "cpu" and marked.note == "mine"  # a graph as it is
            for batch in (mb, mb.to("cpu"), mb.pin_memory() if torch.cuda.is_available() else mb):
                assert batch.note == "mine" and torch.equal(batch.seed_degree, seeds * 10)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback without CUDA")
def test_moves_by_hand_fall_back_without_cuda_as_copy_to_does():
    """Found in review (a GPU script on a laptop): ``mb.to("cuda")`` crashed inside torch,
    ``SampledSubgraph.to`` was missing, ``graph.to("pinned")`` (GraphBolt's) and integer
    devices (``copy_to(local_rank)``) were refused as not devices, and ``Place("stream")``
    failed at the first batch with a message naming no cause."""
    import warnings

    from graphpipe._internal import devices
    from graphpipe.transforms import Place, place

    devices._warned_without_cuda.clear()
    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(data.train_set, 4, seed=1).sample_neighbor(data.graph, [3, 2], seed=2).fetch_feature(data.features, ["feat"])
    mb = next(iter(pipe))
    with pytest.warns(UserWarning, match=r"MiniBatch.to\('cuda'\): CUDA is not available; the batch stays on the CPU"):
        moved = mb.to("cuda")
    with pytest.warns(UserWarning, match=r"SampledSubgraph.to\('cuda'\): CUDA is not available; the layer stays on the CPU"):
        layer = mb.sampled_subgraphs[0].to("cuda", non_blocking=True)
    assert torch.equal(moved.node_features["feat"], mb.node_features["feat"]) and moved.seeds.device.type == "cpu"
    assert torch.equal(layer.sampled_csc.indices, mb.sampled_subgraphs[0].sampled_csc.indices)
    assert torch.equal(layer.original_row_node_ids, mb.sampled_subgraphs[0].original_row_node_ids)
    with pytest.warns(UserWarning, match=r"CSCGraph.pin_memory_\(\): CUDA is not available"):
        assert data.graph.to("pinned") is data.graph
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert data.graph.to(0) is data.graph and [b.seeds.device.type for b in pipe.copy_to(0)] == ["cpu"] * len(list(pipe))
    import numpy as np

    layer = mb.sampled_subgraphs[0]
    layer.note = torch.arange(2)  # a user's attribute stays, as MiniBatch.to keeps them (review of the change)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(layer.to("cuda").note, layer.note) and mb.to(np.int64(0)).seeds.device.type == "cpu"
    # None is refused by every .to (a graph and a feature store read it as CUDA before)
    for move in (mb.to, layer.to, data.graph.to, data.features.to, data.features[("node", None, "feat")].to):
        with pytest.raises(ValueError, match=r"\.to: `device` must be a torch device or a name like 'cuda:0', got None"):
            move(None)
    with pytest.raises(ValueError, match=r"place: Place\('stream'\) \(for FeatureFetcher\) needs CUDA, which is not available; use Place\('thread'\)"):
        place(pipe, (Place(), Place(), Place("stream")))
