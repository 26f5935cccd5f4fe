"""What a response guarantees about the reserved events it sends, kept where they are made.

- A `STAGE` document carries counts, never contents: its fields are short one-line labels,
  its `counts` integers, and nothing else is in it.
- Every `TOOL_CALL` gets exactly one `TOOL_RESULT`: a call still unanswered when the response
  ends is answered with an error ("no result"), so a reader sees `result` or `error`, never
  neither.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ConfigDict, ValidationError

from sentient_assist.protocol import conventions as names
from sentient_assist.protocol.conventions import StagePayload
from sentient_assist.protocol.json_value import JSONObject
from sentient_assist.runtime.errors import AgentError

NO_RESULT = "no result: the run ended before this tool call was answered"
MAX_STAGE_LABEL = 256  # characters of a stage label (an agent name, as capability, can be 256): not a text


class _SentStage(StagePayload):
    """A STAGE as it may be sent: strict (counts are ints, not "3" or 3.0 or True), no other field."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def checked_stage(content: Mapping[str, object]) -> JSONObject:
    """The STAGE document as sent, or AgentError naming what in it could hold contents."""
    try:
        stage = _SentStage.model_validate(content)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise AgentError(
            f"STAGE {where}: {error['msg']} (a stage carries labels and integer counts, never contents)"
        ) from None
    for field in ("stage", "phase", "capability", "outcome", "reason"):
        label = getattr(stage, field)
        if label is not None and (len(label) > MAX_STAGE_LABEL or "\n" in label or "\r" in label):
            raise AgentError(
                f"STAGE {field} must be a one-line label of at most {MAX_STAGE_LABEL} characters "
                "(a stage carries labels and integer counts, never contents)"
            )
    return stage.model_dump(mode="json")


class OpenToolCalls:
    """The TOOL_CALLs a response has sent and not yet answered, in order."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[str, str] = {}  # id -> tool name

    def sent(self, event_name: str, content: Mapping[str, object]) -> None:
        """Note a TOOL_CALL or TOOL_RESULT document on its way out."""
        call_id = content.get("id")
        if event_name == names.TOOL_RESULT:
            if isinstance(call_id, str):
                self._calls.pop(call_id, None)
            return
        name = content.get("name")
        # Only a call of the convention's shape is read as one, and so answered for.
        if isinstance(call_id, str) and isinstance(name, str) and isinstance(content.get("arguments"), dict):
            self._calls[call_id] = name

    def unanswered(self) -> list[JSONObject]:
        """The TOOL_RESULT contents that answer every open call with NO_RESULT; none are open after."""
        calls, self._calls = self._calls, {}
        return [{"id": call_id, "name": name, "result": None, "error": NO_RESULT} for call_id, name in calls.items()]
