import numba
import pytest
import torch

import graphpipe as gp
from graphpipe.datasets import rmat_edge_chunks, rmat_edges, synthetic_node_classification

SMALL = dict(num_nodes=5000, avg_degree=20, num_classes=5, feature_dim=16)


@pytest.fixture(scope="module")
def dataset():
    return synthetic_node_classification(**SMALL, seed=3)


def _edge_set(graph):
    src, dst = graph.edge_index()
    return src * graph.total_num_nodes + dst


def test_sizes_and_dtypes(dataset):
    g = dataset.graph
    assert isinstance(dataset, gp.datasets.NodeClassificationDataset)
    assert g.total_num_nodes == 5000 and g.indices.dtype == torch.int32 and g.indptr.dtype == torch.int32
    # R-MAT repeats hub edges, so fewer than the 2 * 50,000 directed edges drawn survive.
    assert 50_000 < g.total_num_edges < 100_000
    feat = dataset.features["feat"].data
    assert feat.shape == (5000, 16) and feat.dtype == torch.float32
    assert dataset.labels.shape == (5000,) and dataset.labels.dtype == torch.int64
    assert dataset.num_classes == 5 and set(dataset.labels.tolist()) == set(range(5))
    assert "num_nodes=5000" in repr(dataset) and "num_classes=5" in repr(dataset)


def test_deterministic_under_seed(dataset):
    again = synthetic_node_classification(**SMALL, seed=3)
    other = synthetic_node_classification(**SMALL, seed=4)
    assert torch.equal(again.graph.indptr, dataset.graph.indptr)
    assert torch.equal(again.graph.indices, dataset.graph.indices)
    assert torch.equal(again.features["feat"].data, dataset.features["feat"].data)
    assert torch.equal(again.labels, dataset.labels)
    for a, b in zip(
        (again.train_set, again.validation_set, again.test_set),
        (dataset.train_set, dataset.validation_set, dataset.test_set),
    ):
        assert all(torch.equal(x, y) for x, y in zip(a.items, b.items))
    assert not torch.equal(other.graph.indices[:1000], dataset.graph.indices[:1000])
    assert not torch.equal(other.labels, dataset.labels)


def test_same_for_any_numba_thread_count():
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = synthetic_node_classification(num_nodes=3000, feature_dim=8, seed=1)
    finally:
        numba.set_num_threads(threads)
    many = synthetic_node_classification(num_nodes=3000, feature_dim=8, seed=1)
    assert torch.equal(one.graph.indices, many.graph.indices)
    assert torch.equal(one.features["feat"].data, many.features["feat"].data)


def test_simple_undirected_graph(dataset):
    g = dataset.graph
    src, dst = g.edge_index()
    assert not bool((src == dst).any()), "self loop"
    # Neighbours are strictly increasing within each node: sorted and no repeats.
    step = g.indices[1:].long() - g.indices[:-1].long()
    same_node = dst[1:] == dst[:-1]
    assert bool((step[same_node] > 0).all())
    forward = torch.sort(_edge_set(g)).values
    backward = torch.sort(dst * g.total_num_nodes + src).values
    assert torch.equal(forward, backward)


def test_degrees_are_power_law(dataset):
    deg = dataset.graph.in_degrees().float()
    assert deg.max() > 15 * deg.mean()
    # Many low-degree nodes and a heavy tail: the median is well below the mean.
    assert deg[deg > 0].median() < 0.6 * deg.mean()


def test_splits_disjoint_non_isolated_and_labelled(dataset):
    deg = dataset.graph.in_degrees()
    connected = int((deg > 0).sum())
    seen = []
    for item_set, fraction in zip((dataset.train_set, dataset.validation_set, dataset.test_set), (0.1, 0.05, 0.1)):
        assert item_set.names == ("seeds", "labels")
        seeds, labels = item_set.items
        assert seeds.dtype == torch.int64 and len(item_set) == int(fraction * connected)
        assert bool((deg[seeds] > 0).all())
        assert torch.equal(labels, dataset.labels[seeds])
        seen.append(seeds)
    all_seeds = torch.cat(seen)
    assert all_seeds.unique().numel() == all_seeds.numel()


def test_labels_follow_the_graph(dataset):
    src, dst = dataset.graph.edge_index()
    homophily = (dataset.labels[src] == dataset.labels[dst]).float().mean().item()
    assert homophily > 0.5  # 1 / num_classes = 0.2
    random = synthetic_node_classification(**SMALL, rewire_fraction=0.0, seed=3)
    src, dst = random.graph.edge_index()
    homophily = (random.labels[src] == random.labels[dst]).float().mean().item()
    assert abs(homophily - 0.2) < 0.03


def test_neighbourhood_mean_denoises_features(dataset):
    # What makes a GNN beat an MLP here: the nearest class mean classifies the mean of a
    # node's neighbours' features far better than the node's own features.
    x, y = dataset.features["feat"].data, dataset.labels
    src, dst = dataset.graph.edge_index()
    deg = dataset.graph.in_degrees()
    neighbour_mean = torch.zeros_like(x).index_add_(0, dst, x[src]) / deg.clamp(min=1).unsqueeze(1)
    connected = deg > 0

    def nearest_mean_accuracy(f):
        means = torch.stack([f[connected & (y == c)].mean(0) for c in range(dataset.num_classes)])
        return (torch.cdist(f[connected], means).argmin(1) == y[connected]).float().mean().item()

    own, neighbours = nearest_mean_accuracy(x), nearest_mean_accuracy(neighbour_mean)
    assert own < 0.55 and neighbours > own + 0.15


