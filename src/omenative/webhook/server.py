"""The admission webhook, served over TLS by the controller process.

- `/validate-inferenceservice` refuses bad InferenceServices with a message that says why, and admits with
  warnings (kubectl prints them) what works but deserves attention: a named runtime that does not declare support
  for the model, `LWS_*` variables, hostNetwork without ClusterFirstWithHostNet, an ignored deploymentStrategy.
- `/mutate-inferenceservice` normalizes what OME treats as unset (a runner with an empty name).
- `/validate-inferencereplica` refuses writes that do not come from omenative (ome.io/controller-write).

The process makes its own CA and serving certificate, renews them before they expire, and keeps the webhook
configurations' `caBundle` current. In a cluster the material is shared by all replicas through a Secret next to
the webhook's Service; a local run keeps it in memory (or `--webhook-cert-dir`) and registers a URL.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import attrs
import structlog
from aiohttp import web

from omenative.api import constants as c
from omenative.api import migration_request, naming, standalone
from omenative.api.config import ControllerConfig
from omenative.api.modes import declared_components
from omenative.api.types import BaseModelSpec, ServingRuntimeSpec
from omenative.api.validation import Admission, validate_inference_service
from omenative.kube import metrics
from omenative.kube.apply import FIELD_MANAGER
from omenative.kube.client import ApiError, KubeClient
from omenative.kube.resources import MUTATING_WEBHOOKS, SECRETS, VALIDATING_WEBHOOKS, Resource
from omenative.obj import Obj
from omenative.ome_resources import INFERENCE_REPLICAS, INFERENCE_SERVICES
from omenative.render.pods import scale_limit
from omenative.webhook.certs import Bundle, renew

log = structlog.get_logger(__name__)
CONFIGURATION = "omenative"
MAX_REVIEW_BYTES = 8 * 1024 * 1024
ROTATION_CHECK_SECONDS = 3600.0


@attrs.frozen(kw_only=True)
class WebhookOptions:
    bind_address: str = ":9443"
    service: str | None = None  # "namespace/name" of the Service in front of the webhook (in-cluster)
    url: str | None = None  # base URL the API server calls (local runs)
    cert_dir: str | None = None


def migration_errors(obj: Obj, old: Obj) -> list[str]:
    """Migration request annotations added or changed by this write that are malformed or name a component the
    service does not declare (one left as it was is not judged again: its removal must stay possible)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    before = (old.get("metadata") or {}).get("annotations") or {}
    changed = {k: v for k, v in annotations.items() if migration_request.is_request(k) and before.get(k) != v}
    return migration_request.check_annotations(changed, set(declared_components(obj.get("spec") or {})))


