"""A Lightning DDP job on CPU, as its docs write one. `python
lightning_job.py clean|planted`: planted changes a weight on rank 0 only
after the second batch (the replicas drift apart)."""
import sys

import lightning as L
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self, planted):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        self.planted = planted

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.planted and batch_idx == 1 and self.global_rank == 0:
            with torch.no_grad():
                self.net[0].weight[0, 0] += 0.5

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp",
                        max_epochs=1, limit_train_batches=4,
                        enable_checkpointing=False, logger=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Regressor(sys.argv[1] == "planted"),
                DataLoader(data, batch_size=8))


if __name__ == "__main__":
    main()
