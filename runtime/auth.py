"""Credentials and channels: a role per caller (client, worker, job), bearer tokens in metadata, optional TLS.

Clients and workers hold long-lived tokens; a job holds only the token of its lease, which lets it report its
own progress and move its own checkpoints, nothing else. Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import grpc

from hetsched.errors import HetschedError

HEADER = "authorization"
CLIENT, WORKER, JOB = "client", "worker", "job"


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Caller:
    role: str
    lease_token: str = ""


@dataclass(frozen=True)
class Credentials:
    """The scheduler's two long-lived tokens (jobs get per-lease tokens from the server)."""

    client: str
    worker: str

    def __post_init__(self) -> None:
        if not self.client or not self.worker:
            raise ValueError("both a client and a worker token are required")
        if secrets.compare_digest(self.client, self.worker):
            raise ValueError("the client and worker tokens must differ (least privilege)")

    def caller(self, metadata) -> Caller | None:
        """Who is calling, from the `authorization` metadata; None when no credential matches."""
        value = dict(metadata or ()).get(HEADER, "")
        scheme, _, token = value.partition(" ")
        if scheme == "Lease" and token:
            return Caller(JOB, token)
        if scheme != "Bearer" or not token:
            return None
        if secrets.compare_digest(token, self.client):
            return Caller(CLIENT)
        if secrets.compare_digest(token, self.worker):
            return Caller(WORKER)
        return None


def require(context, credentials: Credentials, *roles: str) -> Caller:
    """The caller of this RPC, if its role may call it; aborts with UNAUTHENTICATED / PERMISSION_DENIED."""
    caller = credentials.caller(context.invocation_metadata())
    if caller is None:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credential")
    if caller.role not in roles:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, f"a {caller.role} credential may not call this RPC")
    return caller


def write_secret(path: Path, value: str) -> None:
    """Write a token file readable by its owner only (0600), atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(value)
    os.replace(tmp, path)


def read_secret(path: str | Path) -> str:
    return check_token(Path(path).read_text().strip(), f"token file {path}")


def check_token(token: str, source: str) -> str:
    """`token` if it can be one: a non-empty run of printable ASCII without spaces. gRPC refuses other metadata
    with a bare "INTERNAL: Invalid metadata", and an empty one is refused later without naming its source."""
    if not token:
        raise HetschedError(f"{source} is empty: a token is one line (`hetsched scheduler` writes new ones)")
    bad = next((c for c in token if not "!" <= c <= "~"), None)
    if bad is not None:
        raise HetschedError(f"{source}: a token is one line of printable ASCII without spaces, and this one has "
                            f"{bad!r}")
    return token


def channel(address: str, token: str | None, tls_ca: str | None = None, scheme: str = "Bearer",
            server_name: str | None = None) -> grpc.Channel:
    """A channel whose every call carries `<scheme> <token>` (none when `token` is None: callers pass
    per-call metadata); TLS when `tls_ca` (a PEM CA file) is given."""
    port = address.rpartition(":")[2]
    if port.isdigit() and not 1 <= int(port) <= 65535:
        # gRPC dials the port modulo 2^16 (":99999" reached :34463) and would hand the token to whatever is there
        raise HetschedError(f"scheduler address {address!r}: the port must be 1..65535")
    if server_name and not tls_ca:
        raise HetschedError(f"a TLS server name ({server_name!r}) checks the scheduler's certificate, and without a "
                            f"CA certificate (--tls-ca) the channel has no TLS")
    value = f"{scheme} {token}"
    options = [("grpc.max_receive_message_length", 16 << 20)]
    if tls_ca:
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        creds = grpc.ssl_channel_credentials(Path(tls_ca).read_bytes())
        if token is not None:
            def add_token(context, callback):
                callback(((HEADER, value),), None)
            creds = grpc.composite_channel_credentials(creds, grpc.metadata_call_credentials(add_token))
        return grpc.secure_channel(address, creds, options=options)
    plain = grpc.insecure_channel(address, options=options)
    return plain if token is None else grpc.intercept_channel(plain, _Metadata(value))


class _Metadata(grpc.UnaryUnaryClientInterceptor, grpc.StreamUnaryClientInterceptor,
                grpc.UnaryStreamClientInterceptor):
    def __init__(self, value: str):
        self._md = ((HEADER, value),)

    def _details(self, details):
        return _Details(details, self._md)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


class _Details(grpc.ClientCallDetails):
    def __init__(self, base, md):
        self.method, self.timeout, self.credentials = base.method, base.timeout, base.credentials
        self.wait_for_ready, self.compression = base.wait_for_ready, base.compression
        self.metadata = tuple(base.metadata or ()) + md
