"""Shared-token authentication for every RPC (and optional TLS)."""

from __future__ import annotations

import secrets

import grpc

HEADER = "authorization"


def new_token() -> str:
    return secrets.token_urlsafe(24)


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects calls without `authorization: Bearer <token>` with UNAUTHENTICATED."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}"

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")
        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        metadata = dict(handler_call_details.invocation_metadata or ())
        if not secrets.compare_digest(metadata.get(HEADER, ""), self._expected):
            return self._deny
        return continuation(handler_call_details)


def channel(address: str, token: str, tls_ca: str | None = None) -> grpc.Channel:
    """A channel whose every call carries the token."""
    def add_token(context, callback):
        callback(((HEADER, f"Bearer {token}"),), None)
    if tls_ca:
        creds = grpc.composite_channel_credentials(grpc.ssl_channel_credentials(open(tls_ca, "rb").read()),
                                                   grpc.metadata_call_credentials(add_token))
        return grpc.secure_channel(address, creds)
    return grpc.intercept_channel(grpc.insecure_channel(address), _Metadata(token))


class _Metadata(grpc.UnaryUnaryClientInterceptor):
    def __init__(self, token: str):
        self._md = ((HEADER, f"Bearer {token}"),)

    def intercept_unary_unary(self, continuation, details, request):
        details = details._replace(metadata=tuple(details.metadata or ()) + self._md) \
            if hasattr(details, "_replace") else _Details(details, self._md)
        return continuation(details, request)


class _Details(grpc.ClientCallDetails):
    def __init__(self, base, md):
        self.method, self.timeout, self.credentials = base.method, base.timeout, base.credentials
        self.wait_for_ready, self.compression = base.wait_for_ready, base.compression
        self.metadata = tuple(base.metadata or ()) + md
