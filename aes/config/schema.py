"""Typed schemas for every Hydra config group.

Each dataclass mirrors one folder of ``conf/``; the YAML files there only choose
values. A composed config is merged into these schemas by :func:`aes.config.load`,
so a typo or a wrong type fails at start-up with the key that is wrong.

This module must stay importable without torch, vLLM or DeepSpeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING


class ConfigError(ValueError):
    """A config value that cannot work; the message says what to set."""


MODES = ("run", "validate", "rollout", "calibrate", "generate", "train", "eval", "sft")


REQUEST_SETTINGS = ("temperature", "seed", "logprobs", "parallel_tool_calls", "reasoning_effort", "thinking",
                    "prompt_cache")
"""The model settings a client turns into request parameters (what ``unsupported_params`` may name)."""
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def _check_request_settings(cfg: ModelConfig) -> None:
    unknown = [p for p in cfg.unsupported_params if p not in REQUEST_SETTINGS]
    if unknown:
        raise ConfigError(f"model {cfg.name}: unsupported_params names {', '.join(map(str, unknown))}; each must be one "
                          f"of {', '.join(REQUEST_SETTINGS)}")
    if cfg.reasoning_effort is not None and cfg.reasoning_effort not in REASONING_EFFORTS:
        raise ConfigError(f"model {cfg.name}: reasoning_effort must be one of {', '.join(REASONING_EFFORTS)} or "
                          f"null, got {cfg.reasoning_effort!r}")
    if cfg.reasoning_tokens < 0:
        raise ConfigError(f"model {cfg.name}: reasoning_tokens must be >= 0, got {cfg.reasoning_tokens}")
    if cfg.thinking not in (None, "adaptive", "enabled", "disabled"):
        raise ConfigError(f"model {cfg.name}: thinking must be adaptive, enabled, disabled or null, got {cfg.thinking!r}")
    if cfg.thinking == "enabled" and cfg.reasoning_tokens < 1024:
        raise ConfigError(f"model {cfg.name}: thinking=enabled spends a budget of reasoning_tokens, which must be at "
                          f"least 1024 (got {cfg.reasoning_tokens}); set reasoning_tokens or thinking=adaptive")


@dataclass
class ModelConfig:
    """A model that plays the proposer or the solver (``conf/proposer``, ``conf/solver``)."""

    name: str = MISSING
    """Short name used in paths and metrics, e.g. ``local`` or ``qwen9b``."""
    backend: str = MISSING
    """Client implementation: anthropic, openai, openai_compatible, local or tiny."""
    model: str = MISSING
    """Model identifier sent to the backend (API model name, GGUF path or tiny preset)."""
    base_url: Optional[str] = None
    """Server URL for openai_compatible backends (vLLM, SGLang); None for hosted APIs."""
    base_urls: list[str] = field(default_factory=list)
    """Several servers of the same model (openai_compatible): requests are spread over them and an
    episode's turns stay on one; empty uses base_url. Set by the job when it starts the servers
    (``cluster.servers``)."""
    engine: str = "auto"
    """The server behind an openai_compatible base_url, which decides how exact token ids and
    log-probs are asked for: vllm (its return_token_ids extensions), llamacpp (the server's own
    chat template, /tokenize and a completion on those ids) or auto (learnt from the health check)."""
    api_key_env: Optional[str] = None
    """Environment variable holding the API key; None when the backend needs none."""
    temperature: float = 1.0
    """Sampling temperature."""
    max_tokens: int = 2048
    """Most tokens generated per model call."""
    logprobs: bool = False
    """Ask the backend for per-token log-probs (needed to train on the trajectories)."""
    context_length: int = 8192
    """Largest prompt + completion the model accepts, in tokens."""
    price_input_per_mtok: float = 0.0
    """USD per million prompt tokens, for cost accounting."""
    price_output_per_mtok: float = 0.0
    """USD per million generated tokens, for cost accounting."""
    price_cached_input_per_mtok: Optional[float] = None
    """USD per million prompt tokens read from the provider's cache; None charges the full input price."""
    price_cache_write_per_mtok: Optional[float] = None
    """USD per million prompt tokens written to the provider's cache (Anthropic bills a write above
    the input price, OpenAI not at all); None charges the full input price."""
    unsupported_params: list[str] = field(default_factory=list)
    """Settings of this config whose request parameter the model answers with an error: the client
    never sends them, whatever a caller asks (e.g. ``[temperature]`` for OpenAI's reasoning models,
    which take no temperature but their own). Any of temperature, seed, logprobs, parallel_tool_calls,
    reasoning_effort, thinking, prompt_cache."""
    parallel_tool_calls: bool = False
    """Whether the model may call several tools in one reply. False asks the API for one call at a
    time (OpenAI's ``parallel_tool_calls: false``, Anthropic's ``disable_parallel_tool_use``); either
    way the agent runs every call a reply holds, in order, each with its own result."""
    reasoning_effort: Optional[str] = None
    """How much a reasoning model thinks (OpenAI's ``reasoning_effort``, Anthropic's
    ``output_config.effort``): none, minimal, low, medium, high, xhigh or max; None: the model's
    default (nothing sent)."""
    reasoning_tokens: int = 0
    """Tokens a call may spend reasoning on top of its ``max_tokens``. The APIs count reasoning in the
    completion limit (OpenAI's ``max_completion_tokens``, Anthropic's ``max_tokens``), so a call asks
    for max_tokens + reasoning_tokens: a reply's own budget (a turn, the review's
    ``admission.review_max_tokens``) is not eaten by its reasoning. Reasoning tokens are counted
    apart (``reasoning_tokens`` in usage, trajectories and the run's totals) and billed as output."""
    thinking: Optional[str] = None
    """Anthropic's thinking: adaptive (the model decides how much), enabled (a budget of
    ``reasoning_tokens``, at least 1024) or disabled; None: nothing sent (the model's default)."""
    prompt_cache: bool = True
    """Ask the provider to cache the prompt's prefix (Anthropic: a top-level ``cache_control``; OpenAI
    caches by itself): each turn of an episode reads its history back at ``price_cached_input_per_mtok``."""
    timeout_sec: float = 600.0
    """Timeout of one model call."""
    max_retries: int = 5
    """Retries with backoff on rate limits, 5xx and timeouts."""
    use_tools: Optional[bool] = None
    """Send tool specs (native tool calls); None uses the backend's default, False asks for fenced blocks."""
    threads: Optional[int] = None
    """CPU threads of an in-process backend (local, tiny); None uses every core."""
    parallel: int = 2
    """Concurrent generation slots of an in-process server (local)."""
    seed: Optional[int] = None
    """Sampling seed where the backend supports one; None draws a fresh one."""
    rope_scaling: Any = None
    """Config overrides that let the model read ``context_length`` tokens (e.g. ``{rope_parameters:
    {rope_type: yarn, factor: 4.0, original_max_position_embeddings: 32768}, max_position_embeddings:
    131072}``), given to vLLM (--hf-overrides) and to the trainer's model load alike; None: the model
    card's recipe of its family when the context needs one (aes/models/families.py)."""

    def __post_init__(self) -> None:
        _check_request_settings(self)
        if self.temperature < 0:
            raise ConfigError(f"model temperature must be >= 0, got {self.temperature}")
        if self.max_tokens <= 0:
            raise ConfigError(f"model max_tokens must be > 0, got {self.max_tokens}")
        if self.engine not in ("auto", "vllm", "llamacpp"):
            raise ConfigError(f"model engine must be auto, vllm or llamacpp, got {self.engine!r}")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, dict):
            raise ConfigError(f"model rope_scaling must be a mapping of config overrides or null, got {self.rope_scaling!r}")


