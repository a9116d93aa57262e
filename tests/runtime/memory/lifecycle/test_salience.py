"""The salience gate (issue 13, item 3): chit-chat costs no model call and no lookup, life events and questions
about the past are remembered and looked up, an unsure turn goes to the configured small model (whose failed or
malformed answer counts as worth it), every decision is a trace event that replays, and a flush of chit-chat
makes no extraction call."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from pagemind.runtime.agent import Agent
from pagemind.runtime.events import FlushEvent, ModelRequestEvent, SalienceEvent
from pagemind.runtime.memory.lifecycle.salience import assess, assess_rules, extraction_gate, turns_of
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelError, ModelRequest
from pagemind.runtime.observer import NullObserver
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import SalienceConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.archival import RecordingArchival
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, ScriptedModel
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.testing.specs import build_spec, spec_data
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import replay
from pagemind.tools import ToolCall

CONFIG = SalienceConfig()
T = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

CHITCHAT = [
    "ok",
    "OK!!",
    "okay thanks",
    "haha",
    "hahaha 😂",
    "lol",
    "Thank you so much!",
    "thanks :)",
    "got it",
    "嗯嗯",
    "哈哈哈",
    "好的",
    "好的，谢谢！",
    "嗯",
    "收到",
    "晚安",
    "👍",
    "🙂🙂",
    "",
    "   ",
]
LIFE_EVENTS = [
    "I got the job!",
    "My exam is next Friday and I'm so nervous",
    "We're moving to Oslo in May",
    "My girlfriend and I broke up last night",
    "I'm allergic to peanuts",
    "Tomorrow is my birthday",
    "我下周要考试，好紧张",
    "我们下个月搬家",
    "我和男朋友分手了",
    "我对花生过敏",
    "明天是我的生日",
    "我找到新工作了",
]
RECALL_QUESTIONS = [
    "Do you remember what I said about my sister?",
    "what did I say yesterday?",
    "还记得我上次说的那家餐厅吗",
    "上次那个电影叫什么",
]
JOKE = "Tell me a long story about a dragon who guards an old mountain village by the sea"  # no signal, but too long to be written off as small talk
UNSURE = [
    "What is the boiling point of mercury in kelvin, and why is it a liquid at room temperature?",
    JOKE,
    "外面的风景真的很美，阳光很好，风也很舒服，让人想出去走走看看呢",
]
SMALL_TALK = [
    "the weather is lovely",
    "tell me a joke",
    "what do you think about rainy days?",
    "天气不错",
    "没什么，随便聊聊",
]


class Events(NullObserver, list):
    """Every event reported."""

    def on_event(self, event) -> None:
        self.append(event)

    def of(self, kind: type) -> list:
        return [e for e in self if isinstance(e, kind)]


class SearchCounting(RecordingArchival):
    """Archival memory that keeps every search it is asked for (and finds nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.searches: list[str] = []

    async def search(self, query: str, **options: Any) -> list:
        self.searches.append(query)
        return await super().search(query, **options)


def verdict(remember: bool, lookup: bool) -> str:
    return json.dumps({"remember": remember, "lookup": lookup})


def answering(salience: str | Exception) -> FunctionModel:
    """A model whose steps reply at once and whose salience calls get `salience` (or raise it)."""

    def respond(request: ModelRequest) -> dict:
        if request.purpose == "salience":
            if isinstance(salience, Exception):
                raise salience
            return reply_body(salience)
        return tool_call_body("send_message", {"message": "I hear you."})

    return FunctionModel(respond)


async def gated_agent(
    tmp_path, model: Any, clock: ManualClock, **salience: Any
) -> tuple[Agent, Events, SearchCounting]:
    spec = build_spec(memory={"prefetch_top_k": 3, "salience": {"model": "tiny", **salience}})
    agent = await Agent.load(
        spec, model=model, store=StateStore(make_engine(f"sqlite:///{tmp_path / 'a.db'}")), clock=clock
    )
    agent.archival = archival = SearchCounting()
    agent.observer = events = Events()
    return agent, events, archival


def salience_calls(model: FunctionModel | ScriptedModel) -> list[ModelRequest]:
    return [r for r in model.requests if r.purpose == "salience"]


# -- the rules ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", CHITCHAT)
def test_chitchat_is_worth_neither(text):
    decision = assess_rules(text, CONFIG)
    assert (decision.remember, decision.lookup, decision.score, decision.unsure) == (False, False, 0.0, False)


@pytest.mark.parametrize("text", LIFE_EVENTS)
def test_life_events_are_remembered_and_looked_up(text):
    decision = assess_rules(text, CONFIG)
    assert decision.remember and decision.lookup and not decision.unsure
    assert "life event" in decision.reason and decision.score >= CONFIG.remember_above


@pytest.mark.parametrize("text", RECALL_QUESTIONS)
def test_questions_about_the_past_are_looked_up(text):
    decision = assess_rules(text, CONFIG)
    assert decision.lookup and not decision.unsure and "recall question" in decision.reason


@pytest.mark.parametrize("text", UNSURE)
def test_a_turn_with_no_signal_is_unsure_and_counts_as_worth_it_without_a_model(text):
    decision = assess_rules(text, CONFIG)
    assert decision.unsure and decision.remember and decision.lookup and decision.source == "rules"
    assert CONFIG.skip_below <= decision.score < CONFIG.remember_above


def test_emotions_preferences_and_specifics_add_to_the_score():
    plain = assess_rules("we watched a film at home", CONFIG).score
    assert assess_rules("we watched a film at home and I felt so lonely", CONFIG).score > plain
    assert assess_rules("I really like green tea", CONFIG).remember
    assert assess_rules("我最喜欢喝绿茶", CONFIG).remember
    assert assess_rules("我今天好难过", CONFIG).remember
    assert assess_rules("we watched a film with Anna", CONFIG).score > plain  # a name mid-sentence


def test_a_reason_names_the_signals_never_the_users_words():
    # Reasons go into traces; `trace export --redact` must not find the user's text in them.
    decision = assess_rules("My sister Mei has her wedding on 3 June", CONFIG)
    assert decision.remember and not any(word in decision.reason for word in ("Mei", "wedding", "3", "June"))


def test_a_reply_with_something_in_it_makes_a_chitchat_turn_worth_it():
    assert not assess_rules("ok", CONFIG, reply="Great, talk soon!").remember
    decision = assess_rules("ok", CONFIG, reply="Then I'll remind you about the exam on Friday.")
    assert decision.remember and "reply life event" in decision.reason


def test_extra_keywords_and_chitchat_from_the_config():
    config = SalienceConfig(keywords=["chess", "围棋"], chitchat=["roger", "收到啦"])
    assert not assess_rules("chess", CONFIG).remember and assess_rules("我在学围棋", CONFIG).unsure
    for text in ("chess", "我在学围棋"):
        decision = assess_rules(text, config)
        assert decision.remember and not decision.unsure and "life event" in decision.reason
    assert assess_rules("Roger!", CONFIG).reason.startswith("small talk")
    assert assess_rules("Roger!", config).reason == "chit-chat"
    assert not assess_rules("收到啦", config).remember


@pytest.mark.parametrize("text", SMALL_TALK)
def test_short_small_talk_with_no_signal_costs_no_model_call(text):
    decision = assess_rules(text, CONFIG)
    assert (decision.remember, decision.lookup, decision.unsure) == (False, False, False)
    assert decision.reason.startswith("small talk")
    assert assess_rules(text, SalienceConfig(small_talk_chars=0)).unsure  # the knob turns it off


def test_thresholds_move_the_unsure_band():
    text = JOKE
    assert not assess_rules(text, SalienceConfig(skip_below=0.3, remember_above=0.6)).remember
    assert not assess_rules(text, SalienceConfig(remember_above=0.25)).unsure


# -- the model, when the rules are unsure --------------------------------------------------------------------------


async def test_an_unsure_turn_asks_the_model_once_and_takes_its_answer():
    model = ScriptedModel([reply_body(verdict(False, True))])
    decision = await assess(JOKE, SalienceConfig(model="tiny"), model=model)
    assert (decision.remember, decision.lookup, decision.source, decision.unsure) == (False, True, "model", True)
    [request] = model.requests
    assert request.purpose == "salience" and request.model == "tiny" and request.max_tokens == 20
    assert json.loads(request.messages[1]["content"]) == {"user": JOKE}


async def test_sure_turns_and_a_gate_without_a_model_make_no_call():
    model = ScriptedModel()  # fails loudly if asked
    for text in ["haha", "嗯嗯", "I got the job!"]:
        assert (await assess(text, SalienceConfig(model="tiny"), model=model)).source == "rules"
    assert (await assess(JOKE, CONFIG, model=model)).remember  # no model configured: worth it
    assert model.requests == []


@pytest.mark.parametrize(
    "answer",
    [
        "yes",
        '{"remember": "true", "lookup": false}',
        '{"remember": false, "lookup": false, "why": "small talk"}',
        '{"remember": false}',
        "[true, true]",
    ],
)
async def test_a_malformed_answer_counts_as_worth_it_and_is_logged(answer):
    with capture_logs() as logs:
        decision = await assess(JOKE, SalienceConfig(model="tiny"), model=ScriptedModel([reply_body(answer)]))
    assert (decision.remember, decision.lookup, decision.source) == (True, True, "model")
    assert "malformed" in decision.reason
    assert [entry["event"] for entry in logs] == ["salience_model_malformed"]


async def test_a_fenced_answer_is_accepted():
    model = ScriptedModel([reply_body(f"```json\n{verdict(False, False)}\n```")])
    assert not (await assess(JOKE, SalienceConfig(model="tiny"), model=model)).lookup


async def test_a_failed_model_call_counts_as_worth_it():
    model = answering(ModelError("the endpoint is down"))
    with capture_logs() as logs:
        decision = await assess(JOKE, SalienceConfig(model="tiny"), model=model)
    assert decision.remember and decision.lookup and "model failed" in decision.reason
    assert [entry["event"] for entry in logs] == ["salience_model_failed"]


async def test_the_gate_off_finds_everything_worth_it():
    decision = await assess("ok", SalienceConfig(enabled=False))
    assert decision.remember and decision.lookup


# -- prefetch ---------------------------------------------------------------------------------------------------


async def test_chitchat_costs_no_model_call_and_no_lookup(tmp_path, clock):
    model = answering(verdict(True, True))
    agent, events, archival = await gated_agent(tmp_path, model, clock)
    for text in ["haha", "ok thanks", "嗯嗯", "好的", "👍"]:
        await agent.send(text)
    assert archival.searches == [] and salience_calls(model) == []
    decisions = [e.data for e in events.of(SalienceEvent)]
    assert len(decisions) == 5 and all(d.gate == "prefetch" and not d.lookup and d.source == "rules" for d in decisions)


async def test_life_events_are_looked_up_without_a_model_call(tmp_path, clock):
    model = answering(verdict(False, False))
    agent, events, archival = await gated_agent(tmp_path, model, clock)
    await agent.send("My exam is tomorrow and I'm nervous")
    await agent.send("还记得我上次说的吗")
    assert archival.searches == ["My exam is tomorrow and I'm nervous", "还记得我上次说的吗"]
    assert salience_calls(model) == []


async def test_an_unsure_turn_looks_up_only_when_the_model_says_so(tmp_path, clock):
    model = answering(verdict(False, False))
    agent, events, archival = await gated_agent(tmp_path, model, clock)
    await agent.send(JOKE)
    assert archival.searches == [] and len(salience_calls(model)) == 1
    [decision] = [e.data for e in events.of(SalienceEvent)]
    assert (decision.source, decision.lookup) == ("model", False)
    # The call went through the agent's model path: observers (a trace) see it.
    assert [e.purpose for e in events.of(ModelRequestEvent)][:2] == ["salience", "step"]


async def test_a_malformed_answer_at_prefetch_looks_up(tmp_path, clock):
    model = answering("no lookup needed")
    agent, events, archival = await gated_agent(tmp_path, model, clock)
    await agent.send(JOKE)
    assert archival.searches == [JOKE]


async def test_with_the_gate_off_every_turn_is_looked_up_and_nothing_is_traced(tmp_path, clock):
    model = answering(verdict(False, False))
    agent, events, archival = await gated_agent(tmp_path, model, clock, enabled=False)
    await agent.send("haha")
    assert archival.searches == ["haha"] and events.of(SalienceEvent) == [] and salience_calls(model) == []


async def test_the_prefetch_part_can_be_turned_off_alone(tmp_path, clock):
    agent, events, archival = await gated_agent(tmp_path, answering(verdict(False, False)), clock, prefetch=False)
    await agent.send("haha")
    assert archival.searches == ["haha"] and events.of(SalienceEvent) == []


# -- traces -------------------------------------------------------------------------------------------------------


async def test_decisions_and_the_model_call_are_recorded_and_replay(tmp_path, clock):
    model = answering(verdict(False, True))
    spec = build_spec(
        tools=["send_message", "archival_memory_insert", "archival_search"],
        memory={"prefetch_top_k": 3, "salience": {"model": "tiny"}},
    )
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'r.db'}")
    agent = await Agent.load(spec, model=model, settings=settings, clock=clock)
    assert agent.archival is not None
    recorder = record(agent, path=tmp_path / "t.jsonl")
    for text in ["haha", JOKE, "My exam is tomorrow"]:
        await agent.send(text)
    recorder.close()
    trace = read_trace(tmp_path / "t.jsonl")
    decisions = [e.data for e in trace.events if isinstance(e, SalienceEvent)]
    assert [(d.source, d.lookup) for d in decisions] == [("rules", False), ("model", True), ("rules", True)]
    assert [e.purpose for e in trace.events if isinstance(e, ModelRequestEvent)].count("salience") == 1
    assert (await replay(trace)).status == "identical"


