"""The documented path of the client's HTTP transports: :mod:`fastagg.client.transport`."""

from .client.transport import (
    AiohttpTransport,
    HttpxTransport,
    Response,
    Transport,
    make_transport,
    pump,
)

__all__ = ["AiohttpTransport", "HttpxTransport", "Response", "Transport", "make_transport", "pump"]