def test_features_are_class_mean_plus_noise():
    ds = synthetic_node_classification(num_nodes=4000, num_classes=4, feature_dim=32, feature_noise=0.5, seed=0)
    feat, labels = ds.features["feat"].data, ds.labels
    means = torch.stack([feat[labels == c].mean(0) for c in range(4)])
    residual = feat - means[labels]
    assert abs(residual.std().item() - 0.5) < 0.02
    assert abs(residual.mean().item()) < 0.01
    # Class means have norm about 1 and point in different directions.
    assert bool((means.norm(dim=1) > 0.6).all())
    assert torch.cdist(means, means).fill_diagonal_(10.0).min() > 0.8


def test_rmat_edges():
    src, dst = rmat_edges(1000, 20_000, seed=7)
    assert src.shape == dst.shape == (20_000,) and src.dtype == torch.int32
    assert int(torch.minimum(src.min(), dst.min())) >= 0 and int(torch.maximum(src.max(), dst.max())) < 1000
    again = rmat_edges(1000, 20_000, seed=7)
    assert torch.equal(src, again[0]) and torch.equal(dst, again[1])
    skewed = torch.bincount(torch.cat([src, dst]).long(), minlength=1000).float()
    # a = b = c = d = 1/4 on a power of two nodes is a uniform random graph: no hubs.
    usrc, udst = rmat_edges(1024, 20_000, a=0.25, b=0.25, c=0.25, seed=7)
    uniform = torch.bincount(torch.cat([usrc, udst]).long(), minlength=1024).float()
    assert skewed.max() > 10 * skewed.mean() and uniform.max() < 2 * uniform.mean()


@pytest.mark.parametrize("chunk_edges", [1, 999, 7_000, 20_000, 50_000])
def test_rmat_edge_chunks_concatenate_to_the_whole_stream(chunk_edges):
    src, dst = rmat_edges(1000, 20_000, a=0.5, b=0.2, c=0.2, seed=3)
    chunks = list(rmat_edge_chunks(1000, 20_000, chunk_edges, a=0.5, b=0.2, c=0.2, seed=3))
    assert [s.numel() for s, _ in chunks][:-1] == [chunk_edges] * (len(chunks) - 1) and 0 < chunks[-1][0].numel() <= chunk_edges
    assert torch.equal(torch.cat([s for s, _ in chunks]), src) and torch.equal(torch.cat([d for _, d in chunks]), dst)
    assert list(rmat_edge_chunks(1000, 0, chunk_edges)) == []
    with pytest.raises(ValueError, match="rmat_edge_chunks: `chunk_edges`"):
        rmat_edge_chunks(1000, 10, 0)


def test_rmat_quadrant_probabilities():
    # With 2 nodes there is one level and the quadrant is the edge: P(0->0) = a,
    # P(0->1) = b, P(1->0) = c, P(1->1) = d, up to the random relabelling of {0, 1}.
    src, dst = rmat_edges(2, 100_000, a=0.4, b=0.3, c=0.2, seed=0)
    freq = (torch.bincount(src.long() * 2 + dst.long(), minlength=4).double() / 1e5).tolist()
    if freq[0] < freq[3]:
        freq = freq[::-1]
    assert freq == pytest.approx([0.4, 0.3, 0.2, 0.1], abs=0.01)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_nodes=1), "`num_nodes` must be an int >= 2"),
        (dict(num_nodes=100, split=(0.5, 0.5)), "`split` must be three positive fractions"),
        (dict(num_nodes=100, split=(0.6, 0.3, 0.3)), "summing to at most 1"),
        (dict(num_nodes=100, rewire_fraction=1.5), "`rewire_fraction` must be a finite number >= 0.0 and <= 1.0"),
        (dict(num_nodes=100, rewire_fraction="0.5"), "`rewire_fraction` must be a finite number"),
        (dict(num_nodes=100, feature_noise=-1.0), "`feature_noise` must be a finite number >= 0.0"),
        (dict(num_nodes=100, feature_noise=float("inf")), "`feature_noise` must be a finite number"),
        (dict(num_nodes=100, split=(0.3, 0.3, float("nan"))), r"`split\[2\]` must be a finite number > 0.0"),
        (dict(num_nodes=100, split="abc"), "`split` must be three positive fractions"),
        (dict(num_nodes=100, seed=1.9), "`seed` must be an int, got 1.9"),  # was: the dataset of seed=1
        (dict(num_nodes=100, seed="x"), "`seed` must be an int"),
        (dict(num_nodes=100, num_classes=1), "`num_classes` must be an int >= 2"),
        (dict(num_nodes=20, split=(0.01, 0.01, 0.01)), "leaves an empty set"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        synthetic_node_classification(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_nodes=0, num_edges=5), "`num_nodes` must be an int >= 1"),
        (dict(num_nodes=10, num_edges=-1), "`num_edges` must be an int >= 0"),
        (dict(num_nodes=2**31 + 1, num_edges=5), "`num_nodes` must be <= 2\\*\\*31"),
        (dict(num_nodes=10, num_edges=5, a=1.2), "`a` must be a finite number >= 0.0 and <= 1.0"),
        (dict(num_nodes=10, num_edges=5, seed=0.5), "`seed` must be an int"),
        (dict(num_nodes=10, num_edges=5, a=0.5, b=0.4, c=0.3), "a \\+ b \\+ c` must be <= 1"),
    ],
)
def test_rmat_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rmat_edges(**kwargs)
