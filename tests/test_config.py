"""Every config file composes and validates; the schema stays documented and light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from aes.config import CONF_DIR, ConfigError, compose_config, load_config, register_schema
from aes.config import schema

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
