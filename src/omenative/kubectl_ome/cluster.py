"""What `kubectl ome` reads and writes in a cluster: the `Cluster` protocol every command takes, and `KubeCluster`,
its implementation on the synchronous Kubernetes client (a command line waits for each answer anyway)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, cast

from omenative.api import constants as c
from omenative.obj import Obj


def component_order(replica: Obj) -> int:
    component = (replica.get("spec") or {}).get("component") or ""
    return c.COMPONENTS.index(component) if component in c.COMPONENTS else len(c.COMPONENTS)


class Cluster(Protocol):
    """What the commands read and write; `namespace` is the kubeconfig context's."""

    namespace: str

    def inference_service(self, namespace: str, name: str) -> Obj | None: ...

    def replicas(self, namespace: str, isvc: str) -> list[Obj]: ...

    def get_ome(self, plural: str, namespace: str, name: str) -> Obj | None: ...

    def list_ome(self, plural: str, namespace: str | None, selector: str | None) -> list[Obj]: ...

    def patch_ome(self, plural: str, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj: ...

    def patch_replica(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj: ...

    def patch_service(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj: ...

    def scale_of(self, namespace: str, name: str) -> Obj: ...

    def patch_scale(self, namespace: str, name: str, body: Obj, dry_run: bool) -> Obj: ...

    def pods_selected(self, namespace: str, selector: str) -> list[Obj]: ...

    def pods(self, namespace: str, isvc: str, component: str, index: int) -> list[Obj]: ...

    def service_pods(self, namespace: str, isvc: str) -> list[Obj]: ...

    def pod_log(self, namespace: str, pod: str, container: str, follow: bool, options: dict[str, Any]
                ) -> Iterable[str]: ...

    def warning_events(self, namespace: str) -> list[Obj]: ...

    def warnings(self, namespace: str, pod: str) -> list[Obj]: ...

    def deployment(self, namespace: str, name: str) -> Obj: ...

    def config_map(self, namespace: str, name: str) -> Obj | None: ...

    def hpa(self, namespace: str, name: str) -> Obj | None: ...


class KubeCluster:
    """The few reads the plugin makes, through the synchronous Kubernetes client."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        try:
            from kubernetes import client
            from kubernetes import config as kube_config
        except ImportError as exc:
            raise SystemExit("error: kubectl-ome needs the Kubernetes client: pip install 'omenative[plugin]'") from exc

        config: Any = kube_config  # partly annotated upstream; used through Any
        self.namespace = "default"
        try:
            config.load_kube_config(config_file=kubeconfig, context=context)
            _, active = config.list_kube_config_contexts(config_file=kubeconfig)
            chosen = next((x for x in config.list_kube_config_contexts(config_file=kubeconfig)[0]
                           if x["name"] == context), active) if context else active
            self.namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
        except config.ConfigException:
            config.load_incluster_config()
        self.custom = client.CustomObjectsApi()
        self.core = client.CoreV1Api()

    def inference_service(self, namespace: str, name: str) -> Obj | None:
        return self.get_ome("inferenceservices", namespace, name)

    def patch_replica(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        return self.patch_ome("inferencereplicas", namespace, name, patch, dry_run)

    def patch_ome(self, plural: str, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        """A JSON patch of an ome.io object (the kubernetes client sends a list body as a JSON patch)."""
        kwargs: dict[str, Any] = {"_content_type": "application/json-patch+json"}
        if dry_run:
            kwargs["dry_run"] = "All"
        api: Any = self.custom
        return cast(Obj, api.patch_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, name, patch,
                                                            **kwargs))

    def patch_service(self, namespace: str, name: str, patch: list[Obj], dry_run: bool) -> Obj:
        return self.patch_ome("inferenceservices", namespace, name, patch, dry_run)

    def replicas(self, namespace: str, isvc: str) -> list[Obj]:
        return sorted(self.list_ome("inferencereplicas", namespace, f"{c.LABEL_ISVC}={isvc}"), key=component_order)

    def pods_selected(self, namespace: str, selector: str) -> list[Obj]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector)
        return [self.core.api_client.sanitize_for_serialization(p) for p in pods.items]

    def pods(self, namespace: str, isvc: str, component: str, index: int) -> list[Obj]:
        return self.pods_selected(
            namespace, f"{c.LABEL_ISVC}={isvc},{c.LABEL_COMPONENT}={component},{c.LABEL_INSTANCE_INDEX}={index}")

    def service_pods(self, namespace: str, isvc: str) -> list[Obj]:
        return self.pods_selected(namespace, f"{c.LABEL_ISVC}={isvc}")

    def warning_events(self, namespace: str) -> list[Obj]:
        events = self.core.list_namespaced_event(namespace, field_selector="type=Warning")
        return [self.core.api_client.sanitize_for_serialization(e) for e in events.items]

    def deployment(self, namespace: str, name: str) -> Obj:
        from kubernetes import client

        found = client.AppsV1Api().read_namespaced_deployment(name, namespace)
        return cast(Obj, self.core.api_client.sanitize_for_serialization(found))

    def list_ome(self, plural: str, namespace: str | None, selector: str | None) -> list[Obj]:
        """An ome.io kind's objects (all namespaces when `namespace` is None), each with apiVersion and kind."""
        api: Any = self.custom
        kwargs = {"label_selector": selector} if selector else {}
        if plural.startswith("cluster") or namespace is None:
            found = api.list_cluster_custom_object(c.GROUP, c.VERSION, plural, **kwargs)
        else:
            found = api.list_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, **kwargs)
        return list(cast(Obj, found).get("items") or [])

    def get_ome(self, plural: str, namespace: str, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        api: Any = self.custom
        try:
            if plural.startswith("cluster"):
                return cast(Obj, api.get_cluster_custom_object(c.GROUP, c.VERSION, plural, name))
            return cast(Obj, api.get_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def config_map(self, namespace: str, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return cast(Obj, self.core.api_client.sanitize_for_serialization(found))

    def hpa(self, namespace: str, name: str) -> Obj | None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            found = client.AutoscalingV2Api().read_namespaced_horizontal_pod_autoscaler(name, namespace)
        except ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise
        return cast(Obj, self.core.api_client.sanitize_for_serialization(found))

    def scale_of(self, namespace: str, name: str) -> Obj:
        api: Any = self.custom
        return cast(Obj, api.get_namespaced_custom_object_scale(c.GROUP, c.VERSION, namespace, "inferencereplicas",
                                                                name))

    def patch_scale(self, namespace: str, name: str, body: Obj, dry_run: bool) -> Obj:
        """A merge patch of the /scale subresource; the resourceVersion in it makes the API server refuse (409) a
        write on a replica that changed since it was read."""
        kwargs: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
        if dry_run:
            kwargs["dry_run"] = "All"
        api: Any = self.custom
        return cast(Obj, api.patch_namespaced_custom_object_scale(c.GROUP, c.VERSION, namespace, "inferencereplicas",
                                                                  name, body, **kwargs))

    def pod_log(self, namespace: str, pod: str, container: str, follow: bool, options: dict[str, Any]
                ) -> Iterable[str]:
        """The container's log, line by line as it streams (`follow` keeps reading until the pod stops)."""
        response: Any = self.core.read_namespaced_pod_log(pod, namespace, container=container, follow=follow,
                                                          _preload_content=False, **options)
        try:
            pending = b""
            for chunk in response.stream(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                yield from (line.decode(errors="replace") for line in lines)
            if pending:
                yield pending.decode(errors="replace")
        finally:
            response.release_conn()

    def warnings(self, namespace: str, pod: str) -> list[Obj]:
        events = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={pod},type=Warning")
        return [self.core.api_client.sanitize_for_serialization(e) for e in events.items]
