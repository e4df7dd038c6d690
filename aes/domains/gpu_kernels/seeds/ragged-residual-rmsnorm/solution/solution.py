"""Reference solution: one program per (batch, token) row, the whole hidden size in one block."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _residual_rmsnorm(x_ptr, r_ptr, w_ptr, len_ptr, out_ptr, T, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    n = tl.load(len_ptr + row // T)
    cols = tl.arange(0, BLOCK)
    inside = cols < H
    live = inside & ((row % T) < n)
    x = tl.load(x_ptr + row * H + cols, mask=live, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * H + cols, mask=live, other=0.0).to(tl.float32)
    h = x + r
    inv = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + cols, (h * inv * w).to(out_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden))

    def forward(self, x: torch.Tensor, residual: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        B, T, H = x.shape
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        _residual_rmsnorm[(B * T,)](x, residual, self.weight, lengths.contiguous(), out, T, H, self.eps,
                                    BLOCK=triton.next_power_of_2(H))
        return out
