"""One training step, the same for ``mode=train`` and the flywheel: a DPPO update of the solver on
groups with reward spread, and its metrics row (``dppo/*``: loss, masked fraction, ratio stats,
reward mean and std, kept and collected groups)."""

from __future__ import annotations


def train_step(solver, groups: list, collected: int, metrics, *, step: int, **fields) -> dict:
    """Update ``solver`` on ``groups`` (``collected`` were drawn to find them) and log the row."""
    stats = solver.update(groups, collected)
    metrics.log({"event": "update", "step": step, **fields, "solver_reward_mean": stats.get("reward_mean"),
                 **{f"dppo/{k}": v for k, v in stats.items()}}, step=step)
    return stats
