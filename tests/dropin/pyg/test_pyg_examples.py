"""PyG's own example scripts, vendored with only their loader and dataset lines replaced
(each marked ``# graphpipe: changed``), run on tiny offline datasets of the same shape
(:mod:`offline_pyg_data`) and must beat a feature-only baseline.

The scripts run as PyG ships them (module-level code, no ``__main__`` guard, their own
epoch counts); ``ogbn_train.py`` runs its default model (SGFormer, on disjoint subtrees)
with its own arguments for fewer epochs, workers, seeds, neighbours and channels and a larger learning rate; ``bipartite_sage_unsup.py`` (typed link
prediction) runs as shipped, its 16 workers a loader included.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

import offline_pyg_data as offline  # noqa: E402
from upstream_diff import marked_changes  # noqa: E402

HERE = Path(__file__).parent
MARK = "# graphpipe: changed"
# Per script: the changed lines (loader lines, the graphpipe import, the dataset import).
CHANGED_LINES = {
    "to_hetero_mag.py": 5,
    "hierarchical_sage.py": 5,
    "graph_sage_unsup.py": 4,
    "ogbn_train.py": 4,
    "bipartite_sage_unsup.py": 8,
}
HEADER_LINES = 3  # licence, upstream path and commit, what changed


@pytest.mark.parametrize("script", sorted(CHANGED_LINES))
def test_only_the_marked_lines_differ_from_upstream(script):
    """Against the upstream copy (``upstream/``): every line the vendored script adds is
    marked, and no upstream line is dropped but those the marked lines replace."""
    vendored = (HERE / script).read_text().splitlines()[HEADER_LINES:]
    upstream = (HERE / "upstream" / script).read_text().splitlines()
    # found in review: a dropped upstream line (init_params()) passed the check of added lines
    assert marked_changes(vendored, upstream, MARK) == sum(line.endswith(MARK) for line in vendored) == CHANGED_LINES[script]


def run(script, tmp_path, *args):
    """Run ``script`` from ``tmp_path/examples/hetero`` (its data paths are relative)."""
    where = tmp_path / "examples" / "hetero"
    where.mkdir(parents=True)
    (where / script).write_text((HERE / script).read_text())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parents[2]), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, script, *args], cwd=where, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def last(pattern, text) -> float:
    return float(re.findall(pattern, text)[-1])


def mag_baseline() -> float:
    paper = offline.OGB_MAG()[0]["paper"]
    return offline.feature_only_accuracy(paper.x, paper.y, paper.train_mask, paper.val_mask)


@pytest.mark.parametrize("script", ["to_hetero_mag.py", "hierarchical_sage.py"])
def test_hetero_node_classification_beats_paper_features_alone(script, tmp_path):
    out = run(script, tmp_path)
    assert last(r"Val: ([0-9.]+)", out) > mag_baseline() + 0.15, out


def test_graph_sage_unsup_beats_features_alone(tmp_path):
    pytest.importorskip("sklearn")  # the script's own classifier
    out = run("graph_sage_unsup.py", tmp_path)
    data = offline.Planetoid()[0]
    baseline = offline.feature_only_accuracy(data.x, data.y, data.train_mask, data.test_mask)
    assert last(r"Test: ([0-9.]+)", out) > baseline + 0.15, out


def test_ogbn_train_default_model_needs_disjoint_and_beats_features_alone(tmp_path):
    """The default model (SGFormer) reads ``batch.batch``: disjoint subtrees."""
    # Its own arguments keep it short: disjoint subtrees of 1024 seeds and fanouts 10^3 would
    # hold about a million nodes a batch, here as in PyG.
    out = run("ogbn_train.py", tmp_path, *"--epochs 3 --lr 0.01 --num_workers 2 --batch_size 128 --fan_out 4 --hidden_channels 64".split())
    dataset = offline.PygNodePropPredDataset()
    data, split = dataset[0], dataset.get_idx_split()
    baseline = offline.feature_only_accuracy(data.x, data.y.view(-1), split["train"], split["test"])
    assert last(r"Test Accuracy: ([0-9.]+)%", out) / 100 > baseline + 0.15, out


def test_bipartite_sage_unsup_beats_item_popularity(tmp_path):
    """Typed link prediction: ``HeteroItemSet`` of user-to-item pairs, PyG's binary
    negatives for training, the split's own labelled pairs for validation and test."""
    pytest.importorskip("sklearn")  # the script's own metric
    T = pytest.importorskip("torch_geometric.transforms")
    out = run("bipartite_sage_unsup.py", tmp_path)
    data = offline.Taobao()[0]
    train, _, test = T.RandomLinkSplit(
        num_val=0.1, num_test=0.1, neg_sampling_ratio=1.0, add_negative_train_samples=False, edge_types=[("user", "to", "item")]
    )(data)
    pairs = test["user", "item"]
    baseline = offline.popularity_auc(train["user", "item"].edge_index, data["item"].num_nodes, pairs.edge_label_index, pairs.edge_label)
    assert last(r"Test: ([0-9.]+)", out) > max(baseline, 0.5) + 0.2, out
