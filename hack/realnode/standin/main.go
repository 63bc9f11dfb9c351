// Command standin plays the processes of the guides' runtimes on the sandbox's real node: it is no model.
//
// It is installed as /usr/local/bin/python3 in images tagged with the catalog's image names, so the runtimes'
// command lines run unchanged and are told apart by their module:
//
//	python3 -m sglang.launch_server ...         an engine or decoder (leader or worker of a multi-pod Instance)
//	python3 -m sglang_router.launch_router ...  the prefill-decode router
//	pause                                       the pod sandbox's pause process
//
// An engine of a multi-pod Instance wires up as SGLang does: each worker (--node-rank k > 0) connects to the
// leader at --dist-init-addr (the leader's DNS name, so cluster DNS must work); the leader answers its health
// and readiness probes only while all --nnodes - 1 workers are connected, and its chat completion names itself
// and those workers. The router finds prefill and decode pods through the API by --prefill-selector and
// --decode-selector, as SGLang's router does with --service-discovery, and names the two pods it used.
//
// Each serves /metrics in Prometheus's text format: requests_total and request_errors_total (answers of 500 and
// above) of its chat completions, from 0 at start, which a canary analysis reads per revision once the PodMonitor
// labels the series. With OME_STANDIN_ERRORS=true in its environment (a template change, so a revision of its
// own) it answers every chat completion with a 500: a canary that goes wrong for real.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "pause" {
		pause()
	}
	if len(args) >= 2 && args[0] == "-m" {
		flags := parseFlags(args[2:])
		switch args[1] {
		case "sglang.launch_server":
			engine(flags)
		case "sglang_router.launch_router":
			router(flags)
		}
	}
	log.Fatalf("stand-in: unknown command line %q", os.Args)
}

// parseFlags reads --name value and --name (a switch) pairs; the stand-ins ignore the flags they do not use.
func parseFlags(args []string) map[string]string {
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "--") {
			continue
		}
		name := strings.TrimPrefix(args[i], "--")
		if k, v, ok := strings.Cut(name, "="); ok {
			flags[k] = v
		} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			flags[name] = args[i+1]
			i++
		} else {
			flags[name] = "true"
		}
	}
	return flags
}

func get(flags map[string]string, name, fallback string) string {
	if v, ok := flags[name]; ok {
		return v
	}
	return fallback
}

func pause() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	os.Exit(0)
}

func hostname() string {
	name, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return name
}

// -- engine ----------------------------------------------------------------------------------------------------

type leader struct {
	mu      sync.Mutex
	workers map[string]int // connected workers by name, each with its rank
}

func (l *leader) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.workers))
	for name := range l.workers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// accept takes workers' connections: a worker sends one line "rank=K pod=NAME" and keeps the connection open for
// as long as it lives, as a distributed process group would.
func (l *leader) accept(listener net.Listener) {
	for {
		conn, err := listener.Accept()
		if err != nil {
			log.Fatalf("leader: accept: %v", err)
		}
		go func() {
			defer conn.Close()
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return
			}
			fields := map[string]string{}
			for _, field := range strings.Fields(line) {
				if k, v, ok := strings.Cut(field, "="); ok {
					fields[k] = v
				}
			}
			name := fields["pod"]
			rank, _ := strconv.Atoi(fields["rank"])
			l.mu.Lock()
			l.workers[name] = rank
			l.mu.Unlock()
			log.Printf("leader: worker %s (rank %d) connected", name, rank)
			_, _ = io.Copy(io.Discard, conn) // until the worker goes away
			l.mu.Lock()
			delete(l.workers, name)
			l.mu.Unlock()
			log.Printf("leader: worker %s (rank %d) disconnected", name, rank)
		}()
	}
}

// join connects a worker to its leader and reconnects whenever the connection drops.
func join(address string, rank int) {
	for {
		conn, err := net.DialTimeout("tcp", address, 3*time.Second)
		if err != nil {
			log.Printf("worker: leader %s not reachable yet: %v", address, err)
			time.Sleep(time.Second)
			continue
		}
		log.Printf("worker: connected to leader %s", address)
		_, _ = fmt.Fprintf(conn, "rank=%d pod=%s\n", rank, hostname())
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
		log.Printf("worker: lost leader %s", address)
		time.Sleep(time.Second)
	}
}

