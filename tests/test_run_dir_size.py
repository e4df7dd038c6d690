"""A run ends by saying how much disk its run dir takes, as ``du`` counts it, largest parts first."""

from __future__ import annotations

import re
import subprocess

from aes.paths import disk_usage, human_bytes, size_line

UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def _du(path) -> int:
    return int(subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def test_disk_usage_is_what_du_counts(tmp_path):
    (tmp_path / "checkpoints" / "step_1").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step_1" / "weights.bin").write_bytes(b"\0" * 3_000_000)
    (tmp_path / "metrics.jsonl").write_text("{}\n" * 1000)
    (tmp_path / "link").symlink_to(tmp_path / "checkpoints")  # not followed
    total, parts = disk_usage(tmp_path)
    assert total == _du(tmp_path)
    assert set(parts) == {"checkpoints/", "metrics.jsonl", "link"} and parts["checkpoints/"] >= 3_000_000
    line = size_line(tmp_path)
    assert line.startswith(f"{tmp_path}: {human_bytes(total)} (checkpoints/ 3.0 MB, ")  # the largest first
    assert "metrics.jsonl 4.1 KB" in line
    assert (human_bytes(999), human_bytes(1500), human_bytes(2.1e9)) == ("999 B", "1.5 KB", "2.1 GB")


def test_a_run_logs_its_run_dir_size(simulated_run):
    log = (simulated_run / "run.log").read_text()
    [line] = [line for line in log.splitlines() if "run dir " in line and str(simulated_run) in line]
    value, unit, parts = re.search(rf"run dir {re.escape(str(simulated_run))}: ([\d.]+) (B|KB|MB|GB) \((.+)\)$",
                                   line).groups()
    # the total was measured with the pool database's write-ahead log still open: it may shrink since
    assert 0.7 * _du(simulated_run) < float(value) * UNITS[unit] < 1.5 * _du(simulated_run)
    listed = dict(part.split(" ", 1) for part in parts.split(", "))  # {"viewer/": "4.4 MB", ...}
    assert len(listed) == 3 and {"viewer/", "proposer/"} <= set(listed)
    for name in ("viewer/", "proposer/"):  # parts no longer written to: exactly what du says now
        assert listed[name] == human_bytes(_du(simulated_run / name)), name
