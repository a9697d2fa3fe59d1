import pytest
import torch

from graphpipe.datasets import TemporalRetailDataset, temporal_retail
from graphpipe.datasets.temporal_retail import CUTOFFS, HORIZON, LINK_DAYS, NUM_DAYS
from hetero_graphs import typed_edges

NUM_CUSTOMERS = 500
EDGE_TYPES = [
    "customer:buys:product",
    "customer:rev_made_by:transaction",
    "product:rev_buys:customer",
    "product:rev_contains:transaction",
    "transaction:contains:product",
    "transaction:made_by:customer",
]


@pytest.fixture(scope="module")
def dataset():
    return temporal_retail(NUM_CUSTOMERS, seed=1)


def _transactions(ds):
    """``(customer, product, day)`` of every transaction, by transaction id, from the
    ``transaction:*`` edges (edge ``i`` of a type comes from transaction ``i``)."""
    edges = typed_edges(ds.graph, ["transaction:made_by:customer", "transaction:contains:product"])
    out = []
    for src, dst, ids in edges.values():
        assert torch.equal(src, ids)  # the source of edge i is transaction i
        out.append(dst[torch.argsort(ids)])
    return out[0], out[1], ds.node_features["transaction", "timestamp"]


def _auroc(scores, labels):
    """The probability that a random positive scores above a random negative (ties: half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    return float((pos[:, None] > neg[None]).double().mean() + 0.5 * (pos[:, None] == neg[None]).double().mean())


def test_types_sizes_and_features(dataset):
    g = dataset.graph
    assert isinstance(dataset, TemporalRetailDataset) and dataset.name == "temporal_retail"
    assert g.node_types == ["customer", "product", "transaction"] and g.edge_types == EDGE_TYPES
    counts = g.num_nodes_per_type
    assert counts["customer"] == NUM_CUSTOMERS and counts["product"] == NUM_CUSTOMERS // 10
    assert 8 * NUM_CUSTOMERS < counts["transaction"] < 30 * NUM_CUSTOMERS
    per_type = torch.bincount(g.type_per_edge.to(torch.int64), minlength=len(EDGE_TYPES))
    assert per_type.tolist() == [counts["transaction"]] * len(EDGE_TYPES)  # one edge of each type per transaction
    shapes = {key: (tuple(t.shape), t.dtype) for key, t in dataset.node_features.items()}
    assert shapes == {
        ("customer", "feat"): ((NUM_CUSTOMERS, 7), torch.float32),
        ("product", "feat"): ((counts["product"], 9), torch.float32),
        ("transaction", "feat"): ((counts["transaction"], 2), torch.float32),
        ("transaction", "timestamp"): ((counts["transaction"],), torch.int64),
    }
    category = dataset.node_features["product", "feat"][:, :8]
    assert torch.equal(category.sum(1), torch.ones(counts["product"])) and bool(category.sum(0).min() >= 1)
    assert dataset.features["node", "transaction", "timestamp"].row_shape == ()
    assert [t.metadata["name"] for t in dataset.tasks] == ["churn", "purchase"]
    assert "customer=500" in repr(dataset) and "edge_types=6" in repr(dataset)


def test_is_a_function_of_its_arguments(dataset):
    again, other = temporal_retail(NUM_CUSTOMERS, seed=1), temporal_retail(NUM_CUSTOMERS, seed=2)
    for key, t in dataset.node_features.items():
        assert torch.equal(t, again.node_features[key])
    assert torch.equal(dataset.graph.indices, again.graph.indices)
    assert torch.equal(dataset.graph.edge_attributes["timestamp"], again.graph.edge_attributes["timestamp"])
    assert torch.equal(dataset.churn.test_set.item_sets["customer"].items[2], again.churn.test_set.item_sets["customer"].items[2])
    assert not torch.equal(dataset.node_features["customer", "feat"], other.node_features["customer", "feat"])


def test_every_edge_carries_its_transactions_day_and_reverses_mirror(dataset):
    customer, product, day = _transactions(dataset)
    assert bool((day >= 1).all() and (day <= NUM_DAYS).all()) and bool((day[1:] >= day[:-1]).all())
    times = dataset.graph.edge_attributes["timestamp"]
    assert times.dtype == torch.int64
    edges = typed_edges(dataset.graph)
    per_type = dataset.graph.type_per_edge.to(torch.int64)
    txn = torch.arange(day.numel())
    expected = {
        "transaction:made_by:customer": (txn, customer),
        "transaction:contains:product": (txn, product),
        "customer:buys:product": (customer, product),
    }
    for etype, (src, dst) in expected.items():
        s, relation, d = etype.split(":")
        for name, (a, b) in ((etype, (src, dst)), (f"{d}:rev_{relation}:{s}", (dst, src))):
            got_src, got_dst, ids = edges[name]
            assert torch.equal(got_src, a[ids]) and torch.equal(got_dst, b[ids]), name
            # The edge attribute (CSC order) is the day of the edge's transaction.
            at = per_type == dataset.graph.edge_type_to_id[name]
            assert torch.equal(times[at], day[ids]), name


def test_the_graph_is_already_time_sorted(dataset):
    """Each destination's in-edges of a type are in time order (ties by edge id), so
    temporal samplers find the valid ones by binary search with no sort_by_time."""
    g = dataset.graph
    resorted = g.sort_by_time(edge_timestamp_attr_name="timestamp")
    assert torch.equal(resorted.indices, g.indices) and torch.equal(resorted.original_edge_ids, g.original_edge_ids)


def test_churn_labels_read_the_horizon_after_the_cutoff(dataset):
    customer, _, day = _transactions(dataset)
    task = dataset.churn
    assert task.metadata["num_classes"] == 2 and task.metadata["horizon"] == HORIZON
    for split, cutoffs in CUTOFFS.items():
        item_set = getattr(task, f"{split}_set").item_sets["customer"]
        assert item_set.names == ("seeds", "timestamp", "labels")
        seeds, times, labels = item_set.items
        assert all(t.dtype == torch.int64 for t in item_set.items)
        assert sorted(set(times.tolist())) == list(cutoffs)
        for c, t, y in zip(seeds.tolist(), times.tolist(), labels.tolist()):
            days = day[customer == c]
            assert bool((days <= t).any())  # only customers who bought by the cutoff
            assert y == int(not bool(((days > t) & (days <= t + HORIZON)).any()))
        # every customer with a purchase by the cutoff is there, once per cutoff
        for t in cutoffs:
            assert seeds[times == t].tolist() == torch.unique(customer[day <= t]).tolist()
    # split by time: no split's labels read a day that a later split's history or labels start from
    assert max(CUTOFFS["train"]) + HORIZON <= min(CUTOFFS["validation"])
    assert max(CUTOFFS["validation"]) + HORIZON <= min(CUTOFFS["test"])
    assert max(CUTOFFS["test"]) + HORIZON <= NUM_DAYS


def test_purchase_items_are_the_transactions_of_their_days(dataset):
    customer, product, day = _transactions(dataset)
    task = dataset.purchase
    assert task.metadata["edge_type"] == "customer:buys:product"
    seen = 0
    for split, (start, end) in LINK_DAYS.items():
        item_set = getattr(task, f"{split}_set").item_sets["customer:buys:product"]
        assert item_set.names == ("seeds", "timestamp")
        pairs, times = item_set.items
        kept = (day > start) & (day <= end)
        assert torch.equal(pairs, torch.stack([customer[kept], product[kept]], 1)) and torch.equal(times, day[kept])
        seen += len(item_set)
    assert seen == day.numel()


def test_churn_follows_history_not_static_features():
    """The label depends on history: days since the last purchase before the cutoff
    ranks the test items far better than any static customer feature does."""
    ds = temporal_retail(2000, seed=0)
    customer, _, day = _transactions(ds)
    seeds, times, labels = ds.churn.test_set.item_sets["customer"].items
    span = NUM_DAYS + 1
    keys, _ = torch.sort(customer * span + day)
    before = torch.searchsorted(keys, seeds * span + times, right=True) - 1  # the last purchase by the cutoff
    assert torch.equal(keys[before] // span, seeds)
    last = keys[before] % span
    assert _auroc((times - last).double(), labels) > 0.85
    static = ds.node_features["customer", "feat"][seeds]
    best = max(max(_auroc(static[:, j], labels), 1 - _auroc(static[:, j], labels)) for j in range(static.size(1)))
    assert 0.5 < best < 0.6


def test_bad_size_is_refused():
    with pytest.raises(ValueError, match="temporal_retail: `num_customers` must be an int >= 10"):
        temporal_retail(5)
    with pytest.raises(ValueError, match="temporal_retail: `seed` must be an int >= 0, got 1.5"):
        temporal_retail(20, seed=1.5)
