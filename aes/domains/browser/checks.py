"""Admission checks of the browser-use domain, run after checks 1-4 and the reset check: the web
app's code and state (``[metadata] app_data``) are out of the agent user's reach, so the state the
tests read changes only through the app (:mod:`aes.domains.agent_access`; codes ``browser.*``)."""

from __future__ import annotations

from aes.domains.agent_access import access_reasons
from aes.tasks import Reason


def checks(task_dir, runner, image: str) -> list[Reason]:
    """The browser domain's reasons to reject the task at ``task_dir`` (built as ``image``)."""
    return access_reasons("browser", task_dir, runner, image)
