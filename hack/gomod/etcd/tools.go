//go:build tools

// Package tools pins the etcd command hack/build-binaries.sh builds, so `go mod tidy` keeps its dependencies.
package tools

import _ "go.etcd.io/etcd/server/v3"