# -- extraction on eviction --------------------------------------------------------------------------------------


def chat(*turns: tuple[str, str]) -> list[Message]:
    messages = []
    for i, (user, reply) in enumerate(turns):
        messages += [
            Message("user", user, T),
            Message("assistant", None, T, tool_calls=(call_of("send_message", {"message": reply}, i),)),
            Message("tool", reply, T, tool_call_id=f"c{i}", name="send_message"),
        ]
    return messages


def call_of(name: str, arguments: dict, i: int) -> ToolCall:
    return ToolCall(f"c{i}", name, json.dumps(arguments))


def test_turns_are_user_messages_with_what_the_agent_said():
    messages = [Message("assistant", "left over", T), *chat(("ok", "Great!"), ("hi", "Hello there"))]
    assert turns_of(messages) == [("", "left over"), ("ok", "Great!"), ("hi", "Hello there")]


def test_the_extraction_gate_says_no_only_when_no_turn_is_worth_remembering():
    idle = extraction_gate(chat(("haha", "haha"), ("ok", "Great!"), ("嗯嗯", "好的")), CONFIG)
    assert (idle.gate, idle.remember, idle.turns, idle.source) == ("extraction", False, 3, "rules")
    busy = extraction_gate(chat(("haha", "haha"), ("I start my new job on Monday", "Good luck!")), CONFIG)
    assert busy.remember and busy.turns == 2 and "1 of 2" in busy.reason
    assert extraction_gate(chat(("ok", "ok")), SalienceConfig(extraction=False)) is None
    assert extraction_gate(chat(("ok", "ok")), SalienceConfig(enabled=False)) is None


