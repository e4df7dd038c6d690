"""Eager reference: residual add then RMSNorm over the hidden size, on a ragged batch.

x and residual are (B, T, H) float16 or float32 tensors; lengths is a (B,) int64 tensor. Row b holds
lengths[b] real tokens; positions t >= lengths[b] are padding whose values are garbage (NaN here)
and must not leak into the result: the output there is exactly 0. The sum of squares is taken in
float32 and the result is cast back to x's dtype.
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden))

    def forward(self, x: torch.Tensor, residual: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        B, T, H = x.shape
        valid = torch.arange(T, device=x.device)[None, :] < lengths[:, None]
        h = x.float() + residual.float()
        h = torch.where(valid[..., None], h, torch.zeros_like(h))
        inv = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * inv * self.weight.float()).to(x.dtype)


def get_init_inputs():
    return [1000]


def get_inputs(batch=3, tokens=37, hidden=1000, dtype=torch.float32, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, tokens + 1, (batch,), generator=g)
    lengths[0] = tokens
    x = torch.randn(batch, tokens, hidden, generator=g)
    residual = torch.randn(batch, tokens, hidden, generator=g) * 0.5
    pad = torch.arange(tokens)[None, :] >= lengths[:, None]
    x[pad] = float("nan")
    residual[pad] = float("nan")
    return [x.to(device, dtype), residual.to(device, dtype), lengths.to(device)]
