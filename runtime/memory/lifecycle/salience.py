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
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError

from pagemind.runtime.events import Event, Salience, SalienceEvent
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelClient, ModelError, ModelRequest, ModelResponse
from pagemind.runtime.model.response import without_fence
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.memory import SalienceConfig

log = structlog.get_logger("pagemind.salience")

Call = Callable[[ModelRequest], Awaitable[ModelResponse]]
PREFETCH_STEP = 1  # the prefetch runs just before the turn's first step: its model call is reported with it

# -- the word lists (lower case; Latin phrases match whole words, an optional plural "s" allowed) -------------------

CHITCHAT = (
    "ok, okay, okey, okie, k, kk, alright, all right, sure, cool, nice, great, good, fine, awesome, perfect, thanks, "
    "thank you, thank u, thx, ty, tysm, youre welcome, welcome, np, no problem, no worries, hi, hello, hey, hiya, yo, "
    "bye, goodbye, good night, goodnight, gn, good morning, morning, night, see you, see ya, cya, later, got it, "
    "i see, sounds good, makes sense, hmm, hm, mm, mhm, uh, um, oh, ah, aw, aww, wow, yay, oops, so, very, much, too, "
    "a lot, really, indeed, please, pls, plz, me too, same, im fine, i am fine, not bad, yes, yeah, yep, yup, ya, "
    "no, nope, nah, "
    "嗯, 恩, 哦, 噢, 喔, 啊, 呀, 吧, 呢, 啦, 了, 嘛, 好的, 好吧, 好, 行, 可以, 没问题, 谢谢, 多谢, 谢啦, 感谢, "
    "晚安, 早安, 早上好, 早, 你好, 拜拜, 再见, 收到, 知道了, 明白, 对, 是的, 是啊, 对啊, 没事, 不客气, 辛苦了, "
    "太好了, 不错, 酷"
)
LAUGHTER = r"(?<![a-z])(?:(?:a?h[ae]){2,}h?|l+o+l+|lmao|rofl|x+d+|hehe+)(?![a-z])|[哈呵嘿嘻嗯]+"

LIFE_EVENTS = (
    "job, work, career, interview, hired, fired, laid off, promotion, promoted, quit, resign, boss, salary, "
    "exam, finals, test results, graduate, graduation, school, university, college, degree, thesis, "
    "move, moving, moved, relocate, apartment, new house, break up, broke up, breakup, divorce, married, "
    "marry, wedding, engaged, pregnant, baby, born, died, death, passed away, funeral, sick, ill, hospital, "
    "surgery, diagnosed, diagnosis, allergy, allergies, allergic, diet, vegetarian, vegan, medication, "
    "therapy, therapist, doctor, appointment, birthday, anniversary, holiday, vacation, trip, travel, flight, "
    "retire, retired, retirement, deadline, girlfriend, boyfriend, wife, husband, partner, mom, mother, dad, "
    "father, sister, brother, son, daughter, kid, child, children, friend, dog, cat, pet, remind, promise, "
    "工作, 上班, 面试, 辞职, 离职, 失业, 裁员, 升职, 加薪, 老板, 考试, 考研, 高考, 期末, 毕业, 学校, 大学, 论文, "
    "搬家, 搬到, 分手, 离婚, 结婚, 婚礼, 订婚, 怀孕, 宝宝, 孩子, 去世, 葬礼, 生病, 住院, 医院, 手术, 过敏, 吃药, "
    "医生, 预约, 生日, 纪念日, 假期, 旅行, 出差, 退休, 截止, 男朋友, 女朋友, 老婆, 老公, 妈妈, 爸爸, 姐姐, 妹妹, "
    "哥哥, 弟弟, 儿子, 女儿, 朋友, 猫, 狗, 宠物, 提醒, 答应"
)
EMOTIONS = (
    "sad, unhappy, happy, angry, mad, upset, anxious, anxiety, worried, worry, nervous, scared, afraid, stressed, "
    "stress, depressed, lonely, excited, frustrated, exhausted, hurt, cry, crying, cried, hate, miss, proud, "
    "ashamed, embarrassed, overwhelmed, heartbroken, grateful, jealous, terrified, devastated, "
    "难过, 伤心, 开心, 高兴, 生气, 焦虑, 担心, 紧张, 害怕, 压力, 抑郁, 孤独, 寂寞, 兴奋, 沮丧, 哭, 讨厌, 想念, "
    "骄傲, 崩溃, 烦, 郁闷, 失望, 委屈, 感动, 难受, 心累"
)
PREFERENCES = (
    r"(?<![a-z])i (?:really )?(?:like|love|hate|prefer|enjoy|dislike|adore|cant stand)(?![a-z])|"
    r"(?<![a-z])favou?rites?(?![a-z])|(?<![a-z])(?:allergic|intolerant) to(?![a-z])|"
    r"我(?:很|最|超|特别|真的)?(?:喜欢|爱|讨厌|不喜欢|受不了)|最喜欢|我不吃|我不能吃"
)
ABOUT_USER = (
    r"(?<![a-z])(?:my|mine|im|i am|ive|i have|i live|i work|i was|i got|i will|ill|i need|i want|i feel)(?![a-z])|"
    r"我(?:是|叫|住|在|的|有|要|想|会|得|们)"
)
RECALL_QUESTIONS = (
    "do you remember, you remember, remember when, remember what, did i tell you, did i mention, what did i say, "
    "what did i tell you, i told you, i mentioned, last time, you said, we talked about, we discussed, as i said, "
    "like i said, 上次, 还记得, 记得吗, 记不记得, 你记得, 我说过, 跟你说过, 告诉过你, 之前说, 以前说, 你说过, "
    "我们聊过, 提过"
)
SPECIFICS = (
    r"\d|(?<![a-z])(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|"
    r"july|august|september|october|november|december|tomorrow|tonight|yesterday|weekend|next (?:week|month|year)|"
    r"last (?:week|month|year))(?![a-z])|明天|后天|昨天|前天|今晚|下周|上周|下个月|上个月|明年|去年|周末|星期|礼拜|"
    r"周[一二三四五六日天]|[一二三四五六七八九十]+[月号]"
)
NAME = re.compile(r"(?<=[^.!?\s]\s)[A-Z][a-z]+")  # a capitalised word that does not start a sentence


