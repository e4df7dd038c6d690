"""The Docker sandbox in which tasks are built, solved and verified.

What it isolates
  * Each trial runs in a fresh container from the task's image, removed (SIGKILL,
    no grace period) when the trial ends, whatever happened in it.
  * CPU (``nano_cpus``), memory (no swap beyond it), and the number of processes
    (``pids_limit``) are capped per container, so a fork bomb or a memory hog only
    kills its own trial.
  * ``network_mode = "no-network"`` (and ``allowlist``, which aes cannot enforce
    host by host) runs the container with no network interface but loopback.
  * Commands run with a host-side deadline; the output kept per command is capped
    (head and tail), so a flood of output cannot exhaust the aes process.
  * ``solution/`` and ``tests/`` are not in the image: the solution is uploaded
    only for the oracle, the tests only after the agent phase has ended.
  * Everything aes creates is labelled with its owner process; containers of a
    crashed aes process on this host are removed when the next one starts.
  * The verifier does not trust the container: with ``sandbox.trusted_verifier`` (the
    default) the agent's processes are killed first and the tests run with a read-only
    toolchain mounted from the host (:mod:`aes.sandbox.verifier_toolchain`, which states
    the guarantee and its limits).
  * A restart of the Docker engine mid-run costs the trials in flight their containers,
    not their results: they wait for the engine and run again; a nearly full Docker disk
    stops the run with a message instead of failing trials (:mod:`aes.sandbox.engine`).

What it does not isolate
  * Tests that import or run the agent's own code run that code in the verifier.
  * Containers share the host kernel (Docker's default seccomp and capabilities);
    this is not a VM boundary.
  * ``storage_mb`` is not enforced (overlay2 on ext4 has no per-container quota);
    disk use is bounded only by the host's free space.
  * Image builds have network access and run with the builder's defaults.
"""

from aes.sandbox.container import Container, ExecResult
from aes.sandbox.docker_backend import DockerSandbox, SandboxError
from aes.sandbox.docker_client import SandboxUnavailable, reap_orphans
from aes.sandbox.images import BuildResult, ImageBuilder
from aes.sandbox.trial import (
    AgentRun,
    NopAgent,
    OracleAgent,
    Outcome,
    TrialAgent,
    TrialResult,
    TrialRunner,
)

__all__ = [
    "AgentRun",
    "BuildResult",
    "Container",
    "DockerSandbox",
    "ExecResult",
    "ImageBuilder",
    "NopAgent",
    "OracleAgent",
    "Outcome",
    "SandboxError",
    "SandboxUnavailable",
    "TrialAgent",
    "TrialResult",
    "TrialRunner",
    "reap_orphans",
]
