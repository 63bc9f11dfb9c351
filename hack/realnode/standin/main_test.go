package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func scrape(t *testing.T, c *counters) string {
	t.Helper()
	w := httptest.NewRecorder()
	c.metrics(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return w.Body.String()
}

func TestCountersStartAtZeroAndCountErrorsApart(t *testing.T) {
	var c counters
	if got := scrape(t, &c); !strings.Contains(got, "requests_total 0\n") ||
		!strings.Contains(got, "request_errors_total 0\n") {
		t.Fatalf("a fresh process exposes both series at 0, got:\n%s", got)
	}
	ok := c.count(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	bad := c.count(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "x", http.StatusBadGateway) })
	for _, h := range []http.HandlerFunc{ok, ok, bad} {
		h(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
	}
	if got := scrape(t, &c); !strings.Contains(got, "requests_total 3\n") ||
		!strings.Contains(got, "request_errors_total 1\n") {
		t.Fatalf("3 answers, 1 of them a 502, got:\n%s", got)
	}
}

func TestAnErroringRevisionAnswers500(t *testing.T) {
	t.Setenv("OME_STANDIN_ERRORS", "true")
	var c counters
	h := c.count(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	w := httptest.NewRecorder()
	h(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("answered %d, want 500", w.Code)
	}
	if got := scrape(t, &c); !strings.Contains(got, "request_errors_total 1\n") {
		t.Fatalf("the 500 is counted as an error, got:\n%s", got)
	}
}
