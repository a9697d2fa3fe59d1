"""A synthetic retail dataset with timestamps, shaped like a relational benchmark, for
temporal sampling.

RelBench's retail datasets (rel-hm, rel-amazon) are tables: customers and products
(dimension tables, no time) and a fact table of timestamped transactions whose foreign
keys point at both. Relational deep learning makes every row a node and every foreign
key an edge; its tasks are (entity, cutoff time) pairs whose labels come from the rows
after the cutoff, and a model may read only the rows up to it. :func:`temporal_retail`
draws such a database offline, from a seed:

* **customers** join on a random day and stay active for a random lifetime; while
  active they buy at a rate of their own. Both the rate and the expected lifetime
  depend on the customer's favourite product category (a customer buys in it 75% of
  the time; categories range from frequent and loyal to rare and fickle) and on
  per-customer factors. Their static features (two noisy readings of those factors,
  a membership flag, a region) say little about either.
* **products** belong to a category (one-hot feature, with the log price); within a
  category some are much more popular than others.
* **transactions** (one per purchase) carry a day, an amount and a quantity.

Whether a customer buys in the next ``horizon`` days therefore follows from their past
transactions (how recently and how often they bought, in which categories), which a
temporal GNN reads from the graph, and hardly from their static features. A model that
also sees transactions after the cutoff reads the label itself: that is the leak
temporal sampling prevents.

Why transactions are nodes (not customer-product edges with attributes): this is
RelBench's shape (a row per node, the amount a node feature, customers and products
untimed dimension tables), and a customer's transactions reach their products in the
second hop. The direct ``customer:buys:product`` edges (one per transaction) are there
for the purchase link task, whose pairs must be an edge type of the graph (as in
GraphBolt). Every edge carries the day of the transaction it comes from as its
``"timestamp"``, so the edge time alone bounds every hop, with GraphBolt's
``edge_timestamp_attr_name="timestamp"`` or PyG's ``time_attr="timestamp"`` (which
must name a node or an edge attribute, not both: so the graph has no node timestamps).
The transactions' days are also a node feature, to compute how old a transaction is
relative to its seed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np
import torch

from graphpipe.graph.csc_graph import CSCGraph
from graphpipe.features.store import FeatureStore
from graphpipe.batch.item_set import HeteroItemSet, ItemSet
from graphpipe._internal.checks import check_int
from graphpipe.datasets.ondisk import Task

__all__ = ["TemporalRetailDataset", "temporal_retail"]

NUM_DAYS = 360  # days 1 .. NUM_DAYS
HORIZON = 30
# Churn items: (customer, cutoff day) for every customer with a purchase on or before the
# cutoff; the label reads the days (cutoff, cutoff + HORIZON], RelBench's convention: a
# sampler that admits neighbours up to the seed's time (PyG's "<=") or only before it
# (GraphBolt's "<") never sees them. Later cutoffs for later splits, so no split's labels
# read days another split's labels read.
CUTOFFS = {"train": (90, 120, 150, 180, 210), "validation": (240, 270), "test": (300, 330)}
# Purchase items: the transactions of the days (start, end] of each split, the same days
# the churn labels of that split read (the train set also holds the days before).
LINK_DAYS = {"train": (0, 240), "validation": (240, 300), "test": (300, 360)}
PURCHASE_EDGE_TYPE = "customer:buys:product"

_NUM_CATEGORIES = 8
_FAVOURITE = 0.75  # share of a customer's purchases in their favourite category
# Per category (shuffled by the seed): purchases per active day, and mean lifetime in days.
_RATE = np.geomspace(0.03, 0.3, _NUM_CATEGORIES)
_LIFETIME = np.geomspace(60.0, 600.0, _NUM_CATEGORIES)


@dataclass
class TemporalRetailDataset:
    """Customers, products and transactions with days; a churn and a purchase task.

    Attributes:
        name: ``"temporal_retail"``.
        graph: the typed graph: node types ``customer``, ``product``, ``transaction``;
            edge types ``transaction:made_by:customer``, ``transaction:contains:product``,
            ``customer:buys:product`` and their reverses ``customer:rev_made_by:transaction``,
            ``product:rev_contains:transaction``, ``product:rev_buys:customer``; edge
            attribute ``"timestamp"`` (int64 day of the edge's transaction) on every edge.
            Edge ``i`` of every edge type (its id within the type) comes from transaction
            ``i``; transaction ids ascend with time.
        node_features: ``("customer", "feat")`` ``[C, 7]`` float32, ``("product", "feat")``
            ``[P, 9]`` float32 (category one-hot, standardised log price),
            ``("transaction", "feat")`` ``[T, 2]`` float32 (standardised log amount and
            quantity), ``("transaction", "timestamp")`` ``[T]`` int64 day.
        churn: the node task (``metadata``: ``name="churn"``, ``num_classes=2``,
            ``target_type="customer"``, ``horizon``, ``cutoffs``): item sets
            ``HeteroItemSet({"customer": ItemSet((seeds, timestamp, labels))})``, all
            ``[n]`` int64: the customer, the cutoff day, 1 if the customer buys nothing in
            the days ``(cutoff, cutoff + horizon]``.
        purchase: the link task (``metadata``: ``name="purchase"``, ``edge_type``):
            ``HeteroItemSet({"customer:buys:product": ItemSet((seeds, timestamp))})``,
            ``seeds`` ``[n, 2]`` int64 (customer, product) of each transaction of the
            split's days, ``timestamp`` ``[n]`` int64 its day.
    """

    name: str
    graph: CSCGraph
    node_features: Dict[Tuple[str, str], torch.Tensor]
    churn: Task
    purchase: Task

    @property
    def tasks(self) -> List[Task]:
        """GraphBolt's list of tasks: ``[churn, purchase]``."""
        return [self.churn, self.purchase]

    @functools.cached_property
    def features(self) -> FeatureStore:
        """The typed :class:`~graphpipe.FeatureStore` over :attr:`node_features` (no copy)."""
        return FeatureStore(node_features=self.node_features)

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={n:,}" for t, n in self.graph.num_nodes_per_type.items())
        sizes = ", ".join(
            f"{task.metadata['name']}=({len(task.train_set)}, {len(task.validation_set)}, {len(task.test_set)})"
            for task in self.tasks
        )
        return (
            f"TemporalRetailDataset(name='{self.name}', nodes=({nodes}), num_edges={self.graph.total_num_edges:,}, "
            f"edge_types={len(self.graph.edge_types)}, days={NUM_DAYS}, horizon={HORIZON}, "
            f"items (train, validation, test): {sizes})"
        )


def temporal_retail(num_customers: int = 3000, seed: int = 0) -> TemporalRetailDataset:
    """A deterministic retail database as a temporal typed graph, with a churn and a
    purchase task split by time (see the module docstring for how it is drawn).

    Days ``1 .. 360``; ``num_customers // 10`` products (at least one per category) in 8
    categories; about 20 transactions per customer. 3,000 customers (the default) give
    59,000 transactions and 357,000 edges (6 per transaction), and 6,588 / 4,593 / 5,713
    churn items (45-55% churn) and 29,315 / 14,477 / 15,700 purchases per split, in 0.1-0.3 s
    on 2 cores.

    Args:
        num_customers: the size knob (>= 10); everything else scales with it.
        seed: the dataset is a deterministic function of its arguments.

    Returns:
        A :class:`TemporalRetailDataset`: each destination's in-edges of a type in time
        order (transaction ids ascend with time).
    """
    num_customers = check_int(num_customers, "num_customers", "temporal_retail", minimum=10)
    seed = check_int(seed, "seed", "temporal_retail", minimum=0)
    rng = np.random.default_rng(seed)
    products = _products(rng, max(_NUM_CATEGORIES, num_customers // 10))
    customers, behaviour = _customers(rng, num_customers)
    customer, product, day, amount, quantity = _transactions(rng, behaviour, products["category"], products["price"])
    pairs = {
        "transaction:made_by:customer": (np.arange(day.size), customer),
        "transaction:contains:product": (np.arange(day.size), product),
        "customer:buys:product": (customer, product),
    }
    edges, times = {}, {}
    for edge_type, (src, dst) in pairs.items():
        s, relation, d = edge_type.split(":")
        edges[edge_type] = torch.from_numpy(np.stack([src, dst]))
        edges[f"{d}:rev_{relation}:{s}"] = torch.from_numpy(np.stack([dst, src]))
        times[edge_type] = times[f"{d}:rev_{relation}:{s}"] = torch.from_numpy(day)
    num_nodes = {"customer": num_customers, "product": products["category"].size, "transaction": day.size}
    graph = CSCGraph.from_hetero_edges(edges, num_nodes, edge_attributes={"timestamp": times})
    node_features = {
        ("customer", "feat"): torch.from_numpy(customers),
        ("product", "feat"): torch.from_numpy(products["feat"]),
        ("transaction", "feat"): torch.from_numpy(_standardised(np.log(amount), quantity.astype(np.float64))),
        ("transaction", "timestamp"): torch.from_numpy(day),
    }
    churn = Task(
        metadata={"name": "churn", "num_classes": 2, "target_type": "customer", "horizon": HORIZON, "cutoffs": CUTOFFS},
        **{f"{split}_set": _churn_items(customer, day, num_customers, cutoffs) for split, cutoffs in CUTOFFS.items()},
    )
    purchase = Task(
        metadata={"name": "purchase", "edge_type": PURCHASE_EDGE_TYPE},
        **{f"{split}_set": _purchase_items(customer, product, day, *days) for split, days in LINK_DAYS.items()},
    )
    return TemporalRetailDataset("temporal_retail", graph, node_features, churn, purchase)


def _products(rng: np.random.Generator, num_products: int) -> Dict[str, np.ndarray]:
    """Each product's ``category`` ``[P]`` int64 (every category at least once),
    ``price`` ``[P]`` float64 and ``feat`` ``[P, 9]`` float32."""
    category = np.arange(num_products) % _NUM_CATEGORIES
    rng.shuffle(category)
    price = np.exp(rng.normal(2.0, 0.6, _NUM_CATEGORIES)[category] + rng.normal(0.0, 0.3, num_products))
    feat = np.concatenate([np.eye(_NUM_CATEGORIES)[category], _standardised(np.log(price))], axis=1)
    return {"category": category, "price": price, "feat": feat.astype(np.float32)}


def _customers(rng: np.random.Generator, n: int) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
    """Static features ``[n, 7]`` float32 and the hidden behaviour: ``favourite``
    category, purchase ``rate`` per day, first and last active ``join``/``leave`` days."""
    favourite = rng.integers(_NUM_CATEGORIES, size=n)
    rate_factor, loyalty_factor = rng.normal(size=(2, n))
    order = rng.permutation(_NUM_CATEGORIES)
    rate = _RATE[order][favourite] * np.exp(0.5 * rate_factor)
    lifetime = rng.exponential(_LIFETIME[order][favourite] * np.exp(0.5 * loyalty_factor))
    join = rng.uniform(1.0, NUM_DAYS - HORIZON + 1, n)
    member = rng.random(n) < 1.0 / (1.0 + np.exp(-0.5 * loyalty_factor))
    region = np.eye(4)[rng.integers(4, size=n)]
    noisy = _standardised(0.3 * rate_factor + rng.normal(size=n), 0.3 * loyalty_factor + rng.normal(size=n))
    feat = np.concatenate([noisy, member[:, None], region], axis=1).astype(np.float32)
    return feat, {"favourite": favourite, "rate": rate, "join": join, "leave": join + lifetime}


def _transactions(rng, behaviour, product_category, price):
    """Every purchase, in time order (by day, then customer): ``customer``, ``product``,
    ``day`` int64 ``[T]``, ``amount`` float64 and ``quantity`` int64."""
    start = behaviour["join"]
    end = np.minimum(behaviour["leave"], NUM_DAYS + 1)
    counts = 1 + rng.poisson(behaviour["rate"] * (end - start))  # the first purchase on the join day
    customer = np.repeat(np.arange(start.size), counts)
    first = np.zeros(customer.size, dtype=bool)
    first[np.cumsum(counts) - counts] = True
    day = np.where(first, start[customer], rng.uniform(start[customer], end[customer])).astype(np.int64)
    in_favourite = rng.random(customer.size) < _FAVOURITE
    category = np.where(in_favourite, behaviour["favourite"][customer], rng.integers(_NUM_CATEGORIES, size=customer.size))
    product = _popular_product(rng, category, product_category)
    quantity = 1 + rng.poisson(0.5, customer.size)
    amount = price[product] * quantity * np.exp(rng.normal(0.0, 0.1, customer.size))
    order = np.lexsort((customer, day))
    return customer[order], product[order], day[order], amount[order], quantity[order]


def _popular_product(rng: np.random.Generator, category: np.ndarray, product_category: np.ndarray) -> np.ndarray:
    """A product of each ``category``, drawn within it with Zipf-like popularity (the
    ``r``-th product of a category weighs ``1 / r``)."""
    by_category = np.argsort(product_category, kind="stable")
    starts = np.searchsorted(product_category[by_category], np.arange(_NUM_CATEGORIES + 1))
    sizes = np.diff(starts)[category]
    # Inverse CDF of the density 1 / x on [1, size + 1): rank floor((size + 1) ** u) - 1.
    rank = np.minimum(np.floor((sizes + 1.0) ** rng.random(category.size)).astype(np.int64) - 1, sizes - 1)
    return by_category[starts[category] + rank]


def _standardised(*columns: np.ndarray) -> np.ndarray:
    """``[n, len(columns)]`` float32, each column shifted and scaled to mean 0, std 1."""
    stacked = np.stack(columns, axis=1)
    return ((stacked - stacked.mean(0)) / stacked.std(0)).astype(np.float32)


def _churn_items(customer: np.ndarray, day: np.ndarray, num_customers: int, cutoffs) -> HeteroItemSet:
    """(customer, cutoff, label) for every cutoff and every customer with a purchase on or before it."""
    seeds, times, labels = [], [], []
    for cutoff in cutoffs:
        before = np.bincount(customer[day <= cutoff], minlength=num_customers)
        window = (day > cutoff) & (day <= cutoff + HORIZON)
        buys = np.bincount(customer[window], minlength=num_customers) > 0
        active = np.flatnonzero(before)
        seeds.append(active)
        times.append(np.full(active.size, cutoff))
        labels.append(~buys[active])
    fields = (torch.from_numpy(np.concatenate(f).astype(np.int64)) for f in (seeds, times, labels))
    return HeteroItemSet({"customer": ItemSet(tuple(fields), names=("seeds", "timestamp", "labels"))})


def _purchase_items(customer, product, day, start: int, end: int) -> HeteroItemSet:
    """The (customer, product) pair and day of every transaction of the days (start, end]."""
    kept = (day > start) & (day <= end)
    pairs = torch.from_numpy(np.stack([customer[kept], product[kept]], axis=1))
    times = torch.from_numpy(day[kept])
    return HeteroItemSet({PURCHASE_EDGE_TYPE: ItemSet((pairs, times), names=("seeds", "timestamp"))})
