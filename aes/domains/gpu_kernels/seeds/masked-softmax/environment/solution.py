"""Write ModelNew here: the same computation as reference.Model, done by a Triton kernel."""
import torch
import triton
import triton.language as tl
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, scale: float = 0.125):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("launch your Triton kernel here")
