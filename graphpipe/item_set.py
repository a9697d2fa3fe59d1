"""ItemSet: the training items (seed nodes, optionally with labels) a sampler iterates."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch

__all__ = ["ItemSet"]


class ItemSet:
    """A fixed-length set of items, each a tuple of aligned tensor rows.

    ``items`` may be:
      * an ``int`` n: the node ids ``0..n-1`` (``torch.arange``);
      * a tensor: one field (e.g. seed node ids);
      * a tuple of tensors with equal first dimension, e.g. ``(seeds, labels)``.

    ``names`` names the fields, one per tensor (e.g. ``("seeds", "labels")``); the
    :class:`~graphpipe.ItemSampler` copies fields called ``seeds`` and ``labels`` into the
    MiniBatch fields of the same name. With one field and no names, the field is ``seeds``.
    """

    def __init__(
        self,
        items: Union[int, torch.Tensor, Tuple[torch.Tensor, ...]],
        names: Optional[Union[str, Sequence[str]]] = None,
    ):
        if isinstance(items, bool):
            raise TypeError("ItemSet: `items` must be an int, a tensor or a tuple of tensors, got bool")
        if isinstance(items, int):
            if items < 1:
                raise ValueError(f"ItemSet: `items` as an int must be >= 1, got {items} (empty item set)")
            items = (torch.arange(items),)
        elif isinstance(items, torch.Tensor):
            items = (items,)
        elif isinstance(items, (tuple, list)):
            items = tuple(torch.as_tensor(t) for t in items)
        else:
            raise TypeError(
                f"ItemSet: `items` must be an int, a tensor or a tuple of tensors, got "
                f"{type(items).__name__}"
            )
        if len(items) == 0:
            raise ValueError("ItemSet: `items` is an empty tuple; give at least one tensor")
        length = items[0].size(0) if items[0].dim() > 0 else None
        for i, t in enumerate(items):
            if t.dim() == 0:
                raise ValueError(f"ItemSet: field {i} is a 0-d tensor; items need a first dimension")
            if t.size(0) != length:
                raise ValueError(
                    f"ItemSet: all fields must have the same length, but field 0 has {length} "
                    f"rows and field {i} has {t.size(0)}"
                )
        if length == 0:
            raise ValueError("ItemSet: the item set is empty (0 items); give at least one item")
        if names is None:
            names = ("seeds",) if len(items) == 1 else None
        elif isinstance(names, str):
            names = (names,)
        if names is not None:
            names = tuple(names)
            if len(names) != len(items):
                raise ValueError(
                    f"ItemSet: `names` has {len(names)} entries for {len(items)} fields; give one "
                    f"name per tensor, e.g. names=('seeds', 'labels')"
                )
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

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{n}: {tuple(t.shape)} {t.dtype}"
            for n, t in zip(self.names or range(len(self._items)), self._items)
        )
        return f"ItemSet(len={len(self)}, {fields})"
