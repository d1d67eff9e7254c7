"""The layer-graph networks of worker/models/cifar_networks.h, written in PyTorch.

Parameter names (state_dict keys) are the C++ variables' names; the dense
layer's weight is the transpose of the C++ one (PyTorch's Linear keeps
(outputs, inputs)). Convolutions have no bias, batch norm is nn.BatchNorm2d
with its defaults (eps 1e-5, momentum 0.1).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _conv(cin, cout, kernel, stride):
    return nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False)


def _projection(cin, cout, stride):
    """None (identity), or a 1x1 conv + BN where the shape changes."""
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(_conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    """He et al.: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = _conv(cin, cout, 3, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = _conv(cout, cout, 3, 1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class Bottleneck(nn.Module):
    """torchvision's bottleneck (stride on the 3x3), expansion 4."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.conv1 = _conv(cin, width, 1, 1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv(width, width, 3, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv(width, cout, 1, 1)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class WideBlock(nn.Module):
    """Zagoruyko & Komodakis's pre-activation block; the 1x1 shortcut reads
    the activated input."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = _conv(cin, cout, 3, stride)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = _conv(cout, cout, 3, 1)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = _conv(cin, cout, 1, stride)

    def forward(self, x):
        o = F.relu(self.bn1(x))
        shortcut = x if self.shortcut is None else self.shortcut(o)
        out = self.conv2(F.relu(self.bn2(self.conv1(o))))
        return out + shortcut


def _stages(block, cin, stages):
    """nn.Sequential per stage; the first block of every stage but the first
    has stride 2. Returns (stages, channels out)."""
    layers = []
    for s, (channels, blocks) in enumerate(stages):
        seq = []
        for i in range(blocks):
            seq.append(block(cin, channels, 2 if (i == 0 and s > 0) else 1))
            cin = channels * (4 if block is Bottleneck else 1)
        layers.append(nn.Sequential(*seq))
    return layers, cin


class CifarResNet(nn.Module):
    def __init__(self, depth, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = _conv(3, 16, 3, 1)
        self.bn1 = nn.BatchNorm2d(16)
        (self.layer1, self.layer2, self.layer3), c = _stages(
            BasicBlock, 16, [(16, n), (32, n), (64, n)])
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class WideResNet(nn.Module):
    def __init__(self, depth, k, classes=10):
        super().__init__()
        n = (depth - 4) // 6
        self.conv1 = _conv(3, 16, 3, 1)
        (self.layer1, self.layer2, self.layer3), c = _stages(
            WideBlock, 16, [(16 * k, n), (32 * k, n), (64 * k, n)])
        self.bn = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.conv1(x))))
        x = F.relu(self.bn(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Cnn10(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        layers, cin = [], 3
        for c in [64, 64, 64, 'M', 128, 128, 128, 'M', 256, 256, 256]:
            if c == 'M':
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [_conv(cin, c, 3, 1), nn.BatchNorm2d(c), nn.ReLU()]
                cin = c
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.features(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet50Cifar(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = _conv(3, 64, 3, 1)
        self.bn1 = nn.BatchNorm2d(64)
        (self.layer1, self.layer2, self.layer3, self.layer4), c = _stages(
            Bottleneck, 64, [(64, 3), (128, 4), (256, 6), (512, 3)])
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


NETWORKS = {
    'resnet20': lambda: CifarResNet(20),
    'resnet56': lambda: CifarResNet(56),
    'wrn_16_4': lambda: WideResNet(16, 4),
    'wrn_28_10': lambda: WideResNet(28, 10),
    'cnn10': Cnn10,
    'resnet50_cifar': ResNet50Cifar,
}
