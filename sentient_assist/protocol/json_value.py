"""JSON as the type checker sees it: what a document, a tool's arguments, a pause's state hold.

Checked statically only. At run time the alias is `Any`, so that a pydantic field of this
type is validated as it always was (taken as it comes); whether a value really is JSON is
`dumps_json`'s check where one is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    JSONValue: TypeAlias = str | int | float | bool | list["JSONValue"] | dict[str, "JSONValue"] | None
else:
    JSONValue = Any

JSONObject: TypeAlias = dict[str, JSONValue]
