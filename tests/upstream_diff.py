"""The check behind the drop-in claim: a vendored upstream script differs from its
upstream copy only in lines marked as changed."""

import difflib
from typing import List


def marked_changes(vendored: List[str], upstream: List[str], mark: str) -> int:
    """How many lines ``vendored`` changes, after checking that each ends with ``mark``,
    that every other line is upstream's in upstream's order, and that no upstream line is
    dropped but those the marked lines replace (a loader call of several lines may become one)."""
    changed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=upstream, b=vendored, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        old, new = upstream[i1:i2], vendored[j1:j2]
        assert new, f"upstream lines dropped: {old}"
        assert all(line.endswith(mark) for line in new), f"an unmarked change: {old} -> {new}"
        changed += len(new)
    return changed
