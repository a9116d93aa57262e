"""How the daemon runs its agents: `DaemonConfig`, its settings (limits, timings, the API keys' limits) and the
shortcut switches (`hand_off`, `finish_with_last_step`, `hold_steps`), each a faster path with the same outcome.

`pagemind serve --set NAME=VALUE` sets a field (`DaemonConfig.from_settings`); the docs' table of defaults is made
from this class.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationError


class DaemonConfig(BaseModel):
    """How the daemon runs its agents."""

    concurrency: int = Field(64, gt=0, description="agents whose work runs at once in this process")
    lease_s: float = Field(30, gt=0, description="an agent's lease: how long a dead daemon holds its agents")
    poll_s: float = Field(1.0, gt=0, description="the safety-net poll for work no wake-up announced")
    idle_unload_s: float = Field(300, ge=0, description="an agent idle this long is unloaded from memory")
    grace_s: float = Field(30, ge=0, description="how long `stop` lets running items finish before cancelling")
    max_loaded: int = Field(1024, gt=0, description="agents kept loaded at most (least recently used go first)")
    max_attempts: int = Field(5, gt=0, description="claims of one item before it fails (a daemon died each time)")
    turn_wait_s: float = Field(30, ge=0, description="how long a turn waits for a turn run outside the daemon")
    linger_s: float = Field(
        10.0,
        ge=0,
        description="an agent whose inbox is empty is kept (lease, turn lock) this "
        "long for its next message before it is given back (`scheduler.dispatcher`)",
    )
    # Each lingering agent holds its turn lock, a Postgres advisory lock: a daemon holds up to max_lingering +
    # concurrency of them, and Postgres' lock table has max_locks_per_transaction × max_connections slots (6,400
    # with the defaults) for every daemon on the database together.
    max_lingering: int = Field(512, ge=0, description="agents that linger at once at most")
    url: str = Field("", description="the URL this daemon answers on, for `pagemind run` (the API sets it)")
    relay_interval_s: float = Field(
        0.05,
        ge=0,
        description="a relayed run's events are written at most this often "
        "(batched meanwhile) for watchers in other processes (Postgres)",
    )
    events_keep_s: float = Field(3600, gt=0, description="relayed events are deleted this long after written")
    # The API's keys (`scheduler.api.auth`): limits of each user key (admins have none; 0: no limit), and how long
    # this process trusts a key it found without asking the database again (a revocation elsewhere waits for it).
    key_requests_per_minute: int = Field(600, ge=0, description="requests a user key may make per minute (0: any)")
    key_turns_in_flight: int = Field(
        4, ge=0, description="messages of one user accepted and not finished at once, over its agents (0: any)"
    )
    key_cache_s: float = Field(5.0, ge=0, description="a key found is trusted this long before it is read again")
    min_api_trigger_s: float = Field(
        900, ge=0, description="an agent posted to the API: least time between two of its trigger firings (0: any)"
    )
    # Shortcuts: each saves statements or round trips per turn, measured on and off in one run by
    # `python -m bench.daemon_ab --off NAME` (bench/RESULTS.md); off, the daemon takes the plain path, with the
    # same outcome. One gain each:
    # linger_s: off (0) gives 0.27x the steps/s at 10 agents on Postgres (2026-12-04; `git log -p bench/RESULTS.md`).
    # hold_steps: own overhead per step x0.86-0.88 at low load on Postgres, x0.96 on SQLite ("Held steps").
    # hand_off: off: 0.67-0.76x the steps/s, 1.12-1.30x CPU/step; Postgres at 10 agents ~1.0x steps/s, 1.13x CPU/step.
    # finish_with_last_step: off: 0.71-0.83x the steps/s, 1.02-1.22x CPU/step; Postgres at 10 agents 0.91-0.98x.
    # (Both: 2026-12-07, host loaded 7-17 on 2 CPUs: bench/RESULTS.md, "Daemon throughput, main against this branch".)
    hand_off: bool = Field(
        True,
        description="a message for an agent whose worker lingers here is inserted already claimed for that worker, "
        "with the turn's user message, one statement instead of three; off: the worker is woken and claims it",
    )
    finish_with_last_step: bool = Field(
        True,
        description="a turn's inbox item is finished in its last step's commit (one round trip less a turn); off: "
        "finished in a statement of its own after the turn",
    )
    hold_steps: bool = Field(
        True,
        description="a step that only edited core memory or read is stored with the turn's next step, in one "
        "statement (`runtime.loop`); off: every step commits alone",
    )

    @classmethod
    def from_settings(cls, settings: list[str]) -> DaemonConfig:
        """The defaults with `NAME=VALUE` settings (`pagemind serve --set`); ValueError naming a bad one."""
        chosen: dict[str, str] = {}
        for setting in settings:
            name, sep, value = setting.partition("=")
            if not sep or name.strip() not in cls.model_fields or name.strip() == "url":
                known = ", ".join(sorted(set(cls.model_fields) - {"url"}))
                raise ValueError(f"--set {setting!r}: expected NAME=VALUE with NAME one of {known}")
            chosen[name.strip()] = value.strip()
        try:
            return cls.model_validate(chosen)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"--set {first['loc'][0]}: {first['msg']}") from None
