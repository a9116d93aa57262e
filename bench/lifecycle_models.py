"""The scripted models of bench.lifecycle: a companion that answers each request as a competent model would,
and a reflector that applies rules a weak model could follow. Neither reads the benchmark's ground truth; each
sees only the request it answers.

- companion (agent steps): a user message that states a personal fact or a plan is filed with
  `archival_memory_insert` (rewritten in the third person, Chinese kept in Chinese; kind `todo` when it names a
  time); anything else, and
  the step after a tool result, is answered with `send_message`;
- summaries: extractive (bench.long_conversation's); extraction on eviction: nothing (the companion filed the
  facts when they were said);
- reflector (the contract's reflection request, `runtime/reflection`): near-duplicate texts are merged; two
  fact/preference memories on the same subject (a keyword table: "lives in / moved to", "works at / joined", …)
  are a contradiction the newer wins; todos whose written date has passed are marked done. No insights, no
  profile patch;
- salience's small model (when the rules are unsure): `{"remember", "lookup"}`, both true when the companion
  would file the message; anything else (an episode's summary, a re-summary when fading): the first words of
  the request's last message, within its max_tokens.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from bench.long_conversation import extractive_summary
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.testing.responses import Body, reply_body, tool_call_body
from pagemind.runtime.tokens import count_tokens

REPLY = "I hear you. Tell me more?"
SALIENCE_MODEL = "scripted-small"  # the name bench.lifecycle gives `memory.salience.model`
EMPTY_EXTRACTION = '{"facts": [], "preferences": [], "progress": [], "todos": []}'

# -- the companion ----------------------------------------------------------------------------------------------

_LIFE = re.compile(
    r"\b(?:live|living|moved|work|joined|left|favou?rite|hobby|sister|partner|allerg\w*|birthday|"
    r"grew up|learning|drive|car|cat|dog|pet|named|called|appointment|interview|trip|visiting|"
    r"concert)\b|考试|面试|搬家|工作",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|my|me)\b", re.I)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_TIME_BOUND = re.compile(
    r"\b(?:tomorrow|tonight|this week|next week|until|the day after tomorrow)\b|下周|明天|今晚", re.I
)
_LEAD = re.compile(r"^(?:actually|big news|just so you know|oh|well)[,:]?\s*", re.I)
_PRONOUNS = [
    (re.compile(p, re.I), r)
    for p, r in (
        (r"\bI'm\b", "the user is"),
        (r"\bI am\b", "the user is"),
        (r"\bI've\b", "the user has"),
        (r"\bI\b", "the user"),
        (r"\bmy\b", "the user's"),
        (r"\bme\b", "the user"),
    )
]
_VERB = re.compile(r"\b(the user) (have|work|live|drive|listen|love|like|go|play)\b", re.I)


def memory_of(text: str) -> tuple[str, str] | None:
    """(memory text, kind) for a message that states a personal fact or plan; None for chit-chat."""
    if not _LIFE.search(text) or not (_FIRST_PERSON.search(text) or _CJK.search(text)):
        return None
    kind = "todo" if _TIME_BOUND.search(text) else "fact"
    if _CJK.search(text):  # kept in the user's language, with the user named: "用户下周考试"
        return "用户" + text.strip().removeprefix("我"), kind
    rewritten = _LEAD.sub("", text.strip())
    for pattern, replacement in _PRONOUNS:
        rewritten = pattern.sub(replacement, rewritten)
    rewritten = _VERB.sub(lambda m: f"{m[1]} {'has' if m[2].lower() == 'have' else m[2] + 's'}", rewritten)
    return rewritten[:1].upper() + rewritten[1:], kind


def companion_step(request: ModelRequest) -> Body:
    """One agent step: file what the user's new message states, then (or otherwise) answer."""
    chat = [m for m in request.messages[1:] if m["role"] != "system"]
    if not chat or chat[-1]["role"] != "user":
        return tool_call_body("send_message", {"message": REPLY})
    found = memory_of(chat[-1].get("content") or "")
    if found is None:
        return tool_call_body("send_message", {"message": REPLY})
    text, kind = found
    return tool_call_body("archival_memory_insert", {"content": text, "tags": [kind]})


# -- the reflector ----------------------------------------------------------------------------------------------

TOPICS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.I)
    for name, pattern in {
        "home": r"\b(?:lives? in|living in|moved to)\b",
        "employer": r"\b(?:works? (?:at|for)|joined)\b",
        "food": r"favou?rite food",
        "band": r"favou?rite band",
        "hobby": r"\bhobby\b",
        "car": r"\b(?:drives? an?|car is|bought an?)\b",
        "pet": r"\b(?:cat|dog|pet)\b",
        "sister": r"\bsister\b",
        "partner": r"\bpartner\b",
        "allergy": r"\ballerg",
        "birthday": r"\bbirthday\b",
        "hometown": r"\bgrew up\b",
        "learning": r"\blearning\b",
    }.items()
}
_WORD = re.compile(r"\w+")
_DATE = re.compile(r"\((?:week of )?(\d{4}-\d{2}-\d{2})\)")
NEAR_DUPLICATE = 0.8  # word-set Jaccard at which two memories say the same thing