LAUGH = "haha " * 150  # a long reply with nothing in it: fills the window, stays chit-chat


async def flush_of(tmp_path, clock, texts: list[str], **salience: Any) -> tuple[Events, FunctionModel]:
    spec = AgentSpec.model_validate(
        {
            **spec_data(model_name="m", context_window=4000, max_output_tokens=500),
            "memory": {"prefetch_top_k": 0, "salience": salience},
        }
    )

    def respond(request: ModelRequest) -> dict:
        if request.purpose == "summarize":
            return reply_body("They laughed a lot.")
        if request.purpose == "extract":
            return reply_body(json.dumps({"facts": [{"text": "Lin starts a new job on Monday"}]}))
        return tool_calls_body(call("send_message", {"message": LAUGH}))

    model = FunctionModel(respond)
    agent = await Agent.load(
        spec, model=model, store=StateStore(make_engine(f"sqlite:///{tmp_path / 'f.db'}")), clock=clock
    )
    agent.archival = RecordingArchival()
    agent.observer = events = Events()
    for text in texts:
        await agent.send(text)
        if events.of(FlushEvent):
            return events, model
    raise AssertionError("no flush")


async def test_a_flush_of_chitchat_makes_no_extraction_call(tmp_path, clock):
    events, model = await flush_of(tmp_path, clock, ["haha", "ok", "嗯嗯", "lol", "好的"] * 8)
    [flush] = events.of(FlushEvent)
    assert flush.data.extraction == "unsalient" and flush.data.extracted == 0
    assert "extract" not in {r.purpose for r in model.requests}
    [decision] = [e.data for e in events.of(SalienceEvent) if e.data.gate == "extraction"]
    assert not decision.remember and decision.turns >= 1
    assert events.index(events.of(SalienceEvent)[-1]) < events.index(flush)  # the decision comes first


