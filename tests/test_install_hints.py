"""``graphpipe`` on the package index is an unrelated project (a 2018 model-serving client):
every install hint, in the package, its docs, examples and notebook, names the distribution
``graphpipe-gnn`` (``pip install 'graphpipe-gnn[pyg]'``), never ``graphpipe[...]``."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
WRONG = re.compile(r"(?<![\w-])graphpipe\[")


def test_no_install_hint_names_the_wrong_distribution():
    paths = [*ROOT.joinpath("graphpipe").rglob("*.py"), *ROOT.joinpath("examples").rglob("*.py")]
    paths += [*ROOT.joinpath("notebooks").glob("*.ipynb"), ROOT / "README.md", *ROOT.joinpath("benchmarks").glob("*.md")]
    assert len(paths) > 50
    offenders = [str(p.relative_to(ROOT)) for p in paths if WRONG.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_pattern_catches_the_wrong_form_only():
    assert WRONG.search("pip install 'graphpipe[pyg]'") and WRONG.search("graphpipe[ondisk]")
    assert not WRONG.search("pip install 'graphpipe-gnn[pyg]'")
