"""Admission checks of the browser-use domain, run after checks 1-4 and the reset check.

* The web app's code and state (``[metadata] app_data``) are out of the agent user's reach, so the
  state the tests read changes only through the app (:mod:`aes.domains.agent_access`; codes
  ``browser.no_app_data``, ``.app_data_missing``, ``.agent_can_write_app_data``, ``.agent_is_root``,
  ``.agent_access_check_failed``).
* The wrong-work probe (:mod:`aes.domains.browser.probes`): in a second fresh environment the
  reference runs with each form it saves cut to the smallest part of its changes the app accepts;
  tests that give that partial attempt 0.5 or more are rejected (``browser.partial_rewarded``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aes.domains.agent_access import access_reasons
from aes.domains.browser.probes import PartialForm, partial_reasons
from aes.tasks import Reason, load_task


def checks(task_dir, runner, image: str) -> list[Reason]:
    """The browser domain's reasons to reject the task at ``task_dir`` (built as ``image``)."""
    task = load_task(Path(task_dir))
    with ThreadPoolExecutor(max_workers=1) as pool:  # the probe's trial runs while access is checked
        partial = pool.submit(runner.run, task, PartialForm(), image)
        reasons = access_reasons("browser", task_dir, runner, image)
        reasons += partial_reasons(partial.result())
    return reasons
