"""The computer-use domain (domain=desktop): config, proposer instructions, the base image recipe and
desktop kit the seeds share, the seeds' layout and gated reward, the desktop action set
(aes/agents/desktop.py) with a fake container, and in Docker: scripted models (native tool calls and
fenced text) solving seeds through the desktop actions, a bad key name answered with an error,
`aes validate` admitting every seed with a screenshot sequence of the reference run, and the reset
check rejecting a desktop whose entrypoint stamps the clock into /app."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from aes.agents import TerminalAgent, desktop
from aes.agents.toolboxes import declared_actions
from aes.config import AgentConfig, compose_config
from aes.domains import instructions_dir, seeds_dir
from aes.models import ToolCall
from aes.sandbox import ExecResult, Outcome, TrialRunner
from aes.tasks import check_task, find_tasks, load_task
from aes.tasks.static import dockerfile_instructions
from tests.test_agent import Scripted, reply

REPO = Path(__file__).resolve().parents[1]
DOMAIN = REPO / "aes" / "domains" / "desktop"
SEEDS = DOMAIN / "seeds"
SEED_DIRS = find_tasks([SEEDS])
BRIEF = SEEDS / "decision-brief"
NOTES = SEEDS / "meeting-notes-styles"
KIT = DOMAIN / "base" / "desktop"
CLOCK_STAMPED = REPO / "tests" / "fixtures" / "desktop" / "clock-stamped"


def _base() -> list[tuple[str, str]]:
    return [(word, args) for word, args, _ in dockerfile_instructions((DOMAIN / "base" / "Dockerfile").read_text())]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- config, instructions, seeds -------------------------------------------------------------------
def test_config_composes_with_the_reset_check_and_nop_zero():
    cfg = compose_config(["domain=desktop"])
    assert cfg.domain.name == "desktop" and cfg.domain.reset_check is True and cfg.domain.nop_zero is True
    assert seeds_dir(cfg.domain) == SEEDS
    assert {p.name for p in instructions_dir(cfg.domain).glob("*.md")} == {"task_format.md", "what_to_build.md"}


def test_task_format_documents_the_base_lines_and_the_seeds_test_sh():
    text = (DOMAIN / "instructions" / "task_format.md").read_text()
    for word, args in _base():
        assert f"{word} {args}" in text
    for path in SEED_DIRS:
        assert (path / "tests" / "test.sh").read_text() in text, path.name
    for code in ("nop.reward_not_zero", "reset.state_differs", "/logs/agent/screenshots/", "desktop-wait"):
        assert code in text


def test_base_image_pins_its_python_packages_and_installs_the_desktop_lean():
    [pip] = [args for word, args in _base() if word == "RUN" and "pip install" in args]
    packages = [a for a in pip.split("&&")[1].split() if not a.startswith("-") and not a.endswith("pip")
                and a != "install"]
    assert packages and all("==" in p for p in packages), packages
    [apt] = [args for word, args in _base() if word == "RUN" and "apt-get install" in args]
    assert "--no-install-recommends" in apt and "libreoffice-writer" in apt and "xvfb" in apt
    assert ("ENTRYPOINT", '["/opt/desktop/session"]') in _base()


def test_at_least_four_seeds_with_the_desktop_actions_the_base_recipe_and_the_kit():
    assert len(SEED_DIRS) >= 4
    kit = _files(KIT)
    for path in SEED_DIRS:
        task = load_task(path)
        assert check_task(task) == [], path.name
        assert declared_actions(task) == ["desktop"] and task.spec.agent_user == "agent"
        lines = [(w, a) for w, a, _ in dockerfile_instructions((path / "environment" / "Dockerfile").read_text())]
        assert lines[:len(_base())] == _base(), path.name
        assert ("USER", "agent") not in lines  # the entrypoint starts as root and drops to agent itself
        assert _files(path / "environment" / "desktop") == kit, path.name
        solve = (path / "solution" / "solve.sh").read_text()
        assert "desktop-wait" in solve and "xdotool" in solve and "desktop-shot" in solve
        assert not re.search(r"import|python|from docx|openpyxl|odfpy", solve), "the reference must edit through the GUI"
        document = task.spec.metadata["document"]
        assert f"ENV DESKTOP_DOCUMENT={document}" in (path / "environment" / "Dockerfile").read_text()


RECALC = REPO / "aes" / "domains" / "kit" / "recalc.py"
CALC_SEEDS = [p for p in SEED_DIRS if "openpyxl" in (p / "tests" / "test_outputs.py").read_text()]


class _Sheet(dict):
    """A worksheet as the tests see it: ``ws["B2"].value``."""

    title = "Sales"

    def __getitem__(self, key):
        return SimpleNamespace(value=self.get(key))


def test_calc_seeds_compute_values_from_the_formulas_never_from_stored_values():
    """A workbook stores a value next to each formula and whoever wrote the file chose it: the Calc
    seeds' tests compute every checked cell with the kit's recalc.py (a byte copy) instead."""
    assert len(CALC_SEEDS) >= 2
    for path in CALC_SEEDS:
        tests = (path / "tests" / "test_outputs.py").read_text()
        assert "data_only" not in tests and "from recalc import evaluate" in tests, path.name
        assert (path / "tests" / "recalc.py").read_bytes() == RECALC.read_bytes(), path.name


def test_recalc_follows_moved_inputs_and_refuses_what_it_cannot_read():
    import importlib.util

    spec = importlib.util.spec_from_file_location("recalc_kit", RECALC)
    recalc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recalc)
    ws = _Sheet({"B2": 1240, "C2": 1315, "D2": 1190, "E2": 1402, "F2": "=SUM(B2:E2)", "G2": "=5147",
                 "H2": "=($F$2-B2)*2.5%+ROUND(B2/3,1)", "I2": "=I2+1", "J2": "=VLOOKUP(B2,B2:C3,2)", "K2": '="x"',
                 "L2": "=F2*Sales!C2", "M2": "=F2*Audit!C2"})
    assert recalc.evaluate(ws, "F2") == 5147
    assert recalc.evaluate(ws, "F2", {"B2": 2240}) == 6147  # a live formula follows its inputs
    assert recalc.evaluate(ws, "G2") == 5147 and recalc.evaluate(ws, "G2", {"B2": 2240}) == 5147  # a constant does not
    assert recalc.evaluate(ws, "H2") == pytest.approx((5147 - 1240) * 0.025 + 413.3)
    assert recalc.evaluate(ws, "L2") == 5147 * 1315
    for cell, message in (("I2", "refers to itself"), ("J2", "VLOOKUP() is not supported"), ("K2", "cannot read"),
                          ("M2", "on another sheet")):
        with pytest.raises(recalc.FormulaError, match=re.escape(message)):
            recalc.evaluate(ws, cell)
    assert recalc.references("=SUM(B2:C3)") == {"B2", "B3", "C2", "C3"}
    assert recalc.references("=5147") == set() and recalc.references('="B2"') == set()


@pytest.mark.parametrize("path", SEED_DIRS, ids=lambda p: p.name)
def test_seed_tests_are_gated_by_a_fixture_every_test_uses(path):
    text = (path / "tests" / "test_outputs.py").read_text()
    gate = re.search(r"@pytest.fixture\(scope=\"module\"\)\ndef (\w+)\(\):\n(?:    .*\n)*?    assert ", text)
    assert gate, "no gate fixture that asserts the edit was saved"
    tests = re.findall(r"^def (test_\w+)\(([^)]*)\)", text, re.M)
    assert len(tests) >= 4 and all(gate.group(1) in args.split(", ") for _, args in tests), tests


# -- the action set without Docker -------------------------------------------------------------------
class FakeContainer:
    """Answers each exec with a canned (exit code, output), and remembers the scripts."""

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def exec(self, argv, timeout, *, user=None, env=None, **_):
        self.seen.append((argv[-1], user, env))
        code, output = self.answers.pop(0)
        return ExecResult(code, output)


def _task():
    spec = SimpleNamespace(agent_user="agent", metadata={"actions": ["desktop"], "document": "/app/brief.docx"})
    return SimpleNamespace(name="t", spec=spec)


def test_attach_offers_eight_actions_and_help_for_fenced_models():
    box = desktop.attach(_task(), FakeContainer([]), fenced=True, call_timeout=30, reserved={"type"})
    names = [t.spec.name for t in box.tools]
    assert names == ["screenshot", "text_view", "click", "double_click", "move", "drag", "desktop_type", "key"]
    assert "/app/brief.docx" in box.help and "```bash\nkey ctrl+s\n```" in box.help
    assert "click(x, y, button?)" in box.help and "cannot see images" in box.help


def test_fenced_arguments_parse():
    assert desktop.parse_fenced("click", "640 400") == {"x": 640, "y": 400}
    assert desktop.parse_fenced("click", "640, 400 right") == {"x": 640, "y": 400, "button": "right"}
    assert desktop.parse_fenced("drag", "1 2 3 4") == {"x": 1, "y": 2, "to_x": 3, "to_y": 4}
    assert desktop.parse_fenced("type", "Status: Approved") == {"text": "Status: Approved"}
    assert desktop.parse_fenced("type", '"  padded "') == {"text": "  padded "}
    assert desktop.parse_fenced("key", "ctrl+Home Down") == {"combo": "ctrl+Home Down"}
    assert desktop.parse_fenced("text_view", "") == {}
    assert "__aes_parse_error__" in desktop.parse_fenced("click", "left top")
    assert "__aes_parse_error__" in desktop.parse_fenced("click", "{oops")


def test_scripts_quote_text_and_check_the_screen():
    script = desktop.action_script("type", {"text": "it's $HOME; rm -rf /"})
    assert f"-- {shlex.quote(chr(39).join(['it', 's $HOME; rm -rf /']))}" in script
    assert "desktop-wait" in script.splitlines()[0]
    assert "xdotool mousemove --sync 10 20 click 3" in desktop.action_script("click", {"x": 10, "y": 20,
                                                                                        "button": "right"})
    assert "No such key" in desktop.action_script("key", {"combo": "ctrl+s"})
    with pytest.raises(ValueError):
        desktop.action_script("click", {"x": -1, "y": 5})


def test_actions_run_as_the_agent_user_on_the_display_and_errors_go_back_to_the_model():
    container = FakeContainer([
        (0, "\n__focus__ brief.docx - LibreOffice Writer\n"),
        (6, "(symbol) No such key name 'ctrl+sss'. Ignoring it.\n"),
        (0, "__shot__ /logs/agent/screenshots/step-01-start.png\nScreen 1280x800. Focused window: \"x\".\n"),
    ])
    box = desktop.attach(_task(), container, fenced=False, call_timeout=30, reserved=set())
    tools = {t.spec.name: t for t in box.tools}
    assert tools["click"].run({"x": 5, "y": 6}) == "done: click. Focused window: 'brief.docx - LibreOffice Writer'"
    error = tools["key"].run({"combo": "ctrl+sss"})
    assert error.startswith("[desktop error] unknown key name") and "Return, Tab" in error
    assert "missing argument(s) y" in tools["click"].run({"x": 1})  # never reaches the container
    assert "button must be one of" in tools["click"].run({"x": 1, "y": 2, "button": "top"})
    shot = tools["screenshot"].run({"name": "start"})
    assert shot.startswith("screenshot saved: /logs/agent/screenshots/step-01-start.png (a PNG on disk")
    assert "Screen 1280x800" in shot
    assert {(u, e["DISPLAY"]) for _, u, e in container.seen} == {("agent", ":0")}
    record = box.record()
    assert [(c["action"], c["ok"]) for c in record["actions"]] == [
        ("click", True), ("key", False), ("click", False), ("click", False), ("screenshot", True)]
    assert record["actions"][0]["focused"] == "brief.docx - LibreOffice Writer"
    assert record["screenshots"] == ["/logs/agent/screenshots/step-01-start.png"]


# -- in Docker -----------------------------------------------------------------------------------------
WAIT_FOR_SAVE = "for i in $(seq 50); do find /app -newer /run/desktop/ready -type f | grep -q . && break; sleep 0.2; done"


@pytest.fixture
def runner(sandbox, cfg):
    return TrialRunner(cfg.sandbox, sandbox)


BRIEF_ACTIONS = [
    ("screenshot", {"name": "start"}),
    ("key", {"combo": "ctrl+Home ctrl+e"}),
    ("key", {"combo": "ctrl+nosuchkey"}),  # a bad key name: an error, and the episode goes on
    ("key", {"combo": "Down Home shift+End"}),
    ("type", {"text": "Status: Approved"}),
    ("key", {"combo": "Home shift+End ctrl+b"}),
    ("key", {"combo": "Down Home shift+End"}),
    ("type", {"text": "Owner: Priya Raman"}),
    ("key", {"combo": "Down Home shift+End"}),
    ("type", {"text": "Decision date: 14 March 2026"}),
    ("key", {"combo": "ctrl+s"}),
]


@pytest.mark.docker
@pytest.mark.slow
def test_scripted_model_with_native_tool_calls_solves_a_seed_through_the_desktop(runner):
    replies = [reply(calls=[ToolCall(f"c{i}", name, args)]) for i, (name, args) in enumerate(BRIEF_ACTIONS)]
    replies += [reply(calls=[ToolCall("save", "bash", {"command": WAIT_FOR_SAVE})]),
                reply(calls=[ToolCall("end", "submit", {})])]
    model = Scripted(replies, tools=True)
    result = runner.run(load_task(BRIEF), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.OK and result.reward == 1.0, result.verifier_output[-2000:]
    traj = result.agent_info["trajectory"]
    offered = [t["name"] for t in traj["agent"]["tool_definitions"]]
    assert offered[0] == "bash" and offered[-1] == "submit" and {"screenshot", "click", "key", "type"} <= set(offered)
    steps = [s for s in traj["steps"] if s["source"] == "agent"]
    assert [s["tool_calls"][0]["function_name"] for s in steps[:len(BRIEF_ACTIONS)]] == [n for n, _ in BRIEF_ACTIONS]
    actions = traj["extra"]["desktop"]["actions"]
    assert [a["action"] for a in actions] == [name for name, _ in BRIEF_ACTIONS]
    assert [a["ok"] for a in actions].count(False) == 1 and actions[2]["error"].startswith("unknown key name")
    broken = steps[2]["observation"]["results"][0]
    assert broken["content"].startswith("[desktop error] unknown key name") and broken["extra"]["desktop"]["ok"] is False
    first = steps[0]["observation"]["results"][0]["content"]
    assert "decision-brief.docx - LibreOffice Writer" in first and "Owner:" in first and "OWNER" in first  # the text view (OCR)
    assert traj["extra"]["desktop"]["screenshots"] == ["/logs/agent/screenshots/step-01-start.png"]
    assert actions[-1]["focused"].startswith("decision-brief.docx")


NOTES_FENCED = [
    "key ctrl+Home ctrl+1",
    "key Down Down Home shift+End",
    "type Chair: Marta Kowalski",
    "key Down Home ctrl+2",
    'key {"combo": "Down Down Down Home ctrl+2"}',
    "text_view",
    "key ctrl+s",
]


@pytest.mark.docker
@pytest.mark.slow
def test_fenced_text_only_model_solves_a_seed_through_the_desktop(runner):
    replies = [reply(f"```bash\n{line}\n```") for line in NOTES_FENCED] + [reply(f"```bash\n{WAIT_FOR_SAVE}\n```")]
    model = Scripted(replies + [reply("DONE")])
    result = runner.run(load_task(NOTES), TerminalAgent(model, AgentConfig()))
    assert result.outcome is Outcome.OK and result.reward == 1.0, result.verifier_output[-2000:]
    assert "key(combo)" in model.seen[0][1]["content"]  # the instruction lists the actions
    view = model.seen[6][-1]["content"]  # what text_view gave a text-only model
    assert "meeting-notes.odt - LibreOffice Writer" in view and "Marta Kowalski" in view
    actions = result.agent_info["trajectory"]["extra"]["desktop"]["actions"]
    assert len(actions) == len(NOTES_FENCED) and all(a["ok"] for a in actions), actions


@pytest.mark.docker
@pytest.mark.slow
def test_seeds_pass_aes_validate_and_leave_screenshots(sandbox, tmp_path):
    from typer.testing import CliRunner

    from aes.cli import app

    result = CliRunner().invoke(app, ["validate", str(SEEDS), "--set", "domain=desktop", "--quiet",
                                      "--logs", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{len(SEED_DIRS)}/{len(SEED_DIRS)} valid" in result.output
    for path in SEED_DIRS:
        shots = sorted(p.name for p in tmp_path.glob(f"aes__{path.name}/oracle/agent/screenshots/step-*.png"))
        assert len(shots) >= 4 and shots[0] == "step-01-opened.png", (path.name, shots)


@pytest.mark.docker
@pytest.mark.slow
def test_reset_check_rejects_a_desktop_that_stamps_the_clock_at_start(sandbox):
    from aes.admission import Validator

    assert _files(CLOCK_STAMPED / "environment" / "desktop") == _files(KIT)
    cfg = compose_config(["domain=desktop"])
    report = Validator(cfg.sandbox, reset_check=cfg.domain.reset_check, nop_zero=cfg.domain.nop_zero
                       ).validate(CLOCK_STAMPED)
    assert report.oracle_reward == 1.0 and report.nop_reward == 0.0
    assert not report.valid and [r.code for r in report.reasons] == ["reset.state_differs"]
