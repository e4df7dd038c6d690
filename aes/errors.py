"""Errors shared across packages.

An :class:`InfrastructureError` is a failure of what aes runs on — a model server that does not
answer, a container engine that went away or refused — never of the task or of the agent. An
attempt that ends in one gets no reward (it is neither a 0 nor a 1): it is counted and named as
an infrastructure failure, and enough of them stop the run with what to fix.
"""


class InfrastructureError(RuntimeError):
    """A failure of the infrastructure, not of the task or the agent; the message says what to fix."""
