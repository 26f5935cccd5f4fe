"""A conversation as the wire knows it: Message, and messages to interactions and back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ulid import ULID

from sentient_assist.protocol.events import TextBlockEvent, TextChunkEvent
from sentient_assist.protocol.history import (
    Message,
    as_messages,
    assistant_text,
    interactions_from,
    messages_from,
    user_text,
)
from sentient_assist.protocol.request import Interaction, RequestMessage, ResponseMessage

PACKAGE = Path(__file__).resolve().parents[2] / "sentient_assist"
HISTORY_NAMES = {"Message", "as_messages", "assistant_text", "interactions_from", "messages_from", "user_text"}


def test_messages_become_interactions_and_read_back_as_the_same_messages():
    written = as_messages(
        [
            {"role": "user", "content": "I am Ann."},
            Message(role="assistant", content="Hi Ann."),
            {"role": "user", "content": "Who am I?"},
        ]
    )
    interactions = interactions_from(written, ULID(), "agent-x")
    assert [user_text(i) for i in interactions] == ["I am Ann.", "Who am I?"]
    assert [assistant_text(i) for i in interactions] == ["Hi Ann.", ""]
    read = messages_from(interactions)
    assert [(m.role, m.content) for m in read] == [
        ("user", "I am Ann."),
        ("assistant", "Hi Ann."),
        ("user", "Who am I?"),
    ]
    # A hand-written answer travels as the answer stream it would have been: a chunk, the closing chunk, done.
    events = read[1].events
    assert [(e["event_name"], e.get("is_complete"), e.get("content")) for e in events] == [
        ("FINAL_RESPONSE", False, "Hi Ann."),
        ("FINAL_RESPONSE", True, ""),
        ("done", None, None),
    ]
    assert events[0]["stream_id"] == events[1]["stream_id"] and {e["source"] for e in events} == {"agent-x"}
    assert messages_from(interactions_from(read, ULID(), "agent-x")) == read, "kept events travel as they are"
    text_only = messages_from(interactions, keep_events=False)
    assert [(m.role, m.content) for m in text_only] == [(m.role, m.content) for m in read]
    assert all(m.events == () for m in text_only)


def test_an_assistant_message_must_answer_a_user_message():
    with pytest.raises(ValueError, match=r"history\[0\]: an assistant message must follow a user message"):
        interactions_from(as_messages([{"role": "assistant", "content": "hi"}]), ULID(), "agent-x")
    with pytest.raises(ValueError, match=r"history\[2\]"):
        interactions_from(
            as_messages(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                    {"role": "assistant", "content": "c"},
                ]
            ),
            ULID(),
            "agent-x",
        )


def test_the_answer_is_final_response_else_the_other_text_and_never_thinking():
    request = interactions_from(as_messages([{"role": "user", "content": "q"}]), ULID(), "a")[0].request

    def answered(*events) -> Interaction:
        responses = [ResponseMessage(event=e) for e in events]
        return Interaction(request=RequestMessage(event=request.event), responses=responses)

    def chunk(name: str, text: str) -> TextChunkEvent:
        return TextChunkEvent(event_name=name, source="a", stream_id="s-" + name, is_complete=False, content=text)

    thinking, plan = chunk("THINKING", "hmm"), TextBlockEvent(event_name="PLAN", source="a", content="a plan")
    assert assistant_text(answered(thinking, plan, chunk("FINAL_RESPONSE", "the answer"))) == "the answer"
    assert assistant_text(answered(thinking, plan, chunk("NOTES", " and notes"))) == "a plan and notes"
    assert assistant_text(answered(thinking)) == ""


def test_a_message_is_a_frozen_value():
    message = Message(role="user", content="hi")
    with pytest.raises(ValueError, match="frozen"):
        message.content = "bye"  # type: ignore[misc]


@pytest.mark.parametrize("package", ["facade", "llm", "orchestration"])
def test_the_facade_llm_and_orchestration_take_messages_and_history_from_this_one_module(package):
    for path in sorted((PACKAGE / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = {alias.name for alias in node.names} & HISTORY_NAMES
                if not (node.module or "").startswith("sentient_assist"):
                    continue  # another protocol's types of the same name (a2a's Message)
                assert not names or node.module == "sentient_assist.protocol.history", (
                    f"{path.relative_to(PACKAGE.parent)} imports {sorted(names)} from {node.module}"
                )
                assert node.module not in ("sentient_assist.facade.history", "sentient_assist.llm.history"), (
                    f"{path} imports {node.module}"
                )