def topic(text: str) -> str | None:
    """The subject a memory is about, by the first keyword rule that matches."""
    return next((name for name, pattern in TOPICS.items() if pattern.search(text)), None)


def _jaccard(a: str, b: str) -> float:
    x, y = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return len(x & y) / len(x | y) if x | y else 0.0


def _merges(facts: list[dict[str, Any]], used: set[str]) -> list[dict[str, Any]]:
    merges = []
    for i, old in enumerate(facts):
        for new in facts[i + 1 :]:
            if old["id"] not in used and new["id"] not in used and _jaccard(old["text"], new["text"]) >= NEAR_DUPLICATE:
                merges.append({"keep": new["id"], "drop": [old["id"]], "reason": "near-duplicate text"})
                used.add(old["id"])
    return merges


def _contradictions(facts: list[dict[str, Any]], used: set[str]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for memory in facts:
        if memory["id"] not in used and (name := topic(memory["text"])) is not None:
            groups.setdefault(name, []).append(memory)
    out = []
    for name, group in groups.items():
        if len(group) > 1:  # facts come sorted oldest first: the newest wins
            out.append(
                {
                    "winner": group[-1]["id"],
                    "losers": [m["id"] for m in group[:-1]],
                    "reason": f"newer statement about the user's {name}",
                }
            )
            used.update(m["id"] for m in group[:-1])
    return out


def _done(memories: list[dict[str, Any]], today: date) -> list[dict[str, Any]]:
    out = []
    for memory in memories:
        dates = _DATE.findall(memory["text"]) if memory["kind"] == "todo" else []
        if dates:
            last = date.fromisoformat(dates[-1]) + timedelta(days=6 if "week of" in memory["text"] else 0)
            if last < today:
                out.append({"id": memory["id"], "reason": f"its date ({last}) has passed"})
    return out


def reflect_answer(request: ModelRequest) -> Body:
    """The reflection's output (the contract's ReflectionOutput, as JSON) for the request's JSON payload."""
    user = next((m for m in reversed(request.messages) if m["role"] == "user"), None)
    try:
        payload = json.loads(user["content"]) if user else {}
        memories = sorted(payload.get("memories") or [], key=lambda m: m.get("at") or "")
        today = datetime.fromisoformat(payload["now"].replace("Z", "+00:00")).date()
    except (ValueError, KeyError, TypeError, AttributeError):
        return reply_body('{"merges": [], "contradictions": [], "insights": [], "done": []}')
    facts = [m for m in memories if m.get("kind") in ("fact", "preference")]
    used: set[str] = set()
    output = {
        "merges": _merges(facts, used),
        "contradictions": _contradictions(facts, used),
        "insights": [],
        "profile": None,
        "done": _done(memories, today),
    }
    return reply_body(json.dumps(output))


# -- routing ----------------------------------------------------------------------------------------------------


def salience_answer(request: ModelRequest) -> Body:
    """`{"remember", "lookup"}` for the turn in the request (JSON `{"user": text, ...}`, or the text itself): worth
    both when the companion would file it, neither otherwise."""
    user = next((m for m in reversed(request.messages) if m["role"] == "user"), None)
    content = str((user or {}).get("content") or "")
    try:
        payload = json.loads(content)
        text = str(payload.get("user", content)) if isinstance(payload, dict) else content
    except ValueError:
        text = content
    worth = memory_of(text) is not None
    return reply_body(json.dumps({"remember": worth, "lookup": worth}))


def short_summary(request: ModelRequest) -> Body:
    """The first words of the request's last message, within its max_tokens (episodes, re-summaries)."""
    text = " ".join(str(request.messages[-1].get("content") or "nothing").split())
    limit = max(8, int((request.max_tokens or 64) * 0.8))
    words = text.split(" ")
    while len(words) > 1 and count_tokens(" ".join(words)) > limit:
        words = words[: max(1, len(words) * 3 // 4)]
    return reply_body(" ".join(words))


def _is_reflection(request: ModelRequest) -> bool:
    if "reflect" in request.purpose:
        return True
    user = next((m for m in reversed(request.messages) if m["role"] == "user"), None)
    content = (user or {}).get("content") or ""
    return content.lstrip().startswith("{") and '"memories"' in content and '"now"' in content


def respond(request: ModelRequest) -> Body:
    """Every model call of the benchmark, routed by the request's purpose."""
    if request.purpose == "step":
        return companion_step(request)
    if request.purpose == "summarize":  # the recursive summary's transcript, or anything else (an episode)
        body = extractive_summary(request)
        return short_summary(request) if body["choices"][0]["message"]["content"] == "nothing" else body
    if request.purpose == "extract":
        return reply_body(EMPTY_EXTRACTION)
    if _is_reflection(request):
        return reflect_answer(request)
    if "salien" in request.purpose:
        return salience_answer(request)
    return short_summary(request)


def calls_by_purpose(requests: list[ModelRequest]) -> Counter[str]:
    """How many model calls each purpose made."""
    return Counter(r.purpose for r in requests)
