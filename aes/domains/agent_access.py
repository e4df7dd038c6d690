"""Admission check shared by the domains whose solver must go through an application: the agent
cannot reach around it.

A browser task's web app and a tool-calling task's service keep their state where the tests read
it. If the solver's user can write there (the database file, the app's code, a folder it may
create files in), it can set the state the tests check without the workflow the task is about:
resolve a case by an ``UPDATE`` instead of the console, skip the service's validation rules.
RL finds such a path. So these tasks name their application's data and code in task.toml::

    [metadata]
    app_data = ["/srv/console"]          # files or folders; the app's code and state

and a check trial, as the task's agent user in a fresh environment, looks for what it could
change there (``find -writable``: the kernel's own answer for that user) and whether it is root
or may run anything through sudo. Reasons, ``<domain>.`` + :

* ``no_app_data``: ``[metadata] app_data`` is missing, empty or not a list of absolute paths;
* ``app_data_missing``: a path it names is not in the environment;
* ``agent_can_write_app_data``: the agent's user can write a file or folder under it (the
  message lists the first ones);
* ``agent_is_root``: the agent runs as root, or ``sudo -n true`` succeeds for it (a task's own
  ``sudo`` rule for one command, such as an MCP server, is fine);
* ``agent_access_check_failed``: the trial broke before it could tell.

Reading is not checked: an app's data the agent may read shows it nothing the app does not.
"""

from __future__ import annotations

from aes.sandbox import AgentRun, Container
from aes.tasks import Reason, Task, load_task

KEY = "app_data"
_LIST = 5
_EXISTS = r'''for p in "$@"; do if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo "missing $p"; fi; done; echo done'''
"""Run as root: which of the paths are not there (as the agent, a root-only folder hides them)."""
_PROBE = r'''
echo "uid $(id -u)"
if sudo -n true >/dev/null 2>&1; then echo "sudo all"; fi
for p in "$@"; do
  find "$p" -xdev -maxdepth 12 -writable -print 2>/dev/null | head -n 20 | sed 's/^/writable /'
done
echo done
'''
"""Run as the agent's user: its uid, whether sudo lets it run anything, what it can write."""


class AccessProbe:
    """A check agent: as the task's agent user, what it could write under ``paths``. ``info``:
    ``uid``, ``sudo_all``, ``missing`` and ``writable`` (lists of paths), ``probe_exit``."""

    name = "agent-access"

    def __init__(self, paths: list[str]):
        self.paths = paths

    def run(self, task: Task, container: Container, timeout: float) -> AgentRun:
        exists = container.exec(["sh", "-c", _EXISTS, "sh", *self.paths], min(timeout, 60), user="0")
        out = container.exec(["sh", "-c", _PROBE, "sh", *self.paths], min(timeout, 120), user=task.spec.agent_user)
        info: dict = {"probe_exit": out.exit_code, "missing": [], "writable": [], "uid": None, "sudo_all": False}
        found = exists.output.splitlines()
        lines = out.output.splitlines() + [line for line in found if line.startswith("missing ")]
        for line in lines:
            word, _, rest = line.partition(" ")
            if word == "uid" and rest.strip().isdigit():
                info["uid"] = int(rest)
            elif line == "sudo all":
                info["sudo_all"] = True
            elif word in ("missing", "writable"):
                info[word].append(rest)
        if "done" not in out.output.splitlines() or "done" not in found:  # either script broke off
            info["probe_exit"] = out.exit_code or exists.exit_code or -1
        return AgentRun(exit_code=0, output=out.output, info=info)


def app_data(task: Task) -> list[str] | None:
    """The task's ``[metadata] app_data``, or None when it is not a non-empty list of absolute paths."""
    paths = task.spec.metadata.get(KEY)
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p.startswith("/") for p in paths):
        return None
    return paths


def access_reasons(domain: str, task_dir, runner, image: str) -> list[Reason]:
    """The agent-access reasons of the task in ``task_dir`` (built as ``image``), codes ``<domain>.*``."""
    task = load_task(task_dir)
    paths = app_data(task)
    if paths is None:
        return [Reason(f"{domain}.no_app_data",
                       f"task.toml has no [metadata] {KEY}: a list of the absolute paths holding the application's "
                       "code and state (e.g. [\"/srv/console\"]), which the agent's user must not be able to change")]
    trial = runner.run(task, AccessProbe(paths), image)
    info = trial.agent_info
    if info.get("uid") is None or info.get("probe_exit") != 0:
        return [Reason(f"{domain}.agent_access_check_failed",
                       f"the agent-access probe could not tell ({trial.outcome.value}: "
                       f"{(trial.agent_output or trial.detail or '')[-300:]})")]
    reasons = []
    if info["uid"] == 0 or info["sudo_all"]:
        how = "runs as root" if info["uid"] == 0 else "may run anything through sudo (sudo -n true succeeds)"
        reasons.append(Reason(f"{domain}.agent_is_root",
                              f"the agent's user ({task.spec.agent_user}) {how}: it could change the application's "
                              "state without the application; give [agent] user an unprivileged account"))
    if info["missing"]:
        reasons.append(Reason(f"{domain}.app_data_missing",
                              f"[metadata] {KEY} names paths the environment does not have: {info['missing'][:_LIST]}"))
    if info["writable"] and info["uid"] != 0:
        shown = info["writable"][:_LIST]
        reasons.append(Reason(f"{domain}.agent_can_write_app_data",
                              f"the agent's user ({task.spec.agent_user}) can write the application's data: {shown}"
                              f"{' ...' if len(info['writable']) > _LIST else ''}; make it root's (or the app's own "
                              "user's) and not writable by others, so the state changes only through the application"))
    return reasons
