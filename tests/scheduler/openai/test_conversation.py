"""Which of an app's messages are new, and their idempotency key (scheduler/api/openai/conversation.py)."""

from __future__ import annotations

import pytest

from pagemind.scheduler.api.openai.bodies import ChatMessage
from pagemind.scheduler.api.openai.conversation import incoming
from pagemind.scheduler.api.openai.errors import ProxyError


def chat(*pairs: tuple[str, object]) -> list[ChatMessage]:
    return [ChatMessage.model_validate({"role": role, "content": content}) for role, content in pairs]


def test_the_user_messages_after_the_last_reply_are_new_and_the_history_keys_them():
    first = incoming(chat(("system", "app"), ("user", "a")), None)
    assert (first.text, first.key, first.ignored_system) == ("a", None, 1)  # a first message has no history
    second = chat(("system", "app"), ("user", "a"), ("assistant", "echo: a"), ("user", "b"))
    assert incoming(second, None).text == "b"
    assert incoming(second, None).key == incoming(second, None).key  # the same history again: the same turn
    # The system prompt is no part of the conversation: changing it does not make the message new.
    assert (
        incoming([ChatMessage(role="developer", content="other"), *second[1:]], None).key == incoming(second, None).key
    )
    third = [*second, ChatMessage(role="assistant", content="echo: b"), ChatMessage(role="user", content="b")]
    assert incoming(third, None).key != incoming(second, None).key  # "b" again, a turn later: a new message
    edited = chat(("user", "a"), ("assistant", "echo: A"), ("user", "b"))
    assert incoming(edited, None).key != incoming(second, None).key


def test_a_header_key_wins_and_new_messages_in_a_row_are_joined():
    keyed = incoming(chat(("user", "x")), "msg-1")
    assert keyed.key is not None and keyed.key == incoming(chat(("user", "other")), "msg-1").key
    joined = incoming(chat(("assistant", "hi"), ("user", "one"), ("user", [{"type": "text", "text": "two"}])), None)
    assert joined.text == "one\n\ntwo"


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        (chat(("user", "x"), ("assistant", "y")), "no_new_message"),
        (chat(("system", "only instructions")), "no_new_message"),
        (chat(("user", "   ")), "no_new_message"),
        (chat(("user", [{"type": "input_audio", "input_audio": {}}])), "unsupported_content"),
    ],
)
def test_what_is_no_new_text_is_refused(messages, code):
    with pytest.raises(ProxyError) as refused:
        incoming(messages, None)
    assert (refused.value.status, refused.value.code) == (400, code)
