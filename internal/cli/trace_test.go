package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/testutil"
)

// TestCheckTrace: --trace takes stdout, stderr or an http(s) endpoint.
func TestCheckTrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dest string
		ok   bool
	}{
		{"", true},
		{"stdout", true},
		{"stderr", true},
		{"http://127.0.0.1:4318", true},
		{"https://collector.example/v1/traces", true},
		{"file.json", false},
		{"grpc://127.0.0.1:4317", false},
		{"http://", false},
	} {
		err := checkTrace(tc.dest)
		if tc.ok {
			require.NoError(t, err, tc.dest)
		} else {
			require.ErrorContains(t, err, "malformed --trace", tc.dest)
		}
	}
}

// spanLine is one span --trace stderr printed.
type spanLine struct {
	Name       string         `json:"name"`
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	Parent     string         `json:"parent_span_id"`
	Status     string         `json:"status"`
	Attributes map[string]any `json:"attributes"`
}

// TestE2ETraceStderr: run --trace stderr prints the span tree of the
// acquisition (attempt, a node call per node with its vote) and of the
// release, one JSON object a line, with the names of redlockotel.
func TestE2ETraceStderr(t *testing.T) {
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	r := cli(t, nodesEnv(c.URLs()), "--trace", "stderr", "--rejoin-delay", "0", "run", "traced", "--", "true")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	byName := map[string][]spanLine{}
	byID := map[string]spanLine{}
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var s spanLine
		if json.Unmarshal([]byte(line), &s) != nil || s.Name == "" {
			continue
		}
		byName[s.Name] = append(byName[s.Name], s)
		byID[s.SpanID] = s
	}
	var acquire spanLine
	for _, name := range []string{"redlock.acquire", "redlock.try_acquire"} {
		if len(byName[name]) > 0 {
			acquire = byName[name][0]
		}
	}
	require.NotEmpty(t, acquire.SpanID, "no acquisition span: %s", r.stderr)
	require.Equal(t, "traced", acquire.Attributes["redlock.resource"])
	require.Equal(t, "acquired", acquire.Attributes["redlock.outcome"])
	require.NotEmpty(t, byName["redlock.attempt"])
	attempt := byName["redlock.attempt"][0]
	require.Equal(t, acquire.SpanID, attempt.Parent)
	nodes := 0
	for _, n := range byName["redlock.node.acquire"] {
		if n.Parent == attempt.SpanID {
			nodes++
			require.Equal(t, "granted", n.Attributes["redlock.vote"])
			require.Equal(t, "127.0.0.1", n.Attributes["server.address"])
			require.Equal(t, acquire.TraceID, n.TraceID)
		}
	}
	require.Equal(t, 3, nodes, "a node span per node")
	require.Len(t, byName["redlock.release"], 1)
	for _, n := range byName["redlock.node.release"] {
		require.Equal(t, byName["redlock.release"][0].SpanID, n.Parent)
	}
}

// TestE2ETraceOTLP: --trace URL sends the spans to an OTLP/HTTP endpoint
// (JSON encoding) at /v1/traces when the command ends.
func TestE2ETraceOTLP(t *testing.T) {
	c := testutil.StartRedis(t, 3, testutil.WithConfig("appendonly no"))
	var mu sync.Mutex
	var names []string
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						Name         string `json:"name"`
						TraceID      string `json:"traceId"`
						StartTimeNs  string `json:"startTimeUnixNano"`
						ParentSpanID string `json:"parentSpanId"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if json.Unmarshal(body, &req) == nil && r.Header.Get("Content-Type") == "application/json" {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						names = append(names, s.Name)
					}
				}
			}
			mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	r := cli(t, nodesEnv(c.URLs()), "--trace", srv.URL, "--rejoin-delay", "0", "run", "sent", "--", "true")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, paths, "/v1/traces")
	require.Contains(t, names, "redlock.attempt")
	require.Contains(t, names, "redlock.node.acquire")
	require.Contains(t, names, "redlock.release")
}
