"""kubernetes-asyncio's connection, TLS and auth, without its generated models.

`import kubernetes_asyncio` runs package initializers that import every generated model and API class: about 38 MB,
a third of the controller's memory with a few thousand pods cached. omenative uses only `Configuration`,
`ApiClient` (auth, TLS, URLs) and the kubeconfig and in-cluster loaders. `install()` loads just those modules, with
empty package objects standing in for `kubernetes_asyncio`, `kubernetes_asyncio.client` (and its `models`) and
`kubernetes_asyncio.config`. `omenative run` calls it before anything imports kubernetes_asyncio; where something
already has (the tests, a library user), the full package stays and this does nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


def _package(name: str, path: list[str]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = path
    sys.modules[name] = module
    return module


def install() -> bool:
    """True when the lean modules were loaded; False when kubernetes_asyncio was already imported."""
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
