"""Eager reference: clamped SwiGLU on an interleaved projection.

x is a (..., 2H) float16 or float32 tensor holding gate and up values interleaved along the last
dimension: gate = x[..., 0::2], up = x[..., 1::2]. With limit L, the result is
silu(min(gate, L)) * clamp(up, -L, L), computed in float32 and cast back to x's dtype, of shape (..., H).
"""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, limit: float = 7.0):
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x[..., 0::2].float(), x[..., 1::2].float()
        gate = gate.clamp(max=self.limit)
        up = up.clamp(-self.limit, self.limit)
        return (torch.nn.functional.silu(gate) * up).to(x.dtype)


def get_init_inputs():
    return [7.0]


def get_inputs(shape=(3, 17, 2 * 725), dtype=torch.float32, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g) * 6.0).to(device, dtype)]
