"""The GPU-kernel domain (paper App. C, Table 7; App. C.3): a PyTorch eager reference and a Triton
kernel to write that matches it; correctness through Triton's interpreter on a CPU-only host, and
kernel/eager timing on a GPU; see README.md and instructions/."""
