"""The browser-use domain (domain=browser): config, proposer instructions, the base image recipe the
seeds share, the seeds' layout and gated reward, the browser action set (aes/agents/browser.py) with a
fake container, and in Docker: scripted models (native tool calls and fenced text) solving seeds through
the browser actions, a broken action answered with an error, `aes validate` admitting every seed, and
the reset check rejecting an app that seeds its data from the clock."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from aes.agents import TerminalAgent, browser
from aes.agents.toolboxes import declared_actions
from aes.config import AgentConfig, compose_config
from aes.domains import instructions_dir, seeds_dir
from aes.models import ToolCall
from aes.sandbox import ExecResult, Outcome, TrialRunner
from aes.tasks import check_task, find_tasks, load_task
from aes.tasks.static import dockerfile_instructions
from tests.test_agent import Scripted, reply

REPO = Path(__file__).resolve().parents[1]
DOMAIN = REPO / "aes" / "domains" / "browser"
SEEDS = DOMAIN / "seeds"
SEED_DIRS = find_tasks([SEEDS])
REFUND = SEEDS / "order-refund-confirmation"
CASE = SEEDS / "case-runbook-resolution"
CLOCK_SEEDED = REPO / "tests" / "fixtures" / "browser" / "clock-seeded"


def _base() -> list[tuple[str, str]]:
    return [(word, args) for word, args, _ in dockerfile_instructions((DOMAIN / "base" / "Dockerfile").read_text())]


# -- config, instructions, seeds -------------------------------------------------------------------
def test_config_composes_with_the_reset_check_and_nop_zero():
    cfg = compose_config(["domain=browser"])
    assert cfg.domain.name == "browser" and cfg.domain.reset_check is True and cfg.domain.nop_zero is True
    assert seeds_dir(cfg.domain) == SEEDS
    assert {p.name for p in instructions_dir(cfg.domain).glob("*.md")} == {"task_format.md", "what_to_build.md"}


def test_task_format_documents_the_base_lines_and_the_seeds_test_sh():
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    for word, args in _base():
        assert f"{word} {args}" in text
    for path in SEED_DIRS:
        assert (path / "tests" / "test.sh").read_text() in text, path.name
    for code in ("nop.reward_not_zero", "reset.state_differs", "/logs/agent/screenshots/"):
        assert code in text


def test_base_image_pins_its_python_packages_and_installs_chromium_lean():
    [pip] = [args for word, args in _base() if word == "RUN" and "--break-system-packages" in args]
    packages = [a for a in pip.split("&&")[0].split() if not a.startswith("-") and a not in ("pip", "install")]
    assert packages and all("==" in p for p in packages), packages
    [apt] = [args for word, args in _base() if word == "RUN" and "apt-get install" in args]
    assert "--no-install-recommends" in apt and " chromium " in apt and "/usr/share/doc" in apt


def test_at_least_four_seeds_with_the_browser_actions_and_the_base_recipe():
    assert len(SEED_DIRS) >= 4
    kit = (DOMAIN / "kit" / "webapp.py").read_text()
    for path in SEED_DIRS:
        task = load_task(path)
        assert check_task(task) == [], path.name
        assert declared_actions(task) == ["browser"] and task.spec.agent_user == "agent"
        lines = [(w, a) for w, a, _ in dockerfile_instructions((path / "environment" / "Dockerfile").read_text())]
        assert lines[:len(_base())] == _base(), path.name
        assert (path / "environment" / "app" / "webapp.py").read_text() == kit, path.name
        assert "playwright" in (path / "solution" / "solve.py").read_text()
        assert "/logs/agent/screenshots" in (path / "solution" / "solve.py").read_text()


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_tests_are_gated_by_a_fixture_every_test_uses(path):
    text = (path / "tests" / "test_outputs.py").read_text()
    gate = re.search(r"@pytest.fixture\(scope=\"module\"\)\ndef (\w+)\(db\):\n(?:    .*\n)*?    assert ", text)
    assert gate, "no gate fixture that asserts the work was saved"
    tests = re.findall(r"^def (test_\w+)\(([^)]*)\)", text, re.M)
    assert len(tests) >= 5 and all(gate.group(1) in args.split(", ") for _, args in tests), tests
    assert "mode=ro" in text


# -- the action set without Docker -------------------------------------------------------------------
class FakeContainer:
    """Answers each exec as the session script would, and remembers the commands."""

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def exec(self, argv, timeout, *, user=None, **_):
        command = json.loads(base64.b64decode(argv[-1]))
        self.seen.append((command, user))
        answer = self.answers.pop(0)
        return ExecResult(0, f"noise\n{browser.MARKER} {json.dumps(answer)}\n")


def _task(actions=("browser",)):
    spec = SimpleNamespace(agent_user="agent", metadata={"actions": list(actions), "app_url": "http://127.0.0.1:8080"})
    return SimpleNamespace(name="t", spec=spec)


def test_attach_offers_six_actions_and_help_for_fenced_models():
    box = browser.attach(_task(), FakeContainer([]), fenced=True, call_timeout=30, reserved={"type"})
    names = [t.spec.name for t in box.tools]
    assert names == ["navigate", "click", "browser_type", "press", "read_page", "screenshot"]
    assert "http://127.0.0.1:8080" in box.help and "```bash\nnavigate http://127.0.0.1:8080/" in box.help
    assert "browser_type(target, text)" in box.help and "screenshot(name?)" in box.help


def test_fenced_arguments_parse():
    assert browser.parse_fenced("type", '#note "two words"') == {"target": "#note", "text": "two words"}
    assert browser.parse_fenced("type", "#username alice") == {"target": "#username", "text": "alice"}
    assert browser.parse_fenced("click", "Save draft") == {"target": "Save draft"}
    assert browser.parse_fenced("type", '{"target": "#q", "text": "QZ-418"}') == {"target": "#q", "text": "QZ-418"}
    assert browser.parse_fenced("read_page", "") == {}
    assert "__aes_parse_error__" in browser.parse_fenced("click", "{oops")


def test_actions_run_as_the_agent_user_and_errors_go_back_to_the_model():
    container = FakeContainer([
        {"ok": True, "text": "navigated", "url": "http://127.0.0.1:8080/login", "title": "Sign in"},
        {"ok": False, "error": "LookupError: no visible element matches '#nope'", "url": "http://127.0.0.1:8080/login"},
        {"ok": True, "text": "screenshot saved: /logs/agent/screenshots/step-01-x.png\n\nURL: ...",
         "url": "http://127.0.0.1:8080/login", "title": "Sign in"},
    ])
    box = browser.attach(_task(), container, fenced=False, call_timeout=30, reserved=set())
    tools = {t.spec.name: t for t in box.tools}
    assert tools["navigate"].run({"url": "http://127.0.0.1:8080/"}) == "navigated"
    error = tools["click"].run({"target": "#nope"})
    assert error.startswith("[browser error] LookupError") and "still http://127.0.0.1:8080/login" in error
    assert "missing argument(s) target" in tools["click"].run({})  # never reaches the container
    tools["screenshot"].run({})
    assert [c["action"] for c, _ in container.seen] == ["navigate", "click", "screenshot"]
    assert {u for _, u in container.seen} == {"agent"}
    record = box.record()
    assert [(c["action"], c["ok"]) for c in record["actions"]] == [
        ("navigate", True), ("click", False), ("click", False), ("screenshot", True)]
    assert record["actions"][0]["url"] == "http://127.0.0.1:8080/login"
    assert record["screenshots"] == ["/logs/agent/screenshots/step-01-x.png"]


def test_session_output_without_a_result_is_an_error():
    assert browser.parse_session_output("Traceback ...")["ok"] is False
    assert browser.parse_session_output(f'{browser.MARKER} {{"ok": true, "text": "x"}}') == {"ok": True, "text": "x"}


# -- in Docker -----------------------------------------------------------------------------------------
WAIT_FOR_APP = ("for i in $(seq 100); do python3 -c \"import urllib.request as u; "
                "u.urlopen('http://127.0.0.1:8080/login')\" 2>/dev/null && break; sleep 0.2; done")


@pytest.fixture
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


REFUND_ACTIONS = [
    ("navigate", {"url": "http://127.0.0.1:8080/inbox"}),
    ("type", {"target": "#username", "text": "desk.agent"}),
    ("type", {"target": "Password", "text": "juniper-19"}),
    ("click", {"target": "Sign in"}),
    ("click", {"target": "Damaged lanterns in my November order"}),
    ("click", {"target": "#no-such-button"}),  # a broken action: an error, and the episode goes on
    ("navigate", {"url": "/orders/NW-5531/refund"}),
    ("type", {"target": "Refund quantity of line 2: Trail lantern", "text": "2"}),
    ("type", {"target": "#reason", "text": "Damaged in transit"}),
    ("click", {"target": "Continue"}),
    ("click", {"target": "#method-original_payment"}),
    ("click", {"target": "Continue to confirmation"}),
    ("type", {"target": "#confirm_order", "text": "NW-5531"}),
    ("click", {"target": "Issue refund"}),
    ("read_page", {}),
    ("screenshot", {"name": "refund issued"}),
]


@pytest.mark.docker
def test_scripted_model_with_native_tool_calls_solves_a_seed_through_the_browser(runner):
    replies = [reply(calls=[ToolCall("wait", "bash", {"command": WAIT_FOR_APP})])]
    replies += [reply(calls=[ToolCall(f"c{i}", name, args)]) for i, (name, args) in enumerate(REFUND_ACTIONS)]
    replies += [reply(calls=[ToolCall("peek", "bash", {"command": "cat /srv/desk/app.db"})]),
                reply(calls=[ToolCall("end", "submit", {})])]
    model = Scripted(replies, tools=True)
    result = runner.run(load_task(REFUND), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.OK and result.reward == 1.0, result.verifier_output[-2000:]
    traj = result.agent_info["trajectory"]
    offered = [t["name"] for t in traj["agent"]["tool_definitions"]]
    assert offered[0] == "bash" and offered[-1] == "submit" and {"navigate", "click", "read_page"} <= set(offered)
    steps = [s for s in traj["steps"] if s["source"] == "agent"]
    assert [s["tool_calls"][0]["function_name"] for s in steps[1:len(REFUND_ACTIONS) + 1]] == \
        [name for name, _ in REFUND_ACTIONS]
    actions = traj["extra"]["browser"]["actions"]
    assert [a["action"] for a in actions] == [name for name, _ in REFUND_ACTIONS]
    assert [a["ok"] for a in actions].count(False) == 1 and actions[5]["error"].startswith("LookupError")
    broken = steps[6]["observation"]["results"][0]
    assert broken["content"].startswith("[browser error]") and "read_page" in broken["content"]
    assert broken["extra"]["browser"]["ok"] is False
    assert actions[3]["url"] == "http://127.0.0.1:8080/inbox" and actions[-3]["url"].endswith("/refunds/2")
    assert "Refund #2 issued." in steps[len(REFUND_ACTIONS) - 1]["observation"]["results"][0]["content"]
    assert traj["extra"]["browser"]["screenshots"] == ["/logs/agent/screenshots/step-01-refund-issued.png"]
    # the app's data is out of the agent's reach: only the pages change it
    assert "Permission denied" in steps[-2]["observation"]["results"][0]["content"]


CASE_FENCED = [
    "navigate http://127.0.0.1:8080/cases/QZ-418",
    "type #username duty.lead",
    'type {"target": "#password", "text": "lantern-42"}',
    "click #sign-in",
    "read_page",
    "navigate /runbooks/RB-207",
    "navigate /cases/QZ-418",
    "type #runbook RB-207",
    "type Assignee 'Mira Chen (Platform)'",
    'type #resolution_note "Flushed the tenant token cache per RB-207; batch jobs re-authenticated after the key '
    'rotation."',
    "type #escalation Reviewed: no escalation needed",
    "click Save draft",
    "click Resolve case",
]


@pytest.mark.docker
def test_fenced_text_only_model_solves_a_seed_through_the_browser(runner):
    replies = [reply(f"```bash\n{WAIT_FOR_APP}\n```")] + [reply(f"```bash\n{line}\n```") for line in CASE_FENCED]
    model = Scripted(replies + [reply("DONE")])
    result = runner.run(load_task(CASE), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.OK and result.reward == 1.0, result.verifier_output[-2000:]
    assert "navigate(url)" in model.seen[0][1]["content"]  # the instruction lists the actions
    page = model.seen[6][-1]["content"]  # what read_page gave a text-only model
    assert "URL: http://127.0.0.1:8080/cases/QZ-418" in page and "Fields" in page and "#save-draft" in page
    actions = result.agent_info["trajectory"]["extra"]["browser"]["actions"]
    assert len(actions) == len(CASE_FENCED) and all(a["ok"] for a in actions), actions


@pytest.mark.docker
@pytest.mark.slow
def test_seeds_pass_aes_validate_and_leave_screenshots(sandbox, tmp_path):
    from typer.testing import CliRunner

    from aes.cli import app

    result = CliRunner().invoke(app, ["validate", str(SEEDS), "--set", "domain=browser", "--quiet",
                                      "--logs", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{len(SEED_DIRS)}/{len(SEED_DIRS)} valid" in result.output
    for path in SEED_DIRS:
        shots = sorted(p.name for p in tmp_path.glob(f"aes__{path.name}/oracle/agent/screenshots/step-*.png"))
        assert len(shots) >= 5 and shots[0].startswith("step-01-"), (path.name, shots)


@pytest.mark.docker
@pytest.mark.slow
def test_reset_check_rejects_an_app_that_seeds_its_data_from_the_clock(sandbox):
    from aes.admission import Validator

    cfg = compose_config(["domain=browser"])
    report = Validator(cfg.sandbox, reset_check=cfg.domain.reset_check, nop_zero=cfg.domain.nop_zero
                       ).validate(CLOCK_SEEDED)
    assert report.oracle_reward == 1.0 and report.nop_reward == 0.0
    assert not report.valid and [r.code for r in report.reasons] == ["reset.state_differs"]


def test_every_seed_names_its_app_data_and_the_domain_checks_it():
    from aes.compose import domain_checks
    from aes.domains.agent_access import app_data
    from aes.domains.browser.checks import checks

    assert domain_checks(compose_config(["domain=browser"])) is checks
    for path in SEED_DIRS:
        paths = app_data(load_task(path))
        assert paths and all(p.startswith("/srv/") for p in paths), path.name


@pytest.mark.docker
@pytest.mark.slow
def test_agent_access_check_rejects_app_data_the_agent_can_write(sandbox, cfg, tmp_path):
    """The agent's user must not be able to change the app's state except through the app: a variant
    whose database folder anyone may write, one whose agent is root, one that names no app data. (The
    access part of the domain's checks; its partial-form probe, the other part, has its own test.)"""
    import shutil

    from aes.domains.agent_access import access_reasons

    runner = TrialRunner(cfg.sandbox, sandbox)
    variants = {}
    for name in ("as-built", "writable", "root-agent", "unnamed", "missing"):
        variants[name] = path = tmp_path / name
        shutil.copytree(CASE, path)
    dockerfile = variants["writable"] / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("chmod -R go-rwx /srv/console", "chmod -R a+rwX /srv/console"))
    for name, old, new in (("root-agent", 'user = "agent"', 'user = "root"'),
                           ("unnamed", 'app_data = ["/srv/console"]', ""),
                           ("missing", 'app_data = ["/srv/console"]', 'app_data = ["/srv/console", "/srv/nowhere"]')):
        toml = variants[name] / "task.toml"
        assert old in toml.read_text()
        toml.write_text(toml.read_text().replace(old, new, 1))
    codes = {}
    for name, path in variants.items():
        build = sandbox.build(load_task(path))
        assert build.image, build.reason
        reasons = access_reasons("browser", path, runner, build.image)
        codes[name] = [r.code for r in reasons]
        if name == "writable":
            assert "/srv/console" in reasons[0].message
    assert codes == {"as-built": [], "writable": ["browser.agent_can_write_app_data"],
                     "root-agent": ["browser.agent_is_root"], "unnamed": ["browser.no_app_data"],
                     "missing": ["browser.app_data_missing"]}
