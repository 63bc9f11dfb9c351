# shellcheck shell=bash
# Pinned versions of the local control plane. These were checked to build and run together; change them together.
K8S_VERSION=v1.35.4
K8S_STAGING_VERSION=v0.35.4
SCHEDULER_PLUGINS_VERSION=v0.35.4-devel
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
# Only its published CRDs (ServiceMonitor, PodMonitor, PrometheusRule), from the Go module's example/ folder.
PROMETHEUS_OPERATOR_VERSION=v0.85.0
# Only its standard-channel CRDs (GatewayClass, Gateway, HTTPRoute), from the Go module's config/crd folder: the
# HTTPRoutes of ingress creation.
GATEWAY_API_VERSION=v1.6.3
# A real gateway for those routes (hack/cluster.sh up --gateway): Traefik's Gateway API provider, built from its Go
# module. Not v3.7.13: its go.mod replaces github.com/traefik/traefik/dynamic/ext with a nested module that the module
# zip leaves out (and the proxy here does not serve), and six ACME DNS-provider SDKs it links are refused here.
# v3.6.5 resolves in full (its Gateway API types are v1.4.0's; the v1 kinds it reads are in v1.6.3's CRDs).
TRAEFIK_VERSION=v3.6.5

OMENATIVE_CACHE_DIR="${OMENATIVE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/omenative}"
# One folder per version set, so a version bump never reuses a stale binary.
OMENATIVE_BIN_DIR="${OMENATIVE_BIN_DIR:-$OMENATIVE_CACHE_DIR/k8s-$K8S_VERSION.sp-$SCHEDULER_PLUGINS_VERSION.etcd-$ETCD_VERSION.kwok-$KWOK_VERSION/bin}"

# Every binary the control plane needs. kube-scheduler is the stock scheduler (for clusters without the PodGroup
# CRD); coscheduling-scheduler and podgroup-controller come from scheduler-plugins.
CONTROL_PLANE_BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl
  coscheduling-scheduler podgroup-controller kwok kwokctl)
COREDNS_VERSION=v1.14.7
# Optional parts, built only when asked for (hack/cluster.sh up --kueue).
KUEUE_VERSION=v0.17.0
# KEDA's operator and metrics adapter (hack/cluster.sh up --keda). v2.21.1 needs Go 1.27.4, newer than this machine's
# Go 1.26 and than the one toolchain the module proxy may serve here (go1.27.3); v2.21.0 builds with Go 1.26.
KEDA_VERSION=v2.21.0
# The real node's (hack/cluster.sh --real-node): built only when asked for.
REAL_NODE_BINARIES=(kubelet kube-proxy coredns standin)
