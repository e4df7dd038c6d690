"""Reference solution: one program per row; masked lanes never read, empty rows give 0."""
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _masked_softmax(x_ptr, len_ptr, out_ptr, L, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    n = tl.load(len_ptr + row)
    cols = tl.arange(0, BLOCK)
    live = cols < n
    s = tl.load(x_ptr + row * L + cols, mask=live, other=float("-inf")).to(tl.float32) * scale
    top = tl.max(tl.where(live, s, float("-inf")), axis=0)
    top = tl.where(n > 0, top, 0.0)
    e = tl.where(live, tl.exp(s - top), 0.0)
    total = tl.sum(e, axis=0)
    p = e / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + row * L + cols, p.to(out_ptr.dtype.element_ty), mask=cols < L)


class ModelNew(nn.Module):
    def __init__(self, scale: float = 0.125):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        B, L = x.shape
        x = x.contiguous()
        out = torch.empty_like(x)
        _masked_softmax[(B,)](x, lengths.contiguous(), out, L, self.scale, BLOCK=triton.next_power_of_2(L))
        return out
