"""Decontamination (admission check 5): the shipped Terminal-Bench 2.1 index is on by default,
hash files and benchmark task dirs go through one recipe, and ``aes decontam`` builds and checks."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass

import pytest

from aes.admission.decontam import (Decontaminator, instruction_files, ngram_hashes, read_index, window_hashes,
                                    words, write_index)
from aes.admission.validate import ValidationReport
from aes.config import ConfigError, compose_config
from aes.domains import decontam_index_path
from tests.conftest import REPO, SEEDS, make_task

SHIPPED = REPO / "aes" / "domains" / "terminal" / "decontam" / "terminal-bench-2.1.ngrams"

# The opening sentence of a Terminal-Bench 2.1 instruction (adaptive-rejection-sampler): 16 words,
# so 4 windows of 13, each of which is in the shipped index.
TB21_PHRASE = "Your task is to implement an adaptive-rejection sampler as described in Gilks et al. (1992)."
OWN_TEXT = ("Before you begin, note that the quarterly inventory ledger in the warehouse directory uses "
            "semicolons as separators and lists every pallet with its weight in kilograms.")


def readme_recipe(text: str, n: int = 13) -> set[str]:
    """The recipe of the index's README, written out independently of aes."""
    tokens = re.findall(r"\w+", text.lower())
    return {hashlib.blake2b(" ".join(tokens[i:i + n]).encode(), digest_size=8).hexdigest()
            for i in range(len(tokens) - n + 1)}


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def aes_cli(*args: str) -> Ran:
    """``aes ARGS`` in-process (the exit status, stdout and stderr a shell would see)."""
    from typer.testing import CliRunner

    from aes.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})  # rich wraps usage errors
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


# -- the recipe and the shipped index ---------------------------------------------------------

def test_tokenization_reproduces_the_readme_recipe():
    text = OWN_TEXT + " Ünïcode wörds, CASE and punctuation (a/b-c) — all \u00e9t\u00e9 tokens_with_underscores 42."
    assert ngram_hashes(text) == readme_recipe(text)
    assert ngram_hashes(text, 8) == readme_recipe(text, 8)
    assert len(window_hashes(words(text), 13)) == len(words(text)) - 12
    assert ngram_hashes("too short to have a window") == set()
    # punctuation, case and whitespace do not matter
    assert ngram_hashes(OWN_TEXT.upper().replace(" ", "\n  ").replace(",", " ;")) == ngram_hashes(OWN_TEXT)


def test_the_shipped_index_is_packaged_and_loads():
    path = decontam_index_path(compose_config([]).domain)
    assert path is not None and path.resolve() == SHIPPED.resolve()
    hashes, n = read_index(SHIPPED)
    assert (len(hashes), n) == (12948, 13)
    lines = SHIPPED.read_text().splitlines()
    assert lines[0].startswith("#") and "Terminal-Bench 2.1" in lines[0]
    assert lines[1:] == sorted(set(lines[1:])) and all(re.fullmatch(r"[0-9a-f]{16}", h) for h in lines[1:])
    assert (SHIPPED.parent / "README.md").is_file()  # its source, beside it
    # packaged with the domain: pyproject's package data covers aes/domains/**
    assert '"aes.domains" = ["**/*"]' in (REPO / "pyproject.toml").read_text()


def test_a_known_benchmark_phrase_is_in_the_shipped_index():
    hashes, _ = read_index(SHIPPED)
    assert readme_recipe(TB21_PHRASE) <= hashes and len(readme_recipe(TB21_PHRASE)) == 4
    assert not readme_recipe(OWN_TEXT) & hashes


def test_round_trip_through_a_copy_of_the_shipped_index(tmp_path):
    hashes, _ = read_index(SHIPPED)
    planted = sorted(readme_recipe(OWN_TEXT))[0]
    copy = write_index(tmp_path / "tb21+own.ngrams", hashes | {planted}, "13-gram test copy")
    decon = Decontaminator.from_paths([copy], 13)
    assert len(decon) == 12949
    reason = decon.check("Intro.\n\n" + OWN_TEXT)
    assert reason.code == "decontam.overlap" and reason.message.startswith("1 of the instruction's")
    assert Decontaminator.from_paths([SHIPPED], 13).check(OWN_TEXT) is None