@dataclass
class AgentConfig:
    """The terminal agent that attempts tasks (``conf/agent``); the proposer's terminal harness reuses it."""

    max_turns: Optional[int] = None
    """Most model turns (one shell command each) per episode; None: no turn limit (the task's
    [agent] timeout_sec, the model's context length and max_episode_tokens still end it; paper
    App. D.2). The laptop's limit lives in ``conf/scale/``."""
    command_timeout_sec: float = 120.0
    """Limit of one shell command; the episode's own limit is the task's [agent] timeout_sec."""
    observation_chars: int = 4000
    """Most characters of command output shown to the model per turn (head and tail kept)."""
    max_format_errors: int = 3
    """Consecutive replies without a command (and without saying done) that end the episode."""
    max_episode_tokens: Optional[int] = None
    """Most prompt + completion tokens per episode; None means only the model's context length limits it."""
    system_prompt: Optional[str] = None
    """Replace the built-in system prompt (see aes/agents/prompts.py)."""
    compact_at: Optional[float] = 0.8
    """Context compaction (aes/agents/compaction.py): when the conversation and the next reply would
    fill more than this fraction of the model's context, the oldest tool outputs are replaced by a
    stub, recorded in the trajectory; None: never (the episode ends at the context limit)."""
    compact_to: float = 0.5
    """Fraction of the context a compaction brings the conversation down to (where old outputs allow)."""
    compact_keep: int = 2
    """The most recent tool outputs a compaction always keeps whole."""

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError("agent.max_turns must be >= 1, or null for no turn limit")
        if self.compact_at is not None and not 0.0 < self.compact_to < self.compact_at <= 1.0:
            raise ConfigError(f"agent.compact_to ({self.compact_to}) and agent.compact_at ({self.compact_at}) must "
                              "satisfy 0 < compact_to < compact_at <= 1 (or compact_at: null for no compaction)")
        if self.compact_keep < 0:
            raise ConfigError("agent.compact_keep must be >= 0")


@dataclass
class HarnessConfig:
    """How the proposer builds a task (``conf/harness``; paper §4.1)."""

    name: str = "terminal"
    """prompt (one generation), prompt_feedback (generate, run, revise) or terminal (agent in a sandbox)."""
    max_revisions: int = 2
    """Revisions of one draft after failed admission checks (paper App. G.4). Always 0 for the prompt
    arm, which never runs what it writes (conf/harness/arm/prompt.yaml sets it at every scale)."""
    max_turns: Optional[int] = None
    """Most agent turns of one terminal-harness episode; None: no turn limit, only
    episode_timeout_sec (paper App. D.2: no limit, a 2-hour budget)."""
    episode_timeout_sec: float = 7200.0
    """Wall-clock budget of one proposer episode (paper: 2 h)."""
    cpus: float = 16.0
    """CPUs of the proposer's sandbox (paper: 16; clamped to the host)."""
    memory_mb: int = 32768
    """Memory of the proposer's sandbox in MiB (paper: 32 GiB)."""
    solver_probe_attempts: int = 2
    """Solver attempts the ``solver_model`` tool runs on a draft."""
    feedback_rounds: int = 3
    """prompt_feedback: build-and-run rounds fed back to the model while it drafts one task."""
    episodes_at_once: int = 2
    """Proposer episodes run concurrently in mode=generate."""
    context_chars: int = 24000
    """Most characters of parent task files and trajectories put in a prompt-harness prompt."""
    web_access: bool = False
    """Give the proposer web access (off by default, as in the paper)."""
    reflection: bool = True
    """Between rounds, let the proposer edit its memory, skills and tools from its past rewards
    (harness optimization, paper §3.3: a frontier proposer improves only through its harness, §4.2).
    On at the paper's sizes; the embedded laptop proposer (``conf/scale/proposer/local.yaml``) and the
    static pool turn it off."""
    solver_feedback: bool = True
    """Show the proposer the solver's trajectories, rewards and failures (off: the Table 3 ablation)."""

    def __post_init__(self) -> None:
        if self.name not in ("prompt", "prompt_feedback", "terminal", "scripted"):
            raise ConfigError(
                f"harness.name must be prompt, prompt_feedback, terminal or scripted, got {self.name!r}"
            )
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError("harness.max_turns must be >= 1, or null for no turn limit")
        if self.name == "prompt" and self.max_revisions != 0:
            raise ConfigError(
                f"harness=prompt never runs what it writes (paper §4.1), so harness.max_revisions must be 0, got "
                f"{self.max_revisions}; for revisions from build and test logs use harness=prompt_feedback"
            )
        if self.max_revisions < 0:
            raise ConfigError(f"harness.max_revisions must be >= 0, got {self.max_revisions}")
        if self.episode_timeout_sec <= 0:
            raise ConfigError(f"harness.episode_timeout_sec must be > 0, got {self.episode_timeout_sec}")


@dataclass
class ReviewCriterion:
    """One rubric item of the LLM review (admission check 6)."""

    name: str = MISSING
    """Short identifier, e.g. ``tests_match_instruction``."""
    requirement: str = MISSING
    """What must hold for the criterion to pass, in plain words for the grader."""


