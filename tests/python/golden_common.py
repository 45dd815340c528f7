"""What the golden-value scripts (nn_golden.py, chapter_golden.py) share with each other and with
the C++ tests (tests/testing/golden.hpp): the closed formulas for inputs, token ids and weights,
and the recording of a tensor's values as a golden constant (golden_out.py prints it).
  weight(k, shape) = 0.5 * sin(0.7 * arange(n) + k + 1), k = index in sorted parameter names
  data(phase, shape) = cos(0.3 * arange(n) + phase)
  ids(shape, vocab, mult, add) = (arange(n) * mult + add) % vocab
"""
import math

import torch


def weight(k, shape):
    n = math.prod(shape)
    return (0.5 * torch.sin(0.7 * torch.arange(n, dtype=torch.float32) + (k + 1))).reshape(shape)


def data(phase, shape):
    n = math.prod(shape)
    return torch.cos(0.3 * torch.arange(n, dtype=torch.float32) + phase).reshape(shape)


def ids(shape, vocab, mult=7, add=3):
    n = math.prod(shape)
    return ((torch.arange(n) * mult + add) % vocab).reshape(shape)


def fill(module):
    """Parameter k in sorted-name order gets weight(k)."""
    with torch.no_grad():
        for k, (_, p) in enumerate(sorted(module.named_parameters(), key=lambda kv: kv[0])):
            p.copy_(weight(k, p.shape))


def put_tensor(golden, name, t, step=1):
    """Every step-th value of t as the float32 golden constant `const std::vector<float> name`."""
    vals = t.detach().flatten()[::step].tolist()
    golden.const("std::vector<float>", name, vals, float32=True,
                 comment=f"{name}: shape {list(t.shape)}, every {step}th value, sum {t.sum().item():.8g}")
