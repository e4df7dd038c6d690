"""Model calls of a stored trajectory as (prompt ids, completion ids) for supervised training.

Two sources, tried in this order:

* **Stored ids.** A trajectory this policy rolled out (tiny, local, vLLM with log-probs)
  holds the exact ``prompt_token_ids`` / ``completion_token_ids`` of every model call; they
  are used as they are, nothing is re-tokenized (log-probs are not needed). Ids written by a
  different tokenizer are recognised (the first prompt does not decode to the trajectory's
  first user message) and the trajectory is rendered instead.
* **Rendered.** A trajectory of a hosted model (Claude, GPT: the paper's cold-start data) has
  only messages. The conversation the agent sent is rebuilt from the ATIF steps (system and
  user steps, each agent step's message and tool call, each observation) and rendered with
  the chat template of the model being trained, call by call: the prompt of assistant turn
  k is the template applied to the messages before it with the generation prompt (what the
  policy is given at rollout time), the completion is the text the template adds for turn k,
  tokenized and cut after its first end-of-turn token. The template's text after that token
  (``\\n``, the next header) belongs to the next prompt. Only completions are trained; the
  turns are packed by the rollout rule (:func:`aes.train.episodes.pack_turns`), so a
  template that re-renders history (e.g. drops reasoning) splits sequences instead of
  training the policy on a context it would never see.

Tool calls, ``tool_format``:

* ``native``: for a policy served with function calling (vLLM and a template that renders
  ``tool_calls``: Qwen, Llama 3.1, ...). Assistant messages carry OpenAI-style ``tool_calls``
  (arguments as dicts, as vLLM hands them to the template), results are ``tool`` messages,
  and the trajectory's ``agent.tool_definitions`` go to the template as ``tools``: the policy
  learns the template's own call syntax, which the server's tool parser reads back.
* ``fenced``: for a policy that acts without function calling (tiny, the local SmolLM2: the
  agent's fenced-block mode). Each call becomes what :func:`aes.agents.terminal.parse_action`
  reads in that mode: ``bash`` a fenced block with the command, a host tool (``validate``,
  ``solver_model``) a fenced block of its name and argument values, ``submit`` ``DONE``
  (solver) or a fenced ``submit`` (proposer); results become user messages, and the
  tools-mode system prompts become their fenced-mode versions (the solver's
  ``TOOLS_SYSTEM`` -> ``FENCED_SYSTEM``, the terminal proposer's prompt gets ``FENCED_TOOLS``).
* ``auto``: native when the chat template renders ``tool_calls``, else fenced.

A trajectory recorded in fenced mode (or by a prompt harness) has no native calls: its
messages are rendered as the agent sent them under either format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aes.train.episodes import TrajectoryError, Turn

TOOL_FORMATS = ("auto", "native", "fenced")
_FENCE = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_SYNTHESISED_ID = re.compile(r"call_[0-9a-f]{12}")
"""Ids the terminal agent gives calls it parsed from a fenced block (aes.agents.terminal._call)."""


def is_proposer(trajectory: dict[str, Any]) -> bool:
    """A proposer episode (``extra.assignment``, or an ``aes-proposer-*`` agent), else a solver attempt."""
    extra = trajectory.get("extra") or {}
    name = str((trajectory.get("agent") or {}).get("name") or "")
    return "assignment" in extra or name.startswith("aes-proposer")


def used_tools(trajectory: dict[str, Any]) -> bool:
    """Whether the episode ran with native function calling."""
    extra = trajectory.get("extra") or {}
    return bool((trajectory.get("agent") or {}).get("tool_definitions")) and not extra.get("fenced_mode")


def template_renders_tools(tokenizer: Any) -> bool:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = " ".join(str(t) for t in template.values())
    return isinstance(template, str) and "tool_calls" in template


def resolve_tool_format(tool_format: str, tokenizer: Any) -> str:
    if tool_format not in TOOL_FORMATS:
        raise ValueError(f"tool_format must be one of {', '.join(TOOL_FORMATS)}, got {tool_format!r}")
    if tool_format == "auto":
        return "native" if template_renders_tools(tokenizer) else "fenced"
    return tool_format


# -- messages ---------------------------------------------------------------------------


def _native_calls(step: dict[str, Any], tools_mode: bool) -> list[dict[str, Any]]:
    """The step's tool calls when the model made them with function calling (not parsed from text):
    one, or several called in parallel."""
    calls = step.get("tool_calls") or []
    if not tools_mode or not calls:
        return []
    call = calls[0]
    if _SYNTHESISED_ID.fullmatch(str(call.get("tool_call_id") or "")) and _FENCE.search(step.get("message") or ""):
        return []
    return calls


def fenced_call(call: dict[str, Any], proposer: bool) -> str:
    """What the agent parses in fenced mode for ``call`` (see aes.agents.terminal.parse_action)."""
    name = str(call.get("function_name") or "")
    args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    if name == "submit":
        return "```bash\nsubmit\n```" if proposer else "DONE"
    if name == "bash" and isinstance(args.get("command"), str):
        return f"```bash\n{args['command'].strip()}\n```"
    words = [name, *(str(v) for v in args.values() if v is not None and v != "")]
    return "```bash\n" + " ".join(words) + "\n```"


def _fenced_system(text: str, proposer: bool) -> str:
    """The fenced-mode version of a tools-mode system prompt (others are kept)."""
    from aes.agents import prompts

    if text == prompts.TOOLS_SYSTEM:
        return prompts.FENCED_SYSTEM
    if proposer:
        from aes.proposer.terminal_harness import FENCED_TOOLS

        if FENCED_TOOLS not in text:
            return text + FENCED_TOOLS
    return text


def trajectory_messages(trajectory: dict[str, Any], tool_format: str) -> list[dict[str, Any]]:
    """The chat the agent sent, rebuilt from the ATIF steps, with tool calls in ``tool_format``
    (``native`` or ``fenced``; see the module docstring)."""
    if tool_format not in ("native", "fenced"):
        raise ValueError(f"tool_format must be native or fenced here, got {tool_format!r}")
    tools_mode, proposer = used_tools(trajectory), is_proposer(trajectory)
    fenced = tool_format == "fenced"
    messages: list[dict[str, Any]] = []
    for step in trajectory.get("steps") or []:
        source, text = step.get("source"), step.get("message") or ""
        if not isinstance(text, str):
            text = str(text)
        if source == "system":
            messages.append({"role": "system", "content": _fenced_system(text, proposer)
                             if fenced and tools_mode else text})
        elif source == "user":
            messages.append({"role": "user", "content": text})
        elif source == "agent":
            calls = _native_calls(step, tools_mode)
            if not calls:
                messages.append({"role": "assistant", "content": text})
            elif fenced:
                block = "\n".join(fenced_call(call, proposer) for call in calls)
                messages.append({"role": "assistant", "content": f"{text.rstrip()}\n{block}" if text.strip() else block})
            else:
                messages.append({"role": "assistant", "content": text, "tool_calls": [
                    {"id": call.get("tool_call_id"), "type": "function",
                     "function": {"name": call.get("function_name"),
                                  "arguments": call.get("arguments") if isinstance(call.get("arguments"), dict) else {}}}
                    for call in calls]})
            for result in (step.get("observation") or {}).get("results") or []:
                content = str(result.get("content") or "")
                call_id = result.get("source_call_id")
                if tools_mode and call_id and not fenced:
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
                else:
                    messages.append({"role": "user", "content": content})
    return messages


def tool_specs(trajectory: dict[str, Any]) -> list[dict[str, Any]] | None:
    """``agent.tool_definitions`` (aes ToolSpec dicts) as OpenAI function tools for a template."""
    if not used_tools(trajectory):
        return None
    return [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                              "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
            for t in (trajectory.get("agent") or {}).get("tool_definitions") or []]


# -- tokens -----------------------------------------------------------------------------


def _apply(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict] | None, generation_prompt: bool) -> str:
    if tools is None:
        from aes.models.local import chat_messages

        messages = chat_messages(messages)  # what the policy's own chat backend renders
    kwargs = {"tools": tools} if tools else {}
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt, **kwargs)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def render_turns(messages: list[dict[str, Any]], tokenizer: Any, tools: list[dict] | None = None,
                 eos_token_ids: Sequence[int] = (), source: str = "") -> list[Turn]:
    """One :class:`Turn` per assistant message: the template's prompt for it and the tokens it
    adds for that message, up to and including the first of ``eos_token_ids`` (log-probs 0)."""
    eos = set(eos_token_ids) or ({tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set())
    turns = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if i == 0:
            raise TrajectoryError(f"{source or 'trajectory'}: an assistant turn before any prompt")
        prefix = _apply(tokenizer, messages[:i], tools, True)
        full = _apply(tokenizer, messages[: i + 1], tools, False)
        if not full.startswith(prefix):
            raise TrajectoryError(
                f"{source or 'trajectory'}: the chat template does not render assistant turn {i} as a "
                "continuation of its prompt; it cannot be trained as the policy would generate it")
        completion = _encode(tokenizer, full[len(prefix):])
        end = next((k for k, t in enumerate(completion) if t in eos), None)
        if end is not None:
            completion = completion[: end + 1]
        if completion:
            turns.append(Turn(_encode(tokenizer, prefix), completion, [0.0] * len(completion)))
    return turns


def _normal(text: str) -> str:
    return re.sub(r"\s+", "", text)


def stored_turns(trajectory: dict[str, Any], tokenizer: Any = None, source: str = "") -> list[Turn] | None:
    """The stored token ids of every model call, or None when the trajectory has none (a hosted
    model) or ``tokenizer`` is not the one that wrote them."""
    steps = [s for s in trajectory.get("steps") or [] if s.get("source") == "agent"]
    ids = [((s.get("metrics") or {}).get("prompt_token_ids"), (s.get("metrics") or {}).get("completion_token_ids"))
           for s in steps]
    have = [p is not None and c is not None for p, c in ids]
    if not steps or not any(have):
        return None
    if not all(have):
        missing = next(s.get("step_id") for s, h in zip(steps, have) if not h)
        raise TrajectoryError(f"{source or 'trajectory'} step {missing}: token ids on some model calls only")
    if tokenizer is not None and not _same_tokenizer(trajectory, ids[0][0], tokenizer):
        return None
    turns = []
    for (prompt, completion), step in zip(ids, steps):
        logprobs = (step.get("metrics") or {}).get("logprobs")
        if not logprobs or len(logprobs) != len(completion) or any(lp is None for lp in logprobs):
            logprobs = [0.0] * len(completion)
        turns.append(Turn(list(prompt), list(completion), [float(lp) for lp in logprobs]))
    return turns


def _same_tokenizer(trajectory: dict[str, Any], prompt_ids: list[int], tokenizer: Any) -> bool:
    """The first prompt's ids are in the vocabulary and decode to text holding the trajectory's
    first user message (or system prompt): a different tokenizer's ids do not."""
    vocab = len(tokenizer)
    if any(not 0 <= int(t) < vocab for t in prompt_ids):
        return False
    probe = next((s.get("message") for s in trajectory.get("steps") or []
                  if s.get("source") in ("user", "system") and isinstance(s.get("message"), str)
                  and _normal(s.get("message"))), None)
    if probe is None:
        return True
    return _normal(probe)[:64] in _normal(tokenizer.decode(prompt_ids, skip_special_tokens=False))


def sft_turns(trajectory: dict[str, Any], tokenizer: Any, *, tool_format: str = "auto",
              eos_token_ids: Sequence[int] = (), rerender: bool = False, source: str = "") -> tuple[list[Turn], str]:
    """The model calls of ``trajectory`` for supervised training and how they were obtained
    (``ids`` or ``rendered``); ``rerender`` ignores stored ids."""
    if not rerender:
        turns = stored_turns(trajectory, tokenizer, source)
        if turns is not None:
            return turns, "ids"
    if tokenizer is None:
        raise TrajectoryError(f"{source or 'trajectory'} has no token ids and the policy has no tokenizer to render it")
    fmt = resolve_tool_format(tool_format, tokenizer)
    messages = trajectory_messages(trajectory, fmt)
    tools = tool_specs(trajectory) if fmt == "native" else None
    return render_turns(messages, tokenizer, tools, eos_token_ids, source), "rendered"
