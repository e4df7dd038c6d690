"""The Docker sandbox in which tasks are built, solved and verified.

What it isolates
  * Each trial runs in a fresh container from the task's image, removed (SIGKILL,
    no grace period) when the trial ends, whatever happened in it; a container aes could not
    remove (aes killed) stops by itself after its longest possible trial.
  * CPU (``nano_cpus``), memory (no swap beyond it), the number of processes (``pids_limit``)
    and the disk it writes (``storage_mb``, in disk blocks, a watchdog: :mod:`aes.sandbox.storage`) are capped
    per container, so a fork bomb, a memory hog or a disk filler only ends its own trial.
    Every declared limit is bounded by ``sandbox.max_*`` (:mod:`aes.sandbox.limits`).
  * ``network_mode = "no-network"`` (and ``allowlist``, which aes cannot enforce
    host by host) runs the container with no network interface but loopback. With network,
    builds, trials and proposer sandboxes use aes's own bridge, from which the host's own
    services cannot be reached (:mod:`aes.sandbox.network`).
  * Commands run with a host-side deadline; the output kept per command is capped
    (head and tail), so a flood of output cannot exhaust the aes process.
  * ``solution/`` and ``tests/`` are not in the image: the solution is uploaded
    only for the oracle, the tests only to the verifier.
  * The verifier does not trust the agent's container (``sandbox.trusted_verifier``, the
    default): the agent's processes are frozen and ``tests/test.sh`` runs in a fresh container
    of the pristine image that receives the agent's file changes minus the verifier's runtime
    and configuration (:mod:`aes.sandbox.verifier` states the guarantee,
    :mod:`aes.sandbox.seal` the denylist, :mod:`aes.sandbox.carry` how changes are read).
  * Everything aes creates is labelled with its owner process; containers of a
    crashed aes process on this host are removed when the next one starts.
  * A restart of the Docker engine mid-run costs the trials in flight their containers,
    not their results: they wait for the engine and run again; a nearly full Docker disk
    stops the run with a message instead of failing trials (:mod:`aes.sandbox.engine`).

What it does not isolate
  * Tests that import or run the agent's own code run that code in the verifier.
  * Containers share the host kernel (Docker's default seccomp and capabilities);
    this is not a VM boundary.
  * The storage watchdog measures every ``sandbox.storage_poll_sec``: what is written between
    two measurements can pass the limit (``sandbox.min_free_disk_gib`` still guards the disk).
  * Image builds have network access (to package registries; not to the host); their steps run
    under memory, CPU and process caps (:mod:`aes.sandbox.buildcaps`; the process cap needs a
    local engine with the cgroupfs driver and aes as root).
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
