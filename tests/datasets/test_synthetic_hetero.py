import pytest
import torch

import graphpipe as gp
from graphpipe.datasets import HeteroNodeClassificationDataset, synthetic_mag
from hetero_graphs import typed_edges

NUM_PAPERS = 3000
NODE_TYPES = ["author", "field_of_study", "institution", "paper"]
EDGE_TYPES = [
    "author:affiliated_with:institution",
    "author:writes:paper",
    "field_of_study:rev_has_topic:paper",
    "institution:rev_affiliated_with:author",
    "paper:cites:paper",
    "paper:has_topic:field_of_study",
    "paper:rev_writes:author",
]


@pytest.fixture(scope="module")
def dataset():
    return synthetic_mag(NUM_PAPERS, seed=1)


def _typed_edges(graph, edge_type):
    """``(src, dst)`` type-local int64 ids of ``edge_type``'s edges, by type-local edge id."""
    src, dst, ids = typed_edges(graph, [edge_type])[edge_type]
    order = torch.argsort(ids)
    return src[order], dst[order]


def _pairs(src, dst):
    return set(zip(src.tolist(), dst.tolist()))


def test_types_and_sizes_follow_ogbn_mag(dataset):
    g = dataset.graph
    assert isinstance(dataset, HeteroNodeClassificationDataset) and dataset.target_type == "paper"
    assert g.is_heterogeneous and g.node_types == NODE_TYPES and g.edge_types == EDGE_TYPES
    counts = g.num_nodes_per_type
    assert counts == {"author": 4622, "field_of_study": 244, "institution": 36, "paper": NUM_PAPERS}
    assert g.indices.dtype == torch.int32 and g.type_per_edge.dtype == torch.uint8
    per_type = torch.bincount(g.type_per_edge.to(torch.int64), minlength=len(EDGE_TYPES)).tolist()
    edges = dict(zip(EDGE_TYPES, per_type))
    # ogbn-mag draws 9.7 writes, 10.2 topics and 7.4 citations per paper; repeats are dropped
    # (many topics at this size: 244 fields, a few of them hubs) and citations stored in both
    # directions.
    assert 8.0 * NUM_PAPERS < edges["author:writes:paper"] <= 9.8 * NUM_PAPERS
    assert 6.0 * NUM_PAPERS < edges["paper:has_topic:field_of_study"] <= 10.3 * NUM_PAPERS
    assert 12.0 * NUM_PAPERS < edges["paper:cites:paper"] <= 2 * 7.4 * NUM_PAPERS
    assert "paper=3,000" in repr(dataset) and "edge_types=7" in repr(dataset)


def test_graph_is_valid_and_equals_from_hetero_edges(dataset):
    g = dataset.graph
    g.validate()  # the generator skips the constructor's O(num_edges) checks
    rebuilt = gp.CSCGraph.from_hetero_edges(
        {t: _typed_edges(g, t) for t in EDGE_TYPES}, g.num_nodes_per_type
    )
    for name in ("indptr", "indices", "type_per_edge", "original_edge_ids", "node_type_offset"):
        assert torch.equal(getattr(rebuilt, name), getattr(g, name)), name
    assert dict(rebuilt.edge_type_to_id) == dict(g.edge_type_to_id)


def test_every_node_type_receives_edges(dataset):
    g = dataset.graph
    offsets = g.node_type_offset.tolist()
    degrees = g.in_degrees()
    for i, node_type in enumerate(NODE_TYPES):
        assert int(degrees[offsets[i] : offsets[i + 1]].sum()) > 0, node_type
    assert all(_typed_edges(g, t)[0].numel() > 0 for t in EDGE_TYPES)


def test_reverse_relations_and_symmetric_citations(dataset):
    g = dataset.graph
    for forward, backward in (
        ("author:writes:paper", "paper:rev_writes:author"),
        ("paper:has_topic:field_of_study", "field_of_study:rev_has_topic:paper"),
        ("author:affiliated_with:institution", "institution:rev_affiliated_with:author"),
    ):
        src, dst = _typed_edges(g, forward)
        rev_src, rev_dst = _typed_edges(g, backward)
        assert _pairs(src, dst) == _pairs(rev_dst, rev_src)
    src, dst = _typed_edges(g, "paper:cites:paper")
    assert _pairs(src, dst) == _pairs(dst, src)
    assert not bool((src == dst).any())


def test_no_repeated_edges(dataset):
    # In-edges of one destination and type are sorted by source, so a repeat would be a tie.
    g = dataset.graph
    src, dst = g.edge_index()
    same_group = (dst[1:] == dst[:-1]) & (g.type_per_edge[1:] == g.type_per_edge[:-1])
    assert bool((src[1:][same_group] > src[:-1][same_group]).all())


def test_degrees_are_skewed(dataset):
    g = dataset.graph
    for edge_type, node_type in (
        ("paper:cites:paper", "paper"),
        ("paper:rev_writes:author", "author"),
        ("paper:has_topic:field_of_study", "field_of_study"),
    ):
        degrees = torch.bincount(_typed_edges(g, edge_type)[1], minlength=g.num_nodes_per_type[node_type]).float()
        assert degrees.max() > 8 * degrees.mean(), edge_type


