"""Where CUDA work waits for the host: torch's sync debug mode, each wait's Python line."""

from __future__ import annotations

import os
import warnings
from typing import Callable, List

import torch


def host_syncs(fn: Callable[[], object]) -> List[str]:
    """Run ``fn()`` and return ``"file:line"`` of each synchronizing CUDA call it made
    (``torch.cuda.set_sync_debug_mode("warn")``; its notice that the mode is a prototype is
    not a sync)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [
        f"{os.path.basename(w.filename)}:{w.lineno}"
        for w in caught
        if "called a synchronizing CUDA operation" in str(w.message)
    ]
