"""Asking well, measured (HiL-Bench): Ask-F1 and the ask rate.

Per attempt: question precision = questions that revealed a blocker not revealed before /
questions (asking again about an answered blocker is a question that hit nothing new); blocker
recall = blockers revealed / blockers; Ask-F1 = their harmonic mean (0 when either is 0, e.g. no
question).
Over an evaluation: the ask rate = share of attempts with at least one question.
"""

from __future__ import annotations

import statistics


def ask_scores(log: list[dict], blockers: int) -> dict:
    """Per-attempt scores from the simulated human's log."""
    questions, hits, seen = len(log), 0, set()
    for entry in log:
        new = set(entry["matched"]) - seen
        hits += bool(new)
        seen |= new
    revealed = len(seen)
    precision = hits / questions if questions else 0.0
    recall = revealed / blockers if blockers else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"questions": questions, "matched_questions": hits, "blockers": blockers, "revealed": revealed,
            "precision": precision, "recall": recall, "ask_f1": f1}


def summarize(attempts: list[dict]) -> dict:
    """Over attempts' scores (``ask_scores`` dicts): mean Ask-F1, precision, recall, and the ask rate."""
    if not attempts:
        return {"attempts": 0, "ask_f1": None, "ask_rate": None, "precision": None, "recall": None}
    return {"attempts": len(attempts),
            "ask_f1": statistics.fmean(a["ask_f1"] for a in attempts),
            "precision": statistics.fmean(a["precision"] for a in attempts),
            "recall": statistics.fmean(a["recall"] for a in attempts),
            "ask_rate": statistics.fmean(float(a["questions"] > 0) for a in attempts)}
