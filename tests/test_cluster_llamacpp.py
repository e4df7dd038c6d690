"""The ``openai_compatible`` client against real llama.cpp servers (aes.cluster.llamacpp_server on the
embedded SmolLM2 GGUF): what DPPO needs from every model call is exact.

- ``prompt_token_ids`` are what the server consumed: the server's chat-template rendering, its
  tokenizer's ids (they decode back to that rendering);
- ``completion_token_ids`` are what it generated (they decode to the reply text) and
  ``completion_logprobs`` are log mu of each, the probability under softmax(logits / T) it sampled
  from (that the trainer's pi of the same ids agrees is asserted on a real update in
  tests/test_cluster_job.py: ``dppo/kl_rollout``);
- several servers share the calls and a conversation stays on the server of its first turn.
"""

from __future__ import annotations

import sys
import threading

import pytest

from aes.cluster.layout import Allocation, plan
from aes.cluster.servers import ServerGroup, http_get
from aes.cluster.session import server_specs
from aes.config import AesConfig, ClusterConfig, ModelConfig

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "system", "content": "You are a helpful assistant that solves tasks in a Linux terminal."},
            {"role": "user", "content": "List the files in /app and show the README."}]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two llama.cpp servers of SmolLM2 on free ports, one thread each."""
    run = tmp_path_factory.mktemp("run")
    solver = ModelConfig(name="smollm2", backend="openai_compatible", model="smollm2-135m-instruct", logprobs=True,
                         context_length=2048, max_tokens=24, threads=1, parallel=2, max_retries=1)
    cfg = AesConfig(solver=solver, proposer=solver,
                    cluster=ClusterConfig(servers=2, backend="llamacpp", gpus_per_server=0, port=None,
                                          health_timeout_sec=120, stop_timeout_sec=10))
    alloc = Allocation(("localhost",), 0, ())
    group = ServerGroup(server_specs(cfg, alloc, plan(cfg.cluster, alloc), run), 10, 120)
    try:
        group.start()
        group.wait_healthy()
        yield solver, group
    finally:
        group.stop()


def client(solver: ModelConfig, urls: list[str], **kw):
    from dataclasses import replace

    from aes.models.openai_client import OpenAIChat

    return OpenAIChat(replace(solver, base_url=urls[0], base_urls=urls, **kw))


def post(url: str, path: str, body: dict) -> dict:
    import json
    import urllib.request

    req = urllib.request.Request(url.removesuffix("/v1") + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_the_health_check_learns_the_engine_and_the_agent_gets_fenced_blocks(servers):
    solver, group = servers
    chat = client(solver, group.base_urls, engine="auto")
    assert chat.supports_tools  # until it knows
    chat.health_check()
    assert chat.engine == "llamacpp" and not chat.supports_tools and chat.supports_token_ids


def test_ids_are_what_the_server_consumed_and_generated(servers):
    solver, group = servers
    chat = client(solver, group.base_urls[:1], engine="llamacpp")
    result = chat.chat(MESSAGES)
    url = group.base_urls[0]
    rendered = post(url, "/apply-template", {"messages": MESSAGES})["prompt"]
    assert post(url, "/detokenize", {"tokens": result.prompt_token_ids})["content"] == rendered
    assert result.prompt_token_ids[0] == 1  # <|im_start|>: the template's own BOS, not a second one
    assert result.usage.prompt_tokens == len(result.prompt_token_ids)
    ids = result.completion_token_ids
    assert len(ids) == len(result.completion_logprobs) == result.usage.completion_tokens > 0
    text_ids = ids[:-1] if result.finish_reason == "stop" else ids  # a natural stop ends with <|im_end|>
    assert post(url, "/detokenize", {"tokens": text_ids})["content"] == result.text
    assert all(lp <= 0.0 for lp in result.completion_logprobs)


def test_greedy_calls_have_log_prob_zero(servers):
    solver, group = servers
    greedy = client(solver, group.base_urls[:1], engine="llamacpp").chat(MESSAGES, temperature=0.0)
    assert greedy.completion_logprobs == [0.0] * len(greedy.completion_token_ids)


def test_calls_spread_over_both_servers_and_an_episode_stays_on_one(servers):
    solver, group = servers
    chat = client(solver, group.base_urls, engine="llamacpp", max_tokens=8)
    results = {}

    def first_turn(i):
        results[i] = chat.chat([MESSAGES[0], {"role": "user", "content": f"Task {i}: print the date."}])

    threads = [threading.Thread(target=first_turn, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert chat.calls_per_server == [2, 2]
    history = [MESSAGES[0], {"role": "user", "content": "Task 0: print the date."},
               {"role": "assistant", "content": results[0].text}, {"role": "user", "content": "Go on."}]
    before = list(chat.calls_per_server)
    chat.chat(history)
    chat.chat(history + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "And?"}])
    grew = [a - b for a, b in zip(chat.calls_per_server, before)]
    assert sorted(grew) == [0, 2]  # both later turns on one server
    status, _ = http_get(group.specs[0].health_url)
    assert status == 200


def test_a_server_stops_on_sigterm_right_after_it_is_healthy(tmp_path):
    """SIGTERM at any moment ends the server cleanly (status 0, its ``stopping`` line), never by the
    SIGKILL that follows an ignored SIGTERM: a job's teardown and every weight push depend on it."""
    from aes.cluster.servers import ServerProcess, ServerSpec, free_port, wait_healthy

    log = tmp_path / "server.log"
    for attempt in range(5):
        port = free_port()
        command = [sys.executable, "-m", "aes.cluster.llamacpp_server", "--model", "smollm2-135m-instruct",
                   "--port", str(port), "--threads", "1", "--ctx", "512", "--parallel", "1"]
        spec = ServerSpec(0, "llamacpp", "smollm2-135m-instruct", command, {}, "127.0.0.1", port, "127.0.0.1", log)
        server = ServerProcess(spec, stop_timeout=20)
        server.start()
        guard = server.proc
        try:
            wait_healthy([spec], {0: server}, 120)
        finally:
            server.stop()
        assert guard.returncode == 0, f"attempt {attempt}: the server did not stop on SIGTERM\n{log.read_text()}"
    assert log.read_text().count("stopping") == 5
