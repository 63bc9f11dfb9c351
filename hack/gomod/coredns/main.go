// Command coredns is CoreDNS with only the plugins the real node's cluster DNS uses: it answers for the cluster
// domain from the API (kubernetes) and nothing else, so it needs no upstream and builds in a fraction of the time.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() {
	// The order in which a query passes the plugins, as CoreDNS's plugin.cfg gives it for these five.
	dnsserver.Directives = []string{"bind", "errors", "log", "cache", "kubernetes"}
}

func main() { coremain.Run() }
