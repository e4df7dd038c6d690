"""The cases ModelNew is checked on (each in float32 and float16) and the timed shape."""
CASES = [
    {"name": "default", "init": [7.0], "inputs": {}},
    {"name": "2d-odd", "init": [3.0], "inputs": {"shape": (11, 2 * 13), "seed": 1}},
    {"name": "4d", "init": [7.0], "inputs": {"shape": (2, 3, 5, 2 * 101), "seed": 2}},
    {"name": "one-pair", "init": [0.5], "inputs": {"shape": (1, 2), "seed": 3}},
]
# eager ops that would do the task's math outside a kernel
FORBIDDEN = ["silu", "sigmoid", "exp", "clamp", "clamp_", "clip", "minimum", "maximum", "min", "max",
             "mul", "__mul__", "where", "softplus", "logsigmoid"]
# the paper's limit: the kernel within 70% of the eager time on the timed shape
TIMING = {"init": [7.0], "inputs": {"shape": (8192, 2 * 4096)}, "max_ratio": 0.7}
