"""DistributedItemSampler: every rank's share of the same global batches."""

from __future__ import annotations

from itertools import accumulate
from typing import Dict, List, Optional, Union

import torch
import torch.distributed as dist

from graphpipe.batch.item_set import HeteroItemSet, ItemSet
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.pipes.base import Pipe, upstream
from graphpipe.pipes.item_sampler import ItemSampler
from graphpipe._internal.checks import as_int, check_bool, check_int
from graphpipe.distributed.cooperative import agree_on_seed
from graphpipe.distributed.partition import Partition
from graphpipe.distributed.partitioned import GraphPart

__all__ = ["DistributedItemSampler", "find_distributed_item_sampler"]


class DistributedItemSampler(ItemSampler):
    """Split every global batch of ``batch_size * world_size`` items over the ranks.

    All ranks draw the same permutation per epoch (``seed=None``: rank 0 draws the seed
    and broadcasts it). Global batch ``i`` is the batch an :class:`ItemSampler` of batch
    size ``G = batch_size * world_size`` and the same seed yields; rank ``r`` takes its
    ``r``-th run of ``batch_size`` items (a last, smaller global batch is dealt evenly:
    sizes differ by at most one) and stamps ``batch_index = epoch * num_global_batches +
    i``, the same on every rank, so samplers with the same seed draw the same variates.

    When the last global batch has fewer items than ranks, ranks without items stop one
    batch early, unless ``drop_uneven_inputs=True`` drops that batch on every rank (no
    rank then waits for a collective the others never call). Worker processes
    (``DataLoader(num_workers=W)``) deal each rank's batches further.

    It also carries the setup of the cooperative stages (``cooperative=True``): the vertex
    ``partition`` (:class:`~graphpipe.distributed.Partition`) and one process group per
    kind of collective (sampling, feature fetching, the model's
    :func:`~graphpipe.cooperative_exchange`): those stages run in different threads, and
    collectives on one group must be issued in the same order on every rank.

    :meth:`from_part` makes a sampler of a partitioned dataset's part that holds only the
    items the part owns: the same global batches, each rank taking the items of a batch
    that it owns (cooperative node batches are then those of the whole item set).

    Args:
        item_set, batch_size: as for :class:`~graphpipe.ItemSampler`; ``batch_size`` items
            per rank per batch.
        drop_uneven_inputs: give every rank the same number of batches (those of
            :meth:`from_part` always have: it drops nothing there).
        seed: seed of the permutations (the same on every rank).
        partition: a ``[num_nodes]`` integer tensor of owning ranks, a
            :class:`~graphpipe.distributed.Partition`, or None for the hash partition.
        rank, world_size: default to ``torch.distributed``'s; giving both only splits the
            items (no seed broadcast, no process groups, so no cooperative stages).
        **options: ``shuffle`` and ``drop_last`` (drop a last global batch smaller than
            ``batch_size * world_size``), as for :class:`~graphpipe.ItemSampler`.
    """

    def __init__(
        self,
        item_set: Union[ItemSet, HeteroItemSet, torch.Tensor, int],
        batch_size: int,
        *,
        drop_uneven_inputs: bool = False,
        seed: Optional[int] = None,
        partition: Optional[Union[torch.Tensor, Partition]] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        **options,
    ):
        if (rank is None) != (world_size is None):
            raise ValueError("DistributedItemSampler: give both `rank` and `world_size`, or neither")
        # Explicit rank and world_size: a split only, no collectives and no process groups.
        use_process_group = rank is None
        if use_process_group:
            if not (dist.is_available() and dist.is_initialized()):
                raise RuntimeError(
                    "DistributedItemSampler: torch.distributed is not initialised; call "
                    "torch.distributed.init_process_group(...) first (or pass rank= and world_size=)"
                )
            rank, world_size = dist.get_rank(), dist.get_world_size()
        world_size = check_int(world_size, "world_size", "DistributedItemSampler", minimum=1)
        number = as_int(rank)
        if number is None or not 0 <= number < world_size:
            raise ValueError(f"DistributedItemSampler: `rank` must be an int in [0, {world_size}), got {rank!r}")
        rank = number
        groups = (None, None, None)
        if use_process_group:
            # new_group is collective: every rank builds its samplers in the same order.
            # Their timeout is the default group's (new_group's own default is 30 minutes for
            # gloo), so a rank that stops answering is noticed as the user configured.
            backend, timeout = _backend_for_cpu_and_cuda(), _default_group_timeout()
            groups = [dist.new_group(backend=backend, timeout=timeout) for _ in range(3)]
        self.sampling_group, self.feature_group, self.exchange_group = groups
        self.world_size = world_size
        # One permutation on every rank: a given seed must agree, None takes rank 0's draw
        # (on the sampling group, which has a CPU backend also when the default is NCCL).
        seed = agree_on_seed(self, seed, "DistributedItemSampler") if use_process_group else seed
        super().__init__(item_set, batch_size, seed=seed, **options)
        self.drop_uneven_inputs = check_bool(drop_uneven_inputs, "drop_uneven_inputs", "DistributedItemSampler")
        self.rank = rank
        self.partition = partition if isinstance(partition, Partition) else Partition(world_size, partition)
        if self.partition.num_parts != world_size:
            raise ValueError(
                f"DistributedItemSampler: the partition has {self.partition.num_parts} parts for "
                f"world_size={world_size} ranks"
            )
        # from_part: the positions in the whole split of the items held ([n] int64, ascending);
        # split_size: the items of the whole split (the global batches are cut from them).
        self.split_size, self.owned_items, self._item_ids = len(self.item_set), None, None

    @classmethod
    def from_part(cls, part: GraphPart, split: str, batch_size: int, **options) -> DistributedItemSampler:
        """A sampler of split ``split`` of ``part`` (:func:`~graphpipe.distributed.load_partition`)
        holding only the part's items: all ranks permute the whole split's item positions
        (the same global batches as over the whole item set), and this rank's share of a
        global batch is the items of it that the part owns, in the batch's order (node
        items: its owner's seeds; node pairs: those of its destination), possibly none.
        ``item_ids`` are positions in the whole split. Every rank gets every global batch.
        Negatives (``sample_uniform_negative``) are keyed by a pair's place in its rank's
        batch, so they differ from (but are distributed as) those of the whole item set.

        Args:
            part: a :class:`~graphpipe.distributed.GraphPart`; its partition is used.
            split: a split of ``part.item_sets`` (``"train"``).
            batch_size, **options: as for the constructor (``batch_size`` items per rank on average).
        """
        if not isinstance(part, GraphPart):
            raise TypeError(
                f"DistributedItemSampler.from_part: `part` must be a GraphPart (graphpipe.distributed.load_partition), "
                f"got {type(part).__name__}"
            )
        if split not in part.item_sets:
            raise ValueError(f"DistributedItemSampler.from_part: `split` must be one of {sorted(part.item_sets)}, got {split!r}")
        if "partition" in options:
            raise ValueError("DistributedItemSampler.from_part: the part's partition is used; do not pass `partition`")
        counts = part.num_items[split]
        if (sum(counts.values()) if isinstance(counts, dict) else counts) == 0:
            raise ValueError(f"DistributedItemSampler.from_part: split {split!r} has no items on any part")
        empty = [part.rank] if len(part.item_sets[split]) == 0 else []
        if "rank" not in options and dist.is_available() and dist.is_initialized():
            empty = _ranks_without_items(not empty)  # every rank raises, not one while the others wait
        if empty:
            raise ValueError(
                f"DistributedItemSampler.from_part: part(s) {empty} own no items of split {split!r} (the split has "
                f"{counts} items in all); give every rank the whole split instead: DistributedItemSampler("
                f"load_item_sets(out_dir)[{split!r}], batch_size, partition=part.partition), or partition into fewer parts"
            )
        sampler = cls(part.item_sets[split], batch_size, partition=part.partition, **options)
        if (sampler.rank, sampler.world_size) != (part.rank, part.num_parts):
            raise ValueError(
                f"DistributedItemSampler.from_part: `part` is part {part.rank} of {part.num_parts}, but this is rank "
                f"{sampler.rank} of {sampler.world_size}: load part {sampler.rank} (load_partition(out_dir, dist.get_rank()))"
            )
        ids = part.item_ids[split]
        if isinstance(counts, dict):  # positions in a HeteroItemSet: its types' items one after the other
            offsets = [0, *accumulate(counts.values())]
            sampler.owned_items = torch.cat([offset + ids[t] for offset, t in zip(offsets, counts)])
            sampler.split_size = offsets[-1]
        else:
            sampler.owned_items, sampler.split_size = ids, counts
        sampler._item_ids = ids
        return sampler

    def __getstate__(self):
        # Process groups do not cross processes: copies in worker processes only split
        # batches (cooperative stages there raise a clear error).
        state = super().__getstate__()
        return {**state, "sampling_group": None, "feature_group": None, "exchange_group": None}

    def num_items(self) -> int:
        """Pipe protocol: the items of the whole split, which every rank's batches are cut from."""
        return self.split_size

    def state_options(self) -> Dict[str, object]:
        """Pipe protocol: ItemSampler's, and how the items are shared among the ranks."""
        shared = {"world_size": self.world_size, "rank": self.rank, "drop_uneven_inputs": self.drop_uneven_inputs}
        return {**super().state_options(), **shared, "from_part": self.owned_items is not None}

    @property
    def num_global_batches(self) -> int:
        """Global batches per epoch, counting a last batch that ``drop_uneven_inputs`` drops."""
        n, size = self.split_size, self.batch_size * self.world_size
        return n // size if self.drop_last else -(-n // size)

    def shares(self, rank: int) -> List[int]:
        """Items ``rank`` gets from each global batch of an epoch (0: it skips that batch)."""
        full, rest = divmod(self.split_size, self.batch_size * self.world_size)
        counts = [self.batch_size] * full
        # from_part: every rank gets every global batch, so no batch is uneven.
        uneven = self.drop_uneven_inputs and rest < self.world_size and self.owned_items is None
        if rest and not self.drop_last and not uneven:
            counts.append(rest // self.world_size + int(rank < rest % self.world_size))
        return counts

    @property
    def uneven(self) -> bool:
        """Whether some ranks get fewer batches than others (never with :meth:`from_part`)."""
        return self.owned_items is None and any(0 in self.shares(r) for r in range(self.world_size))

    def __len__(self) -> int:
        shares = self.shares(self.rank)
        return len(shares) if self.owned_items is not None else sum(1 for count in shares if count)

    def stream(self, epoch: int, start: int = 0):
        """This rank's batches ``start, start + 1, ...`` of epoch ``epoch``."""
        order = self.epoch_order(epoch)
        global_size = self.batch_size * self.world_size
        first_index = epoch * self.num_global_batches
        full, rest = divmod(self.split_size, global_size)
        if self.owned_items is not None:
            for i in range(start, len(self)):
                yield self._owned_batch(order[i * global_size : (i + 1) * global_size], first_index + i)
            return
        mine = [(i, count) for i, count in enumerate(self.shares(self.rank)) if count]
        for i, count in mine[start:]:
            # The last, smaller global batch (i == full): ranks below `rest % world_size` take one more.
            base, extra = (self.batch_size, 0) if i < full else divmod(rest, self.world_size)
            start = i * global_size + self.rank * base + min(self.rank, extra)
            rows = order[start : start + count]
            yield MiniBatch(**self.item_set.batch(rows), batch_index=first_index + i)

    def _owned_batch(self, rows: torch.Tensor, batch_index: int) -> MiniBatch:
        """The items this rank holds among the global batch ``rows`` (``[G]`` int64
        positions in the whole split), in ``rows``' order, with whole-split ``item_ids``."""
        owned = self.owned_items
        at = torch.searchsorted(owned, rows).clamp_(max=max(owned.numel() - 1, 0))
        fields = self.item_set.batch(at[owned[at] == rows])
        local = fields["item_ids"]
        ids = self._item_ids
        fields["item_ids"] = {t: ids[t][x] for t, x in local.items()} if isinstance(local, dict) else ids[local]
        return MiniBatch(**fields, batch_index=batch_index)


def _backend_for_cpu_and_cuda() -> Optional[str]:
    """The backend of the stage groups: ids sampled on the CPU travel through gloo even when
    the default group has no CPU backend (NCCL: CUDA tensors only); None keeps the default
    group's backend."""
    default = str(dist.get_backend())
    if default in ("gloo", "mpi", "ucc") or "cpu:" in default or not dist.is_gloo_available():
        return None
    return "cpu:gloo," + (default if ":" in default else f"cuda:{default}")


def _ranks_without_items(held: bool) -> List[int]:
    """The ranks whose part holds no items (each says whether its own does; collective)."""
    group = dist.new_group(backend=_backend_for_cpu_and_cuda(), timeout=_default_group_timeout())
    flags = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(flags, torch.tensor([int(held)]), group=group)
    dist.destroy_process_group(group)
    return [rank for rank, flag in enumerate(flags) if not int(flag)]


def _default_group_timeout():
    """The default process group's timeout (``init_process_group(timeout=...)``), or None."""
    for device in ("cpu", "cuda"):
        try:
            return dist.group.WORLD._get_backend(torch.device(device)).options._timeout
        except (RuntimeError, AttributeError):  # no backend for that device, or another torch
            continue
    return None


def find_distributed_item_sampler(stage: Pipe, where: str) -> DistributedItemSampler:
    """The DistributedItemSampler upstream of ``stage`` (following ``.source``)."""
    for pipe in upstream(getattr(stage, "source", None)):
        if isinstance(pipe, DistributedItemSampler):
            return pipe
    raise ValueError(
        f"{where}: cooperative=True needs a graphpipe.DistributedItemSampler upstream (it defines the "
        f"ranks, the vertex partition and the process groups); found none in the chain"
    )
