package scripts_test

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"

	"github.com/e6344662/go-redlock/scripts"
)

// TestScripts: every script has its own name and source, and its Hash is
// the SHA1 of its source, as EVALSHA names it.
func TestScripts(t *testing.T) {
	names := map[string]bool{}
	for _, s := range scripts.All {
		if s.Name() == "" || s.String() != s.Name() || names[s.Name()] {
			t.Errorf("script %q: empty, misnamed or named twice", s.Name())
		}
		names[s.Name()] = true
		sum := sha1.Sum([]byte(s.Source()))
		if want := hex.EncodeToString(sum[:]); s.Hash() != want {
			t.Errorf("%s: Hash %s, want %s", s.Name(), s.Hash(), want)
		}
	}
	if len(names) != 13 {
		t.Errorf("%d scripts, want 13", len(names))
	}
	s := scripts.New("incr", "return redis.call('INCR', KEYS[1])")
	if s.Name() != "incr" || s.Source() != "return redis.call('INCR', KEYS[1])" || len(s.Hash()) != 40 {
		t.Errorf("New: %q %q %q", s.Name(), s.Source(), s.Hash())
	}
	for _, g := range []*scripts.Script{scripts.Acquire, scripts.AcquireAll, scripts.RWWrite, scripts.RWRead} {
		if !scripts.Grants(g) {
			t.Errorf("Grants(%s) = false", g)
		}
	}
	if scripts.Grants(scripts.Release) || scripts.Grants(s) {
		t.Error("Grants of a script that grants nothing")
	}
}
