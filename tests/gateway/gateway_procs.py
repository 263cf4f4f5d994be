"""Helpers for the gateway tests: a real ``tokenwire serve`` process, certificates.

``Gateway`` is ``tokenwire.testing.processes.ServedProcess`` (the one launcher)
with what these tests read: its stdout and stderr files in ``workdir``, TLS, and
this directory on ``PYTHONPATH`` for the test plugins.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tokenwire.testing import processes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


free_port = processes.free_port


class Gateway:
    """``tokenwire serve`` as a subprocess on 127.0.0.1, with its stderr in a file.

    ``start`` waits for ``/healthz``; ``stop`` interrupts it (and, if it does not
    exit, kills its own process group: the server and its workers).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        config: str | None = None,
        args: tuple[str, ...] = (),
        tls: tuple[Path, Path, Path] | None = None,
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.tls = tls
        self.stderr_path = workdir / f"gateway-{self.port}.stderr"
        self.stdout_path = workdir / f"gateway-{self.port}.stdout"
        argv = [sys.executable, "-m", "tokenwire", "serve", "--host", "127.0.0.1"]
        argv += ["--port", str(self.port), *args]
        if config is not None:
            path = workdir / f"gateway-{self.port}.toml"
            path.write_text(config)
            argv += ["--config", str(path)]
        if tls is not None:
            cert, key, _ca = tls
            argv += ["--certfile", str(cert), "--keyfile", str(key)]
        self.argv = argv
        self._served: processes.ServedProcess | None = None

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """The running server process (``None`` before ``start`` and after ``stop``)."""
        return self._served.proc if self._served is not None else None

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def host_url(self) -> str:
        """The URL with the certificate's host name (``localhost``) when on TLS."""
        return self.url.replace("127.0.0.1", "localhost") if self.tls else self.url

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What httpx's ``verify`` needs: trust the test CA on TLS."""
        return ssl.create_default_context(cafile=str(self.tls[2])) if self.tls else True

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.host_url, verify=self.ssl_context(), **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.host_url, verify=self.ssl_context(), **kwargs)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def start(self, wait: float = 30.0) -> Gateway:
        """Spawn and wait until ``/healthz`` answers ``200`` (RuntimeError with its stderr)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        tls = self.ssl_context()
        self._served = processes.ServedProcess(
            self.argv,
            self.port,
            tls=tls if isinstance(tls, ssl.SSLContext) else None,
            env=env,
            cwd=ROOT,
            timeout_s=wait,
            stderr_path=self.stderr_path,
            stdout_path=self.stdout_path,
        ).start()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Interrupt it; kill its process group (server and workers) if it lingers."""
        if self._served is not None:
            self._served.close()
            self._served = None

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
