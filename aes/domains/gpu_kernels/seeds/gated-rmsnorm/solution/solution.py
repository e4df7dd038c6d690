"""Reference solution: one program per row, reading x and z through their row strides."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _gated_rmsnorm(x_ptr, z_ptr, w_ptr, out_ptr, sx, sz, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < H
    x = tl.load(x_ptr + row * sx + cols, mask=inside, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + row * sz + cols, mask=inside, other=0.0).to(tl.float32)
    g = x * (z / (1.0 + tl.exp(-z)))
    inv = 1.0 / tl.sqrt(tl.sum(g * g, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + cols, (g * inv * w).to(out_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.linspace(1.5, 0.5, hidden))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        N, H = x.shape
        if x.stride(1) != 1:
            x = x.contiguous()
        if z.stride(1) != 1:
            z = z.contiguous()
        out = torch.empty((N, H), dtype=x.dtype, device=x.device)
        _gated_rmsnorm[(N,)](x, z, self.weight, out, x.stride(0), z.stride(0), H, self.eps,
                             BLOCK=triton.next_power_of_2(H))
        return out
