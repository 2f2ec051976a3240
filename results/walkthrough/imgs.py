"""A new user's own case: a torchvision ImageFolder of JPEGs and a ResNet-18 training step."""
import os

import numpy as np
import torch
from PIL import Image
from torch import nn
from torchvision import datasets, models, transforms

ROOT = "/tmp/user/images"


def _write(n_per_class=200, classes=4):
    rng = np.random.default_rng(0)
    for c in range(classes):
        folder = os.path.join(ROOT, f"class{c}")
        os.makedirs(folder, exist_ok=True)
        for i in range(n_per_class):
            path = os.path.join(folder, f"{i}.jpg")
            if not os.path.exists(path):
                Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(path, quality=90)


def make():
    _write()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    return datasets.ImageFolder(ROOT, transform=tf)


def make_step():
    model = models.resnet18(weights=None, num_classes=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, y = batch
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step