@dataclass
class DomainRubric:
    """The review criteria of one domain (``admission.domain_rubrics.<domain>``)."""

    criteria: list[ReviewCriterion] = field(default_factory=list)
    """Each replaces the shared criterion of the same name, or joins the rubric."""


@dataclass
class AdmissionConfig:
    """Admission checks a proposed task must pass (``conf/admission``; DESIGN.md §Admission)."""

    nop_max_reward: float = 0.5
    """The do-nothing run must score below this."""
    ngram: int = 13
    """Decontamination window: reject an instruction sharing this many consecutive words with a held-out
    task (stride 1); a hash index built for another window size is refused."""
    review: bool = True
    """Run the LLM review (check 6); its grader is the proposer's model."""
    review_max_tokens: int = 2048
    """Most tokens of the grader's reply."""
    review_file_chars: int = 6000
    """Most characters of each task file shown to the grader."""
    rubric: list[ReviewCriterion] = field(default_factory=list)
    """The review criteria of every domain; every one must pass."""
    domain_rubrics: dict[str, DomainRubric] = field(default_factory=dict)
    """Per domain: criteria that replace the shared one of the same name, or join the rubric."""

    max_build_sec: float = 900.0
    """Admission builds a task's image for at most this long, whatever its build_timeout_sec says
    (checks 1-4 as a whole end in bounded time; a cached image costs nothing)."""
    max_reference_sec: float = 900.0
    """Admission runs solution/solve.sh for at most this long, whatever its [agent] timeout_sec says."""
    max_verifier_sec: float = 900.0
    """Admission runs the reference's tests for at most this long, whatever [verifier] timeout_sec says."""
    nop_verifier_factor: float = 3.0
    """The do-nothing run's tests get this many times the reference's measured test time (at least
    ``nop_verifier_floor_sec``); cut there, the task is rejected (``nop.verifier_timeout``): tests that do
    not end when the work is missing cost every failing solver attempt the whole verifier timeout."""
    nop_verifier_floor_sec: float = 60.0
    """The least time the do-nothing run's tests get (a [verifier] timeout_sec within this bound may be
    waited out, as Harbor does: that do-nothing run counts as below ``nop_max_reward``, with a warning)."""

    def rubric_for(self, domain: str) -> list[ReviewCriterion]:
        """The rubric a task of ``domain`` is reviewed against (shared criteria, domain ones over them)."""
        own = {c.name: c for c in (self.domain_rubrics[domain].criteria if domain in self.domain_rubrics else [])}
        shared = [own.pop(c.name, c) for c in self.rubric]
        return shared + list(own.values())

    def __post_init__(self) -> None:
        for name in ("max_build_sec", "max_reference_sec", "max_verifier_sec", "nop_verifier_factor",
                     "nop_verifier_floor_sec"):
            value = getattr(self, name)
            if not 0 < value < 1e9:
                raise ConfigError(f"admission.{name} must be a positive number of seconds (or a factor), got {value!r}")


@dataclass
class DomainConfig:
    """What kind of environments to build (``conf/domain``)."""

    name: str = "terminal"
    """Domain name; its package is ``aes/domains/<name>/``."""
    seeds: Optional[str] = None
    """Directory of seed tasks; None uses the domain's packaged seeds."""
    decontam_index: Optional[str] = None
    """Hash file of held-out benchmark instructions for decontamination (admission check 5): the
    BLAKE2b-64 hashes of their ``admission.ngram``-word windows, one a line after a ``#`` comment
    (``aes decontam build`` writes one). A relative path is looked up in ``aes/domains/<name>/``
    first (the terminal domain ships ``decontam/terminal-bench-2.1.ngrams``), then in the working
    directory. None (and no benchmark_instructions): decontamination is off, with a warning."""
    benchmark_instructions: Optional[str] = None
    """Held-out benchmark tasks of your own, hashed with the same recipe and added to the index:
    a task dir, a dir of them (every instruction.md below it, at any depth) or an instruction file."""
    reset_check: bool = False
    """Admission also starts the environment twice (same initial state?) and runs the reference
    twice (paper App. C; on for the domains of App. C, off for terminal tasks, as Harbor admits them)."""
    blocker_registry: bool = False
    """Every task of the domain is human-in-the-loop (aes/hil): a task without ``blockers.json`` is
    rejected at the static checks (``hil.no_registry``), as is a malformed registry (on for ``hil``)."""
    nop_zero: bool = False
    """Admission demands that doing nothing earns exactly 0 (paper App. C.1, for its domains), not just
    less than ``admission.nop_max_reward``: a partial-credit test must give no section to an untouched
    environment."""


