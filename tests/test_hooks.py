"""The rules by which admission judges an image's start-up hooks (aes/sandbox/hooks.py), on the facts
the probe reports; tests/test_hostile_proposals.py runs them on built images."""

from __future__ import annotations

import json
import subprocess
import sys

from aes.sandbox.hooks import PROBE, _Judge

FACTS = {
    "homes": ["/root", "/home/dev"],
    "startup_path": ["/app", "/usr/lib/python3.11", "/usr/lib/python3/dist-packages"],
    "modules": {"_distutils_hack": "/usr/lib/python3/dist-packages/_distutils_hack/__init__.py", "armed": None,
                "planted": "/app/planted.py", "os": "/usr/lib/python3.11/os.py"},
    "paths": {"/app/x.so": {"exists": False, "writable": False}, "/app/lib.so": {"exists": True, "writable": False}, "/usr/lib/missing.so": {"exists": False, "writable": False},
              "/opt/tool/lib.so": {"exists": True, "writable": False}, "/srv/open.sh": {"exists": True, "writable": True},
              "/home/dev/.bash_aliases": {"exists": False, "writable": False},
              "/etc/debian_chroot": {"exists": False, "writable": False}, "/usr/lib/python3.11": {"exists": True}},
}


def judge() -> _Judge:
    return _Judge(FACTS, "/app")


def hook(kind: str, imports=(), refs=(), dynamic=()) -> dict:
    return {"file": "/x", "kind": kind, "binary": False, "imports": list(imports), "refs": list(refs),
            "dynamic": list(dynamic)}


def test_what_the_agent_can_write():
    j = judge()
    assert "workdir" in j.writable("/app/lib.so")
    assert "does not exist" in j.writable("/app/x.so")
    assert "does not exist" in j.writable("/etc/debian_chroot")
    assert "scratch" in j.writable("/tmp/rc") and "scratch" in j.writable("/dev/shm/x")
    assert "home /home/dev" in j.writable("/home/dev/tools/run.sh")
    assert "writable by the agent's user" in j.writable("/srv/open.sh")
    assert "relative" in j.writable("./hook.js")
    assert j.writable("/usr/lib/missing.so") is None  # the agent's work never reaches /usr in the verifier
    assert j.writable("/opt/tool/lib.so") is None
    assert j.writable("/home/dev/.bash_aliases") is None  # a home's dot-entries are never carried


def test_python_hooks_are_judged_by_what_they_import():
    j = judge()
    assert j.hook(hook("pth", imports=["_distutils_hack", "os"])) == []
    assert "imports armed, which the image does not have, while /app" in j.hook(hook("pth", imports=["armed"]))[0]
    assert "imports planted from /app/planted.py" in j.hook(hook("python", imports=["planted"]))[0]
    assert "calls exec() with a value it computes" in j.hook(hook("pth", dynamic=["exec"]))[0]
    assert j.hook({**hook("python"), "binary": True})[0].startswith("is a start-up module that exists only as bytecode")


def test_a_missing_import_is_inert_without_a_writable_directory_on_the_start_up_path():
    facts = {**FACTS, "startup_path": ["/usr/lib/python3.11", "/usr/lib/python3/dist-packages"]}
    assert _Judge(facts, "/app").hook(hook("python", imports=["armed"])) == []


def test_preloads_and_shell_hooks_are_judged_by_the_paths_they_name():
    j = judge()
    assert "lies in the workdir" in j.hook(hook("preload", refs=["/app/lib.so"]))[0]
    assert "outside the image's runtime" in j.hook(hook("preload", refs=["/opt/tool/lib.so"]))[0]
    assert j.hook(hook("preload", refs=["/usr/lib/missing.so"])) == []
    assert "scratch" in j.hook(hook("shell", refs=["/tmp/.rc"]))[0]
    assert j.hook(hook("shell", refs=["/home/dev/.bash_aliases", "/usr/lib/command-not-found"])) == []


def test_start_up_variables_of_the_image():
    j = judge()
    assert "names /app/x.so, which does not exist" in j.variable("BASH_ENV", "/app/x.so")[0]
    assert j.variable("NODE_OPTIONS", "--require=./hook.js")[-1] == "loads code named by an option"
    assert j.variable("NODE_OPTIONS", "--max-old-space-size=4096") == []
    assert j.variable("PYTHON_VERSION", "3.12.1") == [] and j.variable("LANG", "C.UTF-8") == []
    assert j.variable("JAVA_HOME", "/opt/tool/lib.so") == []


def test_the_probe_reads_hooks_without_running_them(tmp_path):
    """The probe itself, run by this Python on a planted site directory: the .pth's code line is
    listed with what it imports and names, and the code never ran."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "zz.pth").write_text("/some/dir\nimport armed, os; exec(open('/app/h.py').read())\n")
    (site / "zz2.pth").write_text("import sys; __import__(sys.argv[0])\n")
    out = tmp_path / "facts.json"
    script = (f"import site; site.getsitepackages = lambda: [{str(site)!r}]\n"
              f"exec(compile(open({str(PROBE)!r}).read(), 'probe', 'exec'))")
    args = json.dumps({"env": {}, "agent_uid": None, "paths": [], "out": str(out)})
    subprocess.run([sys.executable, "-I", "-S", "-c", script, args], check=True, timeout=60)
    facts = json.loads(out.read_text())
    pth = {h["file"].rsplit("/", 1)[-1]: h for h in facts["hooks"] if h["kind"] == "pth"}
    assert pth["zz.pth"]["imports"] == ["armed", "os"] and pth["zz.pth"]["refs"] == ["/app/h.py"]
    assert pth["zz.pth"]["dynamic"] == ["exec"] and pth["zz2.pth"]["dynamic"] == ["__import__"]
    assert facts["modules"]["armed"] is None and facts["paths"]["/app/h.py"]["exists"] is False