def _cited_majority_agreement(dataset):
    """Fraction of papers whose label is the most common label among the papers they cite."""
    labels, num_classes = dataset.labels["paper"], dataset.num_classes
    src, dst = _typed_edges(dataset.graph, "paper:cites:paper")
    votes = torch.zeros(NUM_PAPERS, num_classes)
    votes.index_put_((dst, labels[src]), torch.ones(src.numel()), accumulate=True)
    cited = votes.sum(1) > 0
    return float((votes.argmax(1) == labels)[cited].float().mean())


def test_labels_follow_the_structure(dataset):
    # Chance is 1/16; without homophily the citations say nothing about the label.
    assert _cited_majority_agreement(dataset) > 0.8
    assert _cited_majority_agreement(synthetic_mag(NUM_PAPERS, homophily=0.0, seed=1)) < 0.15


def test_neighbourhood_features_beat_own_features(dataset):
    # Nearest class centroid on a paper's own features against its features plus the means
    # of its cited papers' and its authors' features: what a one-layer R-GCN can read.
    labels, g = dataset.labels["paper"], dataset.graph
    own = dataset.node_features[("paper", "feat")]

    def neighbour_mean(edge_type):
        src, dst = _typed_edges(g, edge_type)
        source = dataset.node_features[(edge_type.split(":")[0], "feat")]
        total = torch.zeros_like(own).index_add_(0, dst, source[src])
        return total / torch.bincount(dst, minlength=NUM_PAPERS).clamp(min=1)[:, None]

    def centroid_accuracy(x):
        centroids = torch.stack([x[labels == c].mean(0) for c in range(dataset.num_classes)])
        return float((torch.cdist(x, centroids).argmin(1) == labels).float().mean())

    alone = centroid_accuracy(own)
    together = centroid_accuracy(own + neighbour_mean("paper:cites:paper") + neighbour_mean("author:writes:paper"))
    assert alone < 0.5 and together > alone + 0.25


def test_features_labels_and_splits(dataset):
    g = dataset.graph
    for node_type, n in g.num_nodes_per_type.items():
        feat = dataset.node_features[(node_type, "feat")]
        assert feat.shape == (n, 128) and feat.dtype == torch.float32
        assert 0.8 < float(feat.std()) < 1.2  # class means ~ N(0, 1/128) plus unit noise
    labels = dataset.labels["paper"]
    assert labels.shape == (NUM_PAPERS,) and labels.dtype == torch.int64
    assert dataset.num_classes == 16 and set(labels.tolist()) == set(range(16))
    sizes = {"train": 2400, "validation": 300, "test": 300}
    seen = []
    for name, size in sizes.items():
        item_set = getattr(dataset, f"{name}_set")
        assert isinstance(item_set, gp.HeteroItemSet) and list(item_set.item_sets) == ["paper"]
        seeds, item_labels = item_set.item_sets["paper"].items
        assert item_set.names == ("seeds", "labels") and seeds.numel() == size
        assert bool((seeds[1:] > seeds[:-1]).all()) and torch.equal(item_labels, labels[seeds])
        seen.append(seeds)
    assert torch.cat(seen).unique().numel() == sum(sizes.values())


def test_deterministic_under_seed(dataset):
    again = synthetic_mag(NUM_PAPERS, seed=1)
    other = synthetic_mag(NUM_PAPERS, seed=2)
    for name in ("indptr", "indices", "type_per_edge", "original_edge_ids"):
        assert torch.equal(getattr(again.graph, name), getattr(dataset.graph, name))
    for key, feat in dataset.node_features.items():
        assert torch.equal(again.node_features[key], feat)
    assert torch.equal(again.labels["paper"], dataset.labels["paper"])
    assert torch.equal(again.train_set.item_sets["paper"].items[0], dataset.train_set.item_sets["paper"].items[0])
    assert not torch.equal(other.graph.indices[:1000], dataset.graph.indices[:1000])
    assert not torch.equal(other.labels["paper"], dataset.labels["paper"])


def test_sampling_reaches_every_node_type(dataset):
    pipe = gp.ItemSampler(dataset.train_set, batch_size=64).sample_neighbor(dataset.graph, [5, 5])
    minibatch = next(iter(pipe))
    assert list(minibatch.seeds) == ["paper"] and minibatch.seeds["paper"].numel() == 64
    assert all(minibatch.input_nodes[t].numel() > 0 for t in NODE_TYPES)


def test_typed_feature_store(dataset):
    store = dataset.features
    assert torch.equal(store["node", "author", "feat"].data, dataset.node_features[("author", "feat")])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_papers=1), "`num_papers` must be an int >= 2"),
        (dict(num_classes=1), "`num_classes` must be an int >= 2"),
        (dict(homophily=1.5), "`homophily` must be a finite number >= 0.0 and <= 1.0"),
        (dict(feature_noise=-1.0), "`feature_noise` must be a finite number >= 0.0"),
        (dict(degree_exponent=2.0), "`degree_exponent` must be a finite number > 2.0"),
        (dict(seed=2.5), "`seed` must be an int"),
        (dict(split=(0.5, 0.5)), "`split` must be three positive fractions"),
        (dict(num_papers=10, split=(0.8, 0.05, 0.05)), "leaves an empty set among 10 papers"),
    ],
)
def test_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        synthetic_mag(**kwargs)
