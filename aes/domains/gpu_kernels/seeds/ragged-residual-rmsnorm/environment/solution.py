"""Write ModelNew here: the same computation as reference.Model, done by a Triton kernel."""
import torch
import triton
import triton.language as tl
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden))

    def forward(self, x: torch.Tensor, residual: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("launch your Triton kernel here")
