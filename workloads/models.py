"""Small PyTorch versions of the paper's job types, sized to train on a CPU in tests.

Each factory returns (model, make_batch(batch_size, generator) -> (inputs, targets), loss_fn). Shapes follow the
real tasks (images, token sequences, rating vectors) at toy scale; `--width` scales them up.
"""

from __future__ import annotations

import torch
from torch import nn


def _images(channels: int, size: int, classes: int):
    def make(batch: int, gen: torch.Generator):
        return torch.randn(batch, channels, size, size, generator=gen), torch.randint(0, classes, (batch,),
                                                                                     generator=gen)
    return make


def _tokens(vocab: int, length: int):
    def make(batch: int, gen: torch.Generator):
        seq = torch.randint(0, vocab, (batch, length + 1), generator=gen)
        return seq[:, :-1], seq[:, 1:]
    return make


class ResNetBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                                  nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c))

    def forward(self, x):
        return torch.relu(x + self.body(x))


def resnet(blocks: int, width: int):
    model = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(),
                          *[ResNetBlock(width) for _ in range(blocks)],
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))
    return model, _images(3, 16, 10), nn.CrossEntropyLoss()


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int, width: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 4, 2 * width, batch_first=True), 2)
        self.out = nn.Linear(width, vocab)

    def forward(self, x):
        return self.out(self.encoder(self.embed(x))).transpose(1, 2)


class TinyLM(nn.Module):
    def __init__(self, vocab: int, width: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, x):
        return self.out(self.lstm(self.embed(x))[0]).transpose(1, 2)


def autoencoder(items: int, width: int):
    model = nn.Sequential(nn.Linear(items, width), nn.Tanh(), nn.Linear(width, items))

    def make(batch: int, gen: torch.Generator):
        x = (torch.rand(batch, items, generator=gen) < 0.05).float()
        return x, x
    return model, make, nn.BCEWithLogitsLoss()


#: Synergy's model names train the closest of these workloads (image models a ResNet, language models a
#: Transformer or LSTM LM, speech models an LSTM LM over frames-as-tokens).
SYNERGY_ALIASES = {"alexnet": "ResNet-18", "res18": "ResNet-18", "res50": "ResNet-50", "mobilenet": "ResNet-18",
                   "shufflenet": "ResNet-18", "gnmt": "LM", "transformer": "Transformer", "lstm": "LM",
                   "m5": "LM", "deepspeech": "LM"}


def build(name: str, width: int = 16):
    """Model, batch maker and loss for a job type's model name (Gavel's vocabulary, or a Synergy model's)."""
    name = SYNERGY_ALIASES.get(name, name)
    vocab, length = 100, 16
    factories = {
        "ResNet-18": lambda: resnet(2, width),
        "ResNet-50": lambda: resnet(4, width),
        "Transformer": lambda: (TinyTransformer(vocab, 2 * width), _tokens(vocab, length), nn.CrossEntropyLoss()),
        "LM": lambda: (TinyLM(vocab, 2 * width), _tokens(vocab, length), nn.CrossEntropyLoss()),
        "Recommendation": lambda: autoencoder(200, 2 * width),
        "A3C": lambda: (nn.Sequential(nn.Linear(32, 2 * width), nn.ReLU(), nn.Linear(2 * width, 6)),
                        lambda b, g: (torch.randn(b, 32, generator=g), torch.randint(0, 6, (b,), generator=g)),
                        nn.CrossEntropyLoss()),
        "CycleGAN": lambda: (nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(),
                                           nn.Conv2d(width, 3, 3, padding=1)),
                             lambda b, g: (lambda x: (x, x))(torch.randn(b, 3, 16, 16, generator=g)), nn.L1Loss()),
    }
    if name not in factories:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(factories)}")
    return factories[name]()
