"""The salience gate: is a turn worth remembering (extraction on eviction) and worth a memory lookup (prefetch)?

Rules first, at no cost: chit-chat ("ok", "haha", "thanks", "嗯嗯", "哈哈", "好的", emoji only) is worth neither;
otherwise a score adds what the message shows — its length, life events (job, exam, move, break-up, allergy,
birthday … 工作, 考试, 搬家, 分手, 过敏, 生日 …), emotion words, preferences, the user speaking of themselves,
names, dates and numbers, and questions about the past ("do you remember", 上次, 还记得), which always ask for
a lookup. The reply, when given, adds its signals at a share (`weights.reply`). A score below `skip_below` is
worth neither, at or above `remember_above` worth both; in between the rules are unsure, and `model` (a small
model on the agent's endpoint) answers `{"remember": bool, "lookup": bool}`, or, with no model configured, the
turn counts as worth it. A failed or malformed answer counts as worth it too, and is logged: the gate only ever
saves work, it never loses a memory because a model misbehaved.

Where it is used: `Agent.prefetch` skips the archival lookup for a turn the gate says no to; a flush skips the
extraction model call when no turn leaving the window is worth remembering (`extraction_gate`, rules only: the
extractor is itself the model call an unsure turn would go to, and it is told to skip small talk). The
extractor's input is left whole — a "yes" or "that one" needs the turns around it. Each decision of a gate is a
`SalienceEvent` in the trace; `assess` is the public function for anyone else (reflection, benchmarks).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError

from pagemind.runtime.events import Event, Salience, SalienceEvent
from pagemind.runtime.memory.lifecycle.salience_rules import NAME, Rules, normalize, rules_for
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelClient, ModelError, ModelRequest, ModelResponse
from pagemind.runtime.model.response import without_fence
from pagemind.runtime.spec.memory import SalienceConfig

log = structlog.get_logger("pagemind.salience")

Call = Callable[[ModelRequest], Awaitable[ModelResponse]]
PREFETCH_STEP = 1  # the prefetch runs just before the turn's first step: its model call is reported with it

# -- decisions --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SalienceDecision:
    """Whether a turn is worth remembering and worth a memory lookup; `score` is the rules' (0–1), `reason` says
    why, `source` who decided ("rules", or "model" once the model was asked), `unsure` whether the rules fell
    between the thresholds."""

    remember: bool
    lookup: bool
    score: float
    reason: str
    source: Literal["rules", "model"] = "rules"
    unsure: bool = False

    def data(self, gate: str, turns: int = 1) -> Salience:
        """The decision as a trace event's data, for `gate` (prefetch | extraction)."""
        return Salience(
            gate=gate,
            remember=self.remember,
            lookup=self.lookup,
            score=self.score,
            reason=self.reason,
            source=self.source,
            turns=turns,
        )


def _units(text: str) -> int:
    """Length in Latin-character units: a CJK character (a word, nearly) counts as 3."""
    return sum(3 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text if not c.isspace())


def _signals(normal: str, original: str, rules: Rules) -> list[str]:
    """The signals found, by weight name. (Reasons name signals, never the words: a trace's reasons must not
    carry the user's text past `trace export --redact`.)"""
    found = [name for name, pattern in rules.signals if pattern.search(normal)]
    if "specifics" not in found and NAME.search(original):
        found.append("specifics")
    return found


def assess_rules(text: str, config: SalienceConfig, *, reply: str | None = None) -> SalienceDecision:
    """The rules' decision on a turn (the user's `text`, optionally the agent's `reply`), at no cost; an unsure
    turn (score between the thresholds) comes back as worth it with `unsure` set."""
    rules = rules_for(config)
    weights = config.weights
    normal = normalize(text)
    residue = " ".join(rules.chitchat.sub(" ", normal).split())
    found = _signals(residue, text, rules) if residue else []
    replied = _signals(normalize(reply), reply, rules) if reply else []
    score, reasons = 0.0, []
    if residue:
        units = _units(residue)
        if units < config.min_chars and not found and not replied:
            return _decided(0.1, f"too short ({units} < {config.min_chars})", found, config)
        if units < config.small_talk_chars and not found and not replied:
            # Short and without a single signal ("the weather is lovely", "I made tea", "天气不错"): small talk,
            # not worth the model's opinion; a long message without one may hold what the rules cannot see.
            return _decided(0.1, f"small talk (no signal, {units} < {config.small_talk_chars})", found, config)
        score = weights.base + weights.length * min(1.0, units / config.long_chars)
    for name in found:
        score += getattr(weights, name)
        reasons.append(name.replace("_", " "))
    for name in replied:
        score += weights.reply * getattr(weights, name)
        reasons.append(f"reply {name.replace('_', ' ')}")
    if not residue and not replied:
        return _decided(0.0, "chit-chat" if normal else "emoji only" if text.strip() else "empty", found, config)
    return _decided(min(1.0, score), ", ".join(reasons) or "no signal", found + replied, config)


def _decided(score: float, reason: str, found: list[str], config: SalienceConfig) -> SalienceDecision:
    score = round(score, 3)
    recall = "recall_question" in found
    if score < config.skip_below:
        return SalienceDecision(False, recall, score, reason)
    if score >= config.remember_above:
        return SalienceDecision(True, True, score, reason)
    return SalienceDecision(True, True, score, f"unsure: {reason}", unsure=True)


# -- the model, when the rules are unsure -----------------------------------------------------------------------

