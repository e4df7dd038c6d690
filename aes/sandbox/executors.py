"""Which trial runner ``sandbox.executor`` names: ``local`` (this process, this machine's engine)
or ``ray`` (:mod:`aes.sandbox.ray_executor`; Ray is imported only then)."""

from __future__ import annotations

from aes.config import SandboxConfig


def trial_runner(cfg: SandboxConfig):
    """A :class:`~aes.sandbox.trial.TrialRunner`, or its Ray counterpart with the same interface
    (``run(task, agent, image=None)``, ``sandbox.build(task)``, ``cfg``)."""
    if cfg.executor == "ray":
        from aes.sandbox.ray_executor import RayTrialRunner

        return RayTrialRunner(cfg)
    from aes.sandbox.trial import TrialRunner

    return TrialRunner(cfg)
