package scripts

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// Library is a set of scripts as one Redis Function library (Redis 7 and
// later): loaded once per server with FUNCTION LOAD, each script is then
// run with FCALL by its function's name, and the helpers the scripts share
// are defined once, when the library loads, instead of at every EVAL. Each
// function runs its script's own code exactly as EVAL runs it: KEYS and
// ARGV are the function's keys and arguments, and every one-line "local"
// helper value (a constant, or state such as counter.lua's c_mark) is set
// again to its first value at the start of each call, so no call sees
// what an earlier one left. The functions are registered without flags: a
// server refuses a call up front where EVAL would refuse the script's
// first write (a read-only replica, out of memory, ...), and a transport
// then runs that call with EVALSHA (redlock/redisnode).
//
// The library's name carries a digest of its text (Name): two versions of
// the scripts load side by side, so clients of both can share a server
// during a rolling upgrade, and a library is loaded without REPLACE. Under
// the build tag redlock_checkkeys each function holds its script's whole
// source, the KEYS check in front, so that every call is checked.
// A Library is built once and safe to share.
type Library struct {
	name  string
	src   string
	funcs map[*Script]string
}

// Functions is the library of every script in All.
var Functions = mustLibrary(All)

func mustLibrary(all []*Script) *Library {
	l, err := NewLibrary(all)
	if err != nil {
		panic("scripts: " + err.Error())
	}
	return l
}

// libNamePlaceholder stands for the library's name in its text while its
// digest is taken.
const libNamePlaceholder = "redlock_LIBRARY"

// NewLibrary builds the library of scripts, which must be this package's
// (built from its helper files): it fails for a script whose source it
// cannot split into the helpers and the script's own code, and for two
// scripts of one name.
func NewLibrary(scripts []*Script) (*Library, error) {
	type entry struct {
		s    *Script
		body string // the script's own code, or its whole source (keyCheck)
	}
	entries := make([]entry, 0, len(scripts))
	seen := map[string]bool{}
	var bodies strings.Builder
	for _, s := range scripts {
		if seen[s.name] || !validFuncName(s.name) {
			return nil, fmt.Errorf("library: script name %q is empty, not [A-Za-z0-9_] or given twice", s.name)
		}
		seen[s.name] = true
		body, err := ownCode(s)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{s, body})
		bodies.WriteString(body + "\n")
	}
	var b strings.Builder
	b.WriteString("#!lua name=" + libNamePlaceholder + "\n")
	b.WriteString("-- go-redlock's scripts as one function library (scripts/library.go):\n" +
		"-- the helpers are defined once; each function sets KEYS, ARGV and the\n" +
		"-- helpers' one-line values afresh, then runs its script's own code.\n")
	if keyCheck == "" {
		b.WriteString("local KEYS, ARGV\n\n")
		// the helpers any script needs, in their order
		b.WriteString(strings.TrimSuffix(assemble(helpers, bodies.String()), bodies.String()))
	}
	for _, e := range entries {
		fmt.Fprintf(&b, "\nredis.register_function{function_name = '%s_%s', callback = function(keys, args)\n",
			libNamePlaceholder, e.s.name)
		if keyCheck != "" {
			b.WriteString("local KEYS, ARGV = keys, args\n")
		} else {
			b.WriteString("KEYS, ARGV = keys, args\n")
			for _, line := range resets(helpers, e.body) {
				b.WriteString(line + "\n")
			}
		}
		b.WriteString(e.body)
		if !strings.HasSuffix(e.body, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("end}\n")
	}
	text := b.String()
	sum := sha1.Sum([]byte(text))
	name := "redlock_" + hex.EncodeToString(sum[:6])
	l := &Library{name: name, src: strings.ReplaceAll(text, libNamePlaceholder, name), funcs: map[*Script]string{}}
	for _, e := range entries {
		l.funcs[e.s] = name + "_" + e.s.name
	}
	return l, nil
}

// validFuncName reports whether s can name a function: Redis allows
// letters, digits and underscores.
func validFuncName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// ownCode is the code of s that goes into its function: under the build
// tag redlock_checkkeys its whole source (the KEYS check shadows redis
// and pcall for the helpers too), else its own file's code (newScript
// keeps it). A script made with New has none.
func ownCode(s *Script) (string, error) {
	if s.body == "" {
		return "", fmt.Errorf("library: %s is not one of this package's scripts (made with New)", s.name)
	}
	if keyCheck != "" {
		return s.src, nil
	}
	return s.body, nil
}

// resets are the assignments that give the one-line helper values body
// uses (directly or through the helpers it uses) their first values, one
// per line in the helpers' order: at the start of a call, as EVAL would
// define them.
func resets(helpers []unit, body string) []string {
	need := identifiers(body)
	for i := len(helpers) - 1; i >= 0; i-- { // a unit names only earlier ones
		if need[helpers[i].name] {
			for id := range helpers[i].uses {
				need[id] = true
			}
		}
	}
	var out []string
	for _, u := range helpers {
		if !need[u.name] {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(u.text, "\n"), "\n")
		code := lines[len(lines)-1]
		if unitConst.MatchString(code) {
			out = append(out, strings.TrimPrefix(code, "local "))
		}
	}
	return out
}

// Name is the library's name: "redlock_" and the first 12 hex digits of
// the SHA1 digest of its text, as FUNCTION LOAD registers it.
func (l *Library) Name() string { return l.name }

// Source is the library's code, as FUNCTION LOAD takes it (a "#!lua
// name=..." line first).
func (l *Library) Source() string { return l.src }

// Function returns the name of s's function in the library, for FCALL,
// and false when s is not one of its scripts (such as a script made with
// New).
func (l *Library) Function(s *Script) (string, bool) {
	name, ok := l.funcs[s]
	return name, ok
}
