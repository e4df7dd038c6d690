"""The three settings of a HiL task, derived without model calls (paper §4.5, Tables 4-5)."""

from __future__ import annotations

from aes.hil.blockers import Blocker

SETTINGS = ("full_info", "ask_human", "no_tool")


def full_info_instruction(instruction: str, blockers: list[Blocker]) -> str:
    """The instruction with every withheld detail stated (the complete-information setting)."""
    details = "\n".join(f"- {b.topic}: {b.answer}" for b in blockers)
    return f"{instruction.rstrip()}\n\n## Details\n\n{details}\n"


def instruction_for(setting: str, instruction: str, blockers: list[Blocker]) -> str:
    if setting not in SETTINGS:
        raise ValueError(f"hil.setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    return full_info_instruction(instruction, blockers) if setting == "full_info" else instruction


def has_tool(setting: str) -> bool:
    return setting == "ask_human"
