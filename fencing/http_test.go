package fencing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

func TestSetHeader(t *testing.T) {
	h := http.Header{}
	h.Add(fencing.Header, "junk")
	fencing.SetHeader(h, 42)
	require.Equal(t, []string{"42"}, h.Values("fencing-token"))

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	fencing.SetHeader(r.Header, ^fencing.Token(0))
	tok, err := fencing.TokenFromRequest(r)
	require.NoError(t, err)
	require.Equal(t, ^fencing.Token(0), tok)
}

func TestTokenFromRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	_, err := fencing.TokenFromRequest(r)
	require.ErrorIs(t, err, fencing.ErrMissingToken)
	require.NotErrorIs(t, err, fencing.ErrInvalidToken)

	for _, v := range badTokens {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(fencing.Header, v)
		_, err := fencing.TokenFromRequest(r)
		require.ErrorIs(t, err, fencing.ErrInvalidToken, "%q", v)
		require.NotErrorIs(t, err, fencing.ErrMissingToken, "%q", v)
	}

	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Add(fencing.Header, "5")
	r.Header.Add(fencing.Header, "7")
	_, err = fencing.TokenFromRequest(r)
	require.ErrorIs(t, err, fencing.ErrInvalidToken, "a repeated header is ambiguous")

	r = httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("fencing-token", "9") // header names are case-insensitive
	tok, err := fencing.TokenFromRequest(r)
	require.NoError(t, err)
	require.Equal(t, fencing.Token(9), tok)
}

// fencedServer returns a fenced handler keyed by URL path, and a counter of
// the calls that reached the inner handler.
func fencedServer(f *fencing.Fence) (http.Handler, *atomic.Int64) {
	var calls atomic.Int64
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprint(w, "ok")
	})
	return fencing.Middleware(f, func(r *http.Request) string { return r.URL.Path }, inner), &calls
}

// serve sends one request with the given token header (none when nil).
func serve(h http.Handler, path string, token *string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPut, path, nil)
	if token != nil {
		r.Header.Set(fencing.Header, *token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func ptr(s string) *string { return &s }

// requireTextError asserts a one-line plain text error response.
func requireTextError(t *testing.T, w *httptest.ResponseRecorder, code int, contains string) {
	t.Helper()
	require.Equal(t, code, w.Code)
	require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain"), w.Header().Get("Content-Type"))
	body := w.Body.String()
	require.True(t, strings.HasSuffix(body, "\n"))
	require.NotContains(t, strings.TrimSuffix(body, "\n"), "\n", "one line")
	require.Contains(t, body, contains)
}

func TestMiddleware(t *testing.T) {
	t.Run("missing token", func(t *testing.T) {
		var f fencing.Fence
		h, calls := fencedServer(&f)
		requireTextError(t, serve(h, "/k", nil), http.StatusBadRequest, "missing token")
		require.Zero(t, calls.Load())
	})

	t.Run("malformed token", func(t *testing.T) {
		for _, v := range []string{"", "-1", "1.5", " 7", "abc", "18446744073709551616", "0", "007", strings.Repeat("x", 5000)} {
			t.Run(fmt.Sprintf("%.20q", v), func(t *testing.T) {
				var f fencing.Fence
				h, calls := fencedServer(&f)
				w := serve(h, "/k", ptr(v))
				requireTextError(t, w, http.StatusBadRequest, "invalid token")
				require.Less(t, w.Body.Len(), 300)
				require.Zero(t, calls.Load())
				require.Zero(t, f.Highest("/k"))
			})
		}
	})

	t.Run("fresh, equal, stale", func(t *testing.T) {
		var f fencing.Fence
		h, calls := fencedServer(&f)

		w := serve(h, "/k", ptr("7"))
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, "ok", w.Body.String())
		require.Equal(t, fencing.Token(7), f.Highest("/k"))

		require.Equal(t, http.StatusOK, serve(h, "/k", ptr("7")).Code, "same holder again")
		requireTextError(t, serve(h, "/k", ptr("5")), http.StatusConflict,
			`fencing: stale token 5 for "/k": highest accepted is 7`)
		require.Equal(t, http.StatusOK, serve(h, "/other", ptr("5")).Code, "keys are independent")
		require.Equal(t, http.StatusOK, serve(h, "/k", ptr("8")).Code)
		requireTextError(t, serve(h, "/k", ptr("7")), http.StatusConflict, "highest accepted is 8")
		require.Equal(t, int64(4), calls.Load())
	})

	t.Run("nil arguments panic", func(t *testing.T) {
		var f fencing.Fence
		key := func(*http.Request) string { return "" }
		require.Panics(t, func() { fencing.Middleware(nil, key, http.NotFoundHandler()) })
		require.Panics(t, func() { fencing.Middleware(&f, nil, http.NotFoundHandler()) })
		require.Panics(t, func() { fencing.Middleware(&f, key, nil) })
	})
}

// TestMiddlewareOrdersHandlers checks that a newer holder's request is not
// let in while an older holder's request is still in its handler, and that
// a waiting request gives up with 503 when its context ends.
func TestMiddlewareOrdersHandlers(t *testing.T) {
	var f fencing.Fence
	entered := make(chan string, 4)
	release := make(chan struct{})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get(fencing.Header)
		entered <- tok
		if tok == "5" {
			<-release
		}
	})
	h := fencing.Middleware(&f, func(*http.Request) string { return "k" }, inner)

	older := make(chan *httptest.ResponseRecorder, 1)
	go func() { older <- serve(h, "/", ptr("5")) }()
	require.Equal(t, "5", <-entered)

	newer := make(chan *httptest.ResponseRecorder, 1)
	go func() { newer <- serve(h, "/", ptr("7")) }()
	select {
	case tok := <-entered:
		t.Fatalf("request %s ran while request 5 was in its handler", tok)
	case <-time.After(50 * time.Millisecond):
	}

	// A waiting request whose client goes away gets 503 and records nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPut, "/", nil)
	fencing.SetHeader(r.Header, 9)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	requireTextError(t, w, http.StatusServiceUnavailable, "deadline exceeded")
	require.Equal(t, fencing.Token(5), f.Highest("k"))

	close(release)
	require.Equal(t, http.StatusOK, (<-older).Code)
	require.Equal(t, http.StatusOK, (<-newer).Code)
	require.Equal(t, "7", <-entered)
	require.Equal(t, fencing.Token(7), f.Highest("k"))
}
