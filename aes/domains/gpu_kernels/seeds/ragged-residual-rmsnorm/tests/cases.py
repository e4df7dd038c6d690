"""The cases ModelNew is checked on (each in float32 and float16) and the timed shape."""
CASES = [
    {"name": "default", "init": [1000], "inputs": {}},
    {"name": "odd-hidden", "init": [77], "inputs": {"batch": 5, "tokens": 9, "hidden": 77, "seed": 1}},
    {"name": "one-token", "init": [256], "inputs": {"batch": 4, "tokens": 1, "hidden": 256, "seed": 2}},
    {"name": "wide-ragged", "init": [2049], "inputs": {"batch": 2, "tokens": 23, "hidden": 2049, "seed": 3}},
]
# eager ops that would do the task's math outside a kernel
FORBIDDEN = ["rsqrt", "sqrt", "pow", "__pow__", "square", "mean", "sum", "var", "norm", "rms_norm",
             "layer_norm", "where", "nan_to_num", "masked_fill", "masked_fill_", "isnan", "nansum", "nanmean"]
# the paper's limit: the kernel within 70% of the eager time on the timed shape
TIMING = {"init": [4096], "inputs": {"batch": 16, "tokens": 512, "hidden": 4096}, "max_ratio": 0.7}
