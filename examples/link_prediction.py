"""Link prediction with GraphSAGE and a dot or MLP predictor, fed by graphpipe.

The built-in synthetic power-law graph (``graphpipe.datasets.synthetic_node_classification``,
with 90% of its edges inside planted communities) is split by edge: 5% of its undirected
edges are held out for validation and 5% for test, and the model sees only the rest. Training batches are node pairs with one uniform negative
each (``sample_uniform_negative``), sampled with ``exclude_seed_edges`` so that no layer
holds the edge to predict (or its reverse). Evaluation follows ogbl-citation2: each held-out
edge ``(u, v)`` is ranked against a fixed set of negative destinations ``(u, v')``, and the
mean reciprocal rank (MRR) and Hits@K are reported. The same predictor on an MLP encoder
(node features only) is the baseline. Links mostly join nodes of one community, which a
node's noisy features reveal poorly and its neighbourhood well, so the GNN wins clearly
(test MRR about 0.58 against 0.32 with the defaults, as the README says).

    python examples/link_prediction.py                   # 20 s on 2 CPU cores (35 s on a first run)
    python examples/link_prediction.py --small           # seconds (used by the tests)
    python examples/link_prediction.py --predictor dot --device cuda --num-nodes 500000
"""

import argparse
import os
import time

# See node_classification.py: idle OpenMP threads must not spin on machines with few cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import torch
import torch.nn as nn
import torch.nn.functional as F
import tqdm

import graphpipe as gp
from node_classification import MLP, GraphSAGE  # the node-classification encoders


class MLPEncoder(MLP):
    """The baseline: node_classification's MLP on each seed node's features, the graph unused."""

    def forward(self, minibatch: gp.MiniBatch) -> torch.Tensor:
        num_seed_nodes = minibatch.sampled_subgraphs[-1].num_dst_nodes  # the first input nodes
        return self.net(minibatch.node_features["feat"][:num_seed_nodes])


class Predictor(nn.Module):
    """Score of a pair from its two embeddings: their dot product, or an MLP on their
    element-wise product (GraphBolt's link-prediction example)."""

    def __init__(self, dim: int, kind: str):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 1)) if kind == "mlp" else None

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        if self.mlp is None:
            return (h_src * h_dst).sum(-1)
        return self.mlp(h_src * h_dst).squeeze(-1)


def split_edges(graph: gp.CSCGraph, fraction: float, seed: int):
    """Hold out ``fraction`` of the undirected edges for validation and as many for test.

    Returns the training graph (both directions of the remaining edges, each node's
    sources sorted so that exclusion looks edges up by binary search), the training pairs
    ``[E, 2]`` (one direction per edge) and the validation and test pairs."""
    src, dst = graph.edge_index()
    one_way = src < dst
    pairs = torch.stack([src[one_way], dst[one_way]], dim=1)
    pairs = pairs[torch.randperm(pairs.size(0), generator=torch.Generator().manual_seed(seed))]
    held_out = int(fraction * pairs.size(0))
    validation, test, train = pairs[:held_out], pairs[held_out : 2 * held_out], pairs[2 * held_out :]
    both = torch.cat([train, train.flip(1)])
    both = both[torch.argsort(both[:, 1] * graph.total_num_nodes + both[:, 0])]
    return gp.CSCGraph.from_coo(both[:, 0], both[:, 1], graph.total_num_nodes), train, validation, test