def _phrases(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def normalize(text: str) -> str:
    """Lower case, NFKC, apostrophes dropped ("I'm" → "im"), anything but letters and digits turned to single
    spaces: what the word lists match against."""
    text = unicodedata.normalize("NFKC", text).lower().replace("'", "").replace("\u2019", "")
    kept = "".join(c if unicodedata.category(c)[0] in "LN" else " " for c in text)
    return " ".join(kept.split())


def _alternation(phrases: Iterable[str], plural: bool = False, *, grouped: bool = True) -> str:
    """One regex for many phrases; a Latin phrase matches whole words only (optionally plural).

    The Latin phrases share one word-boundary check around a group of them (`grouped`): the same matches, spans
    and order of trial as one check per phrase, at about a tenth of the time (the lookbehind in front of every
    alternative kept re from scanning fast; the word lists are long; bench/turn_cost.py measures it).
    `PAGEMIND_TURN_SHORTCUTS=off` (read at each turn, in `rules_for`) builds the per-phrase form."""
    latin: list[str] = []
    other: list[str] = []
    for phrase in sorted({normalize(p) for p in phrases if normalize(p)}, key=len, reverse=True):
        (latin if phrase[0].isascii() else other).append(re.escape(phrase))
    suffix = "(?:s|es)?" if plural else ""
    if not grouped:
        return "|".join([rf"(?<![a-z0-9]){body}{suffix}(?![a-z0-9])" for body in latin] + other) or r"(?!x)x"
    # A Latin phrase and another cannot start at the same place (an ASCII first character or not), so putting
    # the Latin group first changes no match.
    group = [rf"(?<![a-z0-9])(?:{'|'.join(latin)}){suffix}(?![a-z0-9])"] if latin else []
    return "|".join(group + other) or r"(?!x)x"


@dataclass(frozen=True)
class _Rules:
    chitchat: re.Pattern[str]
    signals: tuple[tuple[str, re.Pattern[str]], ...]  # (weight name, pattern), in the order reasons are given


def rules_for(config: SalienceConfig) -> _Rules:
    """The compiled rules for `config`'s own words, in the form `PAGEMIND_TURN_SHORTCUTS` asks for now."""
    return _rules(tuple(config.keywords), tuple(config.chitchat), Settings.read("turn_shortcuts") != "off")


@lru_cache(maxsize=64)
def _rules(keywords: tuple[str, ...], chitchat: tuple[str, ...], grouped: bool) -> _Rules:
    def alternation(phrases: Iterable[str], plural: bool = False) -> str:
        return _alternation(phrases, plural, grouped=grouped)

    return _Rules(
        chitchat=re.compile(f"{alternation([*_phrases(CHITCHAT), *chitchat])}|{LAUGHTER}"),
        signals=(
            ("recall_question", re.compile(alternation(_phrases(RECALL_QUESTIONS)))),
            ("life_event", re.compile(alternation([*_phrases(LIFE_EVENTS), *keywords], plural=True))),
            ("emotion", re.compile(alternation(_phrases(EMOTIONS), plural=True))),
            ("preference", re.compile(PREFERENCES)),
            ("about_user", re.compile(ABOUT_USER)),
            ("specifics", re.compile(SPECIFICS)),
        ),
    )


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


def _signals(normal: str, original: str, rules: _Rules) -> list[str]:
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
