"""A HostAgent whose host or summarizer model fails at the provider: the client hears a message
of ours with the provider's status and the request id, never the provider's text, which can quote
the user's prompt or what the specialists answered."""

from __future__ import annotations

from sentient_assist import HostAgent, OpenAIChatModel, Specialist
from tests.llm.test_provider_failures import (
    CONFIGURED_KEY,
    LEAKS,
    PROMPT,
    assert_record_leaks_nothing,
    run_with_request_id,
)
from tests.orchestration.host_agents import Speaker
from tests.support.openai_server import error_reply, stream_reply

ANSWER = "ALPHA-ANSWER-5151 the account number is in the drawer"


def chat_model(server) -> OpenAIChatModel:
    return OpenAIChatModel("host-model", base_url=server.base_url, api_key=CONFIGURED_KEY, max_retries=0)


async def test_a_host_model_that_is_refused_ends_with_our_message_and_the_request_id(model, llm_log):
    model.enqueue(error_reply(401, f"Incorrect API key provided: {CONFIGURED_KEY}; prompt '{PROMPT}'"))
    host = HostAgent(model=chat_model(model), specialists=[Specialist(Speaker("alpha", ["a"]), "a")])
    frames, errors = await run_with_request_id(host, "host-req-1")
    assert errors == [
        {
            "error_message": "The model provider rejected the credentials.",
            "error_code": 502,
            "details": {"status": 401, "request_id": "host-req-1"},
        }
    ]
    assert not [leak for leak in LEAKS if leak.encode() in frames]
    (record,) = [r for r in llm_log if r.getMessage().startswith("model provider failed")]
    assert record.fields["request_id"] == "host-req-1" and record.fields["model"] == "host-model"
    assert_record_leaks_nothing(record)


async def test_a_summarizer_whose_provider_quotes_the_specialists_answer_leaks_it_nowhere(model, llm_log):
    model.enqueue(
        stream_reply(tool_calls=[("c1", "alpha", {"reason": "fits"})]),
        error_reply(500, f"could not process '{ANSWER}'"),
    )
    host = HostAgent(
        model=chat_model(model),
        specialists=[Specialist(Speaker("alpha", [ANSWER]), "answers")],
        summarizer=chat_model(model),
    )
    frames, errors = await run_with_request_id(host, "host-req-2")
    assert errors == [
        {
            "error_message": "The model provider failed (HTTP 500).",
            "error_code": 502,
            "details": {"status": 500, "request_id": "host-req-2"},
        }
    ]
    assert ANSWER.encode() not in frames  # unheard: the summarizer speaks for the specialists
    (record,) = [r for r in llm_log if r.getMessage().startswith("model provider failed")]
    assert record.fields["provider_message"] == "could not process '[sent text]'"
    assert_record_leaks_nothing(record)