def train_epoch(encoder, predictor, optimizer, loader, desc):
    encoder.train()
    predictor.train()
    progress = tqdm.tqdm(loader, desc=desc, leave=False, disable=None)
    for minibatch in progress:
        h = encoder(minibatch)  # one row per distinct endpoint of the batch's pairs
        pairs = minibatch.compacted_seeds  # positives, then their negatives, in those rows
        logits = predictor(h[pairs[:, 0]], h[pairs[:, 1]])
        loss = F.binary_cross_entropy_with_logits(logits, minibatch.labels.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        progress.set_postfix(loss=f"{loss.item():.3f}")


@torch.no_grad()
def embed_all_nodes(encoder, ds, graph, args, fanouts) -> torch.Tensor:
    """``[num_nodes, dim]``: every node's embedding, sampled from the training graph."""
    encoder.eval()
    pipe = gp.ItemSampler(gp.ItemSet(graph.total_num_nodes), args.batch_size * 4, shuffle=False)
    pipe = pipe.sample_neighbor(graph, fanouts, seed=0).fetch_feature(ds.features, ["feat"]).copy_to(args.device)
    return torch.cat([encoder(minibatch).cpu() for minibatch in gp.DataLoader(pipe)])


@torch.no_grad()
def ranking_metrics(predictor, h, queries, negatives, ks=(1, 10, 50)):
    """MRR and Hits@K of each positive ``(u, v)`` ranked against its ``negatives[i]``
    (ties count half, as OGB's evaluator does)."""
    predictor.eval()
    pos = predictor(h[queries[:, 0]], h[queries[:, 1]]).unsqueeze(1)
    neg = predictor(h[queries[:, 0]].unsqueeze(1), h[negatives])
    rank = 1 + (neg > pos).sum(1) + 0.5 * (neg == pos).sum(1)
    metrics = {"MRR": float((1.0 / rank).mean())}
    metrics.update({f"Hits@{k}": float((rank <= k).float().mean()) for k in ks})
    return metrics


def fit(name, encoder, ds, graph, train_pairs, evaluation, args, fanouts):
    """Train ``encoder`` and a predictor; print validation metrics per epoch and return the
    test metrics."""
    predictor = Predictor(args.hidden, args.predictor)
    encoder, predictor = encoder.to(args.device), predictor.to(args.device)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(predictor.parameters()), lr=args.lr)
    pipe = (
        gp.ItemSampler(gp.ItemSet(train_pairs, names="seeds"), args.batch_size, shuffle=True, seed=0)
        .sample_uniform_negative(graph, 1, seed=0)
        .sample_neighbor(graph, fanouts, exclude_seed_edges=True, include_reverse_edges=True, seed=0)
        .fetch_feature(ds.features, ["feat"])
        .copy_to(args.device)
    )
    loader = gp.DataLoader(pipe)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        train_epoch(encoder, predictor, optimizer, loader, f"{name} epoch {epoch}")
        h = embed_all_nodes(encoder, ds, graph, args, fanouts).to(args.device)
        metrics = ranking_metrics(predictor, h, *evaluation["validation"])
        print(f"{name} epoch {epoch}: validation MRR {metrics['MRR']:.4f} ({time.perf_counter() - start:.1f} s)")
    return ranking_metrics(predictor, h, *evaluation["test"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-nodes", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=512, help="positive pairs per batch")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--predictor", choices=["mlp", "dot"], default="mlp")
    parser.add_argument("--num-negatives", type=int, default=100, help="fixed negatives per evaluated edge")
    parser.add_argument("--max-queries", type=int, default=2000, help="held-out edges evaluated per split")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a tiny graph and run, for tests")
    args = parser.parse_args()
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")
    if args.small:
        args.num_nodes, args.epochs, args.batch_size, args.max_queries = 3000, 2, 256, 500
    fanouts = [10, 10]  # a 2-layer encoder; fanouts[-1] is the seeds' fanout

    start = time.perf_counter()
    ds = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, rewire_fraction=0.9, seed=0)
    graph, train_pairs, validation, test = split_edges(ds.graph, 0.05, seed=0)
    print(f"{ds}\n{train_pairs.size(0)} training, {validation.size(0)} validation, {test.size(0)} test edges "
          f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    # ogbl-citation2's protocol: fixed negative destinations per held-out edge, none of
    # them an edge of the whole graph.
    evaluation = {}
    for split, (name, pairs) in enumerate((("validation", validation), ("test", test))):
        queries = pairs[: args.max_queries]
        negatives = gp.ops.sample_uniform_negatives(
            queries, ds.graph.total_num_nodes, args.num_negatives, key=gp.ops.derive_key(0, split),
            indptr=ds.graph.indptr, indices=ds.graph.indices, exclude_edges=True,
        )  # fmt: skip
        evaluation[name] = (queries.to(args.device), negatives.to(args.device))

    feature_dim = ds.features["feat"].row_shape[0]
    results = {}
    encoders = {
        "MLP": lambda: MLPEncoder(feature_dim, args.hidden, args.hidden, dropout=0.1),
        "GraphSAGE": lambda: GraphSAGE(feature_dim, args.hidden, args.hidden, num_layers=len(fanouts), dropout=0.1),
    }
    for name, make_encoder in encoders.items():
        torch.manual_seed(0)  # each model's initialisation and dropout, independent of the other run
        results[name] = fit(name, make_encoder(), ds, graph, train_pairs, evaluation, args, fanouts)
    for name, metrics in results.items():
        print(f"{name} test MRR: {metrics['MRR']:.4f}")
        print(f"{name} test " + ", ".join(f"{k}: {v:.4f}" for k, v in metrics.items() if k != "MRR"))


if __name__ == "__main__":
    main()
