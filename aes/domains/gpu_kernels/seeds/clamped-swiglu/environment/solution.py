"""Write ModelNew here: the same computation as reference.Model, done by a Triton kernel."""
import torch
import triton
import triton.language as tl
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, limit: float = 7.0):
        super().__init__()
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("launch your Triton kernel here")
