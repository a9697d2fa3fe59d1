"""ItemSampler: the source stage, cutting an ItemSet into MiniBatches."""

from __future__ import annotations

import threading
import warnings
from typing import Dict, Iterator, Optional, Union

import torch

from graphpipe.batch.item_set import NEGATIVE_FIELDS, HeteroItemSet, ItemSet
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.ops.random import derive_key
from graphpipe._internal.checks import NOT_TIME_DTYPES, check_bool, check_int
from graphpipe.pipes.base import Pipe
from graphpipe.pipes.capabilities import check_supported

__all__ = ["ItemSampler"]

_MINIBATCH_FIELDS = ("seeds", "labels", "indexes", "timestamp", "input_id")


class ItemSampler(Pipe):
    """Yield MiniBatches of ``batch_size`` items, reshuffled every epoch.

    With ``shuffle=True`` epoch ``e`` uses the permutation drawn from ``(seed, e)``: a run
    is reproducible under ``seed`` and every epoch sees a new order. A
    :class:`~graphpipe.DataLoader` counts its own epochs (and resumes one mid-way); a
    plain ``for minibatch in pipe`` runs epoch ``self.epoch`` and advances that counter,
    which no loader reads. Batch ``i`` of epoch ``e`` gets ``batch_index = e * len(self) +
    i`` (later stages key their random numbers by it) and ``item_ids``, the positions of
    its items in the item set.

    Args:
        item_set: an :class:`ItemSet` (or a tensor of seed ids) with a ``seeds`` field:
            ``[N]`` node ids, ``[N, 2]`` node pairs (link prediction; with ``labels`` and
            ``indexes`` when they carry their own negatives, as GraphBolt's evaluation
            sets) or ``[N, k]`` hyperlinks (GraphBolt's: sampled from all ``k`` nodes;
            negative sampling and seed-edge exclusion take pairs only); or a
            :class:`~graphpipe.HeteroItemSet` of such sets per node type (node ids) or per
            edge type ``"src:relation:dst"`` (pairs), whose batches hold dicts type -> rows.
        batch_size: items per batch, ``>= 1``.
        shuffle: permute the items each epoch.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        seed: seed of the permutations (None: drawn once from torch's global generator, so
            ``torch.manual_seed`` makes runs reproducible too).

    Integer arguments may be Python ints, numpy integers or one-element integer tensors.
    """

    def __init__(
        self,
        item_set: Union[ItemSet, HeteroItemSet, torch.Tensor, int],
        batch_size: int,
        *positional,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: Optional[int] = None,
    ):
        super().__init__()
        if positional:  # GraphBolt's come in another order: (minibatcher, drop_last, shuffle, ...)
            raise TypeError(
                f"{type(self).__name__}: pass the options after `batch_size` by keyword (shuffle=..., drop_last=..., "
                f"seed=...), got {len(positional)} more positional argument(s); GraphBolt's third positional argument "
                f"is `minibatcher`, which graphpipe has not: its batches are MiniBatches built from the item names"
            )
        if item_set is None:
            raise TypeError(
                "ItemSampler: `item_set` is None; give an ItemSet of the seeds, e.g. gp.ItemSet(seed_ids, "
                "names='seeds') (a dataset's split is None when the data has no such split: from_pyg gives "
                "train_set=None for a Data without train_mask)"
            )
        if not isinstance(item_set, (ItemSet, HeteroItemSet)):
            try:
                item_set = ItemSet(item_set, names="seeds")
            except (TypeError, ValueError) as error:
                raise type(error)(f"ItemSampler: `item_set`: {error}") from error
        if item_set.names is None or "seeds" not in item_set.names:
            raise ValueError(
                f"ItemSampler: `item_set` needs a field named 'seeds', got names={item_set.names}; "
                f"build it as ItemSet((seeds, labels), names=('seeds', 'labels'))"
            )
        unknown = [n for n in item_set.names if n not in _MINIBATCH_FIELDS + NEGATIVE_FIELDS]
        if unknown:
            raise ValueError(
                f"ItemSampler: `item_set` field(s) {unknown} are not supported; known fields: "
                f"{list(_MINIBATCH_FIELDS)}"
            )
        typed = item_set.item_sets if isinstance(item_set, HeteroItemSet) else {None: item_set}
        for node_type, one_set in typed.items():
            _check_items(node_type, one_set)
        if len(item_set) == 0:
            raise ValueError(f"ItemSampler: `item_set` has no items ({item_set!r}); give at least one")
        self.item_set = item_set
        self.batch_size = check_int(batch_size, "batch_size", "ItemSampler", minimum=1)
        self.shuffle = check_bool(shuffle, "shuffle", "ItemSampler")
        self.drop_last = check_bool(drop_last, "drop_last", "ItemSampler")
        self.seed = int(torch.randint(0, 2**62, ())) if seed is None else check_int(seed, "seed", "ItemSampler")
        self.epoch = 0  # the epoch of the next plain iteration (loaders keep their own)
        self._epoch_lock = threading.Lock()

    def __len__(self) -> int:
        n = len(self.item_set)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """``[num_items()]`` int64 order in which epoch ``epoch`` visits the items (a
        DistributedItemSampler's: over the whole split, also when this rank holds only its own)."""
        if not self.shuffle:
            return torch.arange(self.num_items())
        generator = torch.Generator().manual_seed(derive_key(self.seed, epoch) >> 1)
        return torch.randperm(self.num_items(), generator=generator)

    def __getstate__(self):
        return {key: value for key, value in self.__dict__.items() if key != "_epoch_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._epoch_lock = threading.Lock()

    def next_epoch(self) -> int:
        """The epoch a plain iteration runs; advances :attr:`epoch`."""
        with self._epoch_lock:
            epoch = self.epoch
            self.epoch += 1
        return epoch

    def stream(self, epoch: int, start: int = 0) -> Iterator[MiniBatch]:
        """Batches ``start, start + 1, ...`` of epoch ``epoch``; batch ``i`` has
        ``batch_index = epoch * len(self) + i``."""
        order = self.epoch_order(epoch)
        first_index = epoch * len(self)
        for i in range(start, len(self)):
            rows = order[i * self.batch_size : (i + 1) * self.batch_size]
            yield MiniBatch(**self.item_set.batch(rows), batch_index=first_index + i)

    @property
    def num_global_batches(self) -> int:
        """Batch indices per epoch: batch ``i`` of epoch ``e`` has ``batch_index = e *
        num_global_batches + i`` (here ``len(self)``)."""
        return len(self)

    def batches_in(self, first: int, stop: int) -> Iterator[MiniBatch]:
        """The batches with ``first <= batch_index < stop`` (of any epochs), in order."""
        per_epoch = max(self.num_global_batches, 1)
        for epoch in range(first // per_epoch, (stop - 1) // per_epoch + 1):
            for minibatch in self.stream(epoch, max(first - epoch * per_epoch, 0)):
                if minibatch.batch_index >= stop:
                    return
                yield minibatch

    role = "source"  # the Pipe protocol's declarations

    def num_items(self) -> int:
        """Pipe protocol: the items it batches per epoch."""
        return len(self.item_set)

    def state_options(self) -> Dict[str, object]:
        """Pipe protocol: the options deciding which items each batch holds."""
        return {"batch_size": self.batch_size, "shuffle": bool(self.shuffle), "drop_last": bool(self.drop_last)}


def _check_items(node_type: Optional[str], one_set: ItemSet) -> None:
    """The fields of one ItemSet (of node or edge type ``node_type``, None: untyped) as the
    sampler reads them: integer seeds of a known shape, int64-able times and input ids."""
    field = "the `seeds` field" if node_type is None else f"the `seeds` field of '{node_type}'"
    seeds = one_set.field("seeds")
    if len(one_set) and (seeds.is_floating_point() or seeds.is_complex() or seeds.dtype == torch.bool):
        mask = " (a boolean mask's ids: mask.nonzero().view(-1))" if seeds.dtype == torch.bool else ""
        raise TypeError(f"ItemSampler: {field} must hold integer node ids, got dtype {seeds.dtype}{mask}")
    if seeds.dim() == 2 and seeds.size(0) == 2 and seeds.size(1) > 16:  # hyperlinks have a few nodes
        warnings.warn(
            f"ItemSampler: {field} is 2 hyperlinks of {seeds.size(1)} nodes each; node pairs are [N, 2] (PyG's "
            f"[2, N] edge_label_index is edge_label_index.t())",
            stacklevel=3,
        )
    if not (seeds.dim() == 1 or (seeds.dim() == 2 and seeds.size(1) >= 2)):
        raise ValueError(
            f"ItemSampler: {field} must be node ids of shape [N], node pairs of shape [N, 2] (link "
            f"prediction) or hyperlinks of shape [N, k] (k >= 2 nodes each), got shape {tuple(seeds.shape)}"
        )
    times = one_set.field("timestamp")
    if times is not None and len(one_set) and (times.dim() != 1 or times.is_floating_point() or times.dtype in NOT_TIME_DTYPES):
        raise TypeError(
            f"ItemSampler: the `timestamp` field{'' if node_type is None else f' of {node_type!r}'} must be [N] "
            f"integer times (int64), one per seed, got a {tuple(times.shape)} {times.dtype} tensor"
        )
    ids = one_set.field("input_id")
    if ids is not None and (seeds.dim() != 1 or ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool):
        raise TypeError(
            f"ItemSampler: the `input_id` field{'' if node_type is None else f' of {node_type!r}'} must be [N] "
            f"integer ids beside node seeds ([N] ids), got a {tuple(ids.shape)} {ids.dtype} tensor beside "
            f"seeds of shape {tuple(seeds.shape)}"
        )
    if "indexes" in one_set.names and seeds.dim() != 2:
        raise ValueError(f"ItemSampler: an `indexes` field groups node pairs; {field} must be [N, 2] pairs")
    if node_type is not None and seeds.dim() == 2 and seeds.size(1) > 2:
        check_supported("ItemSampler", graph="typed", task="hyperlink")