@dataclass
class CalibrationConfig:
    """The calibration band (``conf/calibration``; paper §3.2, App. G.4)."""

    initial_attempts: int = 4
    """Solver attempts per candidate environment."""
    expanded_attempts: int = 8
    """Attempts after expansion, when the mean lies near a band edge."""
    expand_margin: float = 0.15
    """Expand when the mean is within this distance of a band edge."""
    band_low: float = 0.25
    """Lowest admitted mean reward."""
    band_high: float = 0.75
    """Highest admitted mean reward."""
    min_std: float = 0.1
    """Lowest admitted reward standard deviation across attempts."""
    diagnostic_rollouts: int = 1
    """Rollouts with reference-solution hints run for a task below the band."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.band_low < self.band_high <= 1.0:
            raise ConfigError(
                f"calibration band must satisfy 0 <= band_low < band_high <= 1, "
                f"got [{self.band_low}, {self.band_high}]"
            )
        if self.expanded_attempts < self.initial_attempts:
            raise ConfigError("calibration.expanded_attempts must be >= initial_attempts")


@dataclass
class DeepSpeedConfig:
    """DeepSpeed engine settings (``conf/trainer/deepspeed``); the same engine runs on CPU (gloo) and GPU."""

    zero_stage: int = 0
    """ZeRO stage 0-3."""
    bf16: Optional[bool] = None
    """Train in bf16; None: bf16 on GPU, fp32 on CPU."""
    gradient_clipping: float = 1.0
    """Global gradient-norm clip; 0 disables it."""
    offload_optimizer: bool = False
    """Keep optimizer states in host memory (ZeRO >= 1; needs DeepSpeed's cpu_adam op)."""
    offload_param: bool = False
    """Keep parameters in host memory between uses (ZeRO 3 only)."""
    torch_adam: bool = True
    """Use torch.optim.AdamW (no op to compile); false selects DeepSpeed's FusedAdam kernel."""

    def __post_init__(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3):
            raise ConfigError(f"trainer.deepspeed.zero_stage must be 0-3, got {self.zero_stage}")
        if self.offload_optimizer and self.zero_stage < 1:
            raise ConfigError("trainer.deepspeed.offload_optimizer needs zero_stage >= 1")
        if self.offload_param and self.zero_stage != 3:
            raise ConfigError("trainer.deepspeed.offload_param needs zero_stage=3")
        if self.gradient_clipping < 0:
            raise ConfigError(f"trainer.deepspeed.gradient_clipping must be >= 0, got {self.gradient_clipping}")


@dataclass
class TrainerConfig:
    """Solver training with DPPO (``conf/trainer``; paper §3.3, App. G.1; code in ``aes/train``)."""

    algorithm: str = "dppo"
    """Registered policy-gradient variant (only dppo)."""
    lr: float = 1e-6
    """Learning rate (constant)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    envs_per_update: int = 16
    """Groups (environments) with varying rewards per update; flat groups are dropped and more collected."""
    attempts_per_env: int = 16
    """Attempts per environment in a group."""
    delta_low: float = 0.1
    """Trust-region bound for negative advantages (mu - pi > delta_low is masked)."""
    delta_high: float = 0.1
    """Trust-region bound for positive advantages (pi - mu > delta_high is masked)."""
    aggregation: str = "token_mean"
    """Loss aggregation: token_mean (sum over all loss tokens of the update / their count; paper) or seq_mean."""
    temperature: float = MISSING
    """Sampling temperature of the rollout engine; logits are divided by it so pi matches mu's distribution.
    No default here: ``conf/trainer/dppo.yaml`` takes the solver's (``${solver.temperature}``)."""
    kl_coef: float = 0.0
    """KL penalty coefficient (paper: 0; no reference model is kept, so only 0 is accepted)."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (paper: 0)."""
    max_seq_len: int = MISSING
    """Longest packed training sequence in tokens; longer model calls keep their first max_seq_len tokens.
    No default here: ``conf/trainer/dppo.yaml`` sets it to the solver's context (paper: 128k)."""
    micro_batch_tokens: int = MISSING
    """Most padded tokens (rows x longest row) per forward/backward; gradients accumulate over one update.
    No default here: ``conf/trainer/dppo.yaml`` sets it to ``max_seq_len``."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass (SmolLM2 on CPU: -33% step memory, +20% step time)."""
    proposer_partial_reward: float = 0.5
    """Proposer reward r_P of a valid environment that was not admitted (broken: 0, admitted: 1)."""
    weight_sync: str = "auto"
    """How the rollout engine gets new weights: auto (the solver backend's default), gguf, shared, copy,
    vllm_server (NCCL into running vLLM servers, GPUs), vllm_reload (a safetensors checkpoint the running
    vLLM servers reload in place, CPU) or llamacpp_server (which backend allows which: aes/train/backends.py)."""
    vllm_group_port: int = 51216
    """Port of the NCCL rendezvous between trainer and vLLM server (weight_sync=vllm_server)."""
    updates_per_refresh: int = 16
    """Solver updates between pool refreshes."""
    keep_checkpoints: int = 2
    """Newest DeepSpeed checkpoints kept in RUN_DIR/checkpoints (older ones are deleted after each save)."""
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    """DeepSpeed engine settings."""

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ConfigError(f"trainer.lr must be > 0, got {self.lr}")
        if self.algorithm != "dppo":
            raise ConfigError(f"trainer.algorithm must be dppo, got {self.algorithm!r}")
        if self.kl_coef != 0:
            raise ConfigError("trainer.kl_coef must be 0: aes keeps no reference model (the paper uses 0)")
        if self.delta_low < 0 or self.delta_high < 0:
            raise ConfigError("trainer.delta_low and trainer.delta_high must be >= 0")
        if self.aggregation not in ("token_mean", "seq_mean"):
            raise ConfigError(f"trainer.aggregation must be token_mean or seq_mean, got {self.aggregation!r}")
        if self.temperature != MISSING and self.temperature <= 0:
            raise ConfigError("trainer.temperature must be > 0 (greedy rollouts have no log-probs to train on)")
        if self.envs_per_update < 1 or self.attempts_per_env < 2:
            raise ConfigError("set trainer.envs_per_update >= 1 and trainer.attempts_per_env >= 2 "
                              "(a group of one attempt has no reward spread)")
        set_ = MISSING not in (self.micro_batch_tokens, self.max_seq_len)  # the schema itself is built unset
        if set_ and self.micro_batch_tokens < self.max_seq_len:
            raise ConfigError(f"trainer.micro_batch_tokens ({self.micro_batch_tokens}) must be >= "
                              f"trainer.max_seq_len ({self.max_seq_len})")
        if not 0.0 <= self.proposer_partial_reward <= 1.0:
            raise ConfigError("trainer.proposer_partial_reward must lie in [0, 1]")
        if self.weight_sync not in ("auto", "gguf", "shared", "copy", "vllm_server", "vllm_reload",
                                    "llamacpp_server"):
            raise ConfigError("trainer.weight_sync must be auto, gguf, shared, copy, vllm_server, vllm_reload or "
                              f"llamacpp_server, got {self.weight_sync!r}")


@dataclass
class SandboxConfig:
    """Where tasks are built and run (``conf/sandbox``)."""

    backend: str = "docker"
    """docker, or simulated (in-process rewards from skill and difficulty: experiment=simulated)."""
    docker_host: Optional[str] = None
    """Docker endpoint; None reads DOCKER_HOST or uses the local socket."""
    base_image: str = "aes-base:bookworm"
    """Local image built by ``aes sandbox bootstrap``."""
    image_aliases: dict[str, str] = field(default_factory=dict)
    """Public base image -> local image used when the public one cannot be pulled."""
    pull_missing: bool = True
    """Try to pull a missing public base image before falling back to its alias."""
    pull_timeout_sec: float = 120.0
    """Give up pulling a base image after this long."""
    default_cpus: float = MISSING
    """CPUs of a trial container when task.toml gives none (clamped to the host). No default here:
    ``conf/sandbox/docker.yaml`` holds the paper's 4 (App. G.3), ``conf/scale/`` the laptop's."""
    default_memory_mb: int = MISSING
    """Memory of a trial container in MiB when task.toml gives none. No default here:
    ``conf/sandbox/docker.yaml`` holds the paper's 8 GiB, ``conf/scale/`` the laptop's."""
    pids_limit: int = 1024
    """Most processes in one trial container (stops fork bombs)."""
    build_memory_mb: int = 8192
    """Memory of an image build's steps in MiB (clamped to the host; 0: no cap)."""
    build_cpus: float = 4.0
    """CPUs of an image build's steps (clamped to the host; 0: no cap)."""
    build_pids_limit: int = 4096
    """Most processes of an image build's steps at once (a cgroup of its own: needs a local engine
    with the cgroupfs driver and aes as root; 0: no cap)."""
    default_build_timeout_sec: float = 600.0
    """Image build limit when task.toml gives none."""
    default_agent_timeout_sec: float = 600.0
    """Agent (and oracle) phase limit when task.toml gives none."""
    default_verifier_timeout_sec: float = 600.0
    """Verifier phase limit when task.toml gives none."""
    output_limit_bytes: int = 262144
    """Most bytes of output kept per exec (head and tail are kept, the middle dropped)."""
    trial_logs_max_mb: int = 32
    """Most MiB of a trial's /logs/agent and /logs/artifacts (screenshots, agent logs) copied out
    beside its trajectory (or ``aes validate --logs``); larger logs are left behind, with a note."""
    max_context_mb: int = 256
    """Largest build context accepted, in MiB."""
    concurrency: int = 4
    """Tasks validated / trials run at once."""
    reap_on_start: bool = True
    """Remove containers left behind by crashed aes processes on this host."""
    bootstrap_suite: str = "bookworm"
    """Debian suite of the bootstrapped base image."""
    bootstrap_mirror: Optional[str] = None
    """Debian mirror for debootstrap; None reads it from the host's apt sources."""
    bootstrap_packages: list[str] = field(default_factory=list)
    """Packages installed into the base image (python3 and the verifier's tools)."""
    ca_cert_dir: str = "/usr/local/share/ca-certificates"
    """Host directory of extra CA certificates injected into the base image."""
    trusted_verifier: bool = True
    """Verify sealed: in a fresh container from the task's pristine image that receives the
    agent's file changes minus the verifier's own runtime (aes/sandbox/carry.py); False verifies
    in the agent's own container, exactly as Harbor does (for tests that need the agent's
    running services)."""
    max_build_timeout_sec: float = 3600.0
    """Upper bound on any task's [environment] build_timeout_sec (larger values are clamped)."""
    max_agent_timeout_sec: float = 7200.0
    """Upper bound on any task's [agent] timeout_sec (the oracle's too)."""
    max_verifier_timeout_sec: float = 3600.0
    """Upper bound on any task's [verifier] timeout_sec."""
    max_cpus: float = 16.0
    """Upper bound on a task's [environment] cpus (also clamped to the host)."""
    max_memory_mb: int = 32768
    """Upper bound on a task's [environment] memory_mb (also clamped to the host)."""
    default_storage_mb: int = 10240
    """Writable-layer limit of a trial container in MiB when task.toml gives no storage_mb."""
    max_storage_mb: int = 20480
    """Upper bound on a task's [environment] storage_mb."""
    storage_poll_sec: float = 1.0
    """How often the storage watchdog measures each trial container's writable layer."""
    max_tests_mb: int = 64
    """Largest tests/ (and solution/) directory accepted, in MiB (sizes are read, not the files)."""
    max_instruction_kb: int = 256
    """Largest instruction.md accepted, in KiB."""
    max_carry_entries: int = 200000
    """Most changed paths carried from the agent's container into the verifier's (and four times as
    many looked at, those not carried included)."""
    max_carry_sec: float = 120.0
    """Longest time reading the agent's changes may take; past it the attempt ends as
    storage_exceeded (an agent that leaves too much to carry scores 0)."""
    tamper_audit: bool = True
    """Watch which of the agent's carried files the verifier's processes run (fanotify on the
    engine's host, as root; aes/sandbox/audit.py): one loaded as code where the reference
    solution's verification loaded none, or a start-up or loader path touched, ends the attempt
    as tampered (reward 0)."""
    isolate_host: bool = True
    """Run builds and trials on aes's own bridge network, from which the host's own services (the
    engine's gateway and every host address) cannot be reached (needs root and iptables; a warning
    says when it cannot be set up)."""
    network_name: str = "aes-isolated"
    """Name of that Docker network (its bridge interface is ``aes`` + 8 hex digits of a hash)."""
    engine_wait_sec: float = 600.0
    """How long a trial or build waits for a Docker engine that went away (restart, crash)
    before the run stops with a message; the run resumes when started again."""
    engine_retries: int = 3
    """Times one trial or build is run again after losing its container to an engine restart."""
    min_free_disk_gib: float = 2.0
    """Stop with a clear message when Docker's data root (engine on this host) has less free
    space than this, in GiB; 0 disables the check."""
    # -- where trials run (aes/sandbox/ray_executor.py) --
    executor: str = "local"
    """local (trials in this process, on this machine's engine) or ray (trials and their agent loops
    as Ray tasks on the nodes of a Ray cluster, each node on its own engine; needs the ray extra)."""
    ray_address: Optional[str] = None
    """Ray cluster to join (``HOST:PORT``, ``auto``, ``ray://...``); None: RAY_ADDRESS, else the
    cluster ``ray start`` runs on this machine, else a new one-machine Ray instance."""
    ray_cpus_per_trial: Optional[float] = None
    """Ray CPUs one trial asks for; None: the task's cpus (or default_cpus), bounded like the container."""
    ray_memory_mb_per_trial: Optional[int] = None
    """Ray memory (MiB) one trial asks for; None: the task's memory_mb (or default_memory_mb); 0: none."""
    ray_resources: dict[str, float] = field(default_factory=dict)
    """Extra Ray resources per trial, e.g. ``+sandbox.ray_resources.aes_sandbox=1`` to keep trials on
    nodes started with ``--resources='{"aes_sandbox": N}'`` (at most N trials at a time there)."""
    ray_max_retries: int = 3
    """Times Ray runs a trial (or build) again elsewhere after its node or worker process died."""
    ray_node_docker_hosts: dict[str, str] = field(default_factory=dict)
    """Ray node -> Docker host its trials use; key: a custom resource of the node, a node label
    ``key=value``, or its IP. Nodes without an entry use DOCKER_HOST from ``ray start``'s
    environment, else the default socket."""

    def __post_init__(self) -> None:
        if self.backend not in ("docker", "simulated"):
            raise ConfigError(f"sandbox.backend must be 'docker' or 'simulated', got {self.backend!r}")
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"sandbox.executor must be 'local' or 'ray', got {self.executor!r}")
        if self.executor == "ray" and self.backend != "docker":
            raise ConfigError("sandbox.executor=ray runs Docker trials: it needs sandbox.backend=docker")
        if self.ray_max_retries < 0:
            raise ConfigError(f"sandbox.ray_max_retries must be >= 0, got {self.ray_max_retries}")
        if self.ray_cpus_per_trial is not None and not 0 < self.ray_cpus_per_trial < 1e6:
            raise ConfigError(f"sandbox.ray_cpus_per_trial must be > 0 or null, got {self.ray_cpus_per_trial!r}")
        if self.ray_memory_mb_per_trial is not None and self.ray_memory_mb_per_trial < 0:
            raise ConfigError(f"sandbox.ray_memory_mb_per_trial must be >= 0 or null, got {self.ray_memory_mb_per_trial!r}")
        bad = {k: v for k, v in self.ray_resources.items() if not (isinstance(v, (int, float)) and v > 0)}
        if bad:
            raise ConfigError(f"sandbox.ray_resources values must be positive numbers, got {bad}")
        if self.concurrency < 1:
            raise ConfigError("sandbox.concurrency must be >= 1")
        if self.output_limit_bytes < 1024:
            raise ConfigError("sandbox.output_limit_bytes must be >= 1024")
        if self.build_memory_mb < 0 or self.build_cpus < 0 or self.build_pids_limit < 0:
            raise ConfigError("sandbox.build_memory_mb, build_cpus and build_pids_limit must be >= 0 (0: no cap)")
        if 0 < self.build_pids_limit < 16 or 0 < self.build_memory_mb < 64:
            raise ConfigError("sandbox.build_pids_limit must be 0 or >= 16 and sandbox.build_memory_mb 0 or >= 64: "
                              "a build needs a few processes and some memory for its shell")
        if self.engine_retries < 0 or self.engine_wait_sec < 0:
            raise ConfigError("sandbox.engine_retries and sandbox.engine_wait_sec must be >= 0")
        for name in ("max_build_timeout_sec", "max_agent_timeout_sec", "max_verifier_timeout_sec", "max_cpus",
                     "max_memory_mb", "default_storage_mb", "max_storage_mb", "storage_poll_sec",
                     "max_tests_mb", "max_instruction_kb", "max_carry_entries", "max_carry_sec"):
            value = getattr(self, name)
            if not 0 < value < 1e12:
                raise ConfigError(f"sandbox.{name} must be a positive number, got {value!r}")


