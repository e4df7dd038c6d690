"""Eager reference: gated RMSNorm, y = RMSNorm(x * silu(z)) * weight, over the hidden size.

x and z are (N, H) float16 or float32 tensors, often two halves of one wider projection (so their
rows are strided, not contiguous). The gate, the sum of squares and the scaling are computed in
float32 and the result is cast back to x's dtype, as a new contiguous (N, H) tensor.
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.linspace(1.5, 0.5, hidden))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        g = x.float() * torch.nn.functional.silu(z.float())
        inv = torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        return (g * inv * self.weight.float()).to(x.dtype)


def get_init_inputs():
    return [1531]


def get_inputs(rows=45, hidden=1531, dtype=torch.float32, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    xz = (torch.randn(rows, 2 * hidden, generator=g) * 2.0).to(device, dtype)
    return [xz[:, :hidden], xz[:, hidden:]]
