"""Claiming the port ``tokenwire serve`` listens on, before granian binds it.

granian binds its listening socket with ``SO_REUSEPORT`` on Linux, so a second
server on a taken port would start and silently share the port (the kernel
splits the connections between the two). A socket bound *without*
``SO_REUSEPORT`` cannot join a port someone already listens on, so binding one
first tells us whether the port is free for us alone, and for ``--port 0``
which port the kernel picked.
"""

from __future__ import annotations

import errno
import socket

import click

__all__ = ["claim_port"]


def claim_port(host: str, port: int) -> int:
    """The port to serve on: ``port``, or the one the kernel picks for 0.

    Raises ``click.ClickException`` (one line, exit status 1) when the address
    cannot be bound: the port is taken, needs privileges, or the host is not
    an address of this machine.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise click.ClickException(f"cannot listen on host {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        # SO_REUSEADDR only lets us reuse a port whose old connections sit in
        # TIME_WAIT (a server just restarted); Linux still refuses a port that
        # another socket listens on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            raise click.ClickException(_why(host, port, exc)) from None
        bound: int = sock.getsockname()[1]
    return bound


def _why(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use (another tokenwire serve, or "
            "another program); choose another with --port, or --port 0 for any free port"
        )
    if exc.errno == errno.EACCES:
        return f"port {port} on {host} needs privileges; choose a port above 1023 with --port"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}: not an address of this machine"
    return f"cannot listen on {host} port {port}: {exc.strerror or exc}"
