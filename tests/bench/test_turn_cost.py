"""bench.turn_cost: how a sampled stack is put in a part, the fake model's answers, and the by-part split (the
daemon and py-spy themselves run only in the bench)."""

from __future__ import annotations

import json
from collections import Counter

from bench.turn_cost import PARTS, Window, classify, facts

LOOP = "main (runtime/cli/main.py:174);Runner.run (asyncio/runners.py:118)"


def test_a_stack_goes_to_the_first_part_any_of_its_frames_matches():
    embed = (
        f"{LOOP};Agent.prefetch (runtime/agent.py:258);ShrinkingSession.run (runtime/memory/embedding/onnx_arena.py:51)"
    )
    sql_in_search = (
        f"{LOOP};ArchivalReads.candidates (runtime/memory/archival/reads.py:106);"
        "Connection.execute (sqlalchemy/engine/base.py:1494)"
    )
    assert classify(embed) == "embedding"
    assert classify(sql_in_search) == "SQL"  # parts are exclusive, in their order
    assert classify(f"{LOOP};compile_context (runtime/compiler.py:161)") == "compiling"
    assert classify(f"{LOOP};RequestResponseCycle.run_asgi (uvicorn/protocols/http/h11_impl.py:403)") == (
        "HTTP (API side)"
    )
    assert classify(LOOP) == "event loop"
    assert classify(f"{LOOP};Dispatcher._run (scheduler/dispatcher.py:287)") == "the rest"
    assert classify("Thread.run (threading.py:982);_worker (concurrent/futures/thread.py:81)") is None


def test_the_split_shares_the_measured_cpu_by_samples():
    window = Window(0, 10, 20.0, [1.0], Counter({"embedding": 3, "SQL": 1}))
    split = window.split()
    assert set(split) == set(PARTS)
    assert split["embedding"] == 15.0 and split["SQL"] == 5.0 and sum(split.values()) == 20.0


def test_the_fake_extraction_files_the_users_lines():
    transcript = "\n".join(
        [
            "[2026-01-01 10:00] user: I adopted a rescue dog named Pepper last weekend, she is shy.",
            "[2026-01-01 10:01] assistant: That sounds lovely.",
            "[2026-01-01 10:02] user: ok",
        ]
    )
    body = json.dumps({"messages": [{"role": "system", "content": "Extract"}, {"role": "user", "content": transcript}]})
    answer = json.loads(json.loads(facts(body.encode()))["choices"][0]["message"]["content"])
    said = transcript.splitlines()
    assert sorted(f["text"] for f in answer["facts"]) == sorted([said[0], said[2]])  # the user's, not the reply
