package testutil_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

// TestLockerACLAllowsEveryScriptCommand: every command a lock script calls
// is allowed by LockerACL (and so by docs/security.md's user), and LockerACL
// allows no script command that no script calls. A command the ACL refuses
// inside a script that uses pcall is not seen by the caller: a missing
// +select once left the one-marker rule undone without an error.
func TestLockerACLAllowsEveryScriptCommand(t *testing.T) {
	called := regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)
	used := map[string]bool{}
	for _, s := range scripts.All {
		if s == scripts.FencedWrite { // the resource side's script: StoreACL
			continue
		}
		for _, m := range called.FindAllStringSubmatch(s.Source(), -1) {
			used[strings.ToLower(m[1])] = true
		}
	}
	require.NotEmpty(t, used)
	acl := testutil.LockerACL("redlock:")
	for cmd := range used {
		require.Contains(t, acl, "+"+cmd, "a script calls %s", strings.ToUpper(cmd))
	}
	client := []string{"+fcall", "+evalsha", "+eval", "+subscribe", "+unsubscribe", "+ping", "+info"}
	for _, r := range acl {
		if strings.HasPrefix(r, "+") && !slices.Contains(client, r) {
			require.True(t, used[r[1:]], "LockerACL allows %s, which no script calls", r)
		}
	}
}

// TestSecurityDocGivesTheACLs: docs/security.md's ACL SETUSER lines for
// the Locker's user and for redisfence.Store's user are LockerACL's and
// StoreACL's rules, so the documented users run every script they need.
func TestSecurityDocGivesTheACLs(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	require.NoError(t, err)
	for user, acl := range map[string][]string{
		"redlock": testutil.LockerACL("redlock:"),
		"writer":  testutil.StoreACL("fencing:"),
	} {
		want := "ACL SETUSER " + user + " " + acl[0] + " on >CHANGE-ME " + strings.Join(acl[1:], " ")
		require.Contains(t, string(doc), want+"\n", "the user %s", user)
	}
}

// TestMinimalACLsGiveNoFunctionLoad: neither minimal user may load a
// function library (FUNCTION LOAD, or all of FUNCTION): whoever may can
// replace the code every user's FCALL of the scripts' library runs
// (docs/security.md). The Store's user has no FCALL either; it never sends
// one.
func TestMinimalACLsGiveNoFunctionLoad(t *testing.T) {
	for _, acl := range [][]string{testutil.LockerACL("redlock:"), testutil.StoreACL("fencing:")} {
		for _, r := range acl {
			require.False(t, strings.HasPrefix(r, "+function") || r == "+@scripting" || r == "+@all", "rule %s", r)
		}
	}
	require.NotContains(t, testutil.StoreACL("fencing:"), "+fcall")
}
