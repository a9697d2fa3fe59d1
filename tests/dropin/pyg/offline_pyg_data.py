"""Tiny offline datasets of the same shape as the ones PyG's examples download, under the
same class names, so a vendored example changes only its dataset import line.

Each has the real dataset's fields, node and edge types and tasks, a few hundred to a
few thousand nodes, and labels that depend on the neighbours: a node's own features
carry little of its class (a feature-only model stays near chance), its neighbours'
carry it (a GNN learns it). :func:`feature_only_accuracy` is that baseline. Taobao's
links follow the graph (co-bought items), not item popularity (:func:`popularity_auc`).
"""

from __future__ import annotations

import torch
from torch_geometric.data import Data, HeteroData

__all__ = ["OGB_MAG", "Planetoid", "PygNodePropPredDataset", "Taobao", "feature_only_accuracy", "popularity_auc"]

NUM_CLASSES = 4


class _Dataset:
    """One graph, PyG's dataset interface: ``dataset[0]`` (transformed), ``num_classes``,
    ``num_features``."""

    def __init__(self, data, num_classes: int, transform=None):
        self._data, self.num_classes, self.transform = data, num_classes, transform

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int):
        if index != 0:
            raise IndexError(index)
        data = self._data.clone()
        return data if self.transform is None else self.transform(data)

    @property
    def num_features(self) -> int:
        data = self._data
        return (data["paper"] if isinstance(data, HeteroData) else data).x.size(1)


def _noisy_features(classes: torch.Tensor, dims: int, signal: float, gen) -> torch.Tensor:
    """``[n, dims]`` float32: Gaussian noise plus ``signal`` times a class direction."""
    directions = torch.randn(NUM_CLASSES, dims, generator=gen)
    return torch.randn(classes.numel(), dims, generator=gen) + signal * directions[classes]


def _homophilous_edges(src_classes, dst_classes, num_edges: int, gen, same: float = 0.9) -> torch.Tensor:
    """``[2, num_edges]``: each destination uniform; its source of the same class with
    probability ``same`` (else uniform)."""
    dst = torch.randint(0, dst_classes.numel(), (num_edges,), generator=gen)
    by_class = [torch.nonzero(src_classes == c).view(-1) for c in range(NUM_CLASSES)]
    src = torch.randint(0, src_classes.numel(), (num_edges,), generator=gen)
    for c, members in enumerate(by_class):
        pick = (dst_classes[dst] == c) & (torch.rand(num_edges, generator=gen) < same)
        src[pick] = members[torch.randint(0, members.numel(), (int(pick.sum()),), generator=gen)]
    return torch.stack([src, dst])


def _masks(n: int, gen, fractions=(0.6, 0.2)):
    order = torch.randperm(n, generator=gen)
    cuts = [int(n * fractions[0]), int(n * (fractions[0] + fractions[1]))]
    masks = []
    for rows in (order[: cuts[0]], order[cuts[0] : cuts[1]], order[cuts[1] :]):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[rows] = True
        masks.append(mask)
    return masks


