"""Every config file composes and validates; the schema stays documented and light."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from aes.config import CONF_DIR, ConfigError, compose_config, load_config, register_schema
from aes.config import schema
from aes.report.sizes import describe_sizes

register_schema()  # conf/config.yaml composes on the typed schema (the entry point registers it too)

GROUPS = ["proposer", "solver", "agent", "harness", "domain", "admission", "flywheel", "calibration", "trainer", "sandbox", "logger"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes(group, option):
    cfg = compose_config([f"{group}={option}"])
    assert cfg.mode == "run"


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment):
    compose_config([f"experiment={experiment}"])


@pytest.mark.parametrize("stage", options("trainer/deepspeed"))
def test_every_deepspeed_stage_composes(stage):
    assert compose_config([f"trainer/deepspeed={stage}"]).trainer.deepspeed.zero_stage == int(stage[-1])


@pytest.mark.parametrize("launcher", ["local", "slurm"])
def test_launchers_compose(launcher):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert "submitit" in cfg.hydra.launcher._target_


def test_image_aliases_cover_common_bases():
    aliases = compose_config([]).sandbox.image_aliases
    for image in ["python:3.11-slim", "python:3.12-slim", "python:3.13-slim", "debian:bookworm",
                  "debian:bookworm-slim", "ubuntu:22.04", "ubuntu:24.04"]:
        assert aliases[image] == "aes-base:bookworm"


def test_typos_and_bad_values_fail_with_the_key():
    with pytest.raises(ConfigError, match="sandbox.concurency"):
        load_config({"sandbox": {"concurency": 3}})
    with pytest.raises(ConfigError, match="calibration band"):
        compose_config(["calibration.band_low=0.9", "calibration.band_high=0.2"])
    with pytest.raises(ConfigError, match="mode must be one of"):
        compose_config(["mode=fly"])
    with pytest.raises(ConfigError, match="sandbox.pids_limit"):
        compose_config(["sandbox.pids_limit=many"])


def test_every_schema_field_has_a_docstring():
    tree = ast.parse(Path(schema.__file__).read_text())
    undocumented = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or node.name == "ConfigError":
            continue
        body = node.body
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.AnnAssign):
                nxt = body[i + 1] if i + 1 < len(body) else None
                if not (isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)):
                    undocumented.append(f"{node.name}.{stmt.target.id}")
    assert not undocumented


def test_schema_import_pulls_no_heavy_frameworks():
    code = ("import sys, aes.config, aes.tasks; "
            "print([m for m in ('torch', 'vllm', 'deepspeed') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_modes_needing_inputs_say_what_to_set(tmp_path):
    from aes.run import dispatch

    with pytest.raises(ConfigError, match="mode=train needs trajectories=DIR"):
        dispatch(compose_config(["mode=train", "solver=tiny"]), tmp_path)
    with pytest.raises(ConfigError, match="mode=rollout needs tasks=DIR"):
        dispatch(compose_config(["mode=rollout", "solver=tiny"]), tmp_path)


def test_run_entry_point_fails_clearly_without_inputs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "aes.run", "mode=train", "solver=tiny",
                           f"hydra.run.dir={tmp_path}"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "mode=train needs trajectories=DIR" in proc.stdout + proc.stderr
    assert "effective sizes" in proc.stdout + proc.stderr  # logged before the mode runs


SWEEPS = CONF_DIR.parent / "sweeps"


@pytest.mark.parametrize("sweep", sorted(p.stem for p in SWEEPS.glob("*.yaml")))
def test_every_sweep_composes_and_names_its_params(sweep):
    params = compose_sweep(sweep, [], hydra=True).hydra.sweeper.params
    assert params
    for key, values in params.items():  # every swept value must compose on its own
        for value in str(values).split(","):
            load_config(compose_sweep(sweep, [f"{key}={value}"]))


def compose_sweep(sweep: str, overrides: list[str], hydra: bool = False):
    """A sweep file as ``python -m aes.run -cd sweeps -cn SWEEP`` composes it."""
    with initialize_config_dir(config_dir=str(SWEEPS), version_base="1.3"):
        return compose(config_name=sweep, overrides=[f"hydra.searchpath=[file://{CONF_DIR}]", *overrides],
                       return_hydra_config=hydra)


def test_slurm_cluster_profile_composes():
    slurm_dir = CONF_DIR.parent / "slurm"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[f"hydra.searchpath=[file://{slurm_dir}]", "hydra/launcher=example_cluster"])
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "gpu"
    assert launcher.gpus_per_node == 8 and "source .venv/bin/activate" in launcher.setup


# -- sizes: the paper's when asked, the laptop's only for the embedded model ------------------

README = (CONF_DIR.parent / "README.md").read_text()
PAPER_LINES = ["python -m aes.run proposer=claude solver=qwen",
               "python -m aes.run experiment=paper_frontier",
               "python -m aes.run experiment=paper_self_play"]
SWEEP_LINES = [f"python -m aes.run -m -cd sweeps -cn {p.stem}" for p in sorted(SWEEPS.glob("*.yaml"))
               if "mode: eval" not in p.read_text()]  # evaluation sweeps take the solver from the command line


def compose_line(line: str):
    """A README command line as Hydra composes it; a sweep as its first job."""
    assert line in README, f"the README no longer shows {line!r}"
    args = line.split()[3:]
    if "-cn" not in args:
        return compose_config(args)
    sweep = args[args.index("-cn") + 1]
    params = compose_sweep(sweep, [], hydra=True).hydra.sweeper.params
    return load_config(compose_sweep(sweep, [f"{k}={str(v).split(',')[0]}" for k, v in params.items()]))


def assert_paper_sizes(cfg) -> None:
    """App. G.1 Table 12, App. D.2 Table 10, App. G.4 and the 128k sequence length."""
    t, f, h, c, s = cfg.trainer, cfg.flywheel, cfg.harness, cfg.calibration, cfg.sandbox
    assert (t.lr, t.envs_per_update, t.attempts_per_env) == (1e-6, 16, 16)
    assert (t.delta_low, t.delta_high, t.kl_coef, t.entropy_coef) == (0.1, 0.1, 0.0, 0.0)
    assert t.max_seq_len == cfg.solver.context_length == 131072 <= t.micro_batch_tokens
    assert (f.proposer_interval, t.updates_per_refresh, f.pool_size) == (16, 16, 256)
    assert f.rounds * f.proposer_interval == 288 and f.assignments_per_round * f.proposer_samples >= 64
    # the paper's Prompt arm never runs what it writes: it gets no revisions (App. G.4's two are for the others)
    revisions = 0 if h.name == "prompt" else 2
    assert (h.max_turns, h.episode_timeout_sec, h.cpus, h.memory_mb, h.max_revisions) == (None, 7200, 16, 32768,
                                                                                            revisions)
    assert (s.default_cpus, s.default_memory_mb) == (4, 8192)
    assert (c.initial_attempts, c.expanded_attempts, c.band_low, c.band_high, c.min_std) == (4, 8, 0.25, 0.75, 0.1)
    assert (f.parent_attempts or c.initial_attempts) == 4
    assert cfg.agent.max_turns is None and cfg.solver.max_tokens >= 8192
    if f.shared_policy:
        assert f.proposer_samples == 128  # one proposer group per generation


@pytest.mark.parametrize("line", PAPER_LINES + SWEEP_LINES)
def test_design_card_lines_run_at_paper_scale(line):
    cfg = compose_line(line)
    assert cfg.solver.backend == "openai_compatible"
    assert_paper_sizes(cfg)
    sizes = describe_sizes(cfg)
    assert "proposer turns" in sizes and "131072" in sizes
    if cfg.harness.name == "terminal":
        assert "no limit, 2 h budget" in sizes


def test_the_embedded_default_runs_at_laptop_scale():
    cfg = compose_line("python -m aes.run")
    assert (cfg.proposer.backend, cfg.solver.backend) == ("local", "local")
    t, f, h = cfg.trainer, cfg.flywheel, cfg.harness
    assert (t.envs_per_update, t.attempts_per_env, t.max_seq_len, t.micro_batch_tokens) == (1, 4, 4096, 4096)
    assert (cfg.agent.max_turns, cfg.solver.max_tokens, cfg.proposer.max_tokens) == (4, 256, 512)
    assert (h.max_turns, h.max_revisions, h.episodes_at_once, h.episode_timeout_sec) == (10, 1, 1, 90)
    assert (f.rounds, f.assignments_per_round, f.proposer_interval, f.max_group_draws, f.parent_attempts) == (1, 1, 1, 3, 2)
    assert (cfg.sandbox.default_cpus, cfg.sandbox.default_memory_mb) == (1, 2048)
    assert compose_config(["experiment=embedded"]) == cfg


def test_laptop_sizes_follow_each_model_choice():
    claude_on_laptop = compose_config(["proposer=claude"])  # frontier proposer, embedded solver
    assert claude_on_laptop.harness.max_turns is None and claude_on_laptop.harness.max_revisions == 2
    assert claude_on_laptop.trainer.envs_per_update == 1 and claude_on_laptop.agent.max_turns == 4
    open_solver = compose_config(["solver=qwen"])  # embedded proposer, open solver
    assert open_solver.harness.max_turns == 10 and open_solver.trainer.envs_per_update == 16
    back = compose_config(["experiment=paper_frontier", "solver=local", "proposer=local"])
    assert back.trainer.max_seq_len == 4096 and back.harness.max_turns == 10  # command line holds


PROPOSER_SCALES = sorted(p.stem for p in (CONF_DIR / "scale" / "proposer").glob("*.yaml"))


@pytest.mark.parametrize("proposer", PROPOSER_SCALES + ["claude"])  # every laptop scale, and the paper's
def test_the_prompt_arm_never_revises_at_any_scale(proposer):
    """The paper's Prompt arm never runs what it writes: 0 revisions, also where a scale file gives the
    arms that revise fewer (the laptop's one) — as Table 2's sweep composes it."""
    laptop = proposer in PROPOSER_SCALES
    for harness, revisions in (("prompt", 0), ("prompt_feedback", 1 if laptop else 2), ("terminal", 1 if laptop else 2)):
        swept = load_config(compose_sweep("table2_harness", [f"harness={harness}", f"proposer={proposer}"]))
        assert (swept.harness.name, swept.harness.max_revisions) == (harness, revisions)
        assert swept.harness.max_turns == (10 if laptop else None) and swept.proposer.name == proposer
        assert compose_config([f"harness={harness}", f"proposer={proposer}"]).harness.max_revisions == revisions
    with pytest.raises(ConfigError, match="harness=prompt never runs what it writes.*harness=prompt_feedback"):
        compose_config(["harness=prompt", f"proposer={proposer}", "harness.max_revisions=1"])


@pytest.mark.parametrize("path", sorted((CONF_DIR / "scale").rglob("*.yaml")), ids=lambda p: p.stem)
def test_every_scale_file_belongs_to_a_model_option(path):
    role = path.parent.name
    assert (CONF_DIR / role / path.name).exists(), f"{path} is never chosen: no {role}={path.stem}"
    cfg = compose_config([f"{role}={path.stem}"])
    assert cfg.flywheel.rounds == 1 if role == "solver" else cfg.harness.max_turns == 10


def test_no_turn_limit_is_representable():
    from aes.config import AgentConfig, HarnessConfig

    assert AgentConfig(max_turns=None).max_turns is None and HarnessConfig().max_turns is None
    with pytest.raises(ConfigError, match="harness.max_turns"):
        compose_config(["harness.max_turns=0"])
    with pytest.raises(ConfigError, match="flywheel.proposer_interval"):
        compose_config(["flywheel.proposer_interval=0"])


def _readme_groups() -> dict[str, set[str]]:
    """The README's config-group table: group -> the options it names (`name` in the options cell)."""
    table = README[README.index("### Config groups"):].split("\n\n")[1]
    out = {}
    for row in table.splitlines()[2:]:
        groups, options = row.split("|")[1:3]
        for group in groups.split(","):
            out[group.strip()] = set(re.findall(r"`([\w-]+)`", options))
    return out


def test_readme_config_table_matches_conf_both_ways():
    """Every option the README names composes, every option file of conf/ is named, every group has a row."""
    listed = _readme_groups()
    on_disk = {str(d.relative_to(CONF_DIR)): {p.stem for p in d.glob("*.yaml")} for d in CONF_DIR.rglob("*")
               if d.is_dir() and any(d.glob("*.yaml")) and d.relative_to(CONF_DIR).parts[0] not in ("hydra",)
               and str(d.relative_to(CONF_DIR)) not in ("trainer/deepspeed", "harness/arm")}  # in their parent's row
    assert set(listed) == set(on_disk), "groups in the README table vs conf/"
    for group, options in listed.items():
        assert options == on_disk[group], f"{group}: README lists {sorted(options)}, conf/ has {sorted(on_disk[group])}"


def test_every_schema_field_is_read_somewhere():
    """A field nobody reads is a knob that does nothing: wire it or delete it."""
    import dataclasses
    import re

    from aes.config import schema

    from tests.conftest import REPO

    source = "\n".join(p.read_text() for p in (REPO / "aes").rglob("*.py") if p.name != "schema.py")
    unread = [f"{cls.__name__}.{f.name}" for cls in vars(schema).values()
              if isinstance(cls, type) and dataclasses.is_dataclass(cls) for f in dataclasses.fields(cls)
              if not re.search(rf"\.{f.name}\b|[\"']{f.name}[\"']", source)]
    assert unread == []


def _schema_default(cls, name):
    import dataclasses

    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def test_each_value_has_one_home_no_schema_default_contradicts_its_group_file():
    """A field the default group file sets has no contradicting default in the schema: the schema
    leaves it unset (``???``) or agrees. A YAML interpolation (``${solver.context_length}``) is the
    value's home too. Model files (proposer, solver) are exempt: each is a set of its own, and the
    schema's model defaults only fill what a model file leaves out."""
    import dataclasses

    import yaml

    defaults = {next(iter(d)): d[next(iter(d))] for d in yaml.safe_load((CONF_DIR / "config.yaml").read_text())["defaults"]
                if isinstance(d, dict) and len(d) == 1 and next(iter(d)) in GROUPS}
    contradictions = []

    def walk(cls, data: dict, prefix: str) -> None:
        for key, value in data.items():
            if key == "defaults":
                continue
            default = _schema_default(cls, key)
            if dataclasses.is_dataclass(default) and isinstance(value, dict):
                walk(type(default), value, f"{prefix}{key}.")
                continue
            if default == "???" or default in (None, [], {}):  # unset: the YAML is the home
                continue
            if isinstance(value, str) and "${" in value or value != default:
                contradictions.append(f"{prefix}{key}: schema {default!r}, {prefix.split('.')[0]} file {value!r}")

    for group, option in defaults.items():
        if group in ("proposer", "solver"):
            continue
        cls = type(_schema_default(schema.AesConfig, group))
        walk(cls, yaml.safe_load((CONF_DIR / group / f"{option}.yaml").read_text()) or {}, f"{group}.")
    assert contradictions == []


def test_paper_self_play_documents_a_cold_start_that_composes():
    """experiment=paper_self_play's comment gives the cold start (App. H: mode=sft on proposer
    trajectories, then self-play from its weights); every command it shows composes."""
    text = (CONF_DIR / "experiment" / "paper_self_play.yaml").read_text()
    commands = re.findall(r"#\s+python -m aes\.run ((?:[^\n]*\\\n#)*[^\n]*)", text)
    commands = [" ".join(c.replace("\\\n#", " ").split()) for c in commands]
    assert len(commands) == 2 and commands[0].startswith("mode=sft") and "experiment=paper_self_play" in commands[1]
    sft = compose_config(commands[0].replace("RUN_DIR", "/tmp/run").split())
    assert sft.mode == "sft" and sft.sft.role == "proposer" and sft.sft.max_trajectories == 600
    out = sft.run_dir or re.search(r"hydra\.run\.dir=(\S+)", commands[0]).group(1)
    play = compose_config(commands[1].split())
    assert play.flywheel.shared_policy and play.solver.model == play.proposer.model == f"{out}/sft_model"
