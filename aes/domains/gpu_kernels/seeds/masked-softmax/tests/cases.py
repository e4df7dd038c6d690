"""The cases ModelNew is checked on (each in float32 and float16) and the timed shape."""
CASES = [
    {"name": "default", "init": [0.125], "inputs": {}},
    {"name": "short-rows", "init": [1.0], "inputs": {"batch": 9, "length": 5, "seed": 1}},
    {"name": "odd-length", "init": [0.3], "inputs": {"batch": 4, "length": 333, "seed": 2}},
    {"name": "long", "init": [0.05], "inputs": {"batch": 3, "length": 4097, "seed": 3}},
]
# eager ops that would do the task's math outside a kernel
FORBIDDEN = ["softmax", "log_softmax", "_softmax", "exp", "exp_", "logsumexp", "max", "amax", "sum",
             "div", "__truediv__", "where", "nan_to_num", "masked_fill", "masked_fill_", "isnan", "nansum"]
# the paper's limit: the kernel within 70% of the eager time on the timed shape
TIMING = {"init": [0.125], "inputs": {"batch": 4096, "length": 4096}, "max_ratio": 0.7}