def OGB_MAG(root=None, preprocess=None, transform=None, num_papers: int = 1000):  # noqa: N802 (PyG's class name)
    """ogbn-mag with metapath2vec features: papers (``x``, ``y``, ``year``, masks), authors,
    institutions, fields of study (``x``); author-writes-paper, author-affiliated_with-
    institution, paper-cites-paper, paper-has_topic-field_of_study. A paper's class is its
    authors' (whose features show it), its own features show little."""
    gen = torch.Generator().manual_seed(0)
    counts = {"paper": num_papers, "author": num_papers // 2, "institution": 40, "field_of_study": 60}
    classes = {t: torch.randint(0, NUM_CLASSES, (n,), generator=gen) for t, n in counts.items()}
    data = HeteroData()
    signal = {"paper": 0.15, "author": 1.5, "institution": 1.0, "field_of_study": 1.0}
    for node_type, n in counts.items():
        data[node_type].x = _noisy_features(classes[node_type], 32, signal[node_type], gen)
    paper = data["paper"]
    paper.y = classes["paper"]
    paper.year = torch.randint(2010, 2020, (num_papers,), generator=gen)
    paper.train_mask, paper.val_mask, paper.test_mask = _masks(num_papers, gen)
    for (src, rel, dst), per_dst in [
        (("author", "affiliated_with", "institution"), 1),
        (("author", "writes", "paper"), 3),
        (("paper", "cites", "paper"), 3),
        (("paper", "has_topic", "field_of_study"), 2),
    ]:
        num_edges = per_dst * (counts[dst] if dst == "paper" else counts[src])
        data[src, rel, dst].edge_index = _homophilous_edges(classes[src], classes[dst], num_edges, gen)
    return _Dataset(data, NUM_CLASSES, transform)


def Planetoid(root=None, name="Cora", transform=None, num_nodes: int = 200):  # noqa: N802
    """Cora's shape: ``x`` (row-normalisable non-negative bag of words), ``y``, masks,
    ``edge_index`` (both directions), homophilous edges; features weakly show the class."""
    gen = torch.Generator().manual_seed(1)
    classes = torch.randint(0, NUM_CLASSES, (num_nodes,), generator=gen)
    x = (_noisy_features(classes, 64, 0.3, gen) > 1.0).to(torch.float32)
    edges = _homophilous_edges(classes, classes, 2 * num_nodes, gen, same=0.95)
    edge_index = torch.unique(torch.cat([edges, edges.flip(0)], 1), dim=1)
    train_mask, val_mask, test_mask = _masks(num_nodes, gen, (0.3, 0.3))
    data = Data(x=x, y=classes, edge_index=edge_index, train_mask=train_mask, val_mask=val_mask, test_mask=test_mask)
    return _Dataset(data, NUM_CLASSES, transform)


class PygNodePropPredDataset(_Dataset):
    """ogbn-products / ogbn-arxiv's shape: ``x``, ``y`` ``[N, 1]``, ``edge_index``, and
    ``get_idx_split()`` (``train``/``valid``/``test`` ids)."""

    def __init__(self, name="ogbn-products", root=None, num_nodes: int = 1600):
        gen = torch.Generator().manual_seed(2)
        classes = torch.randint(0, NUM_CLASSES, (num_nodes,), generator=gen)
        x = _noisy_features(classes, 32, 0.15, gen)
        edge_index = _homophilous_edges(classes, classes, 6 * num_nodes, gen)
        super().__init__(Data(x=x, y=classes.view(-1, 1), edge_index=edge_index), NUM_CLASSES)
        order = torch.randperm(num_nodes, generator=gen)
        self._split = {"train": order[: num_nodes // 2], "valid": order[num_nodes // 2 : 3 * num_nodes // 4], "test": order[3 * num_nodes // 4 :]}

    def get_idx_split(self):
        return dict(self._split)


def Taobao(root=None, transform=None, num_users: int = 1000, num_categories: int = 20, per_user: int = 16):  # noqa: N802
    """Taobao's shape: users, items, categories (``num_nodes`` only, no features);
    user-to-item edges with ``time`` and ``behavior`` (0-3), item-to-category edges. A user
    buys ``per_user`` items (duplicates dropped), 90% of them distinct items of one category
    of 20 items, the rest uniform: every item about equally popular, so links are predictable
    from the graph (co-bought items), not from popularity (:func:`popularity_auc`)."""
    gen = torch.Generator().manual_seed(3)
    per_category = 20
    num_items = num_categories * per_category
    user_category = torch.randint(0, num_categories, (num_users,), generator=gen)
    rank = torch.rand(num_users, per_category, generator=gen).argsort(1)[:, :per_user]
    items = user_category.view(-1, 1) * per_category + rank
    anywhere = torch.rand(items.shape, generator=gen) >= 0.9
    items[anywhere] = torch.randint(0, num_items, (int(anywhere.sum()),), generator=gen)
    users = torch.arange(num_users).repeat_interleave(per_user)
    pairs = torch.unique(torch.stack([users, items.view(-1)]), dim=1)
    data = HeteroData()
    data["user"].num_nodes, data["item"].num_nodes = num_users, num_items
    data["category"].num_nodes = num_categories
    data["user", "item"].edge_index = pairs
    data["user", "item"].time = torch.randint(1511539200, 1512316800, (pairs.size(1),), generator=gen)
    data["user", "item"].behavior = torch.randint(0, 4, (pairs.size(1),), generator=gen)
    data["item", "category"].edge_index = torch.stack([torch.arange(num_items), torch.arange(num_items) // per_category])
    return _Dataset(data, 0, transform)


def popularity_auc(train_edge_index: torch.Tensor, num_items: int, edge_label_index: torch.Tensor, edge_label: torch.Tensor) -> float:
    """ROC AUC of scoring each (user, item) pair of ``edge_label_index`` (``[2, P]``) by
    the item's degree in ``train_edge_index``; ``edge_label`` ``[P]`` 1 / 0."""
    score = torch.bincount(train_edge_index[1], minlength=num_items).float()[edge_label_index[1]]
    pos, neg = score[edge_label == 1].view(-1, 1), score[edge_label == 0].view(1, -1)
    return float((pos > neg).float().mean() + 0.5 * (pos == neg).float().mean())


def feature_only_accuracy(x: torch.Tensor, y: torch.Tensor, train: torch.Tensor, test: torch.Tensor) -> float:
    """Test accuracy of a logistic regression on the nodes' own features (no graph)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(x.size(1), int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(300):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x[train]), y[train]).backward()
        optimizer.step()
    return float((model(x[test]).argmax(1) == y[test]).float().mean())
