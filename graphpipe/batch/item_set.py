"""ItemSet and HeteroItemSet: the training items (seed nodes or node pairs, optionally with
labels) a sampler iterates."""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from graphpipe._internal.checks import as_int
from graphpipe.graph.edge_types import parse_edge_type

__all__ = ["ItemSet", "HeteroItemSet", "ItemSetDict", "NEGATIVE_FIELDS", "pairs_with_negatives"]

# GraphBolt 2.1's field names, mapped as GraphBolt 2.2's ItemSampler maps them: seed nodes
# and node pairs are "seeds"; given negatives become seeds, labels and indexes per batch.
_LEGACY_SEEDS = ("seed_nodes", "node_pairs")
NEGATIVE_FIELDS = ("negative_srcs", "negative_dsts")


class ItemSet:
    """A fixed-length set of items, each a tuple of aligned tensor rows.

    ``items`` may be (GraphBolt's ``ItemSet`` forms):
      * an integer n (a Python or numpy int, or a 0-d integer tensor): the node ids
        ``0..n-1`` (``torch.arange``);
      * a tensor, a list, a range or a numpy array: ONE field, e.g. the seed node ids
        (``ItemSet([0, 1, 2, 3])`` is 4 items);
      * a tuple of those, with equal first dimension: one field each, e.g.
        ``(seeds, labels)``.

    ``names`` names the fields, one per tensor (e.g. ``("seeds", "labels")``); the
    :class:`~graphpipe.ItemSampler` copies each field into the MiniBatch field of the same
    name (``seeds``, ``labels``, ``indexes``, ``timestamp``; ``input_id``: ``[N]`` integer
    ids of node seeds that ``to_pyg()`` reports as PyG's ``input_id`` instead of their
    positions in the set, e.g. ``from_pyg``'s mask splits: the node ids).
    With one field and no names, the field is ``seeds``.

    GraphBolt 2.1's names work as GraphBolt 2.2 maps them: ``seed_nodes`` and
    ``node_pairs`` are named ``seeds``; with ``[N, k]`` ``negative_dsts`` (and/or
    ``negative_srcs``) beside ``[N, 2]`` pairs, each batch's seeds are its ``B`` pairs then
    their ``B * k`` negatives (a missing side is the pair's own node), with float32
    ``labels`` (1, then 0) and ``indexes`` (the pair's position in the batch).

    An ItemSet may be empty (a split with no items of one node type, in a
    :class:`HeteroItemSet`); an :class:`~graphpipe.ItemSampler` refuses a set with no
    items at all.
    """

    def __init__(
        self,
        items: Union[int, torch.Tensor, Sequence, np.ndarray, Tuple[Union[torch.Tensor, Sequence, np.ndarray], ...]],
        names: Optional[Union[str, Sequence[str]]] = None,
    ):
        count = _count(items)
        if count is not None:
            if count < 0:
                raise ValueError(f"ItemSet: `items` as an int is a number of items, >= 0, got {count}")
            items = (torch.arange(count, dtype=items.dtype if isinstance(items, torch.Tensor) else torch.int64),)  # GraphBolt's
        elif isinstance(items, tuple):
            items = tuple(_field(t, i) for i, t in enumerate(items))
        else:
            items = (_field(items, 0),)
        if len(items) == 0:
            raise ValueError("ItemSet: `items` is an empty tuple; give at least one tensor")
        length = items[0].size(0)
        for i, t in enumerate(items):
            if t.size(0) != length:
                raise ValueError(
                    f"ItemSet: all fields must have the same length, but field 0 has {length} "
                    f"rows and field {i} has {t.size(0)}"
                )
        if names is None:
            names = ("seeds",) if len(items) == 1 else None
        elif isinstance(names, str):
            names = (names,)
        if names is not None:
            given = names
            names = tuple("seeds" if name in _LEGACY_SEEDS else name for name in names)
            if len(set(names)) != len(names):
                legacy = " (seed_nodes and node_pairs are GraphBolt 2.1's names of seeds)" if tuple(given) != names else ""
                raise ValueError(
                    f"ItemSet: `names` {tuple(given)!r} names a field twice{legacy}; every tensor needs a field of its own"
                )
            if len(names) != len(items):
                raise ValueError(
                    f"ItemSet: `names` has {len(names)} entries for {len(items)} fields; give one "
                    f"name per tensor, e.g. names=('seeds', 'labels')"
                )
            _check_negatives(names, items)
        self._items = items
        self.names: Optional[Tuple[str, ...]] = names

    @property
    def items(self) -> Tuple[torch.Tensor, ...]:
        """The field tensors, each ``[len(self), ...]``."""
        return self._items

    def __len__(self) -> int:
        return self._items[0].size(0)

    def __getitem__(self, index):
        """Rows ``index`` (an int, slice or index tensor) of every field, as a tuple."""
        return tuple(t[index] for t in self._items)

    def field(self, name: str) -> Optional[torch.Tensor]:
        """The tensor of field ``name``, or None if there is no such field."""
        if self.names is None or name not in self.names:
            return None
        return self._items[self.names.index(name)]

    def batch(self, rows: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The MiniBatch fields of items ``rows`` (``[n]`` int64 positions): every named
        field (``input_id`` as int64), and ``item_ids`` (a copy of ``rows``: a view would
        keep the epoch's order alive, and ship it to worker processes); given negatives
        make ``seeds``, ``labels`` and ``indexes`` (see the class doc)."""
        fields = dict(zip(self.names, self[rows]))
        if not fields.keys().isdisjoint(NEGATIVE_FIELDS):
            fields = _with_given_negatives(fields)
        if "input_id" in fields:
            fields["input_id"] = fields["input_id"].to(torch.int64)
        return {**fields, "item_ids": rows.clone()}

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{n}: {tuple(t.shape)} {t.dtype}"
            for n, t in zip(self.names or range(len(self._items)), self._items)
        )
        return f"ItemSet(len={len(self)}, {fields})"


def _check_negatives(names: Tuple[str, ...], items: Tuple[torch.Tensor, ...]) -> None:
    """Given negatives need ``[N, 2]`` seeds and ``[N, k]`` negatives, and no labels or
    indexes of their own (they are made per batch)."""
    fields = dict(zip(names, items))
    given = [name for name in NEGATIVE_FIELDS if name in fields]
    if not given:
        return
    seeds = fields.get("seeds")
    if seeds is None or seeds.dim() != 2 or seeds.size(1) != 2:
        raise ValueError(f"ItemSet: {given} need node pairs ('seeds' or 'node_pairs', [N, 2]) beside them")
    if "labels" in fields or "indexes" in fields:
        raise ValueError(f"ItemSet: {given} make each batch's labels and indexes; drop the 'labels' / 'indexes' fields")
    widths = {name: tuple(fields[name].shape[1:]) for name in given}
    if any(len(width) != 1 for width in widths.values()) or len(set(widths.values())) != 1:
        raise ValueError(f"ItemSet: {given} must be [N, k] node ids, one k for both, got shapes {widths}")


def _with_given_negatives(fields: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """GraphBolt 2.2's ``_construct_seeds``: the batch's pairs and their given negatives
    as ``seeds``, ``labels`` and ``indexes`` (:func:`pairs_with_negatives`)."""
    seeds, labels, indexes = pairs_with_negatives(fields["seeds"], None, fields.get("negative_dsts"), fields.get("negative_srcs"))
    return {"seeds": seeds, "labels": labels, "indexes": indexes}


def pairs_with_negatives(
    pairs: torch.Tensor,
    labels: Optional[torch.Tensor],
    negative_dsts: Optional[torch.Tensor],
    negative_srcs: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``B`` pairs ``[B, 2]`` and their ``[B, k]`` negatives (a side not given is the
    pair's own node) as ``(seeds, labels, indexes)``: ``seeds`` ``[B * (1 + k), 2]`` (the
    pairs, then each pair's negatives; of ``pairs``' and the negatives' dtypes:
    :func:`torch.promote_types`), ``labels`` (``labels`` or
    float32 1.0, then 0 for the negatives) and int64 ``indexes`` (each row's pair)."""
    num, k = pairs.size(0), (negative_dsts if negative_dsts is not None else negative_srcs).size(1)
    sources = pairs[:, :1].expand(-1, k) if negative_srcs is None else negative_srcs
    destinations = pairs[:, 1:].expand(-1, k) if negative_dsts is None else negative_dsts
    negatives = torch.stack([sources.reshape(-1), destinations.reshape(-1)], dim=1)
    dtype = torch.promote_types(pairs.dtype, negatives.dtype)
    seeds = torch.cat([pairs.to(dtype), negatives.to(dtype)])
    if labels is None:
        labels = torch.ones(num, dtype=torch.float32, device=pairs.device)
    negative_labels = labels.new_zeros((num * k,) + tuple(labels.shape[1:]))
    positions = torch.arange(num, device=pairs.device)
    return seeds, torch.cat([labels, negative_labels]), torch.cat([positions, positions.repeat_interleave(k)])


def _count(items) -> Optional[int]:
    """The number of items when ``items`` is a count (an integer or a 0-d integer
    tensor or array), else None (a bool is no count: :func:`_field` refuses it)."""
    if isinstance(items, (torch.Tensor, np.ndarray)) and items.ndim > 0:
        return None
    return as_int(items)


def _field(values, index: int) -> torch.Tensor:
    """One field as a tensor with a first (item) dimension."""
    if isinstance(values, (list, range, np.ndarray)):
        try:
            values = torch.as_tensor(values)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"ItemSet: field {index} cannot be made a tensor ({err})") from err
    if not isinstance(values, torch.Tensor):
        raise TypeError(
            "ItemSet: `items` must be an int, a tensor, a list/range/array (one field) or a tuple of "
            f"them (one field each), got {type(values).__name__}{f' as field {index}' if index else ''}"
        )
    if values.dim() == 0:
        raise ValueError(f"ItemSet: field {index} is a 0-d tensor; items need a first dimension")
    return values


class HeteroItemSet:
    """Items of several node or edge types (GraphBolt's ``HeteroItemSet``, also ``ItemSetDict``).

    Node tasks: ``HeteroItemSet({"paper": ItemSet((seeds, labels), names=("seeds",
    "labels")), ...})``, every :class:`ItemSet` holding type-local node ids of its node
    type. Link tasks: keys are edge types ``"src:relation:dst"`` and ``seeds`` are
    ``[N, 2]`` type-local ``(source, destination)`` pairs of that edge type (with
    ``labels`` and ``indexes`` as for untyped pairs). Every ItemSet has the same field
    names. The items are numbered type after type in the dict's order (item ``i`` of the
    second type is item ``len(first) + i``), so an :class:`~graphpipe.ItemSampler`
    shuffles and cuts them as one set; a batch's fields are dicts type -> rows (only the
    types the batch holds), e.g. ``minibatch.seeds == {"paper": ..., "author": ...}``, and
    ``item_ids`` the items' positions within their type's ItemSet. A type may have no
    items (a split without that type): no batch holds it.

    Args:
        item_sets: node type (or edge type) -> :class:`ItemSet` (or a tensor of seeds).
    """

    def __init__(self, item_sets: Mapping[str, Union[ItemSet, torch.Tensor]]):
        if not isinstance(item_sets, Mapping) or len(item_sets) == 0:
            raise ValueError(
                f"HeteroItemSet: `item_sets` must be a non-empty dict of node type -> ItemSet, got {item_sets!r}"
            )
        sets = {}
        for node_type, item_set in item_sets.items():
            if not isinstance(node_type, str):
                raise TypeError(f"HeteroItemSet: keys must be node or edge type names (str), got {node_type!r}")
            sets[node_type] = item_set if isinstance(item_set, ItemSet) else ItemSet(item_set, names="seeds")
        names = {t: s.names for t, s in sets.items()}
        first = next(iter(names.values()))
        unnamed = [t for t, n in names.items() if n is None]
        if unnamed:
            raise ValueError(
                f"HeteroItemSet: every ItemSet must name its fields (e.g. ItemSet((seeds, labels), names=('seeds', "
                f"'labels'))), got unnamed ones for {unnamed}"
            )
        if any(n != first for n in names.values()):
            raise ValueError(f"HeteroItemSet: every ItemSet needs the same field names, got {names}")
        if "seeds" in first:
            _check_keys({t: s.field("seeds") for t, s in sets.items()})
        self._sets = sets
        self.names: Tuple[str, ...] = first
        lengths = [len(s) for s in sets.values()]
        self._offsets = torch.tensor([0, *lengths]).cumsum(0)

    @property
    def item_sets(self) -> Dict[str, ItemSet]:
        """Node type -> its :class:`ItemSet`."""
        return dict(self._sets)

    @property
    def _itemsets(self) -> Dict[str, ItemSet]:
        """GraphBolt's private name of :attr:`item_sets`, which its temporal example reads
        to change an ItemSet's items in place."""
        return self._sets

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def batch(self, rows: torch.Tensor) -> Dict[str, Dict[str, torch.Tensor]]:
        """The MiniBatch fields of items ``rows`` (``[n]`` int64 positions in the whole
        set): field name -> {node type -> rows of that type, in ``rows``' order}, and
        ``item_ids`` -> {node type -> positions in that type's ItemSet}."""
        kinds = torch.bucketize(rows, self._offsets[1:], right=True)
        fields: Dict[str, Dict[str, torch.Tensor]] = {name: {} for name in (*self.names, "item_ids")}
        for i, (node_type, item_set) in enumerate(self._sets.items()):
            local = rows[kinds == i] - self._offsets[i]
            if local.numel() == 0:
                continue
            for name, value in item_set.batch(local).items():
                fields.setdefault(name, {})[node_type] = value
        return {name: by_type for name, by_type in fields.items() if name not in NEGATIVE_FIELDS}

    def __repr__(self) -> str:
        inner = ",\n".join(f"    {t!r}: {s!r}" for t, s in self._sets.items())
        return f"HeteroItemSet(\n{inner},\n)"


def _check_keys(seeds: Dict[str, torch.Tensor]) -> None:
    """Node ids are keyed by node type, node pairs by edge type ``"src:relation:dst"``,
    and one HeteroItemSet holds one kind."""
    links = [key for key, ids in seeds.items() if ids.dim() == 2]
    if links and len(links) != len(seeds):
        raise ValueError(
            f"HeteroItemSet: every ItemSet must hold node ids (keyed by node type) or every one node pairs (keyed by "
            f"edge type 'src:relation:dst'); got pairs for {links} and node ids for "
            f"{[key for key in seeds if key not in links]}"
        )
    for key in seeds:
        if key in links:
            parse_edge_type(key, "HeteroItemSet")
        elif ":" in key:
            raise ValueError(
                f"HeteroItemSet: {key!r} holds node ids, so it must be a node type; node pairs keyed by edge type "
                f"are [N, 2] seeds"
            )


ItemSetDict = HeteroItemSet
