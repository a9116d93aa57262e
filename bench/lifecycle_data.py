"""A synthetic companion history for bench.lifecycle: days of chit-chat with planted facts, later corrections
of some of them, and time-bound plans, generated from templates and a seed, with the ground truth beside it.

    history = generate(seed=7, days=90, turns_per_day=6)
    for day in history.days: ...             # Day(number, date, turns)
    history.facts["city"].latest             # the value the user stated last
    history.corrections, history.plans       # what changed when; what ends when

Only the benchmark's scoring reads the ground truth; the scripted companion and reflector see requests alone.
The value pools of different subjects never share a word, so a value found in a memory names its subject.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Literal

START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
FIRST_TURN_HOUR, LAST_TURN_HOUR = 8, 22

TurnKind = Literal["chat", "fact", "correction", "plan"]


@dataclass(frozen=True)
class Slot:
    """A subject the user states a fact about: how it is said, how it may be corrected, how it is asked."""

    name: str
    question: str
    values: tuple[str, ...]
    plant: tuple[str, ...]
    correct: tuple[str, ...] = ()  # templates with {v} (new) and {old}; empty: never corrected


SLOTS: tuple[Slot, ...] = (
    Slot(
        "city",
        "Which city does the user live in?",
        ("Lisbon", "Toronto", "Osaka", "Berlin", "Melbourne", "Denver", "Madrid", "Vienna"),
        ("I live in {v}.", "I've been living in {v} for a few years."),
        ("Actually I moved to {v} last month.", "Big news: I moved to {v}, I'm not in {old} anymore."),
    ),
    Slot(
        "job",
        "Where does the user work?",
        ("Acme", "Globex", "Initech", "Hooli", "Umbrella Corp", "Stark Industries"),
        ("I work at {v} as an engineer.", "I work for {v}, mostly as a designer."),
        ("I'm not at {old} anymore, I joined {v}.", "I left {old} and joined {v} this month."),
    ),
    Slot(
        "pet",
        "What is the user's pet called?",
        ("Miso", "Biscuit", "Pepper", "Mochi", "Luna", "Tofu"),
        ("I have a cat called {v}.", "My dog is named {v}."),
    ),
    Slot(
        "food",
        "What is the user's favourite food?",
        ("ramen", "lasagna", "dumplings", "tacos", "pho", "paella", "curry"),
        ("My favourite food is {v}.", "I could eat {v} every day, it's my favourite food."),
        ("These days my favourite food is {v}, not {old}.", "I'm over {old}; my new favourite food is {v}."),
    ),
    Slot(
        "sister",
        "What is the user's sister's name?",
        ("Mei", "Anna", "Priya", "Sofia", "Hana", "Clara"),
        ("My sister's name is {v}.", "My older sister is called {v}."),
    ),
    Slot(
        "allergy",
        "What is the user allergic to?",
        ("peanuts", "shellfish", "penicillin", "pollen", "sesame"),
        ("I'm allergic to {v}.", "Just so you know, I have a {v} allergy."),
    ),
    Slot(
        "hobby",
        "What is the user's hobby?",
        ("rock climbing", "pottery", "chess", "gardening", "photography", "knitting"),
        ("My hobby is {v}.", "In my free time my main hobby is {v}."),
        ("I gave up {old}; my new hobby is {v}.", "My hobby these days is {v} instead of {old}."),
    ),
    Slot(
        "car",
        "What car does the user drive?",
        ("Toyota Corolla", "Honda Civic", "Volkswagen Golf", "Tesla Model 3", "Mazda MX-5", "Ford Focus"),
        ("I drive a {v}.", "My car is a {v}."),
        ("I sold my {old} and bought a {v}.", "I drive a {v} now, the {old} is gone."),
    ),
    Slot(
        "birthday",
        "When is the user's birthday?",
        ("March 3", "July 14", "October 21", "January 9", "May 27"),
        ("My birthday is on {v}.", "My birthday is {v}, don't forget!"),
    ),
    Slot(
        "partner",
        "What is the user's partner called?",
        ("Sam", "Alex", "Jordan", "Kai", "Noor"),
        ("My partner is called {v}.", "My partner's name is {v}."),
    ),
    Slot(
        "band",
        "What is the user's favourite band?",
        ("Radiohead", "Coldplay", "Arctic Monkeys", "Daft Punk", "ABBA", "Fleetwood Mac"),
        ("My favourite band is {v}.", "I listen to {v} all the time, they're my favourite band."),
        ("My favourite band now is {v}, I'm tired of {old}.", "I switched from {old} to {v}, my new favourite band."),
    ),
    Slot(
        "hometown",
        "Where did the user grow up?",
        ("Porto", "Krakow", "Chengdu", "Cork", "Brno"),
        ("I grew up in {v}.", "I was born and grew up in {v}."),
    ),
    Slot(
        "language",
        "Which language is the user learning?",
        ("Japanese", "Spanish", "Italian", "Korean", "Greek"),
        ("I'm learning {v} at the moment.", "I started learning {v}, it's hard but fun."),
    ),
)


def _sunday(day: date) -> date:
    return day + timedelta(days=6 - day.weekday())


def _friday(day: date) -> date:
    return day + timedelta(days=(4 - day.weekday()) % 7)


@dataclass(frozen=True)
class PlanTemplate:
    """A time-bound plan: its wording, the values it names, the last day it is relevant, how it is looked up."""

    text: str
    values: tuple[str, ...]
    query: str
    ends: object  # Callable[[date], date]: the plan's last relevant day, from the day it is said


PLANS: tuple[PlanTemplate, ...] = (
    PlanTemplate(
        "I have a dentist appointment with Dr. {v} tomorrow.",
        ("Lee", "Novak", "Haddad", "Okafor", "Rossi"),
        "dentist appointment with Dr. {v}",
        lambda d: d + timedelta(days=1),
    ),
    PlanTemplate(
        "This week I'm visiting my mum in {v}.",
        ("Bath", "Ghent", "Aarhus", "Lucca", "Bergen"),
        "visiting mum in {v}",
        _sunday,
    ),
    PlanTemplate(
        "下周{v}考试，有点紧张。",
        ("数学", "英语", "物理", "化学", "历史"),
        "下周{v}考试",
        lambda d: _sunday(d) + timedelta(days=7),
    ),
    PlanTemplate(
        "I'm on a work trip to {v} until Friday.",
        ("Zurich", "Dublin", "Seoul", "Nairobi", "Oslo"),
        "work trip to {v}",
        _friday,
    ),
    PlanTemplate(
        "My job interview at {v} is the day after tomorrow.",
        ("Vandelay", "Pied Piper", "Dunder Mifflin", "Soylent", "Cyberdyne"),
        "job interview at {v}",
        lambda d: d + timedelta(days=2),
    ),
    PlanTemplate(
        "Tonight I'm seeing {v} in concert!",
        ("Muse", "Blur", "Portishead", "Massive Attack", "Bjork"),
        "{v} concert",
        lambda d: d,
    ),
)

CHAT = (
    "ok",
    "haha",
    "lol",
    "thanks!",
    "good morning",
    "how are you?",
    "nice",
    "hmm",
    "the weather is lovely today",
    "I'm a bit tired",
    "just had lunch",
    "what do you think about rainy days?",
    "nothing much, just relaxing",
    "see you later",
    "that's funny",
    "yeah",
    "good night",
    "I made tea",
    "it's so quiet today",
    "嗯嗯",
    "哈哈",
    "好的",
    "今天好累",
    "晚安",
    "早上好",
    "吃饭了吗？",
    "没什么，随便聊聊",
    "天气不错",
)


@dataclass(frozen=True)
class Turn:
    """One user message: when, what, and (ground truth) what it plants."""

    at: datetime
    text: str
    kind: TurnKind = "chat"
    ref: str | None = None  # the fact slot, or the plan's id


@dataclass(frozen=True)
class Day:
    """One simulated day (numbered from 1) and its user messages, in order."""

    number: int
    date: date
    turns: list[Turn]

    @property
    def session_end(self) -> datetime:
        """When the day's session ends (the idle trigger would fire): after its last turn."""
        return datetime.combine(self.date, datetime.min.time(), UTC) + timedelta(hours=LAST_TURN_HOUR + 1)


