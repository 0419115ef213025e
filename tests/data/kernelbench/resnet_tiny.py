# kgate test problem (KernelBench format, written for kgate): a level-3 style ResNet, small. A stem
# (conv, BatchNorm, ReLU), three basic blocks (two of them with a strided 1x1 downsample), global
# average pooling and a classifier: 57 tensors with its parameters and buffers, among them four
# BatchNorm step counts (0-dim int64 buffers), more than a command record ever held.
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class Model(nn.Module):
    def __init__(self, channels, num_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, 1, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())
        self.blocks = nn.Sequential(Block(channels, channels, 1), Block(channels, 2 * channels, 2),
                                    Block(2 * channels, 4 * channels, 2))
        self.fc = nn.Linear(4 * channels, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(torch.mean(x, dim=(2, 3)), 1))


batch_size = 8
channels = 16
height = width = 64
num_classes = 10


def get_inputs():
    return [torch.randn(batch_size, 3, height, width)]


def get_init_inputs():
    return [channels, num_classes]