func engine(flags map[string]string) {
	nodes, _ := strconv.Atoi(get(flags, "nnodes", "1"))
	rank, _ := strconv.Atoi(get(flags, "node-rank", "0"))
	model := get(flags, "served-model-name", "standin")
	mode := get(flags, "disaggregation-mode", "null")
	address := get(flags, "dist-init-addr", "")
	l := &leader{workers: map[string]int{}}
	if nodes > 1 {
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			log.Fatalf("engine: --dist-init-addr %q: %v", address, err)
		}
		if rank == 0 {
			listener, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", port))
			if err != nil {
				log.Fatalf("leader: listen on %s: %v", port, err)
			}
			go l.accept(listener)
		} else {
			go join(address, rank)
			if _, ok := flags["port"]; !ok {
				select {} // a worker without a port serves nothing itself
			}
		}
	}
	ready := func() bool { return rank != 0 || len(l.names()) == nodes-1 }
	var served atomic.Int64
	var answered counters
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", answered.metrics)
	health := func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, fmt.Sprintf("waiting for workers: %d of %d connected", len(l.names()), nodes-1),
				http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}
	mux.HandleFunc("/health", health)
	mux.HandleFunc("/health_generate", health)
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": model, "object": "model"}}})
	})
	mux.HandleFunc("/v1/chat/completions", answered.count(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if !ready() {
			http.Error(w, "not ready: workers missing", http.StatusServiceUnavailable)
			return
		}
		workers := l.names()
		content := fmt.Sprintf("stand-in %s %s answered (rank %d of %d; workers connected: %s); this is no model",
			role(mode), hostname(), rank, nodes, strings.Join(orNone(workers), ", "))
		writeJSON(w, completion(served.Add(1), model, content, map[string]any{
			"pod": hostname(), "role": role(mode), "workers": workers}))
	}))
	listen := net.JoinHostPort(get(flags, "host", "0.0.0.0"), get(flags, "port", "30000"))
	log.Printf("engine (%s, rank %d of %d) serving %s on %s", role(mode), rank, nodes, model, listen)
	serve(listen, mux)
}

// serve answers until SIGTERM, then stops taking connections and finishes the requests in flight, as a serving
// engine or router does when its pod is deleted.
// counters are a process's chat completion answers, as /metrics exposes them.
type counters struct{ requests, errors atomic.Int64 }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// count wraps a chat completion handler: every answer is a request, one of 500 or above an error too. With
// OME_STANDIN_ERRORS=true every answer is a 500.
func (c *counters) count(next http.HandlerFunc) http.HandlerFunc {
	failing := os.Getenv("OME_STANDIN_ERRORS") == "true"
	return func(w http.ResponseWriter, r *http.Request) {
		recorder := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if failing {
			http.Error(recorder, "stand-in: OME_STANDIN_ERRORS is set: this revision answers errors",
				http.StatusInternalServerError)
		} else {
			next(recorder, r)
		}
		c.requests.Add(1)
		if recorder.status >= 500 {
			c.errors.Add(1)
		}
	}
}

func (c *counters) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP requests_total Chat completion requests answered.\n# TYPE requests_total counter\n"+
		"requests_total %d\n# HELP request_errors_total Chat completion requests answered with 500 or above.\n"+
		"# TYPE request_errors_total counter\nrequest_errors_total %d\n", c.requests.Load(), c.errors.Load())
}

func serve(listen string, handler http.Handler) {
	server := &http.Server{Addr: listen, Handler: handler}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		log.Printf("stopping: finishing the requests in flight")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
	}()
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
	os.Exit(0)
}

func role(mode string) string {
	switch mode {
	case "prefill":
		return "prefill engine"
	case "decode":
		return "decoder"
	}
	return "engine"
}

func orNone(names []string) []string {
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

func completion(n int64, model, content string, standin map[string]any) map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-standin-%d", n), "object": "chat.completion", "created": time.Now().Unix(),
		"model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage":   map[string]any{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
		"standin": standin,
	}
}

