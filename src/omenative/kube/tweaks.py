"""Process-wide tweaks of the runtime the controller runs on, for memory. `omenative run` applies them first thing
(before anything imports kubernetes_asyncio), unless `--lean-runtime=false`, and the manager checks at start that
they took effect (`in_effect`), logging any that did not. Tests and library users that build a client themselves get
the stock runtime.

- `lean_imports`: kubernetes-asyncio's connection, TLS and auth, without its generated models. `import
  kubernetes_asyncio` runs package initializers that import every generated model and API class: about 38 MB, a
  third of the controller's memory with a few thousand pods cached. omenative uses only `Configuration`,
  `ApiClient` (auth, TLS, URLs) and the kubeconfig and in-cluster loaders; empty package objects stand in for
  `kubernetes_asyncio`, `kubernetes_asyncio.client` (and its `models`) and `kubernetes_asyncio.config`.
- `without_console_extras`: no rich or better-exceptions in structlog's tracebacks.
- `shared_tls_read_buffer`: one TLS read buffer per thread instead of 256 KiB per connection.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

LEAN_IMPORTS = "lean-imports"
SHARED_TLS_READ_BUFFER = "shared-tls-read-buffer"


def apply() -> dict[str, bool]:
    """Applies every tweak; returns which took effect."""
    without_console_extras()
    return {LEAN_IMPORTS: lean_imports(), SHARED_TLS_READ_BUFFER: shared_tls_read_buffer()}


def in_effect() -> dict[str, bool]:
    """Whether each tweak is in effect in this process (read from the runtime itself, not from what was asked)."""
    package = sys.modules.get("kubernetes_asyncio")
    lean = package is not None and getattr(package, "__file__", None) is None and \
        "kubernetes_asyncio.client.models.v1_pod" not in sys.modules
    init = asyncio.sslproto.SSLProtocol.__init__
    return {LEAN_IMPORTS: lean, SHARED_TLS_READ_BUFFER: bool(getattr(init, "shares_read_buffer", False))}


def _package(name: str, path: list[str]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = path
    sys.modules[name] = module
    return module


def lean_imports() -> bool:
    """Loads kubernetes_asyncio without its generated models. True when the lean modules were loaded; False when
    kubernetes_asyncio was already imported (the full package stays)."""
    if "kubernetes_asyncio" in sys.modules:
        return False
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("kubernetes_asyncio is not installed")
    root = next(iter(spec.submodule_search_locations))
    package = _package("kubernetes_asyncio", [root])
    client = _package("kubernetes_asyncio.client", [f"{root}/client"])
    # ApiClient imports the models package only to deserialize into model classes, which omenative never asks for.
    client.models = _package("kubernetes_asyncio.client.models", [f"{root}/client/models"])  # type: ignore[attr-defined]
    config = _package("kubernetes_asyncio.config", [f"{root}/config"])
    package.client, package.config = client, config  # type: ignore[attr-defined]
    client.Configuration = importlib.import_module("kubernetes_asyncio.client.configuration").Configuration  # type: ignore[attr-defined]
    client.ApiClient = importlib.import_module("kubernetes_asyncio.client.api_client").ApiClient  # type: ignore[attr-defined]
    config.ConfigException = importlib.import_module(  # type: ignore[attr-defined]
        "kubernetes_asyncio.config.config_exception").ConfigException
    config.load_kube_config = importlib.import_module(  # type: ignore[attr-defined]
        "kubernetes_asyncio.config.kube_config").load_kube_config
    config.load_incluster_config = importlib.import_module(  # type: ignore[attr-defined]
        "kubernetes_asyncio.config.incluster_config").load_incluster_config
    return True


def without_console_extras() -> None:
    """structlog formats tracebacks with rich or better-exceptions when either can be imported (rich comes with
    the development tools, and pulls in pygments: 3 MB); the controller's logs never need them. Marking them
    absent before structlog is imported makes it use the standard library's formatting."""
    for name in ("rich", "better_exceptions"):
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


TLS_READ_BUFFER = 64 * 1024  # four TLS records (16 KiB at most each) per read
_read_buffers = threading.local()


def _shared_read_buffer() -> memoryview:
    """The TLS read buffer of this thread's connections (an event loop runs in one thread)."""
    view: memoryview | None = getattr(_read_buffers, "view", None)
    if view is None:
        view = _read_buffers.view = memoryview(bytearray(TLS_READ_BUFFER))
    return view


def shared_tls_read_buffer() -> bool:
    """asyncio gives every TLS connection a zero-filled 256 KiB read buffer, resident for the connection's life: with
    a connection per concurrent request and per watch (about a hundred at a time under load), a fifth of the
    controller's peak RSS in `hack/bench.sh`. The buffer holds bytes only between a socket read and the copy into the
    connection's TLS input, both in one event loop callback, so the connections of a thread share one buffer: each
    reads into it and its bytes are copied out before any other connection reads. The buffer is 64 KiB: a TLS record
    is at most 16 KiB, so a read still takes several."""
    protocol = asyncio.sslproto.SSLProtocol
    if getattr(protocol, "max_size", 0) > TLS_READ_BUFFER:
        protocol.max_size = TLS_READ_BUFFER
    init = protocol.__init__
    if getattr(init, "shares_read_buffer", False):
        return True
    if not hasattr(protocol, "buffer_updated"):
        return False  # an asyncio without buffered protocols: nothing to share

    def shared_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        view = _shared_read_buffer()
        if len(getattr(self, "_ssl_buffer", b"")) <= len(view):  # asyncio's own layout: replace its buffer
            self._ssl_buffer = view.obj
            self._ssl_buffer_view = view

    shared_init.shares_read_buffer = True  # type: ignore[attr-defined]
    protocol.__init__ = shared_init  # type: ignore[method-assign]
    return True
