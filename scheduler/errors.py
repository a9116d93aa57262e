"""What the daemon refuses, as exceptions the HTTP API maps to status codes (one class per answer a client gets)."""

from __future__ import annotations


class DaemonError(Exception):
    """Something the daemon refused; the message says what and what to do."""


class UnknownAgent(DaemonError, LookupError):
    """No agent has that name: neither a YAML in the agents folder nor one made through the daemon."""

    def __init__(self, name: str):
        super().__init__(f"no agent is called '{name}' (list them with GET /v1/agents or `pagemind agents`)")
        self.name = name


class AgentUnavailable(UnknownAgent):
    """A YAML file in the agents folder would define the agent, but it does not load: the message says which file
    and why. An `UnknownAgent` to callers that only ask whether the agent is served; the file is read again when it
    changes, so fixing it serves the agent without a restart."""

    def __init__(self, name: str, path: str, why: str, kind: str = "agent"):
        DaemonError.__init__(
            self,
            f"{kind} '{name}' failed to load, so it is not served: {why} "
            "(fix the file; the daemon reads it again when it changes)",
        )
        self.name, self.path, self.why = name, path, why


class AgentExists(DaemonError):
    """The name is taken: by a YAML agent or template in the folder, or by a stored agent."""

    def __init__(self, name: str):
        super().__init__(f"an agent or template called '{name}' already exists; choose another name")
        self.name = name


class UnknownTemplate(DaemonError, LookupError):
    """No YAML in the agents folder has that name, so nothing can be made from it."""

    def __init__(self, name: str, known: list[str]):
        listed = ", ".join(sorted(known)) or "none"
        super().__init__(f"no template or YAML agent is called '{name}' (known: {listed})")
        self.name = name


class InvalidBlocks(DaemonError):
    """Block values an agent's spec does not take: a label it has no block for, or a value its block refuses."""


class NotDeletable(DaemonError):
    """The agent is defined by a YAML file in the agents folder: remove the file instead."""

    def __init__(self, name: str):
        super().__init__(f"agent '{name}' is defined by a YAML file in the agents folder; delete the file instead")
        self.name = name


class UnknownRun(DaemonError, LookupError):
    """No inbox item has that run id."""

    def __init__(self, run_id: str):
        super().__init__(f"no run has the id '{run_id}'")
        self.run_id = run_id


class KeyReused(DaemonError):
    """An idempotency key came back with different content than the item it names."""

    def __init__(self, agent: str, key: str):
        super().__init__(f"idempotency key {key!r} of agent '{agent}' was used for other content; use a new key")
        self.agent, self.key = agent, key


class DaemonStopping(DaemonError):
    """The daemon stopped while a request waited for a run that had not ended: the message is stored and pending
    (another daemon, or this one once restarted, runs it), so the client must not send it again as new."""

    def __init__(self, run_id: str):
        super().__init__(
            f"the daemon is stopping; message {run_id} is stored and pending, and runs once a daemon serves it again "
            f"(GET /v1/runs/{run_id} when it is back; sending it again with the same idempotency_key returns it)"
        )
        self.run_id = run_id
