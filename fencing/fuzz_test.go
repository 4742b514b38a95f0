package fencing_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/e6344662/go-redlock/fencing"
)

// Fuzz tests of every parser of outside input in this package, besides
// FuzzParseToken (parse_test.go): the Fencing-Token header (the fenced
// write script's reply and the fence key's contents are package
// redisfence's). Run one with, for example:
//
//	go test -run='^$' -fuzz='^FuzzTokenFromRequest$' -fuzztime=5s ./fencing/

func FuzzTokenFromRequest(f *testing.F) {
	for _, s := range append(badTokens, "1", "42", "18446744073709551615") {
		f.Add(s, false)
	}
	f.Add("7", true)
	f.Fuzz(func(t *testing.T, header string, repeated bool) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header[fencing.Header] = []string{header}
		if repeated {
			r.Header[fencing.Header] = append(r.Header[fencing.Header], header)
		}
		tok, err := fencing.TokenFromRequest(r)
		if err != nil {
			if !errors.Is(err, fencing.ErrInvalidToken) {
				t.Fatalf("TokenFromRequest(%q): %v does not wrap ErrInvalidToken", header, err)
			}
			if len(err.Error()) > 300 { // quoteShort keeps 40 bytes, each at most 4 when escaped
				t.Fatalf("TokenFromRequest(%q): error of %d bytes; untrusted input must not make errors long", header, len(err.Error()))
			}
			return
		}
		if repeated || tok == 0 || tok.String() != header {
			t.Fatalf("TokenFromRequest(%q, repeated=%t) = %d: only one canonical non-zero token is accepted", header, repeated, tok)
		}
	})
}