func writeJSON(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// -- router ----------------------------------------------------------------------------------------------------

type backend struct{ Name, Address string }

type discovery struct {
	client            *http.Client
	api, token, ns    string
	port              string
	prefill, decode   string
	mu                sync.Mutex
	prefills, decodes []backend
}

func (d *discovery) list(selector string) ([]backend, error) {
	selector = strings.Join(strings.Fields(selector), ",")
	url := fmt.Sprintf("%s/api/v1/namespaces/%s/pods?labelSelector=%s", d.api, d.ns, selector)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("list pods %s: %s: %s", selector, resp.Status, body)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				PodIP      string `json:"podIP"`
				Conditions []struct{ Type, Status string }
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var found []backend
	for _, pod := range list.Items {
		ready := false
		for _, c := range pod.Status.Conditions {
			ready = ready || (c.Type == "Ready" && c.Status == "True")
		}
		if ready && pod.Status.PodIP != "" && pod.Metadata.DeletionTimestamp == nil {
			found = append(found, backend{pod.Metadata.Name, net.JoinHostPort(pod.Status.PodIP, d.port)})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return found, nil
}

func (d *discovery) refresh() {
	for {
		prefills, err1 := d.list(d.prefill)
		decodes, err2 := d.list(d.decode)
		if err1 != nil || err2 != nil {
			log.Printf("router: discovery: %v %v", err1, err2)
		} else {
			d.mu.Lock()
			d.prefills, d.decodes = prefills, decodes
			d.mu.Unlock()
		}
		time.Sleep(time.Second)
	}
}

func router(flags map[string]string) {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		log.Fatalf("router: no service account token: %v", err)
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		log.Fatalf("router: no service account CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	d := &discovery{
		client: &http.Client{Timeout: 10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		api:   "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")),
		token: strings.TrimSpace(string(token)), ns: get(flags, "service-discovery-namespace", "default"),
		port: get(flags, "service-discovery-port", "8080"), prefill: flags["prefill-selector"],
		decode: flags["decode-selector"],
	}
	go d.refresh()
	var next atomic.Int64
	// The pods discovered now, each list rotated to start at the next one in turn (round robin).
	pick := func() ([]backend, []backend, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.prefills) == 0 || len(d.decodes) == 0 {
			return nil, nil, false
		}
		n := int(next.Add(1))
		rotate := func(list []backend) []backend {
			i := n % len(list)
			return append(append([]backend{}, list[i:]...), list[:i]...)
		}
		return rotate(d.prefills), rotate(d.decodes), true
	}
	forward := func(to backend, body []byte) (map[string]any, error) {
		resp, err := http.Post("http://"+to.Address+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s answered %s", to.Name, resp.Status)
		}
		var answer map[string]any
		return answer, json.NewDecoder(resp.Body).Decode(&answer)
	}
	var answered counters
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", answered.metrics)
	mux.HandleFunc("/readiness", func(w http.ResponseWriter, _ *http.Request) {
		if _, _, ok := pick(); !ok {
			http.Error(w, "no prefill or no decode pod discovered", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	alive := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }
	mux.HandleFunc("/health", alive)
	mux.HandleFunc("/liveness", alive) // the PD runtime's router livenessProbe
	// A pod that went away since the last discovery (discovery runs every second) costs a retry on the next one,
	// as SGLang's router retries; only when every discovered pod fails does the client see an error.
	forwardAny := func(to []backend, body []byte) (backend, map[string]any, error) {
		var errs []string
		for _, b := range to {
			answer, err := forward(b, body)
			if err == nil {
				return b, answer, nil
			}
			log.Printf("router: %v; trying the next pod", err)
			errs = append(errs, err.Error())
		}
		return backend{}, nil, errors.New(strings.Join(errs, "; "))
	}
	mux.HandleFunc("/v1/chat/completions", answered.count(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		prefills, decodes, ok := pick()
		if !ok {
			http.Error(w, "no prefill or no decode pod discovered", http.StatusServiceUnavailable)
			return
		}
		prefill, _, err := forwardAny(prefills, body)
		if err != nil {
			http.Error(w, "prefill: "+err.Error(), http.StatusBadGateway)
			return
		}
		decode, answer, err := forwardAny(decodes, body)
		if err != nil {
			http.Error(w, "decode: "+err.Error(), http.StatusBadGateway)
			return
		}
		model, _ := answer["model"].(string)
		content := fmt.Sprintf("stand-in router: prefill on %s, decode on %s; this is no model", prefill.Name, decode.Name)
		writeJSON(w, completion(next.Load(), model, content, map[string]any{
			"router": hostname(), "prefill": prefill.Name, "decode": decode.Name}))
	}))
	listen := net.JoinHostPort(get(flags, "host", "0.0.0.0"), get(flags, "port", "8080"))
	log.Printf("router: prefill %q, decode %q in %s, serving on %s", d.prefill, d.decode, d.ns, listen)
	serve(listen, mux)
}
