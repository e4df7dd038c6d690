"""aes: AutoEnvScaling, an automated RL data flywheel for terminal agents."""

__version__ = "0.1.0"
