"""Wire models of the /assist protocol (docs/protocol.md), no I/O: the request a client posts
(sentient-agent-framework 0.3.0's `interface.request` and `interface.session`) and a
conversation's history. The events are in `sentient_assist.events`."""

from typing import TYPE_CHECKING

from sentient_assist._lazy import lazy_exports

if TYPE_CHECKING:
    from sentient_assist.protocol.history import Message
    from sentient_assist.protocol.request import Interaction, Query, Request, SessionObject

_HOMES = {
    "Interaction": "sentient_assist.protocol.request",
    "Message": "sentient_assist.protocol.history",
    "Query": "sentient_assist.protocol.request",
    "Request": "sentient_assist.protocol.request",
    "SessionObject": "sentient_assist.protocol.request",
}
__all__ = [
    "Interaction",
    "Message",
    "Query",
    "Request",
    "SessionObject",
]
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