INSTRUCTIONS = """\
You decide whether one turn of a conversation between a user and their AI companion is worth keeping in \
long-term memory ("remember": facts, plans, feelings, people, events, preferences — not small talk) and whether \
answering it needs a look into that memory ("lookup": it refers to the user's life or to earlier talks). \
Answer with only this JSON object and nothing else: {"remember": true|false, "lookup": true|false}"""


class ModelVerdict(BaseModel):
    """The model's whole answer: two booleans and nothing else."""

    model_config = ConfigDict(extra="forbid")

    remember: StrictBool
    lookup: StrictBool


def parse_verdict(text: str | None) -> ModelVerdict:
    """The model's answer as a verdict (a Markdown code fence tolerated); raises ValueError otherwise."""
    try:
        return ModelVerdict.model_validate(json.loads(without_fence(text)))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"not the expected JSON: {exc}") from exc


def verdict_request(model: str, text: str, reply: str | None, max_tokens: int) -> ModelRequest:
    """The gate's request to its model."""
    turn = {"user": text, **({"reply": reply} if reply else {})}
    return ModelRequest(
        model=model,
        messages=[
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": json.dumps(turn, ensure_ascii=False)},
        ],
        tools=[],
        temperature=0.0,
        max_tokens=max_tokens,
        purpose="salience",
    )


async def assess(
    text: str, config: SalienceConfig, *, reply: str | None = None, model: ModelClient | Call | None = None
) -> SalienceDecision:
    """Whether a turn is worth remembering and worth a lookup: the rules, then, only when they are unsure and
    both `config.model` and `model` (a client, or a call such as `Agent.call_model` bound to a step) are given,
    one small model call. A failed or malformed answer counts as worth it and is logged. With the gate off
    (`config.enabled` false) every turn is worth both."""
    if not config.enabled:
        return SalienceDecision(True, True, 1.0, "gate off")
    decision = assess_rules(text, config, reply=reply)
    if not decision.unsure or config.model is None or model is None:
        return decision
    call = model.complete if hasattr(model, "complete") else model
    try:
        response = await call(verdict_request(config.model, text, reply, config.max_tokens))
    except ModelError as exc:
        log.warning("salience_model_failed", error=str(exc)[:300])
        return SalienceDecision(
            True, True, decision.score, f"model failed, worth it: {decision.reason}", "model", unsure=True
        )
    try:
        verdict = parse_verdict(response.content)
    except ValueError as exc:
        log.warning("salience_model_malformed", error=str(exc)[:300], answer=(response.content or "")[:200])
        return SalienceDecision(
            True, True, decision.score, f"model answer malformed, worth it: {decision.reason}", "model", unsure=True
        )
    return SalienceDecision(
        verdict.remember, verdict.lookup, decision.score, f"model: {decision.reason}", "model", unsure=True
    )


# -- the gates --------------------------------------------------------------------------------------------------


async def lookup_gate(text: str, config: SalienceConfig, *, model: Call, report: Callable[[Event], None]) -> bool:
    """Whether this turn's archival lookup (prefetch) is worth it; the decision is reported as a trace event.
    Always true, and nothing reported, when the gate or its prefetch part is off."""
    if not (config.enabled and config.gate_lookup):
        return True
    decision = await assess(text, config, model=model)
    log.info(
        "salience",
        gate="prefetch",
        remember=decision.remember,
        lookup=decision.lookup,
        score=decision.score,
        source=decision.source,
        reason=decision.reason[:200],
    )
    report(SalienceEvent(step=PREFETCH_STEP, data=decision.data("prefetch")))
    return decision.lookup


def turns_of(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """The conversation in `messages` as (user text, reply text) turns; a reply before the first user message
    makes a turn with no user text. Tool results and system messages are left out."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        if message.role == "user":
            turns.append((message.content or "", []))
        elif message.role == "assistant":
            said = [message.content or ""] + [
                _message_argument(c.arguments) for c in message.tool_calls if c.name == "send_message"
            ]
            if not turns:
                turns.append(("", []))
            turns[-1][1].extend(s for s in said if s)
    return [(user, "\n".join(reply)) for user, reply in turns]


def _message_argument(arguments: str) -> str:
    try:
        value = json.loads(arguments).get("message")
    except (json.JSONDecodeError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def extraction_gate(messages: Sequence[Message], config: SalienceConfig) -> Salience | None:
    """The rules' decision on the turns leaving the window: worth an extraction call when any of them is worth
    remembering (an unsure one counts). None when the gate or its extraction part is off."""
    if not (config.enabled and config.gate_extraction):
        return None
    decisions = [assess_rules(user, config, reply=reply) for user, reply in turns_of(messages)]
    if not decisions:
        return Salience(
            gate="extraction",
            remember=False,
            lookup=False,
            score=0.0,
            reason="no conversation turns",
            source="rules",
            turns=0,
        )
    best = max(decisions, key=lambda d: (d.remember, d.score))
    worth = sum(d.remember for d in decisions)
    reason = (
        f"{worth} of {len(decisions)} turn(s) worth remembering; best: {best.reason}"
        if worth
        else f"none of {len(decisions)} turn(s) worth remembering"
    )
    log.info(
        "salience", gate="extraction", remember=bool(worth), score=best.score, turns=len(decisions), reason=reason[:200]
    )
    return Salience(
        gate="extraction",
        remember=bool(worth),
        lookup=False,
        score=best.score,
        reason=reason,
        source="rules",
        turns=len(decisions),
    )