@dataclass
class FactTruth:
    """A planted fact: every value the user stated, in order; the last one is the truth."""

    slot: str
    question: str
    values: list[tuple[int, str]] = field(default_factory=list)  # (day, value)

    @property
    def latest(self) -> str:
        """The value stated last."""
        return self.values[-1][1]


@dataclass(frozen=True)
class Correction:
    """A fact the user corrected: the value it replaced and the new one."""

    slot: str
    day: int
    old: str
    new: str


@dataclass(frozen=True)
class Plan:
    """A time-bound plan: said on `day`, relevant through `ends` (inclusive); `marker` names it in a memory."""

    id: str
    day: int
    text: str
    marker: str
    query: str
    ends: date


@dataclass
class History:
    """The generated days and their ground truth."""

    seed: int
    turns_per_day: int
    days: list[Day]
    facts: dict[str, FactTruth]
    corrections: list[Correction]
    plans: list[Plan]

    @property
    def turn_count(self) -> int:
        """User messages in the whole history."""
        return sum(len(d.turns) for d in self.days)

    def first(self, days: int) -> History:
        """The history cut after `days` days, its ground truth as it stood then."""
        facts = {
            slot: FactTruth(t.slot, t.question, [(d, v) for d, v in t.values if d <= days])
            for slot, t in self.facts.items()
        }
        return History(
            self.seed,
            self.turns_per_day,
            self.days[:days],
            {s: t for s, t in facts.items() if t.values},
            [c for c in self.corrections if c.day <= days],
            [p for p in self.plans if p.day <= days],
        )