@dataclass
class LoggerConfig:
    """Metrics sinks (``conf/logger``)."""

    name: str = "jsonl"
    """jsonl (metrics.jsonl in the run dir) or wandb."""
    project: str = "aes"
    """wandb project."""
    mode: str = "offline"
    """wandb mode: offline, online or disabled."""
    group: Optional[str] = None
    """wandb group; None: the sweep dir of a multirun (``-m``: its jobs land in one group), else no group."""
    run_name: Optional[str] = None
    """wandb run name; None: ``<job number>:<the swept overrides>`` in a multirun, else the run dir's name."""
    tags: list[str] = field(default_factory=list)
    """wandb tags, added to ``mode=…``, ``proposer=…``, ``solver=…`` and ``harness=…`` of the run."""


@dataclass
class HilConfig:
    """Human-in-the-loop tasks (``aes/hil``; paper §4.5): the setting solver attempts run in."""

    setting: str = "ask_human"
    """full_info (the withheld answers stated), ask_human (incomplete instruction + the tool) or no_tool."""
    judge: str = "auto"
    """Who decides which withheld details a question asks about: model (``judge_model``, with the
    domain's judge prompt), keyword (deterministic: the blocker's keywords, for offline tests), or
    auto: the model judge wherever a model other than the solver is configured to judge
    (``judge_model``, or a proposer served by an API or a model server), else the keyword judge (the
    embedded, tiny and scripted models, a shared policy)."""
    judge_model: Optional[ModelConfig] = None
    """The model behind ``judge=model``: any model config of ``conf/proposer/`` or ``conf/solver/``,
    chosen with ``proposer@hil.judge_model=NAME`` (e.g. claude, gpt, local); None: the proposer's
    (``proposer=...``). It may not be the solver's own model unless chosen here by name."""
    max_blockers_per_question: int = 2
    """A question the judge finds about more blockers than this is too broad to answer: the simulated
    human replies neutrally and reveals none (a question naming every topic, keyword stuffing), and
    it counts as a question that hit nothing."""
    shaped_reward_weight: float = 0.0
    """The DPPO advantage is computed from task reward + this x Ask-F1 (``extra.reward_shaped``; 0:
    the task reward alone). Eval, calibration, the index and ``sft.min_reward`` always read the task
    reward (``extra.reward``)."""

    def __post_init__(self) -> None:
        if self.setting not in ("full_info", "ask_human", "no_tool"):
            raise ConfigError(f"hil.setting must be full_info, ask_human or no_tool, got {self.setting!r}")
        if self.judge not in ("auto", "keyword", "model"):
            raise ConfigError(f"hil.judge must be auto, keyword or model, got {self.judge!r}")
        if self.shaped_reward_weight < 0:
            raise ConfigError("hil.shaped_reward_weight must be >= 0")
        if self.max_blockers_per_question < 1:
            raise ConfigError("hil.max_blockers_per_question must be >= 1")