# -- admission, by default ----------------------------------------------------------------------

@pytest.fixture
def default_pipeline():
    """The composition root's admission pipeline with the default config; checks 1-4 stubbed
    (no Docker), no review, no calibration."""
    from aes.compose import build_admission

    cfg = compose_config(["admission.review=false"])
    validator, pipeline, _ = build_admission(cfg, trials=object(), rollouts=None, grader=None)
    validator.validate = lambda path: ValidationReport(str(path), True)
    pipeline.calibrator = None
    return pipeline


def test_a_task_sharing_a_tb21_window_is_rejected_by_default(default_pipeline, tmp_path):
    bad = make_task(tmp_path, "bad", instruction=f"# Sampler\n\n{TB21_PHRASE}\nWrite it in R.\n")
    verdict = default_pipeline.admit(bad, "env_bad")
    assert not verdict.valid and verdict.failed_stage == "decontam"
    [reason] = verdict.reasons
    assert reason.code == "decontam.overlap"
    assert "4 of the instruction's" in reason.message and "terminal-bench-2.1.ngrams" in reason.message
    assert "adaptive rejection sampler as described in gilks" in reason.message  # the candidate's own words

    clean = make_task(tmp_path, "clean", instruction=OWN_TEXT + "\nWrite the total weight to /app/total.txt.\n")
    verdict = default_pipeline.admit(clean, "env_clean")
    assert verdict.valid and verdict.reasons == []


def test_the_seed_tasks_are_clean():
    decon = Decontaminator.from_domain(compose_config([]).domain)
    for name, file in instruction_files([SEEDS]):
        assert decon.check(file.read_text()) is None, name


def test_text_benchmarks_and_hash_files_share_one_path(tmp_path):
    bench = tmp_path / "bench"
    make_task(bench, "revenue", instruction=OWN_TEXT)
    (bench / "deep" / "more").mkdir(parents=True)
    (bench / "deep" / "more" / "instruction.md").write_text("Sort the ledger by pallet weight, heaviest first, "
                                                          "and keep the semicolons exactly where they were.")
    from_text = Decontaminator.from_paths([bench], 13)
    assert from_text.instructions == 2
    index = write_index(tmp_path / "bench.ngrams", from_text.index, "13-gram")
    from_hashes = Decontaminator.from_paths([index], 13)
    assert set(from_text.index) == set(from_hashes.index) == readme_recipe(OWN_TEXT) | readme_recipe(
        (bench / "deep" / "more" / "instruction.md").read_text())
    candidate = "Please do this: " + " ".join(OWN_TEXT.split()[3:20]) + " thanks"
    for decon in (from_text, from_hashes):
        assert decon.check(candidate).code == "decontam.overlap"
    assert "bench/revenue" in from_text.check(candidate).message  # a text benchmark names its task


def test_the_message_quotes_only_the_candidates_words():
    held_out = "zqx " * 5 + OWN_TEXT + " secretword " * 5
    decon = Decontaminator({"bench/t": held_out}, 13)
    candidate = " ".join(OWN_TEXT.split()[:14])
    reason = decon.check(candidate)
    assert reason.code == "decontam.overlap" and "2 of the instruction's 2 13-word windows" in reason.message
    assert "zqx" not in reason.message and "secretword" not in reason.message
    assert "weight" not in reason.message  # held-out words after the shared ones are not shown


