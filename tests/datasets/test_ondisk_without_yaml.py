"""Without PyYAML, OnDiskDataset says which package to install (graphpipe imports without it)."""

import sys

import pytest

import graphpipe as gp


def test_missing_pyyaml_is_named(tmp_path, monkeypatch):
    (tmp_path / "metadata.yaml").write_text("graph: {}\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'graphpipe-gnn\[ondisk\]' \(or pip install pyyaml\)"):
        gp.datasets.OnDiskDataset(tmp_path)