@dataclass
class EvalConfig:
    """Evaluation of the solver on a benchmark during training (Table 3, Fig. 20's x axis)."""

    tasks: Optional[str] = None
    """Directory of benchmark tasks evaluated during a run; None: no evaluation during training."""
    every: int = 16
    """Evaluate after every this many DPPO updates (and before the first)."""
    attempts: int = 5
    """Attempts per task: avg@k and pass@k with k = attempts (the paper reports avg@5)."""

    def __post_init__(self) -> None:
        if self.every < 1 or self.attempts < 1:
            raise ConfigError("eval.every and eval.attempts must be >= 1")


@dataclass
class FlywheelConfig:
    """Sizes of the whole loop (``conf/flywheel``; paper App. G.1 in ``experiment=paper_*``)."""

    rounds: int = MISSING
    """Rounds (generations): each is a proposer generation and ``proposer_interval`` solver updates.
    No default here: ``conf/flywheel/default.yaml`` holds the paper's 18 (x 16 = 288 updates)."""
    assignments_per_round: int = MISSING
    """Assignments per generation (each runs ``proposer_samples`` episodes). No default here:
    ``conf/flywheel/default.yaml`` holds it."""
    proposer_samples: int = 1
    """Episodes per assignment; > 1 gives the shared-policy proposer a group to centre its rewards on."""
    proposer_interval: int = 16
    """Solver steps (DPPO updates) between proposer generations (paper k, App. G.1); the proposer's
    trajectories of a generation are trained once, in the update right after it."""
    pool_size: int = 256
    """Target size of the active pool; no more assignments are given once it is reached (an
    assignment counts for ``proposer_samples`` envs: each of its episodes may add one)."""
    min_pool: int = 4
    """A refresh never retires envs below this many admitted ones."""
    replacements_per_retired: float = 1.0
    """New envs the next generation asks the proposer for per env a refresh retired (paper §3.3): it
    opens ``ceil(retired x this / proposer_samples)`` replacement assignments (each of an assignment's
    episodes submits one env), whose parents are the retired envs, farthest outside the band first,
    with the solver's newest rollouts on them; on top of ``assignments_per_round``, within the room
    ``pool_size`` leaves. 1 replaces what left the band one for one; above 1 makes up for
    replacements that miss admission; 0 asks for none (the pool only shrinks at a refresh)."""
    max_group_draws: int = 3
    """Draw up to this many times ``trainer.envs_per_update`` envs looking for groups with reward spread."""
    parent_attempts: Optional[int] = None
    """Fresh solver attempts on each assignment's parent env before a generation (None:
    ``calibration.initial_attempts``, the paper's 4); those with reward spread also train."""
    refresh: bool = True
    """Review the pool every ``trainer.updates_per_refresh`` updates, retiring envs that left the band
    (off: a static pool, the Tmax-style baseline of experiment=static_pool)."""
    carry_unfinished: bool = False
    """Carry unfinished solver attempts across updates (paper App. G.1): an update starts once enough
    groups are complete; attempts still running keep their container and history and go on under the
    new policy, their earlier tokens keeping the log-probs they were sampled with."""
    carry_max_updates: int = 2
    """Most policy updates one carried attempt may see; past it the episode ends (``policy_span``)."""
    shared_policy: bool = False
    """One policy is proposer and solver and is trained on both reward groups (experiment=self_play)."""
    train_proposer: bool = True
    """In shared-policy mode, also train on the proposer's episodes (off: the Fig. 20 ablation)."""

    def __post_init__(self) -> None:
        if self.carry_max_updates < 0:
            raise ConfigError(f"flywheel.carry_max_updates must be >= 0, got {self.carry_max_updates}")
        if self.proposer_interval < 1:
            raise ConfigError(f"flywheel.proposer_interval must be >= 1, got {self.proposer_interval}")
        if self.replacements_per_retired < 0:
            raise ConfigError(f"flywheel.replacements_per_retired must be >= 0, got {self.replacements_per_retired}")
        if self.parent_attempts is not None and self.parent_attempts < 1:
            raise ConfigError(f"flywheel.parent_attempts must be >= 1 or null, got {self.parent_attempts}")


