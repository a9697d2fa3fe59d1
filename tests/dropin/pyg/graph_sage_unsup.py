# Copyright (c) 2023 PyG Team <team@pyg.org>, MIT License (https://github.com/pyg-team/pytorch_geometric/blob/master/LICENSE).
# Vendored from pyg-team/pytorch_geometric@5c6461b2305a: examples/graph_sage_unsup.py
# The lines marked `# graphpipe: changed` replace its loader and dataset lines; the rest is upstream's.
import os.path as osp
import time

import graphpipe as gp  # graphpipe: changed
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression

import torch_geometric
import torch_geometric.transforms as T
from offline_pyg_data import Planetoid  # graphpipe: changed
from torch_geometric.loader import LinkNeighborLoader
from torch_geometric.nn import GraphSAGE

dataset = 'Cora'
path = osp.join(osp.dirname(osp.realpath(__file__)), '..', 'data', dataset)
dataset = Planetoid(path, dataset, transform=T.NormalizeFeatures())
data = dataset[0]

ds = gp.datasets.from_pyg(data)  # graphpipe: changed
train_loader = gp.DataLoader(gp.ItemSampler(gp.ItemSet(data.edge_index.t(), names='seeds'), 256, shuffle=True).sample_uniform_negative(ds.graph, 1.0, neg_sampling='binary').sample_neighbor(ds.graph, [10, 10], layout='pyg').fetch_feature(ds.features, ['feat']).transform(gp.MiniBatch.to_pyg))  # graphpipe: changed
if torch.cuda.is_available():
    device = torch.device('cuda')
elif torch_geometric.is_xpu_available():
    device = torch.device('xpu')
else:
    device = torch.device('cpu')
data = data.to(device, 'x', 'edge_index')

model = GraphSAGE(
    data.num_node_features,
    hidden_channels=64,
    num_layers=2,
).to(device)

optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train():
    model.train()

    total_loss = 0
    for batch in train_loader:
        batch = batch.to(device)
        optimizer.zero_grad()
        h = model(batch.x, batch.edge_index)
        h_src = h[batch.edge_label_index[0]]
        h_dst = h[batch.edge_label_index[1]]
        pred = (h_src * h_dst).sum(dim=-1)
        loss = F.binary_cross_entropy_with_logits(pred, batch.edge_label)
        loss.backward()
        optimizer.step()
        total_loss += float(loss) * pred.size(0)

    return total_loss / data.num_nodes


@torch.no_grad()
def test():
    model.eval()
    out = model(data.x, data.edge_index).cpu()

    clf = LogisticRegression()
    clf.fit(out[data.train_mask], data.y[data.train_mask])

    val_acc = clf.score(out[data.val_mask], data.y[data.val_mask])
    test_acc = clf.score(out[data.test_mask], data.y[data.test_mask])

    return val_acc, test_acc


times = []
for epoch in range(1, 51):
    start = time.time()
    loss = train()
    val_acc, test_acc = test()
    print(f'Epoch: {epoch:03d}, Loss: {loss:.4f}, '
          f'Val: {val_acc:.4f}, Test: {test_acc:.4f}')
    times.append(time.time() - start)
print(f"Median time per epoch: {torch.tensor(times).median():.4f}s")
