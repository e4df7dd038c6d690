"""The proposer: assignments, workspaces, harnesses (prompt, prompt_feedback, terminal), episodes."""

from aes.proposer.assignments import Assignment, make_assignments
from aes.proposer.episode import EpisodeResult, run_episode
from aes.proposer.generate import generate, summarize

__all__ = ["Assignment", "EpisodeResult", "generate", "make_assignments", "run_episode", "summarize"]
