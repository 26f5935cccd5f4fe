"""HostAgent with stand-in host models: through the facade, and through a real /assist stream."""

from __future__ import annotations

import json
import logging

import pytest

from sentient_assist import Agent, HostAgent, Specialist
from sentient_assist.orchestration import CallPolicy, HandoffLimits, handoff_callbacks
from sentient_assist.runtime.errors import ModelProviderError
from sentient_assist.testing import FunctionModel, ScriptedCall, ScriptedModel, ScriptedReply
from tests.orchestration import host_agents
from tests.orchestration.host_agents import Speaker, handing_off, make_host
from tests.server.test_stream_guarantees import assert_streams_completed, assert_well_ended
from tests.support.sse import new_body, read_stream
from tests.support.waiting import until

FACTORIES = [
    "direct_host",
    "two_handoffs_host",
    "unknown_name_host",
    "failing_specialist_host",
    "loop_host",
    "deep_host",
    "capped_host",
    "ring",
]


async def run_in_process(factory: str, prompt: str = "help me"):
    agent = Agent(getattr(host_agents, factory)())
    events = []
    async with agent.stream(prompt) as stream:
        async for event in stream:
            events.append(event)
        return events, stream.result()


@pytest.fixture(scope="module")
def served(serve):
    """A real server per host factory, started on first use."""

    def url_of(factory: str) -> str:
        return serve({"ASSIST_AGENT": f"tests.orchestration.host_agents:{factory}"}).url

    return url_of


def wire(served, factory: str, prompt: str = "help me"):
    stream = read_stream(served(factory), new_body(prompt))
    assert_well_ended(stream)
    assert_streams_completed(stream)
    return stream


def text_by_source(events: list[dict]) -> dict[str, str]:
    found: dict[str, str] = {}
    for event in events:
        if event["event_name"] == "FINAL_RESPONSE":
            found[event["source"]] = found.get(event["source"], "") + event["content"]
    return found


async def test_a_direct_answer_streams(served):
    events, result = await run_in_process("direct_host")
    assert [e.kind for e in events].count("text_delta") > 3
    assert "handoff" not in [e.kind for e in events]
    assert result.text == "A direct answer, streamed word by word."
    stream = wire(served, "direct_host")
    assert stream.names().count("FINAL_RESPONSE") > 3 and "HANDOFF" not in stream.names()