@dataclass
class SFTConfig:
    """Cold-start fine-tuning (``mode=sft``; paper App. H). Sequence length, micro-batching,
    DeepSpeed and (by default) the learning rate come from ``trainer``; the seed from ``seed``."""

    role: str = "any"
    """Trajectories to train on: proposer, solver or any."""
    proposer_outcomes: list[str] = field(default_factory=lambda: ["admitted"])
    """Proposer episodes whose extra.outcome is one of these (broken, valid, admitted)."""
    min_reward: float = 1.0
    """Solver attempts whose extra.reward is at least this (attempts without a reward never count)."""
    max_trajectories: Optional[int] = None
    """Most trajectories after the filters (paper: 600 proposer, 75 HiL); None keeps all."""
    select: str = "newest"
    """Which ones when there are more: newest (last step's timestamp) or random (with the run's seed)."""
    epochs: int = 1
    """Passes over the selected trajectories (shuffled with the run's seed each pass)."""
    trajectories_per_step: int = 8
    """Trajectories per optimizer step; the loss is the token mean over all of their assistant tokens."""
    lr: Optional[float] = None
    """Learning rate of the fine-tuning; None uses trainer.lr."""
    tool_format: str = "auto"
    """Tool calls of rendered trajectories: native (the template's tool-call syntax), fenced (the
    agent's fenced-block mode) or auto (fenced for tiny/local solvers, else native when the chat
    template renders tool_calls); see aes/train/render.py."""
    rerender: bool = False
    """Render every trajectory from its messages even where it carries token ids."""
    export: bool = True
    """Also write the weights as a transformers model (and a GGUF for local solvers) to RUN_DIR/sft_model/."""

    def __post_init__(self) -> None:
        if self.role not in ("any", "proposer", "solver"):
            raise ConfigError(f"sft.role must be one of {'any, proposer, solver'}, got {self.role!r}")
        bad = [o for o in self.proposer_outcomes if o not in ("broken", "valid", "admitted")]
        if bad:
            raise ConfigError(f"sft.proposer_outcomes must be broken, valid or admitted, got {bad}")
        if self.select not in ("newest", "random"):
            raise ConfigError(f"sft.select must be newest or random, got {self.select!r}")
        if self.max_trajectories is not None and self.max_trajectories < 1:
            raise ConfigError("sft.max_trajectories must be >= 1, or null for all")
        if self.epochs < 1 or self.trajectories_per_step < 1:
            raise ConfigError("sft.epochs and sft.trajectories_per_step must be >= 1")
        if self.lr is not None and self.lr <= 0:
            raise ConfigError(f"sft.lr must be > 0, got {self.lr}")
        if self.tool_format not in ("auto", "native", "fenced"):
            raise ConfigError(f"sft.tool_format must be one of {'auto, native, fenced'}, got {self.tool_format!r}")


