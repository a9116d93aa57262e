"""The sections of `memory.advanced`: pressure lines, section budgets, archival and recall ranking, the salience
gate, episodes and reflection. Each is also what the runtime reads, resolved (`MemoryConfig.archival` and the
others: the preset's values where the YAML leaves a field at its default). Defaults are justified in
bench/RESULTS.md."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagemind.runtime.spec.renames import ARCHIVAL_RENAMES, SALIENCE_RENAMES, dropped_keys, renamed_keys


class PressureConfig(BaseModel):
    """When the window is flushed: fractions of the usable window (`context_window − output reserve`)."""

    model_config = ConfigDict(extra="forbid")

    warn: float = Field(0.70, gt=0, lt=1, description="fraction of the usable window at which the agent is warned")
    flush: float = Field(0.90, gt=0, le=1, description="fraction at which old messages are summarised and evicted")
    target: float = Field(0.50, gt=0, lt=1, description="fraction a flush brings the window down to")

    @model_validator(mode="after")
    def _ordered(self) -> PressureConfig:
        if not self.target < self.flush:
            raise ValueError(f"target ({self.target}) must be below flush ({self.flush})")
        if not self.warn < self.flush:
            raise ValueError(f"warn ({self.warn}) must be below flush ({self.flush})")
        return self


class BudgetConfig(BaseModel):
    """Token budgets of the prompt's sections that grow on their own (the summary, the memories looked up for a
    turn) and the room kept for the reply; messages get the rest of the window. (`system` and `core` were shown but
    never enforced, and are gone: each block's `limit` bounds the core blocks.)"""

    model_config = ConfigDict(extra="forbid")
    # What `spec_hash` covers for the removed fields: their old defaults, so no stored agent counts as edited.
    LEGACY: ClassVar[dict[str, int]] = {"system": 1000, "core": 1500}

    summary: int = Field(2000, gt=0, description="tokens for the running summary of evicted messages")
    retrieved: int = Field(2000, gt=0, description="tokens for the memories looked up for the turn")
    output_reserve: int | None = Field(
        None, gt=0, description="tokens kept free for the reply (default: model.max_output_tokens)"
    )

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        return dropped_keys(data, "memory.advanced.budgets")


class ExpiryConfig(BaseModel):
    """When archival memories leave default results: time-bound wording expires them (`memory.expiry`), disuse
    makes them dormant (`memory.decay`; disuse counts the agent's active days, `memory.activity`, not calendar
    days). Date-ranged searches and `pagemind memory archival AGENT --all` still show both."""

    model_config = ConfigDict(extra="forbid")

    from_wording: bool = Field(
        True,
        description="when the writer gives no expiry, read one from time-bound wording "
        "('tomorrow', 'this week', 'until Friday', '下周', '三天内')",
    )
    kinds: list[str] = Field(
        default_factory=lambda: ["fact", "preference", "progress", "todo", "constraint", "reflection"],
        description="kinds whose wording can expire them (episodes are history: never)",
    )
    decay_after_days: float = Field(
        30.0,
        gt=0,
        description="ACTIVE days (dates on which the agent received a user message) without retrieval after "
        "which ranking weight falls; days nobody talked to the agent do not count",
    )
    decay_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="score × (1 − w·f), f rising linearly from 0 at decay_after_days to 1 at hide_after_days",
    )
    hide_after_days: float | None = Field(
        90.0,
        gt=0,
        description="ACTIVE days without retrieval after which a memory leaves default results; a date range "
        "or --all still finds it (null: never)",
    )
    prefetch_counts: bool = Field(
        True,
        description="a memory the per-turn lookup shows the model counts as retrieved for decay (not as a hit)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> ExpiryConfig:
        if self.hide_after_days is not None and not self.decay_after_days < self.hide_after_days:
            raise ValueError(
                f"decay_after_days ({self.decay_after_days}) must be below hide_after_days ({self.hide_after_days})"
            )
        return self


class TemporalConfig(BaseModel):
    """Questions that name a time ("last May", "two weeks ago", "上个月") or ask when something happened
    (`memory.query_time`): a boost, never a filter (a caller's start/end dates filter)."""

    model_config = ConfigDict(extra="forbid")

    range_boost: float = Field(
        0.3, ge=0, le=5, description="score × (1 + b) for results dated inside the period the question names (0: off)"
    )
    when_boost: float = Field(
        0.2, ge=0, le=5, description="score × (1 + b) for results that mention a time when the question asks when"
    )


class MultiHopConfig(BaseModel):
    """A second search round when the first round's best results name entities the question does not
    (`memory.rounds`): no model call. Off by default: on LoCoMo dev it lost hit@5 and doubled the cost."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="run the second round when new entities appear")
    from_top: int = Field(5, gt=0, le=50, description="first-round results whose entities are read")
    max_entities: int = Field(3, gt=0, le=10, description="entities added to the question")
    weight: float = Field(0.5, ge=0, le=1, description="second round's share in the fused score (first: 1)")


class ArchivalConfig(BaseModel):
    """Archival memory (archival_search, the per-turn lookup) and recall memory (conversation_search): hybrid
    ranking, noise floors, dedupe. Defaults: bench/retrieval_locomo.py on the LoCoMo dev conversations."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="archival memory exists (the agent also needs an archival tool)")
    # Hybrid ranking: keyword (BM25) and dense scores, each divided by its best in the candidate set, mixed.
    dense_weight: float = Field(0.5, ge=0, le=1, description="share of the dense score in the fused score")
    min_similarity: float = Field(0.30, ge=-1, le=1, description="cosine a result needs (the noise floor)")
    min_keyword_score: float = Field(
        0.0, ge=0, description="... or a BM25 score above this (0: any non-stop-word match)"
    )
    candidates: int = Field(50, gt=0, le=1000, description="candidates fetched per retriever before fusion")
    top_k: int = Field(5, gt=0, le=50, description="results per page of a search that gives no top_k")
    max_top_k: int = Field(50, gt=0, le=200, description="most results per page a search may ask for")
    # After fusion (archival): score × recency × importance × usefulness.
    recency_weight: float = Field(0.1, ge=0, le=1, description="how much of the score decays with age")
    recency_half_life_days: float = Field(180.0, gt=0, description="days in which the decaying part halves")
    importance_weight: float = Field(0.2, ge=0, le=1, description="score × (1 + w·(importance − 0.5))")
    default_importance: float = Field(0.5, ge=0, le=1, description="importance of a memory written without one")
    hit_boost: float = Field(
        0.05, ge=0, le=1, description="score × (1 + b·log(1 + hit count)), fading with time since the last hit"
    )
    # Write path.
    dedupe_threshold: float = Field(0.92, gt=0, le=1, description="cosine at which a same-kind memory is a copy")
    supersede_threshold: float = Field(
        0.80, gt=0, le=1, description="cosine above which a same-kind memory that differs is replaced"
    )
    supersede_kinds: list[str] = Field(
        default_factory=lambda: ["fact", "preference", "constraint", "progress", "todo"],
        description="kinds that state something that can change (episodes do not)",
    )
    max_memory_chars: int = Field(4000, gt=0, description="longest memory accepted, in characters")
    # The conversation a memory was filed from (`memory.filed_from`): keywords only, never shown.
    context_messages: int = Field(
        2, ge=0, le=10, description="source messages whose words the keyword index adds to a memory (0: off)"
    )
    context_chars: int = Field(400, gt=0, le=10000, description="characters of each such source message indexed")
    keyword_avg_len: float = Field(
        48.0, gt=0, le=1000, description="BM25's average document length in terms (memories written afterwards)"
    )
    neighbour_weight: float = Field(
        0.0, ge=0, le=1, description="share of the memories filed just before and after added to a result (0: off)"
    )
    neighbour_seconds: float = Field(600.0, gt=0, description="seconds within which memories count as filed together")
    # Recall (conversation_search): each message is keyed with the message before it.
    recall_dense: bool = Field(True, description="add dense similarity to conversation_search's full-text ranking")
    recall_own_text_weight: float = Field(1.0, ge=0, description="extra BM25 weight of a message's own words")
    recall_next_weight: float = Field(0.2, ge=0, le=1, description="share of the next message's score added")
    recall_context_messages: int = Field(
        2, ge=0, le=5, description="earlier messages of the session whose words a message is indexed with (0: none)"
    )
    recall_speaker_boost: float = Field(
        0.3, ge=0, le=5, description='score × (1 + b) for turns whose speaker label ("Caroline: …") the query names'
    )
    recall_diversity: float = Field(
        0.4, ge=0, le=1, description="variety in the head: score × (1 − w·max cosine to the results above) (0: off)"
    )
    recall_diversity_depth: int = Field(30, gt=0, le=200, description="results re-ordered for variety")
    expiry: ExpiryConfig = Field(default_factory=ExpiryConfig, description="expiry by wording, decay by disuse")
    temporal: TemporalConfig = Field(default_factory=TemporalConfig, description="boosts for questions about time")
    multihop: MultiHopConfig = Field(default_factory=MultiHopConfig, description="a second search round")

    # Added after agents existed: left out of the spec's fingerprint while at their defaults (`spec.fingerprint`).
    LATER_FIELDS: ClassVar[tuple[str, ...]] = (
        "expiry",
        "temporal",
        "multihop",
        "recall_speaker_boost",
        "recall_diversity",
        "recall_diversity_depth",
        "context_messages",
        "context_chars",
        "neighbour_weight",
        "neighbour_seconds",
        "keyword_avg_len",
        "recall_context_messages",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, ARCHIVAL_RENAMES, "archival")


class EpisodeTier(BaseModel):
    """One step of fading: episodes older than `after_days` are re-summarised to at most `max_tokens`."""

    model_config = ConfigDict(extra="forbid")

    after_days: float = Field(gt=0, description="age (from the session's start) at which this tier applies")
    max_tokens: int = Field(gt=0, description="the episode's resolution in this tier")


class EpisodesConfig(BaseModel):
    """Sessions become `episode` memories at session end, and fade with age (`runtime.memory.episodes`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="turn ended sessions into episode memories")
    min_session_words: int = Field(
        10, ge=0, description="fewer words of user messages (a CJK character counts as one) is chit-chat: no episode"
    )
    max_tokens: int = Field(512, gt=0, description="a fresh episode's length in tokens")
    tiers: list[EpisodeTier] = Field(
        default_factory=lambda: [EpisodeTier(after_days=7, max_tokens=256), EpisodeTier(after_days=30, max_tokens=64)],
        description="older tiers hold fewer tokens",
    )
    model: str | None = Field(None, description="default: memory.summarizer_model, else the agent's model")
    max_sessions_per_run: int = Field(
        20, gt=0, description="sessions turned into episodes per run (the oldest first; the rest wait for the next run)"
    )

    @model_validator(mode="after")
    def _fading(self) -> EpisodesConfig:
        self.tiers = sorted(self.tiers, key=lambda t: t.after_days)
        budgets = [self.max_tokens] + [t.max_tokens for t in self.tiers]
        if any(older > younger for younger, older in zip(budgets, budgets[1:], strict=False)):
            raise ValueError(f"episode tiers must not grow with age (max_tokens {budgets})")
        return self


class ReflectionConfig(BaseModel):
    """Sleep-time reflection (`pagemind.runtime.reflection`): one bounded model call that merges, resolves
    contradictions, writes insights, updates the profile and marks todos done."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="off: `reflect` does nothing (and every_turns is ignored)")
    every_turns: int = Field(0, ge=0, description="reflect after every N user turns (0: only when asked or idle)")
    budget: int = Field(6000, ge=500, description="input tokens of the reflection request; oldest messages go first")
    max_output_tokens: int = Field(1500, gt=0, description="the reflection answer's token limit")
    model: str | None = Field(None, description="default: memory.summarizer_model, which defaults to the agent's")
    profile_block: str = Field("profile", description="the core block the profile patch applies to")
    neighbours: int = Field(3, ge=0, le=20, description="nearest live memories added per memory the messages touched")
    max_memories: int = Field(60, gt=0, le=500, description="memories offered to the model at most")


class SalienceWeights(BaseModel):
    """What each signal adds to a turn's salience score (0–1); the rules in `runtime/memory/lifecycle/salience.py`."""

    model_config = ConfigDict(extra="forbid")

    base: float = Field(0.25, ge=0, le=1, description="any message that is not chit-chat")
    length: float = Field(0.15, ge=0, le=1, description="added in proportion to length, in full at `long_chars`")
    life_event: float = Field(
        0.5, ge=0, le=1, description="job, exam, move, break-up, allergy, birthday … (工作, 考试 …)"
    )
    recall_question: float = Field(0.5, ge=0, le=1, description="'do you remember', 'what did I say', 上次, 还记得")
    emotion: float = Field(0.3, ge=0, le=1, description="emotion words (sad, anxious, 难过, 焦虑 …)")
    preference: float = Field(0.3, ge=0, le=1, description="'I like/hate/prefer', 'my favourite', 我喜欢, 我讨厌")
    about_user: float = Field(0.2, ge=0, le=1, description="the user speaks of themselves: 'my', 'I am', 我的, 我是")
    specifics: float = Field(0.2, ge=0, le=1, description="names, dates, numbers, weekdays (明天, 下周, 3月)")
    reply: float = Field(0.5, ge=0, le=1, description="share of the reply's signals that counts for the turn")


class SalienceConfig(BaseModel):
    """The salience gate: whether a turn is worth remembering (extraction on eviction) and worth a memory lookup.
    Rules first; a turn scoring between `skip_below` and `remember_above` is unsure and goes to `model` (a small
    model on the agent's endpoint), or counts as worth it when there is none."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="off: every turn is looked up and extracted, no decisions are traced")
    gate_lookup: bool = Field(True, description="gate the per-turn memory lookup (memory.memories_per_turn)")
    gate_extraction: bool = Field(True, description="gate the extraction model call when messages leave the window")
    skip_below: float = Field(0.2, ge=0, le=1, description="a score below this is not worth remembering or a lookup")
    remember_above: float = Field(0.5, ge=0, le=1, description="a score at or above this is worth both")
    min_chars: int = Field(4, ge=0, description="shorter messages with no signal score as too short (a CJK char is 3)")
    long_chars: int = Field(200, gt=0, description="length at which the length bonus is full (a CJK char is 3)")
    small_talk_chars: int = Field(
        60, ge=0, description="shorter, with no signal at all, is small talk: worth neither, no model call (0: off)"
    )
    keywords: list[str] = Field(default_factory=list, description="extra life-event keywords (any language)")
    chitchat: list[str] = Field(default_factory=list, description="extra chit-chat phrases ('roger', '收到啦')")
    model: str | None = Field(None, description="model asked when the rules are unsure; none: unsure is worth it")
    max_tokens: int = Field(20, gt=0, le=200, description="the model's answer is a tiny JSON object")
    weights: SalienceWeights = Field(default_factory=SalienceWeights, description="what each signal adds")

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return renamed_keys(data, SALIENCE_RENAMES, "salience")

    @model_validator(mode="after")
    def _ordered(self) -> SalienceConfig:
        if self.skip_below > self.remember_above:
            raise ValueError(f"skip_below ({self.skip_below}) must not exceed remember_above ({self.remember_above})")
        return self