def review_response(request: Obj, *, allowed: bool, message: str = "", warnings: tuple[str, ...] = (),
                    patch: list[Obj] | None = None) -> Obj:
    response: Obj = {"uid": request.get("uid", ""), "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "reason": "Invalid", "message": message}
    if warnings:
        response["warnings"] = list(warnings)
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def defaulting_patch(obj: Obj) -> list[Obj]:
    """JSON patches that remove empty runner names, which OME treats as unset (the runtime's name stays)."""
    patch = []
    spec = obj.get("spec") or {}
    for comp in c.COMPONENTS:
        component = spec.get(comp)
        if not isinstance(component, dict):
            continue
        for path, part in (("", component), ("/leader", component.get("leader")),
                           ("/worker", component.get("worker"))):
            runner = (part or {}).get("runner") if isinstance(part, dict) else None
            if isinstance(runner, dict) and "name" in runner and not runner["name"]:
                patch.append({"op": "remove", "path": f"/spec/{comp}{path}/runner/name"})
    return patch


BUNDLE_FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")


def _read_dir(folder: Path) -> Bundle | None:
    files = [folder / n for n in BUNDLE_FILES]
    return Bundle(*(f.read_bytes() for f in files)) if all(f.exists() for f in files) else None


def _write_dir(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in files.items():
        (folder / name).write_bytes(value)


class Reads(Protocol):
    """What the webhook reads (the manager's caches) and the client it writes its certificates and configurations
    with: narrow, so the webhook needs no controller."""

    client: KubeClient
    config: ControllerConfig

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None: ...

    def runtime_named(self, namespace: str, name: str, kind: str | None = None) -> tuple[Obj, bool] | None: ...

    def model_named(self, namespace: str, name: str, kind: str | None = None) -> tuple[Obj, bool] | None: ...


class WebhookServer:
    def __init__(self, options: WebhookOptions, ctx: Reads) -> None:
        self.options = options
        self.ctx = ctx
        self.bundle: Bundle | None = None
        self.ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._runner: web.AppRunner | None = None
        self._rotation: asyncio.Task[None] | None = None
        self.bound: tuple[str, int] | None = None

    @property
    def service(self) -> tuple[str, str] | None:
        """(namespace, name) of the Service in front of the webhook, in a cluster."""
        if not self.options.service:
            return None
        namespace, name = self.options.service.split("/", 1)
        return namespace, name

    # -- admission
    def admission_context(self, obj: Obj) -> Admission:
        spec = obj.get("spec") or {}
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        runtime_ref, model_ref = spec.get("runtime") or {}, spec.get("model") or {}
        runtime_name, model_name = runtime_ref.get("name"), model_ref.get("name")
        runtime = (self.ctx.runtime_named(namespace, runtime_name, runtime_ref.get("kind")) or (None, False))[0] \
            if runtime_name else None
        model = (self.ctx.model_named(namespace, model_name, model_ref.get("kind")) or (None, False))[0] \
            if model_name else None
        return Admission(
            runtime_name=runtime_name if runtime else None,
            runtime=ServingRuntimeSpec.from_dict(runtime.get("spec") or {}) if runtime else None,
            runtime_raw=dict(runtime.get("spec") or {}) if runtime else None,
            model_name=model_name if model else None,
            model=BaseModelSpec.from_dict(model.get("spec") or {}) if model else None,
            config=self.ctx.config)

    async def _review(self, request: web.Request) -> Obj:
        review = await request.json()
        if not isinstance(review, dict) or not isinstance(review.get("request") or {}, dict):
            raise web.HTTPBadRequest(text="the body is not an AdmissionReview")
        return dict(review.get("request") or {})

    async def validate_inference_service(self, request: web.Request) -> web.Response:
        req = await self._review(request)
        obj = req.get("object") or {}
        if req.get("operation") not in ("CREATE", "UPDATE") or not obj:
            return web.json_response(review_response(req, allowed=True))
        old = req.get("oldObject") if req.get("operation") == "UPDATE" else None
        findings = validate_inference_service(obj, self.admission_context(obj), old=old or None)
        errors = list(findings.errors) + migration_errors(obj, old or {})
        message = "; ".join(errors)
        allowed = findings.allowed and not errors
        if not allowed:
            log.info("rejected an InferenceService", name=(obj.get("metadata") or {}).get("name"), reason=message)
        return web.json_response(review_response(req, allowed=allowed, message=message,
                                                 warnings=findings.warnings))

    async def mutate_inference_service(self, request: web.Request) -> web.Response:
        req = await self._review(request)
        obj = req.get("object") or {}
        return web.json_response(review_response(req, allowed=True, patch=defaulting_patch(obj) or None))

    async def validate_inference_replica(self, request: web.Request) -> web.Response:
        req = await self._review(request)
        obj = req.get("object") or {}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        old = req.get("oldObject") or {}
        if req.get("operation") in ("CREATE", "UPDATE") and not standalone.projected(obj) and \
                not standalone.projected(old):
            # A standalone replica: the user owns its spec, judged by OME's rules for one.
            namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
            ref = (obj.get("spec") or {}).get("runtimeRef")
            found = self.ctx.runtime_named(namespace, str(ref.get("name") or ""), ref.get("kind")) \
                if isinstance(ref, dict) and ref.get("name") else None
            errors = standalone.standalone_errors(
                obj, old or None, lambda name: self.ctx.get(INFERENCE_SERVICES, namespace, name) is not None,
                runtime=(found[0].get("spec") or {}) if found is not None else None)
            if errors:
                log.info("rejected a standalone InferenceReplica", name=(obj.get("metadata") or {}).get("name"),
                         reason="; ".join(errors))
            return web.json_response(review_response(req, allowed=not errors, message="; ".join(errors),
                                                     warnings=tuple(standalone.standalone_warnings(obj))))
        if req.get("operation") in ("CREATE", "UPDATE") and annotations.get(c.ANN_CONTROLLER_WRITE) != "true":
            finalizers_only = old and {k: v for k, v in old.items() if k != "metadata"} == \
                {k: v for k, v in obj.items() if k != "metadata"}
            if not finalizers_only:
                parent = ((obj.get("spec") or {}).get("parentRef") or {}).get("name") or "its InferenceService"
                return web.json_response(review_response(req, allowed=False, message=(
                    f"InferenceReplica {(obj.get('metadata') or {}).get('name')} is written by omenative from "
                    f"InferenceService {parent}; edit the InferenceService instead")))
        return web.json_response(review_response(req, allowed=True))

    async def validate_scale(self, request: web.Request) -> web.Response:
        """A write to an InferenceReplica's /scale (kubectl scale, an autoscaler) is refused past the count whose
        Instances' pod names still fit 63 characters: Instance indexes grow with the count, and a name past the
        limit is refused by the API server only later, pod by pod."""
        req = await self._review(request)
        obj = req.get("object") or {}
        replicas = (obj.get("spec") or {}).get("replicas") if isinstance(obj, dict) else None
        replica = self.ctx.get(INFERENCE_REPLICAS, req.get("namespace") or "", req.get("name") or "")
        if not isinstance(replicas, int) or replica is None:
            return web.json_response(review_response(req, allowed=True))
        limit = scale_limit(replica)
        if limit is not None and replicas > limit[0]:
            cap, longest = limit
            return web.json_response(review_response(req, allowed=False, message=(
                f"spec.replicas: {replicas} Instances of InferenceReplica {req.get('name')} would give pods names "
                f"longer than {naming.MAX_DNS_LABEL} characters (such as {longest!r}); at most {cap} Instances fit "
                "this InferenceService's name")))
        return web.json_response(review_response(req, allowed=True))

    # -- TLS and registration
    def hosts(self) -> list[str]:
        if self.service:
            namespace, name = self.service
            return [f"{name}.{namespace}.svc", name, f"{name}.{namespace}", f"{name}.{namespace}.svc.cluster.local"]
        host = urlparse(self.options.url or "https://127.0.0.1").hostname or "127.0.0.1"
        return [host]

    def client_config(self, path: str) -> Obj:
        ca = base64.b64encode(self.bundle.ca_cert if self.bundle else b"").decode()
        if self.service:
            namespace, name = self.service
            port = int(self.options.bind_address.rpartition(":")[2])
            return {"service": {"namespace": namespace, "name": name, "path": path, "port": port}, "caBundle": ca}
        return {"url": (self.options.url or "").rstrip("/") + path, "caBundle": ca}

    def configurations(self) -> tuple[Obj, Obj]:
        def rule(resource: str) -> Obj:
            return {"apiGroups": [c.GROUP], "apiVersions": [c.VERSION], "operations": ["CREATE", "UPDATE"],
                    "resources": [resource], "scope": "Namespaced"}

        common = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                  "timeoutSeconds": 10}
        labels = {"app.kubernetes.io/part-of": "omenative"}
        validating = {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION, "labels": labels},
            "webhooks": [
                {"name": "inferenceservice.ome-webhook-server.validator", "rules": [rule("inferenceservices")],
                 "clientConfig": self.client_config("/validate-inferenceservice"), **common},
                {"name": "inferencereplica.ome-webhook-server.validator", "rules": [rule("inferencereplicas")],
                 "clientConfig": self.client_config("/validate-inferencereplica"), **common},
                {"name": "inferencereplica-scale.ome-webhook-server.validator",
                 "rules": [{**rule("inferencereplicas/scale"), "operations": ["UPDATE"]}],
                 "clientConfig": self.client_config("/validate-inferencereplica-scale"), **common},
            ]}
        mutating = {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION, "labels": labels},
            "webhooks": [
                {"name": "inferenceservice.ome-webhook-server.defaulter", "rules": [rule("inferenceservices")],
                 "clientConfig": self.client_config("/mutate-inferenceservice"), "reinvocationPolicy": "Never",
                 **common},
            ]}
        return validating, mutating

    async def _load_secret(self) -> Obj | None:
        assert self.service is not None
        namespace, name = self.service
        try:
            return await self.ctx.client.get(SECRETS, f"{name}-certs", namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _load_bundle(self) -> tuple[Bundle | None, str | None]:
        """The stored bundle and, in a Secret, the Secret's resourceVersion (None when there is no Secret)."""
        if self.service:
            secret = await self._load_secret()
            if secret is None:
                return None, None
            data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
            bundle = Bundle(*(data[k] for k in BUNDLE_FILES)) if all(k in data for k in BUNDLE_FILES) else None
            return bundle, secret["metadata"].get("resourceVersion")
        if self.options.cert_dir:
            return await asyncio.to_thread(_read_dir, Path(self.options.cert_dir)), None
        return None, None

    async def _store_bundle(self, bundle: Bundle, version: str | None) -> bool:
        """Stores the bundle; False when another replica stored one first. Replicas start together and each makes a
        bundle: the Secret is created (only one create succeeds) or updated on the version read (only one update of
        it succeeds), so that every replica serves with the certificate the caBundle names."""
        files = dict(zip(BUNDLE_FILES, attrs.astuple(bundle), strict=True))
        if self.service:
            namespace, name = self.service
            data = {k: base64.b64encode(v).decode() for k, v in files.items()}
            try:
                if version is None:
                    await self.ctx.client.create(SECRETS, {
                        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": f"{name}-certs", "namespace": namespace}, "data": data}, namespace,
                        field_manager=FIELD_MANAGER)
                else:
                    await self.ctx.client.patch(SECRETS, f"{name}-certs", {
                        "metadata": {"resourceVersion": version}, "data": data}, namespace,
                        field_manager=FIELD_MANAGER)
            except ApiError as exc:
                if exc.conflict:  # AlreadyExists, or the Secret changed since it was read
                    return False
                raise
        elif self.options.cert_dir:
            await asyncio.to_thread(_write_dir, Path(self.options.cert_dir), files)
        return True

    def _load_into_ssl(self, bundle: Bundle) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(bundle.cert)
            key.write_bytes(bundle.key)
            self.ssl.load_cert_chain(cert, key)

    async def ensure_certificates(self) -> bool:
        """Makes or renews the certificates; True when they changed."""
        now = dt.datetime.now(dt.UTC)
        current, version = await self._load_bundle()
        fresh = renew(current, self.hosts(), now)
        if fresh is not current:
            stored = await self._store_bundle(fresh, version)
            # Another replica stored its bundle first: serve that one.
            current = fresh if stored else (await self._load_bundle())[0] or fresh
        changed = self.bundle is None or current.cert != self.bundle.cert
        if changed:
            self._load_into_ssl(current)
            self.bundle = current
        return changed

    async def register(self) -> None:
        validating, mutating = self.configurations()
        await self.ctx.client.apply(VALIDATING_WEBHOOKS, validating, field_manager=FIELD_MANAGER)
        await self.ctx.client.apply(MUTATING_WEBHOOKS, mutating, field_manager=FIELD_MANAGER)

    async def start(self) -> None:
        await self.ensure_certificates()
        # An update's review carries the old object and the new one, each up to the API server's own request limit
        # (3 MiB): aiohttp's default of 1 MiB refused large ones with 413.
        app = web.Application(middlewares=[_instrumented, _never_500], client_max_size=MAX_REVIEW_BYTES)
        for path, handler in (("/validate-inferenceservice", self.validate_inference_service),
                              ("/mutate-inferenceservice", self.mutate_inference_service),
                              ("/validate-inferencereplica", self.validate_inference_replica),
                              ("/validate-inferencereplica-scale", self.validate_scale)):
            app.router.add_post(path, handler)
            metrics.init_webhook_series(path)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        host, _, port = self.options.bind_address.rpartition(":")
        site = web.TCPSite(self._runner, host or "0.0.0.0", int(port), ssl_context=self.ssl)
        await site.start()
        addresses = self._runner.addresses
        self.bound = (str(addresses[0][0]), int(addresses[0][1])) if addresses else None
        await self.register()
        self._rotation = asyncio.create_task(self._rotate(), name="webhook certificates")
        log.info("admission webhook serving", address=self.options.bind_address,
                 via=self.options.service or self.options.url)

    async def _rotate(self) -> None:
        while True:
            await asyncio.sleep(ROTATION_CHECK_SECONDS)
            try:
                if await self.ensure_certificates():
                    log.info("webhook certificate renewed")
                await self.register()  # also repairs a caBundle someone changed
            except Exception:
                log.exception("webhook certificate check failed; retrying at the next check")

    async def stop(self) -> None:
        if self._rotation is not None:
            self._rotation.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rotation
        if self._runner is not None:
            await self._runner.cleanup()


@web.middleware
async def _never_500(request: web.Request, handler: Any) -> web.StreamResponse:
    """A judgement that fails is a refusal with a message, never a 500: the API server would show "Server got itself
    in trouble" and the user would not learn what to change. A body that is not a review is answered 400."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except web.HTTPException:
        raise
    except Exception as exc:
        log.exception("admission failed; refusing the object", path=request.path)
        try:
            review = await request.json()
            req = dict(review.get("request") or {}) if isinstance(review, dict) else {}
        except Exception:
            raise web.HTTPBadRequest(text="the body is not an AdmissionReview") from exc
        answer = review_response(req, allowed=False, message=(
            f"omenative could not judge this object ({type(exc).__name__}: {exc}); check its fields against "
            "kubectl explain, and report this message if they are right"))
        answer["response"]["status"]["code"] = 400
        return web.json_response(answer)


@web.middleware
async def _instrumented(request: web.Request, handler: Any) -> web.StreamResponse:
    """controller-runtime's webhook metrics: requests by code, latency and requests in flight, per path."""
    path = request.path
    if request.match_info.route.resource is None:
        stray: web.StreamResponse = await handler(request)  # not one of ours (a 404): no series per stray path
        return stray
    in_flight = metrics.webhook_requests_in_flight.labels(webhook=path)
    in_flight.inc()
    started = time.monotonic()
    code = 500
    try:
        response: web.StreamResponse = await handler(request)
        code = response.status
        return response
    except web.HTTPException as exc:
        code = exc.status
        raise
    finally:
        in_flight.dec()
        metrics.webhook_latency_seconds.labels(webhook=path).observe(time.monotonic() - started)
        metrics.webhook_requests_total.labels(webhook=path, code=str(code)).inc()