async def test_a_hand_off_after_preamble_text_is_not_missed(served):
    events, result = await run_in_process("two_handoffs_host")
    kinds = [e.kind for e in events]
    assert kinds.index("text_delta") < kinds.index("handoff")
    assert result.text.startswith("Let me hand this over.\n\n")
    stream = wire(served, "two_handoffs_host")
    handoffs = [e["content"] for e in stream.events if e["event_name"] == "HANDOFF"]
    assert handoffs == [
        {"to_agent": "alpha", "argument": {"reason": "alpha fits", "task": None}},
        {"to_agent": "beta", "argument": {"reason": "beta fits", "task": None}},
    ]
    # Each specialist's events arrive under its own source; the host opens each one's paragraph with its name.
    assert text_by_source(stream.events) == {
        "host": "Let me hand this over.\n\nalpha: \n\nbeta: ",
        "alpha": "alpha speaks first",
        "beta": "beta speaks second",
    }
    answer = "".join(e["content"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE")
    assert answer == "Let me hand this over.\n\nalpha: alpha speaks first\n\nbeta: beta speaks second"


async def test_two_hand_offs_run_at_once_and_reach_the_client_in_a_fixed_order():
    alpha = Speaker("alpha", ["a1 ", "a2 ", "a3"], pause=0.02)
    beta = Speaker("beta", ["b1 ", "b2"])
    alpha.wait_for = beta  # alpha ends only after beta has started: they run concurrently
    host = make_host("alpha", "beta", specialists=[Specialist(alpha, "first"), Specialist(beta, "second")])
    result = await Agent(host).run("both")
    chunks = [e for e in result.messages[-1].events if e["event_name"] == "FINAL_RESPONSE" and e["source"] != "host"]
    sources = [e["source"] for e in chunks]
    assert sources == sorted(sources, key=["alpha", "beta"].index), "beta's words came before alpha was done"
    # Two answers without a summarizer: each its own paragraph, in order, said by whom.
    assert result.text == "Let me hand this over.\n\nalpha: a1 a2 a3\n\nbeta: b1 b2"


def test_over_the_wire_two_hand_offs_arrive_in_order_and_callbacks_run_before_the_specialist(served):
    stream = wire(served, "ordered_host")
    specialist_chunks = [
        e["source"] for e in stream.events if e["event_name"] == "FINAL_RESPONSE" and e["source"] != "host"
    ]
    assert specialist_chunks == ["alpha"] * 4 + ["beta"] * 3  # words, then each stream's last chunk
    assert "error" not in stream.names(), "alpha waits for beta to start: an error means they ran one by one"
    reported = wire(served, "callbacks_host")
    answer = next(
        e["content"] for e in reported.events if e["source"] == "reporter" and e["event_name"] == "FINAL_RESPONSE"
    )
    assert answer == "first:reporter,second:reporter"
    names = reported.names()
    assert names.index("HANDOFF") < next(i for i, e in enumerate(reported.events) if e["source"] == "reporter")


async def test_an_unknown_specialist_goes_to_the_fallback_or_the_host_answers(served):
    _, answered_by_host = await run_in_process("unknown_name_host")
    assert answered_by_host.text == "Let me hand this over.\n\nI answered it myself."
    assert not answered_by_host.errors
    with_fallback = make_host("nobody", fallback="beta")
    result = await Agent(with_fallback).run("x")
    assert "beta speaks second" in result.text
    stream = wire(served, "unknown_name_host")
    assert "error" not in stream.names() and stream.names()[-1] == "done"


async def test_handoff_event_then_callbacks_in_order_then_the_specialist():
    log: list[str] = []
    beta = Speaker("beta", ["hi"])

    async def first(handoff):
        await until(lambda: "handoff-event" in log, 5)  # the reader has taken what was sent before this callback
        log.append(f"first:{handoff.to_agent}:{beta.started.is_set()}")

    async def second(handoff):
        log.append(f"second:{handoff.to_agent}:{beta.started.is_set()}")

    async def broken(handoff):
        raise RuntimeError("an observer failed")

    host = make_host("beta", specialists=[Specialist(beta, "says hi")], on_handoff=[first, broken, second])
    events = []
    async with Agent(host).stream("x") as stream:
        async for event in stream:
            if event.kind == "handoff":
                log.append("handoff-event")
            events.append(event)
    assert log == ["handoff-event", "first:beta:False", "second:beta:False"]
    assert beta.started.is_set() and stream.result().text.endswith("hi")


async def test_a_failing_specialist_is_an_error_under_its_name_and_the_host_ends_well(served):
    _, result = await run_in_process("failing_specialist_host")
    assert [(e.code, e.details["error_type"]) for e in result.errors] == [(500, "RuntimeError")]
    stream = wire(served, "failing_specialist_host")
    error = next(e for e in stream.events if e["event_name"] == "error")
    assert error["source"] == "failing" and "specialist broke" not in stream.raw.decode()
    assert stream.names()[-2:] == ["USAGE", "done"]


async def test_a_loop_back_to_the_host_is_refused_with_a_clear_error(served):
    _, result = await run_in_process("loop_host")
    assert [(e.code, e.details["refused"]) for e in result.errors] == [(508, "loop")]
    assert "host -> calls_back -> host" in result.errors[0].message
    stream = wire(served, "loop_host")
    assert any(e["event_name"] == "error" and e["content"]["error_code"] == 508 for e in stream.events)


async def test_handoff_callbacks_get_the_raw_argument_and_can_be_given_per_run():
    seen: list[tuple[str, str, str, str | None]] = []

    async def at_construction(handoff):
        seen.append(("host", handoff.to_agent, handoff.argument, handoff.reason))

    async def this_run(handoff):
        seen.append(("run", handoff.to_agent, handoff.argument, handoff.task))

    host = make_host("alpha", on_handoff=[at_construction])
    with handoff_callbacks(this_run):
        await Agent(host).run("one")
    await Agent(host).run("two")  # outside: the host's own callbacks only
    assert seen == [
        ("host", "alpha", '{"reason": "alpha fits"}', "alpha fits"),
        ("run", "alpha", '{"reason": "alpha fits"}', None),
        ("host", "alpha", '{"reason": "alpha fits"}', "alpha fits"),
    ]


async def test_a_loop_back_to_the_served_agent_counts_it_as_the_first_link(served):
    events, result = await run_in_process("ring")
    assert [e.text for e in events if e.event_name == "RAN"] == ["ring_a", "ring_b", "ring_c"]  # ring_a once
    assert [(e.code, e.details["refused"]) for e in result.errors] == [(508, "loop")]
    assert "ring_a -> ring_b -> ring_c -> ring_a" in result.errors[0].message
    stream = wire(served, "ring")
    assert [e["content"] for e in stream.events if e["event_name"] == "RAN"] == ["ring_a", "ring_b", "ring_c"]
    assert [e["content"]["error_code"] for e in stream.events if e["event_name"] == "error"] == [508]


async def test_calls_nested_past_the_depth_limit_are_refused(served):
    events, result = await run_in_process("deep_host")
    levels = [e.text for e in events if e.event_name == "LEVEL"]
    assert levels == ["1", "2", "3"]
    assert [(e.code, e.details["refused"]) for e in result.errors] == [(508, "depth")]
    stream = wire(served, "deep_host")
    assert [e["content"] for e in stream.events if e["event_name"] == "LEVEL"] == ["1", "2", "3"]


async def test_blocked_specialists_are_refused_and_hand_offs_are_capped(served):
    blocked = make_host("alpha", policy=CallPolicy(block=frozenset({"alpha"})))
    result = await Agent(blocked).run("x")
    assert [(e.code, e.details) for e in result.errors] == [(403, {"refused": "blocked"})]
    _, capped = await run_in_process("capped_host")
    assert [e.details for e in capped.errors] == [{"limit": "max_handoffs"}]
    assert "alpha speaks first" in capped.text and "beta" not in capped.text
    stream = wire(served, "capped_host")
    assert [e["content"]["to_agent"] for e in stream.events if e["event_name"] == "HANDOFF"] == ["alpha"]


async def test_a_summarizer_speaks_for_the_specialists():
    summarizer = host_agents.FunctionModel(
        lambda messages, tools: host_agents.ScriptedReply(text=f"Summary of {len(messages) - 2} answers.")
    )
    host = make_host("alpha", "beta", summarizer=summarizer)
    result = await Agent(host).run("x")
    sources = {e["source"] for e in result.messages[-1].events}
    assert sources == {"host"}, "with a summarizer, the specialists are not heard directly"
    assert result.text.endswith("Summary of 2 answers.")


async def test_a_call_to_an_unknown_specialist_beside_known_ones_is_an_error_and_a_warning(caplog):
    host = make_host("alpha", "nobody")  # no fallback
    with caplog.at_level(logging.WARNING, logger="sentient_assist.orchestration"):
        result = await Agent(host).run("x")
    assert "alpha speaks first" in result.text, "the known specialist still gets the request"
    assert [(e.code, e.details) for e in result.errors] == [(404, {"unknown_specialist": "nobody"})]
    assert "'nobody'" in result.errors[0].message and "alpha" in result.errors[0].message
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'nobody'" in warnings[0] and "help me" not in warnings[0]
    documents = [
        (e["event_name"], json.dumps(e["content"]))
        for e in result.messages[-1].events
        if e["source"] == "host" and e["content_type"] in ("atomic.json", "atomic.error")
    ]
    assert [name for name, _ in documents] == ["error", "HANDOFF", "USAGE"]
    assert documents[1][1] == '{"to_agent": "alpha", "argument": {"reason": "alpha fits", "task": null}}'


async def test_every_tool_call_of_the_host_gets_a_tool_message_when_it_answers_itself():
    model = ScriptedModel(
        [
            ScriptedReply(
                text="Let me see.",
                tool_calls=(ScriptedCall("nobody", {"reason": "?"}), ScriptedCall("alpha", {"reason": "!"})),
            ),
            ScriptedReply(text="I answered it myself."),
        ]
    )
    alpha = Specialist(Speaker("alpha", ["a"]), "a")
    host = HostAgent(model=model, specialists=[alpha], limits=HandoffLimits(max_handoffs=0))
    result = await Agent(host).run("x")
    assert result.text == "Let me see.\n\nI answered it myself."
    asked_again = model.calls[1][0]
    calls = asked_again[-3].tool_calls
    assert [m.role for m in asked_again[-3:]] == ["assistant", "tool", "tool"]
    assert [m.tool_call_id for m in asked_again[-2:]] == [c.id for c in calls], "a tool message per call, in order"
    assert asked_again[-2].content == "There is no specialist named 'nobody'; answer the user yourself."
    assert "alpha" in asked_again[-1].content and [e.details for e in result.errors] == [{"limit": "max_handoffs"}]


FAILED = ModelProviderError("The model provider failed while answering.", 502)


@pytest.mark.parametrize("failing", ["host", "summarizer"])
async def test_when_a_model_fails_each_text_stream_ends_once_before_the_error_then_usage_and_done(failing):
    failing_reply = ScriptedReply(reasoning="Thinking it over.", text="Half an", failure_after_text=FAILED)
    handing_off = ScriptedReply(text="Over to alpha.", tool_calls=(ScriptedCall("alpha", {"reason": "fits"}),))
    host = HostAgent(
        model=ScriptedModel([failing_reply if failing == "host" else handing_off]),
        specialists=[Specialist(Speaker("alpha", ["a"]), "a")],
        summarizer=ScriptedModel([failing_reply]) if failing == "summarizer" else None,
    )
    events = [e for e in (await Agent(host).run("x")).messages[-1].events if e["source"] == "host"]
    names = [e["event_name"] for e in events]
    assert names[-3:] == ["error", "USAGE", "done"] and names.count("error") == 1
    streams: dict[str, list[dict]] = {}
    for event in events:
        if event["content_type"] == "chunked.text":
            streams.setdefault(event["stream_id"], []).append(event)
    for chunks in streams.values():
        assert [c["is_complete"] for c in chunks].count(True) == 1 and chunks[-1]["is_complete"], "ends once, last"
        assert any(c["content"] for c in chunks), "no empty extra stream"
        assert events.index(chunks[-1]) < names.index("error"), f"{chunks[0]['event_name']} ended after the error"
    assert events[-2]["content"]["requests"] == (1 if failing == "host" else 2)


@pytest.mark.parametrize(
    ("first", "second"),
    [("a.b", "a b"), ("web search", "web_search"), ("alpha", "alpha"), ("x" * 64 + "1", "x" * 64 + "2")],
)
def test_specialists_whose_names_would_share_a_tool_name_are_refused(first, second):
    specialists = [Specialist(Speaker(first, ["1"]), "one"), Specialist(Speaker(second, ["2"]), "two")]
    with pytest.raises(ValueError, match="share the tool name") as refused:
        make_host(specialists=specialists)
    assert repr(first) in str(refused.value) and repr(second) in str(refused.value)
    apart = [Specialist(Speaker("web-search", ["1"]), "one"), Specialist(Speaker("web_search", ["2"]), "two")]
    assert set(make_host(specialists=apart).specialists) == {"web-search", "web_search"}, "'-' is kept: no clash"


@pytest.fixture(scope="module")
def far_speaker_url(serve):
    return serve({"ASSIST_AGENT": "tests.orchestration.host_agents:far_speaker"}).url + "/assist"


async def test_a_specialist_can_be_a_remote_agent_or_a_chat_model(far_speaker_url):
    remote = Specialist(Agent(far_speaker_url, processor_id="far_alpha"), "speaks from another machine")
    modeler = Specialist(FunctionModel(lambda messages, tools: ScriptedReply(text="from a model")), "a model")
    assert (remote.name, modeler.name) == ("far_alpha", "function")
    host = HostAgent(model=handing_off("far_alpha", "function"), specialists=[remote, modeler])
    result = await Agent(host).run("both")
    events = result.messages[-1].events
    assert [e["content"]["to_agent"] for e in events if e["event_name"] == "HANDOFF"] == ["far_alpha", "function"]
    assert text_by_source(list(events)) == {
        "host": "Let me hand this over.\n\nfar_alpha: \n\nfunction: ",
        "far_alpha": "from far away",  # forwarded live from the other server, under its own source
        "function": "from a model",
    }
    with pytest.raises(TypeError, match="agent, an Agent"):
        Specialist("not an agent", "nothing")  # type: ignore[arg-type]


def test_a_host_served_here_hands_off_to_a_specialist_served_by_a_second_uvicorn(serve, far_speaker_url):
    env = {"ASSIST_AGENT": "tests.orchestration.host_agents:host_of_far_speaker", "SPECIALIST_URL": far_speaker_url}
    stream = read_stream(serve(env).url, new_body("over there"))
    assert_well_ended(stream)
    assert text_by_source(stream.events)["far_alpha"] == "from far away"
    assert [e["content"]["to_agent"] for e in stream.events if e["event_name"] == "HANDOFF"] == ["far_alpha"]
