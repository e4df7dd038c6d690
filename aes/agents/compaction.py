"""Context compaction: old tool outputs give way when an episode nears the model's context.

The rule, applied before each model call of an episode (solver attempt or proposer episode):
when the conversation's estimated tokens plus the reply's budget exceed ``agent.compact_at`` of
the model's context length, the oldest tool outputs (command output, host-tool results) are
replaced, oldest first, by a one-line stub that says what was dropped, until the estimate falls
to ``agent.compact_to`` of the context. The ``agent.compact_keep`` most recent outputs stay whole,
and nothing else is touched: the system prompt, the instruction, feedback, and the model's own
replies and calls are what it needs to go on. Compacting well below the trigger means it happens
seldom, so the prefix the provider has cached stays valid between compactions.

Each compaction is recorded in the trajectory (``extra.compactions``: before which step, whose
outputs, the estimated tokens before and after); the outputs themselves stay in their steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STUB = "[output dropped to fit the context: {chars} characters of the result of step {step}]"
CHARS_PER_TOKEN_ADDED = 3
"""Estimate of a new message's tokens: generous (3 characters a token), so the context is not underrated."""
CHARS_PER_TOKEN_REMOVED = 4
"""Estimate of the tokens a dropped output frees: cautious (4 characters a token)."""


def approx_tokens(messages: list[dict[str, Any]]) -> int:
    """A generous token estimate of messages (3 characters per token plus per-message overhead)."""
    return sum(len(str(m.get("content") or "")) // CHARS_PER_TOKEN_ADDED + 8 for m in messages)


@dataclass
class Output:
    """A tool output in an episode's messages."""

    index: int
    """Its position in the message list."""
    step_id: int
    """The trajectory step whose call it answers."""
    dropped: bool = False


def compact(messages: list[dict[str, Any]], outputs: list[Output], context: int, reply_tokens: int,
            context_length: int, at: float, to: float, keep: int) -> tuple[int, dict[str, Any] | None]:
    """Apply the rule to ``messages`` in place; ``(estimated context after, the record or None)``.

    ``context``: the conversation's estimated tokens; ``reply_tokens``: what the next call may
    generate (and reason). Nothing happens below ``at * context_length``."""
    if context + reply_tokens <= at * context_length:
        return context, None
    target = to * context_length
    before, dropped, freed_chars = context, [], 0
    candidates = [o for o in outputs[:max(len(outputs) - keep, 0)] if not o.dropped]
    for output in candidates:
        if context + reply_tokens <= target:
            break
        message = messages[output.index]
        text = str(message.get("content") or "")
        stub = STUB.format(chars=len(text), step=output.step_id)
        if len(stub) >= len(text):
            continue
        messages[output.index] = {**message, "content": stub}
        output.dropped = True
        context -= (len(text) - len(stub)) // CHARS_PER_TOKEN_REMOVED
        dropped.append(output.step_id)
        freed_chars += len(text) - len(stub)
    if not dropped:
        return context, None
    return context, {"dropped_outputs_of_steps": dropped, "characters_dropped": freed_chars,
                     "estimated_tokens_before": before, "estimated_tokens_after": context,
                     "reply_tokens": reply_tokens, "context_length": context_length}
