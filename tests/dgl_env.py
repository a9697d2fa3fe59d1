"""The separate DGL environment some tests drive in a subprocess (DGL 2.1 needs torch <= 2.2
and numpy < 2; how to build it: ``tests/interop/test_dgl.py``).

Its Python is ``$GRAPHPIPE_DGL_PYTHON``, else ``venv-dgl/bin/python`` in the repository or
beside it; tests skip when none imports the modules they need.
"""

import functools
import os
import subprocess

import pytest

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATES = [
    os.environ.get("GRAPHPIPE_DGL_PYTHON"),
    os.path.join(REPOSITORY, "venv-dgl", "bin", "python"),
    os.path.join(os.path.dirname(REPOSITORY), "venv-dgl", "bin", "python"),
]


@functools.lru_cache(maxsize=None)
def dgl_python(*modules: str) -> str:
    """The DGL environment's Python when it imports ``dgl.graphbolt`` and ``modules``;
    otherwise the calling test is skipped."""
    for python in filter(None, CANDIDATES):
        if os.access(python, os.X_OK):
            imports = ", ".join(("dgl.graphbolt", *modules))
            found = subprocess.run([python, "-c", f"import {imports}"], capture_output=True, timeout=120)
            if found.returncode == 0:
                return python
    pytest.skip(f"no DGL environment importing dgl.graphbolt and {list(modules)} (set GRAPHPIPE_DGL_PYTHON)")
