"""Eager reference: softmax over the valid prefix of each row of a padded batch.

x is a (B, L) float16 or float32 tensor of scores and lengths a (B,) int64 tensor: row b holds
lengths[b] real scores, and the positions after them are padding whose values are garbage (NaN
here) and must be ignored. The result is softmax(x * scale) over the real scores, computed in
float32 and cast back to x's dtype; the padding's output is exactly 0, and so is every output of a
row with no real score (lengths[b] == 0).
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, scale: float = 0.125):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        B, L = x.shape
        valid = torch.arange(L, device=x.device)[None, :] < lengths[:, None]
        s = torch.where(valid, x.float() * self.scale, torch.full((B, L), float("-inf"), device=x.device))
        p = torch.softmax(s, dim=-1)
        return torch.where(valid, p, torch.zeros_like(p)).to(x.dtype)


def get_init_inputs():
    return [0.125]


def get_inputs(batch=6, length=1000, dtype=torch.float32, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, length + 1, (batch,), generator=g)
    lengths[0], lengths[-1] = length, 0
    x = torch.randn(batch, length, generator=g) * 16.0
    x[torch.arange(length)[None, :] >= lengths[:, None]] = float("nan")
    return [x.to(device, dtype), lengths.to(device)]