def _schedule_facts(rng: random.Random, days: int) -> tuple[dict[str, FactTruth], list[tuple[int, Turn]]]:
    """Each slot planted once in the first 40 % of the days; about half corrected later (one twice, if long)."""
    facts, events = {}, []
    plant_until = max(1, int(days * 0.4))
    corrected = [s for s in SLOTS if s.correct]
    twice = rng.choice(corrected).name if days >= 60 else None
    for slot in SLOTS:
        values = rng.sample(slot.values, 3)
        day = rng.randint(1, plant_until)
        truth = facts[slot.name] = FactTruth(slot.name, slot.question, [(day, values[0])])
        events.append((day, Turn(START, rng.choice(slot.plant).format(v=values[0]), "fact", slot.name)))
        for _ in range((2 if slot.name == twice else 1) if slot.correct else 0):
            gap = max(1, days // 8)
            first = truth.values[-1][0] + gap
            if first > days:
                break
            day = rng.randint(first, max(first, min(days, first + days // 3)))
            old, new = truth.values[-1][1], values[len(truth.values)]
            truth.values.append((day, new))
            text = rng.choice(slot.correct).format(v=new, old=old)
            events.append((day, Turn(START, text, "correction", slot.name)))
    return facts, events


def _schedule_plans(rng: random.Random, days: int) -> tuple[list[Plan], list[tuple[int, Turn]]]:
    """A plan on about a third of the days, each (template, value) pair used at most once."""
    pairs = [(t, v) for t in PLANS for v in t.values]
    rng.shuffle(pairs)
    plans, events = [], []
    for day in range(1, days + 1):
        if not pairs or rng.random() > 0.35:
            continue
        template, value = pairs.pop()
        said = (START + timedelta(days=day - 1)).date()
        plan = Plan(
            f"plan{len(plans) + 1}",
            day,
            template.text.format(v=value),
            value,
            template.query.format(v=value),
            template.ends(said),
        )
        plans.append(plan)
        events.append((day, Turn(START, plan.text, "plan", plan.id)))
    return plans, events


def generate(seed: int = 7, days: int = 90, turns_per_day: int = 6) -> History:
    """The history: `turns_per_day` user messages a day (more on a day with many planted messages), chit-chat
    around the planted facts, corrections and plans, at times spread over the waking day."""
    rng = random.Random(seed)
    facts, fact_events = _schedule_facts(rng, days)
    plans, plan_events = _schedule_plans(rng, days)
    corrections = [
        Correction(t.slot, d, t.values[i - 1][1], v)
        for t in facts.values()
        for i, (d, v) in enumerate(t.values)
        if i > 0
    ]
    planted: dict[int, list[Turn]] = {}
    for day, turn in sorted(fact_events + plan_events, key=lambda e: e[0]):
        planted.setdefault(day, []).append(turn)
    out = []
    for number in range(1, days + 1):
        mine = planted.get(number, [])
        texts: list[Turn] = [Turn(START, rng.choice(CHAT)) for _ in range(max(0, turns_per_day - len(mine)))]
        for turn in mine:
            texts.insert(rng.randint(0, len(texts)), turn)
        day = (START + timedelta(days=number - 1)).date()
        step = (LAST_TURN_HOUR - FIRST_TURN_HOUR) * 60 // max(1, len(texts))
        first = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=FIRST_TURN_HOUR)
        turns = [Turn(first + timedelta(minutes=i * step), t.text, t.kind, t.ref) for i, t in enumerate(texts)]
        out.append(Day(number, day, turns))
    return History(seed, turns_per_day, out, facts, sorted(corrections, key=lambda c: c.day), plans)
