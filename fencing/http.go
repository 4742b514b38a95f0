package fencing

import (
	"errors"
	"fmt"
	"net/http"
)

// Header is the HTTP header that carries a fencing token, in the decimal
// form Token.String writes.
const Header = "Fencing-Token"

// ErrMissingToken is returned (wrapped) by TokenFromRequest when a request
// carries no Fencing-Token header.
var ErrMissingToken = errors.New("fencing: missing token")

// SetHeader sets the Fencing-Token header in h to t, replacing any value it
// had.
func SetHeader(h http.Header, t Token) {
	h.Set(Header, t.String())
}

// TokenFromRequest returns the fencing token of r, from its Fencing-Token
// header. Without the header it returns an error wrapping ErrMissingToken.
// A header that is repeated, empty, or not a token in canonical decimal form
// as ParseToken accepts it (digits only, no sign, spaces or leading zeros,
// fits in 64 bits, not zero) gives an error wrapping ErrInvalidToken.
func TokenFromRequest(r *http.Request) (Token, error) {
	vs := r.Header.Values(Header)
	switch len(vs) {
	case 0:
		return 0, fmt.Errorf("%w: no %s header", ErrMissingToken, Header)
	case 1:
	default:
		return 0, fmt.Errorf("%w: %d %s headers, want one", ErrInvalidToken, len(vs), Header)
	}
	t, reason := parseToken(vs[0])
	if reason != "" {
		return 0, fmt.Errorf("%w in %s header %s: %s", ErrInvalidToken, Header, quoteShort(vs[0]), reason)
	}
	return t, nil
}

// Middleware returns a handler that fences next with f. For each request it
// reads the token with TokenFromRequest and answers 400 Bad Request when the
// token is missing or malformed; otherwise it runs next under f.Do for the
// key that key(r) returns, answering 409 Conflict when the token is stale
// (below the highest accepted for that key) and 503 Service Unavailable when
// the request ends while waiting for its turn. Error bodies are one line of
// plain text naming the reason. It panics if f, key or next is nil.
//
// Because next runs inside f.Do, requests for one key are served one at a
// time, in an order in which their tokens never decrease: a stale request
// that passed the check cannot still be running, and writing, after a newer
// holder's request was let in. That is what makes the fence protect the
// handler's effects rather than only its entry, and it is why the token is
// recorded when the request is let in, before next runs, and stays recorded
// whatever next does: a request with token t proves every lower token
// stale. The price is that requests for one key, even from one holder, do
// not run concurrently, and a handler that never returns blocks its key
// (waiters give up when their request context ends). Effects that next
// leaves running after it returns are not ordered.
//
// The fence trusts the header: a client that sends a huge token locks every
// other client out of that key for good. Authenticate clients before this
// handler.
func Middleware(f *Fence, key func(*http.Request) string, next http.Handler) http.Handler {
	if f == nil || key == nil || next == nil {
		panic("fencing: Middleware needs a non-nil Fence, key function and handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := TokenFromRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		err = f.Do(r.Context(), key(r), t, func() error {
			next.ServeHTTP(w, r)
			return nil
		})
		if err == nil {
			return
		}
		code := http.StatusServiceUnavailable
		if errors.Is(err, ErrStaleToken) {
			code = http.StatusConflict
		}
		http.Error(w, err.Error(), code)
	})
}