def test_the_domain_config_is_checked(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="aes.admission.decontam"):
        decon = Decontaminator.from_domain(compose_config(["domain.decontam_index=null"]).domain)
    assert decon.empty and decon.check(TB21_PHRASE) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "domain.decontam_index" in warnings[0] and "OFF" in warnings[0]

    with pytest.raises(ConfigError, match="domain.decontam_index"):
        Decontaminator.from_domain(compose_config(["domain.decontam_index=nope.ngrams"]).domain)
    with pytest.raises(ConfigError, match="domain.benchmark_instructions"):
        Decontaminator.from_domain(compose_config([f"domain.benchmark_instructions={tmp_path}/missing"]).domain)
    with pytest.raises(ConfigError, match="13-word windows but admission.ngram is 8"):
        Decontaminator.from_domain(compose_config([]).domain, 8)

    make_task(tmp_path / "bench", "own", instruction=OWN_TEXT)
    both = Decontaminator.from_domain(compose_config([f"domain.benchmark_instructions={tmp_path}/bench"]).domain)
    assert len(both) == 12948 + len(readme_recipe(OWN_TEXT))
    assert both.check(TB21_PHRASE) and both.check(OWN_TEXT)


# -- the CLI --------------------------------------------------------------------------------------

def test_cli_build_and_check(tmp_path):
    bench, cands = tmp_path / "bench", tmp_path / "cands"
    make_task(bench, "ledger", instruction=OWN_TEXT)
    make_task(cands, "copy", instruction="Intro. " + OWN_TEXT.upper())
    make_task(cands, "fresh", instruction="Count the lines of /app/data.txt and write the number to /app/n.txt.")
    out = tmp_path / "idx" / "bench.ngrams"
    proc = aes_cli("decontam", "build", str(bench), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# ") and "13-gram" in lines[0]
    assert lines[1:] == sorted(readme_recipe(OWN_TEXT))

    report = tmp_path / "rows.json"
    proc = aes_cli("decontam", "check", str(cands), "--index", str(out), "--json", str(report))
    assert proc.returncode == 1, proc.stderr
    rows = json.loads(report.read_text())
    windows = len(words(OWN_TEXT)) - 12
    assert rows == [{"task": str(cands / "copy"), "contaminated": True, "matches": windows},
                    {"task": str(cands / "fresh"), "contaminated": False, "matches": 0}]
    assert [json.loads(line) for line in proc.stdout.splitlines()] == rows

    assert aes_cli("decontam", "check", str(cands / "fresh"), "--index", str(out)).returncode == 0
    # an instruction file is a task too; text dirs work as --index as well
    assert aes_cli("decontam", "check", str(cands / "copy" / "instruction.md"), "--index", str(bench)).returncode == 1


def test_cli_check_uses_the_domains_index_by_default(tmp_path):
    make_task(tmp_path, "tb", instruction=TB21_PHRASE)
    make_task(tmp_path, "own", instruction=OWN_TEXT)
    proc = aes_cli("decontam", "check", str(tmp_path / "tb"))
    assert proc.returncode == 1 and json.loads(proc.stdout) == {"task": str(tmp_path / "tb"), "contaminated": True,
                                                                "matches": 4}
    assert aes_cli("decontam", "check", str(tmp_path / "own")).returncode == 0


def test_cli_usage_errors_exit_2(tmp_path):
    make_task(tmp_path, "own", instruction=OWN_TEXT)
    missing = aes_cli("decontam", "check", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "does not exist" in missing.stdout + missing.stderr
    assert aes_cli("decontam", "check", str(tmp_path / "own"), "--index", str(tmp_path / "nope.ngrams")).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = aes_cli("decontam", "check", str(empty))
    assert proc.returncode == 2 and "no instruction.md" in proc.stderr
    proc = aes_cli("decontam", "check", str(tmp_path / "own"), "--set", "domain.decontam_index=null")
    assert proc.returncode == 2 and "index is empty" in proc.stderr
    assert aes_cli("decontam", "build", str(empty), "--out", str(tmp_path / "x.ngrams")).returncode == 2
    bad = tmp_path / "bad.ngrams"
    bad.write_text("# 13-gram\n0123456789abcdef\nnot a hash\n")
    assert aes_cli("decontam", "check", str(tmp_path / "own"), "--index", str(bad)).returncode == 2

