"""Without PyYAML, OnDiskDataset says which package to install (graphpipe imports without it)."""

import sys

import pytest

import graphpipe as gp


def test_missing_pyyaml_is_named(tmp_path, monkeypatch):
    (tmp_path / "metadata.yaml").write_text("graph: {}\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'graphpipe-gnn\[ondisk\]' \(or pip install pyyaml\)"):
        gp.datasets.OnDiskDataset(tmp_path)


def test_the_datasets_name_the_real_distribution():
    """``graphpipe`` on the package index is an unrelated project: install hints name
    ``graphpipe-gnn``."""
    import pathlib

    package = pathlib.Path(gp.__file__).parent
    for folder in ("datasets", "_internal"):
        for path in (package / folder).glob("*.py"):
            text = path.read_text()
            assert "graphpipe[" not in text, path