@dataclass
class ClusterConfig:
    """What the job starts on its allocation around the run (``conf/cluster``; a cluster's own
    values in ``slurm/cluster_profile/``, pulled in by its launcher profile; code in ``aes/cluster``).

    GPUs are handed out per node: the servers take the first ones (a server never spans nodes), the
    DeepSpeed trainer one rank per remaining GPU of its nodes; the node holding trainer rank 0 runs
    the flywheel. Nothing happens unless ``servers`` > 0 or the trainer spans several ranks."""

    servers: int = 0
    """Rollout servers to start for the solver (0: none; solver.base_url is used as configured)."""
    backend: str = "vllm"
    """Server engine: vllm (GPUs, weights pushed over NCCL) or llamacpp (aes's llama.cpp server on a
    GGUF, e.g. CPU; new weights are a re-exported GGUF and a restart on the same port)."""
    gpus_per_server: int = 1
    """GPUs of each server (vLLM's tensor-parallel size); 0 for CPU servers."""
    model: Optional[str] = None
    """Model the servers load; None: solver.model."""
    command: list[str] = field(default_factory=list)
    """A server command replacing the backend's default; placeholders {model} {host} {port} {tp}
    {gpus} {name} {index}."""
    extra_args: list[str] = field(default_factory=list)
    """Arguments appended to every server command (e.g. --max-model-len 131072)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables of the servers."""
    port: Optional[int] = 8000
    """Port of server 0 (server i listens on port + i); None: free ports (servers on the flywheel's node only)."""
    bind_host: Optional[str] = None
    """Address the servers listen on; None: 127.0.0.1 on the flywheel's node, 0.0.0.0 on others."""
    health_timeout_sec: float = 1800.0
    """How long the job waits for every server's health check (model loading) before it fails."""
    stop_timeout_sec: float = 30.0
    """Grace between SIGTERM and SIGKILL when a server is stopped or restarted."""
    log_dir: Optional[str] = None
    """Directory of the server logs (one file per server); None: RUN_DIR/servers."""
    gpus_per_node: Optional[int] = None
    """GPUs of each node; None: counted from CUDA_VISIBLE_DEVICES, else nvidia-smi (0 on a CPU node)."""
    trainer_nodes: int = 1
    """Nodes the DeepSpeed trainer spans (data parallel, one rank per GPU no server uses); more than
    one needs a SLURM allocation of that many nodes (launcher nodes, one task per node)."""
    trainer_gpus_per_node: Optional[int] = None
    """Trainer ranks on each trainer node; None: every GPU of the node that no server uses."""
    master_port: Optional[int] = None
    """Rendezvous port of the trainer ranks on the first trainer node; None: derived from the job id."""
    dist_timeout_min: float = 1440.0
    """Timeout of the trainer ranks' collectives: the other ranks wait on rank 0's rollouts between updates."""
    python: Optional[str] = None
    """The interpreter whose vLLM serves (backend vllm); None: ``.aes-cache/vllm-venv`` when setup made it
    (AES_WITH_VLLM=1, vLLM's CPU build), else this interpreter (the ``vllm`` extra on GPU machines)."""
    tool_parser: str = "auto"
    """vLLM's --tool-call-parser: auto (the model family's, aes/models/families.py; none for a family
    without tool calls, whose solver then writes fenced blocks), none, or a parser name."""
    model_config: Optional[str] = None
    """A copy of the served model's config.json (or its directory) for the preflight's context check
    where the model itself is not on this machine; None: read it from the model."""

    def __post_init__(self) -> None:
        if self.backend not in ("vllm", "llamacpp"):
            raise ConfigError(f"cluster.backend must be vllm or llamacpp, got {self.backend!r}")
        if self.servers < 0 or self.gpus_per_server < 0:
            raise ConfigError("cluster.servers and cluster.gpus_per_server must be >= 0")
        if self.trainer_nodes < 1:
            raise ConfigError(f"cluster.trainer_nodes must be >= 1, got {self.trainer_nodes}")
        if self.trainer_gpus_per_node is not None and self.trainer_gpus_per_node < 1:
            raise ConfigError("cluster.trainer_gpus_per_node must be >= 1, or null for every free GPU")
        if self.health_timeout_sec <= 0 or self.stop_timeout_sec < 0 or self.dist_timeout_min <= 0:
            raise ConfigError("cluster.health_timeout_sec and dist_timeout_min must be > 0, stop_timeout_sec >= 0")

    @property
    def active(self) -> bool:
        """Whether the job starts anything (servers or more than one trainer rank)."""
        return self.servers > 0 or self.trainer_nodes > 1 or self.trainer_gpus_per_node is not None


@dataclass
class BudgetConfig:
    """Run-level spending limits on model calls (``budget.*``)."""

    max_usd: Optional[float] = None
    """Stop new model calls once this much USD is spent; None means no limit."""
    max_tokens: Optional[int] = None
    """Stop new model calls once this many tokens (prompt + completion) are used; None means no limit."""


@dataclass
class AesConfig:
    """The root config (``conf/config.yaml``)."""

    mode: str = "run"
    """run (the flywheel), validate, rollout, calibrate, generate, train, eval or sft (the cold start)."""
    tasks: Optional[str] = None
    """Task directory (or directory of tasks) for validate/rollout/calibrate/eval."""
    attempts: int = 4
    """Solver attempts per task in mode=rollout."""
    k: int = 5
    """Attempts per task in mode=eval (reports avg@k and pass@k)."""
    assignments: int = 4
    """Proposer episodes in mode=generate."""
    trajectories: Optional[str] = None
    """A trajectories/ dir (written by mode=rollout) that mode=train trains the solver on."""
    seed: int = 0
    """Random seed."""
    infra_failure_limit: int = 8
    """Solver attempts of one rollout batch that may end in an infrastructure failure (model server
    unreachable, Docker engine lost, sandbox error) before the run stops and names the causes;
    such attempts are never scored."""
    run_dir: Optional[str] = None
    """Output directory; None uses Hydra's run dir."""
    resume: Optional[str] = None
    """A run dir to continue with the config it was started with (``python -m aes.run resume=RUN_DIR``)."""
    proposer: ModelConfig = field(default_factory=ModelConfig)
    """The model that builds environments."""
    solver: ModelConfig = field(default_factory=ModelConfig)
    """The model that is trained on the environments."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The terminal agent (solver harness)."""
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    """The proposer harness."""
    domain: DomainConfig = field(default_factory=DomainConfig)
    """The environment domain."""
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    """Admission checks."""
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    """The calibration band."""
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """Solver training."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    """The container sandbox."""
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    """Metrics logging."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """Spending limits on model calls for the whole run."""
    flywheel: FlywheelConfig = field(default_factory=FlywheelConfig)
    """Sizes of the whole loop."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    """The cold start (mode=sft)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Benchmark evaluation during training."""
    hil: HilConfig = field(default_factory=HilConfig)
    """Human-in-the-loop tasks: the setting, the judge, the shaped reward."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """Model servers and trainer ranks the job starts on its allocation (aes/cluster)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
