"""CopyTo: move every MiniBatch to a device."""

from __future__ import annotations

from graphpipe._internal.checks import check_bool
from graphpipe._internal.devices import device_or_cpu
from graphpipe.pipes.base import Pipe, functional_pipe

__all__ = ["CopyTo"]


@functional_pipe("copy_to")
class CopyTo(Pipe):
    """Yield ``item.to(device, non_blocking=non_blocking)`` for every item of ``source``.

    Items are MiniBatches or anything with a ``.to(device, non_blocking=...)`` method.
    ``non_blocking=True`` only overlaps copies with compute when the item's CPU tensors
    are pinned (see :meth:`MiniBatch.pin_memory`).

    Without CUDA, a CUDA ``device`` warns once and the stage copies to the CPU instead
    (``self.device`` is then ``cpu``), so the same script runs on a machine without a GPU.

    ``extra_attrs`` (GraphBolt 2.1's: names of further MiniBatch fields to copy, e.g.
    ``["seed_nodes"]``) is accepted and changes nothing: every tensor of a MiniBatch is
    copied, attributes a user's stage set on it included, and GraphBolt 2.1's names are
    derived from its fields.
    """

    def __init__(self, source: Pipe, device, extra_attrs=None, *, non_blocking: bool = False):
        super().__init__()
        self.source = source
        if extra_attrs is not None and (
            not isinstance(extra_attrs, (list, tuple)) or not all(isinstance(name, str) for name in extra_attrs)
        ):
            raise TypeError(
                f"copy_to: `extra_attrs` (GraphBolt 2.1's third argument) must be a list of MiniBatch field names, got "
                f"{extra_attrs!r}; pass `non_blocking=` by keyword"
            )
        # CUDA absent: the CPU, warned once; cuda -> cuda:k, the building thread's device
        self.device = device_or_cpu(device, f"copy_to('{device}'): CUDA is not available; batches stay on the CPU", "CopyTo")
        self.non_blocking = check_bool(non_blocking, "non_blocking", "copy_to")

    def copy(self, item):
        """``item`` on ``self.device``."""
        return item.to(self.device, non_blocking=self.non_blocking)

    def process(self, item):
        """The per-batch work of the stage protocol: :meth:`copy` (a subclass overriding it is honoured)."""
        return self.copy(item)

    def label(self) -> str:
        return f"CopyTo({self.device})"

    role = "copy"  # the Pipe protocol: moves batches to `device`