async def test_a_flush_with_one_life_event_among_the_chitchat_extracts(tmp_path, clock):
    events, model = await flush_of(tmp_path, clock, ["I start my new job on Monday"] + ["haha", "ok", "嗯嗯"] * 12)
    [flush] = events.of(FlushEvent)
    assert (flush.data.extraction, flush.data.extracted) == ("stored", 1)
    assert [r.purpose for r in model.requests].count("extract") == 1


async def test_with_the_extraction_gate_off_chitchat_is_extracted(tmp_path, clock):
    events, model = await flush_of(tmp_path, clock, ["haha", "ok", "嗯嗯", "lol", "好的"] * 8, extraction=False)
    [flush] = events.of(FlushEvent)
    assert flush.data.extraction == "stored" and "extract" in {r.purpose for r in model.requests}
    assert all(e.data.gate == "prefetch" for e in events.of(SalienceEvent))


# -- configuration ------------------------------------------------------------------------------------------------


def test_every_knob_is_in_the_yaml_and_the_fingerprint_holds_for_agents_that_set_none():
    spec = build_spec(
        memory={
            "salience": {
                "enabled": True,
                "prefetch": True,
                "extraction": False,
                "skip_below": 0.1,
                "remember_above": 0.6,
                "min_chars": 2,
                "long_chars": 120,
                "keywords": ["chess"],
                "chitchat": ["roger"],
                "model": "tiny",
                "max_tokens": 16,
                "weights": {"life_event": 0.6, "reply": 0.3},
            }
        }
    )
    assert spec.memory.salience.weights.life_event == 0.6 and spec.memory.salience.model == "tiny"
    assert build_spec().spec_hash() != spec.spec_hash()
    assert build_spec().spec_hash() == build_spec(memory={"salience": {}}).spec_hash()
    with pytest.raises(ValueError, match="skip_below"):
        SalienceConfig(skip_below=0.7, remember_above=0.5)
    with pytest.raises(ValueError):
        build_spec(memory={"salience": {"treshold": 0.3}})


