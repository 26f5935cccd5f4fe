"""The agent card: who the served agent is, and where and how to call it (A2A 1.0).

Its name and description are the agent's; its one skill is the agent itself (A2A clients list
skills, and an agent here is one capability); its one interface is JSON-RPC at the face's path,
under ASSIST_PUBLIC_URL (else the URL the card was asked for at: right behind a proxy that
sets the Host header, or when called directly); with ASSIST_API_KEYS set, the bearer scheme.
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from sentient_assist.runtime.agent import AbstractAgent
from sentient_assist.version import __version__

BEARER = "bearer"
MEDIA_TYPES = ["text/plain", "application/json"]


def agent_card(agent: AbstractAgent, rpc_url: str, *, with_keys: bool) -> AgentCard:
    """The card of `agent`, called at `rpc_url` (JSON-RPC)."""
    description = agent.description or f"The agent {agent.name}."
    card = AgentCard(
        name=agent.name,
        description=description,
        version=__version__,
        provider=AgentProvider(organization="sentient-assist", url="https://pypi.org/project/sentient-assist/"),
        supported_interfaces=[
            AgentInterface(
                url=rpc_url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=MEDIA_TYPES,
        default_output_modes=MEDIA_TYPES,
        skills=[AgentSkill(id=agent.name, name=agent.name, description=description, tags=["agent"])],
    )
    if with_keys:
        card.security_schemes[BEARER].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="A key of ASSIST_API_KEYS: `Authorization: Bearer <key>`."
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList()}))
    return card
