package fencetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/fencetest"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testutil.LeakOptions()...)
}

// memory is the protected data behind the in-process fences.
type memory struct {
	mu sync.Mutex
	m  map[string]string
}

func (m *memory) set(key, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]string)
	}
	m.m[key] = value
}

func (m *memory) Read(_ context.Context, key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[key]
	return v, ok, nil
}

// fenceResource writes through Fence.Do: the check and the write are one
// step for the key.
type fenceResource struct {
	f fencing.Fence
	memory
}

func (r *fenceResource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	return r.f.Do(ctx, key, t, func() error {
		r.set(key, value)
		return nil
	})
}

func TestFenceConforms(t *testing.T) {
	fencetest.Run(t, fencetest.NewLocker(t), &fenceResource{})
}

// storeResource is redisfence.Store on a Redis server.
type storeResource struct{ s *redisfence.Store }

func (r storeResource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	return r.s.Write(ctx, key, value, t)
}

func (r storeResource) Read(ctx context.Context, key string) (string, bool, error) {
	v, _, found, err := r.s.Read(ctx, key)
	return v, found, err
}

func TestStoreConforms(t *testing.T) {
	for _, c := range []struct {
		name   string
		client func(t *testing.T) *redis.Client
	}{
		{"miniredis", func(t *testing.T) *redis.Client { return testutil.NewMiniCluster(t, 1).Client(0) }},
		{"redis-server", func(t *testing.T) *redis.Client { return testutil.StartRedisServer(t).Client() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := c.client(t)
			fencetest.Run(t, fencetest.NewLocker(t), storeResource{redisfence.New(client, "resource:")})
		})
	}
}

// httpResource is a client of a handler behind fencing.Middleware: a PUT
// to /KEY with the token in the Fencing-Token header stores the body.
type httpResource struct {
	srv *httptest.Server
	memory
}

// staleBody parses a 409 answer's body, the StaleError's text.
var staleBody = regexp.MustCompile(`stale token ([0-9]+) for "(.*)": highest accepted is ([0-9]+)`)

func (r *httpResource) Write(ctx context.Context, key, value string, t fencing.Token) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.srv.URL+"/"+url.PathEscape(key), strings.NewReader(value))
	if err != nil {
		return err
	}
	fencing.SetHeader(req.Header, t)
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil
	case http.StatusConflict:
		m := staleBody.FindStringSubmatch(string(body))
		if m == nil {
			return fmt.Errorf("409 with an unexpected body %q", body)
		}
		tok, err1 := strconv.ParseUint(m[1], 10, 64)
		high, err2 := strconv.ParseUint(m[3], 10, 64)
		k, err3 := strconv.Unquote(`"` + m[2] + `"`)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		return &fencing.StaleError{Key: k, Token: fencing.Token(tok), Highest: fencing.Token(high)}
	default:
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
}

func TestMiddlewareConforms(t *testing.T) {
	r := &httpResource{}
	var f fencing.Fence
	key := func(req *http.Request) string { return strings.TrimPrefix(req.URL.Path, "/") }
	r.srv = httptest.NewServer(fencing.Middleware(&f, key, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.set(key(req), string(b))
		w.WriteHeader(http.StatusNoContent)
	})))
	t.Cleanup(r.srv.Close)
	fencetest.Run(t, fencetest.NewLocker(t), r)
}

// unfenced applies every write: what a resource that ignores the token
// does.
type unfenced struct{ memory }

func (r *unfenced) Write(_ context.Context, key, value string, _ fencing.Token) error {
	r.set(key, value)
	return nil
}

// TestKitFailsAnUnfencedResource: the kit is not a rubber stamp. Run on a
// resource that ignores tokens (in a child process, since its failures are
// the point), every check fails.
func TestKitFailsAnUnfencedResource(t *testing.T) {
	if os.Getenv("FENCETEST_UNFENCED") == "1" {
		fencetest.Run(t, fencetest.NewLocker(t), &unfenced{})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKitFailsAnUnfencedResource$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FENCETEST_UNFENCED=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the kit passed a resource that ignores tokens:\n%s", out)
	for _, check := range []string{"StaleAfterNewer", "EqualToken", "ConcurrentInterleaved", "PausedHolder"} {
		require.Contains(t, string(out), "--- FAIL: TestKitFailsAnUnfencedResource/"+check, "%s", out)
	}
}