async def test_a_trace_recorded_before_the_gate_existed_replays_with_it_off(tmp_path, clock):
    spec = build_spec(
        tools=["send_message", "archival_memory_insert", "archival_search"],
        memory={"prefetch_top_k": 3, "salience": {"enabled": False}},
    )
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'o.db'}")
    agent = await Agent.load(spec, model=answering(verdict(True, True)), settings=settings, clock=clock)
    recorder = record(agent, path=tmp_path / "old.jsonl")
    await agent.send("haha")
    recorder.close()
    lines = (tmp_path / "old.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    del header["spec"]["memory"]["advanced"]["salience"]  # as a trace of an older pagemind has it
    (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert (await replay(read_trace(tmp_path / "old.jsonl"))).status == "identical"


def test_the_grouped_word_lists_match_as_one_check_per_phrase(monkeypatch):
    """`PAGEMIND_TURN_SHORTCUTS`: the word lists' Latin phrases share one boundary check; every match and span is
    the one the per-phrase form finds (plurals, CJK phrases, a phrase inside a longer word)."""
    import re

    from pagemind.runtime.memory.lifecycle import salience_rules

    phrases = ["new job", "job", "moved", "wedding", "结婚", "生日", "baby"]
    texts = [
        "i got a new job and moved",
        "two weddings and a babys day",
        "jobless is not a job",
        "我们结婚了 生日快乐 jobs",
        "nothing here at all",
        "rejob newjob new jobs",
    ]
    for plural in (False, True):
        grouped = re.compile(salience_rules.alternation(phrases, plural))
        each = re.compile(salience_rules.alternation(phrases, plural, grouped=False))
        assert grouped.pattern != each.pattern
        for text in texts:
            assert [m.span() for m in grouped.finditer(text)] == [m.span() for m in each.finditer(text)]
            assert grouped.sub(" ", text) == each.sub(" ", text)


def test_the_shortcut_switch_is_read_at_each_turn_not_at_import(monkeypatch):
    """`PAGEMIND_TURN_SHORTCUTS=off` set in a running process gives the per-phrase rules from the next turn on,
    with the same decision."""
    from pagemind.runtime.memory.lifecycle import salience_rules

    text = "I got a new job and we moved to Lisbon, so lonely"
    monkeypatch.delenv("PAGEMIND_TURN_SHORTCUTS", raising=False)
    grouped, on = salience_rules.rules_for(CONFIG), assess_rules(text, CONFIG)
    monkeypatch.setenv("PAGEMIND_TURN_SHORTCUTS", "off")
    each, off = salience_rules.rules_for(CONFIG), assess_rules(text, CONFIG)
    assert grouped.chitchat.pattern != each.chitchat.pattern
    assert "(?<![a-z0-9])(?:" not in each.signals[1][1].pattern  # no shared boundary check around a group
    assert (on.remember, on.score, on.reason) == (off.remember, off.score, off.reason)
