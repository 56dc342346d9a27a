"""A small CNN fed by a DataLoader whose per-sample transform runs in Python and NumPy (random crop,
flip, per-channel normalisation and a colour jitter on 3x96x96 images): with ``num_workers=0`` the
training loop waits for each batch while the GPU idles. A plain PyTorch script with no perfkit code:

    perfkit profile scripts/gpu/dataloader_train.py -- 0 20 cuda      # workers off
    perfkit profile scripts/gpu/dataloader_train.py -- 4 20 cuda      # four workers, pinned batches
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]


class Images(Dataset):
    def __init__(self, n: int = 4096):
        self.images = np.random.default_rng(0).integers(0, 256, size=(n, 3, 96, 96), dtype=np.uint8)
        self.labels = np.arange(n) % 10

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        top, left = rng.integers(0, 17, size=2)
        img = self.images[i, :, top:top + 80, left:left + 80].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        for c in range(3):  # colour jitter, one channel at a time, as torchvision-free code often does
            img[c] = np.clip(img[c] * rng.uniform(0.8, 1.2) + rng.uniform(-0.1, 0.1), 0.0, 1.0)
        img = np.ascontiguousarray((img - MEAN) / STD)
        return torch.from_numpy(img), int(self.labels[i])


def main():
    workers, steps, device = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(Images(), batch_size=128, shuffle=True, num_workers=workers,
                        pin_memory=workers > 0 and device.startswith("cuda"), persistent_workers=workers > 0)
    done = 0
    while done < steps:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            done += 1
            if done == steps:
                break


if __name__ == "__main__":
    main()
