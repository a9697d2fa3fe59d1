"""Small stages for the transform tests (module level, so worker processes can unpickle them)."""

import functools
import time

import torch

import graphpipe as gp
from graphpipe.ops import LayerSample
from graphpipe.pipes import SubgraphSampler


class WindowSampler(SubgraphSampler):
    """Takes up to ``fanout`` consecutive in-neighbours from an offset keyed by (layer key, vertex)."""

    def sample_layer(self, nodes, layer, minibatch):
        fanout = self.fanouts[layer]
        indptr = self.graph.indptr.long()
        start = indptr[nodes]
        degree = indptr[nodes + 1] - start
        taken = degree.clamp(max=fanout)
        key = self.layer_key(minibatch.batch_index, layer) % 1_000_003
        offset = (nodes * 7919 + key) % degree.clamp(min=1)
        out_indptr = torch.cat([torch.zeros(1, dtype=torch.int64), taken.cumsum(0)])
        dst = torch.repeat_interleave(torch.arange(nodes.numel()), taken)
        rank = torch.arange(dst.numel()) - out_indptr[dst]
        positions = start[dst] + (offset[dst] + rank) % degree[dst]
        return LayerSample(out_indptr, self.graph.indices[positions].long(), positions)


class SlowWindowSampler(WindowSampler):
    def sample_layer(self, nodes, layer, minibatch):
        time.sleep(0.01)
        return super().sample_layer(nodes, layer, minibatch)


def karate_chain(sampler_class=WindowSampler, batch_size=4, **item_sampler_args):
    """ItemSampler (all 34 nodes, shuffled, seed 7) -> sampler [3, 2] -> fetch_feature('feat')."""
    data = gp.datasets.karate_club()
    items = gp.ItemSet((torch.arange(34), data.labels), names=("seeds", "labels"))
    args = dict(shuffle=True, seed=7)
    args.update(item_sampler_args)
    sampler = sampler_class(gp.ItemSampler(items, batch_size, **args), data.graph, [3, 2], seed=11)
    return gp.FeatureFetcher(sampler, data.features, ["feat"])


def assert_same_batches(left, right):
    """Equal seeds, labels, batch_index, subgraphs, input nodes and features, in order."""
    assert len(left) == len(right) > 0
    for a, b in zip(left, right):
        assert a.batch_index == b.batch_index
        assert torch.equal(a.seeds, b.seeds) and torch.equal(a.labels, b.labels)
        assert torch.equal(a.input_nodes, b.input_nodes)
        assert torch.equal(a.node_features["feat"], b.node_features["feat"])
        assert len(a.sampled_subgraphs) == len(b.sampled_subgraphs) == 2
        for x, y in zip(a.sampled_subgraphs, b.sampled_subgraphs):
            assert torch.equal(x.sampled_csc.indptr, y.sampled_csc.indptr)
            assert torch.equal(x.sampled_csc.indices, y.sampled_csc.indices)
            assert torch.equal(x.original_edge_ids, y.original_edge_ids)


def live_graphpipe_threads():
    import threading

    # A loader's compile job (tests/pipes/test_compile_kernels.py) ends on its own.
    return [t for t in threading.enumerate() if t.name.startswith("graphpipe") and t.name != "graphpipe-compile"]


def fail_on_batch_3(minibatch):
    if minibatch.batch_index == 3:
        raise ValueError(f"toy failure in batch {minibatch.batch_index}")
    return minibatch


def die_on_batch_2(minibatch):
    if minibatch.batch_index == 2:
        import os

        os._exit(3)
    return minibatch


def python_chain(fn, batch_size=4, shuffle=False):
    """ItemSampler (34 nodes, seed 7) -> transform(fn) -> fetch_feature: no numba in the workers."""
    data = gp.datasets.karate_club()
    items = gp.ItemSet((torch.arange(34), data.labels), names=("seeds", "labels"))
    return gp.ItemSampler(items, batch_size, shuffle=shuffle, seed=7).transform(fn).fetch_feature(data.features, ["feat"])


def with_fake_subgraphs(minibatch):
    """A numba-free stand-in for sampling: input nodes depend on seeds and batch_index."""
    from dataclasses import replace

    extra = (minibatch.seeds * 7 + minibatch.batch_index) % 34
    return replace(minibatch, input_nodes=torch.cat([minibatch.seeds, extra]))


def same_minibatch(minibatch):
    return minibatch


def three_seconds_from_batch_1(minibatch):
    """Busy for 3 s from batch 1 on: longer than stopping waits for a worker (2 s)."""
    if minibatch.batch_index >= 1:
        time.sleep(3)
    return minibatch


COMPILED = []  # what the compile tasks of DeclaredSampler ran


def record_compile(name):
    COMPILED.append(name)


class UndeclaredSampler(gp.Pipe):
    """A sampler written on the documented base, declaring nothing: numba-free stand-in
    sampling (with_fake_subgraphs)."""

    def __init__(self, source):
        super().__init__()
        self.source = source

    def process(self, minibatch):
        return with_fake_subgraphs(minibatch)


class DeclaredSampler(UndeclaredSampler):
    """The same sampler, declaring what it is (not a SubgraphSampler)."""

    role = "sampler"
    thread_safe = True

    def compile_tasks(self):
        return [functools.partial(record_compile, type(self).__name__)]


def assorted_tensors(minibatch):
    """A batch of every kind of tensor a worker may send: views of one storage, a storage too
    large for the batch's shared buffer, one in shared memory already, a parameter, one that
    needs grad, other dtypes, an empty one, a nested one; and a string."""
    i = minibatch.batch_index
    base = torch.arange(12.0) + i
    return {
        "seeds": minibatch.seeds, "slice": base[2:6], "transposed": base.view(3, 4).t(),
        "large": torch.arange(300_000, dtype=torch.float32) + i, "shared": torch.full((3,), float(i)).share_memory_(),
        "parameter": torch.nn.Parameter(torch.ones(2) * i), "needs_grad": torch.ones(2, requires_grad=True),
        "bool": minibatch.seeds % 2 == 0, "bfloat16": minibatch.seeds.bfloat16(), "complex": minibatch.seeds.to(torch.complex64),
        "empty": torch.empty(0, 3, dtype=torch.int64), "text": f"batch {i}",
        "nested": torch.nested.as_nested_tensor([minibatch.seeds, minibatch.seeds[:2]]),
    }  # fmt: skip


def unpicklable_batch(minibatch):
    return {"seeds": minibatch.seeds, "call": lambda: minibatch}
