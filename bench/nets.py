"""The networks of the training benchmark (``bench --train``) and their training steps.

* ``resnet18``: ResNet-18 with the BasicBlock layout of the common model zoos
  (conv 7x7 / stride 2, BatchNorm, ReLU, max-pool 3x3 / stride 2; four stages of
  two BasicBlocks with 64, 128, 256, 512 channels, the first block of stages
  2-4 with stride 2 and a 1x1 convolution + BatchNorm shortcut; global average
  pool; Dense), input 3x112x112, batch 16, 10 classes, softmax cross-entropy,
  Momentum, ``nn.TrainOneStepCell``.
* ``stack``: 8 x (Conv2d 32->32 3x3 padded, BatchNorm2d, ReLU) on (16, 32, 28, 28),
  MSE loss, the functional style: ``ms.value_and_grad`` and an optimizer call
  (under ``ms.jit`` in GRAPH mode).
* ``mlp``: 4 x (Dense 1024->1024, BatchNorm1d, ReLU) and a Dense head, batch 512,
  10 classes, softmax cross-entropy, Momentum, ``nn.TrainOneStepCell``.

``quick=True`` gives the same layouts with tiny widths and inputs (for tests).
A variant is ``"original"`` (MindSpore's own BatchNorm) or ``"converted"``
(``convert_batchnorm`` on a deep copy of the original, so both start from the
same parameter values and get the same batch).
"""
import copy

import numpy as np

NETS = ("resnet18", "stack", "mlp")
VARIANTS = ("original", "converted")

# name -> (full size, quick size); each a dict of the builder's keyword arguments
SIZES = {
    "resnet18": (dict(widths=(64, 128, 256, 512), batch=16, image=112, classes=10),
                 dict(widths=(4, 8, 8, 16), batch=2, image=32, classes=10)),
    "stack": (dict(blocks=8, channels=32, batch=16, image=28),
              dict(blocks=2, channels=4, batch=2, image=8)),
    "mlp": (dict(layers=4, width=1024, batch=512, classes=10),
            dict(layers=2, width=16, batch=8, classes=10)),
}


def describe(name, quick=False):
    """One line saying what the network is at this size (for the report)."""
    s = SIZES[name][1 if quick else 0]
    if name == "resnet18":
        return (f"ResNet-18 (widths {'/'.join(map(str, s['widths']))}), batch {s['batch']}, "
                f"3x{s['image']}x{s['image']}, {s['classes']} classes, Momentum, TrainOneStepCell")
    if name == "stack":
        return (f"{s['blocks']} x (Conv2d {s['channels']}->{s['channels']} 3x3, BatchNorm2d, ReLU) on "
                f"({s['batch']}, {s['channels']}, {s['image']}, {s['image']}), MSE, value_and_grad + Momentum")
    return (f"{s['layers']} x (Dense {s['width']}->{s['width']}, BatchNorm1d, ReLU) + Dense, batch "
            f"{s['batch']}, {s['classes']} classes, Momentum, TrainOneStepCell")


def _cells():
    """The Cell classes, defined on first use so that importing this module does not import MindSpore."""
    from mindspore import nn, ops

    def conv(cin, cout, k, stride=1):
        return nn.Conv2d(cin, cout, k, stride=stride, pad_mode="pad", padding=k // 2, has_bias=False)

    class BasicBlock(nn.Cell):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = conv(cin, cout, 3, stride)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = conv(cout, cout, 3)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            if stride != 1 or cin != cout:
                self.shortcut = nn.SequentialCell([conv(cin, cout, 1, stride), nn.BatchNorm2d(cout)])
            else:
                self.shortcut = nn.Identity()

        def construct(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + self.shortcut(x))

    class ResNet18(nn.Cell):
        def __init__(self, widths, classes):
            super().__init__()
            self.stem = nn.SequentialCell([conv(3, widths[0], 7, 2), nn.BatchNorm2d(widths[0]), nn.ReLU(),
                                           nn.MaxPool2d(3, 2, pad_mode="pad", padding=1)])
            blocks, cin = [], widths[0]
            for i, w in enumerate(widths):
                stride = 1 if i == 0 else 2
                blocks += [BasicBlock(cin, w, stride), BasicBlock(w, w, 1)]
                cin = w
            self.stages = nn.SequentialCell(blocks)
            self.mean = ops.ReduceMean(keep_dims=False)
            self.fc = nn.Dense(cin, classes)

        def construct(self, x):
            return self.fc(self.mean(self.stages(self.stem(x)), (2, 3)))

    def conv_bn_relu_stack(blocks, channels):
        return nn.SequentialCell([c for _ in range(blocks)
                                  for c in (conv(channels, channels, 3), nn.BatchNorm2d(channels), nn.ReLU())])

    def mlp(layers, width, classes):
        cells = [c for _ in range(layers) for c in (nn.Dense(width, width), nn.BatchNorm1d(width), nn.ReLU())]
        return nn.SequentialCell(cells + [nn.Dense(width, classes)])

    return ResNet18, conv_bn_relu_stack, mlp


def build(name, quick=False, seed=0):
    """(network, inputs, loss kind): the original network with fixed initial values and one fixed batch."""
    import mindspore as ms
    ResNet18, conv_bn_relu_stack, mlp = _cells()
    s = SIZES[name][1 if quick else 0]
    ms.set_seed(seed)
    rng = np.random.default_rng(seed)
    if name == "resnet18":
        net = ResNet18(s["widths"], s["classes"])
        x = rng.standard_normal((s["batch"], 3, s["image"], s["image"]), dtype=np.float32)
        y = rng.integers(0, s["classes"], s["batch"]).astype(np.int32)
        kind = "classify"
    elif name == "stack":
        net = conv_bn_relu_stack(s["blocks"], s["channels"])
        shape = (s["batch"], s["channels"], s["image"], s["image"])
        x = rng.standard_normal(shape, dtype=np.float32)
        y = rng.standard_normal(shape, dtype=np.float32)
        kind = "regress"
    elif name == "mlp":
        net = mlp(s["layers"], s["width"], s["classes"])
        x = rng.standard_normal((s["batch"], s["width"]), dtype=np.float32)
        y = rng.integers(0, s["classes"], s["batch"]).astype(np.int32)
        kind = "classify"
    else:
        raise ValueError(f"bench --train: net expected one of {', '.join(NETS)}, got {name!r}")
    return net, (ms.Tensor(x), ms.Tensor(y)), kind


def variant_of(net, variant, copy_original=False):
    """The network a variant trains: the original itself (or, with copy_original, a deep copy of it),
    or a converted deep copy of it. A process that measures one variant's memory copies both, so
    that both have the same allocation history."""
    if variant == "original":
        return copy.deepcopy(net) if copy_original else net
    if variant == "converted":
        from mindspore_bn_grad import convert_batchnorm
        return convert_batchnorm(copy.deepcopy(net))
    raise ValueError(f"bench --train: variant expected one of {', '.join(VARIANTS)}, got {variant!r}")


def train_step(name, net, inputs, kind, graph):
    """A no-argument callable running one training step on the fixed batch; returns the loss tensor.

    resnet18 and mlp: nn.WithLossCell + Momentum + nn.TrainOneStepCell (compiled
    by MindSpore in GRAPH mode). stack: ms.value_and_grad + Momentum, the step
    function under ms.jit in GRAPH mode.
    """
    import mindspore as ms
    from mindspore import nn
    net.set_train(True)
    if kind == "classify":
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    else:
        loss_fn = nn.MSELoss()
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    x, y = inputs
    if name != "stack":
        cell = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
        cell.set_train(True)
        return lambda: cell(x, y)

    def forward(data, target):
        return loss_fn(net(data), target)
    grad_fn = ms.value_and_grad(forward, None, opt.parameters)

    def step(data, target):
        loss, grads = grad_fn(data, target)
        opt(grads)
        return loss
    step = ms.jit(step) if graph else step
    return lambda: step(x, y)
