package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

// runInProcess runs the command line in this process with env as the whole
// environment, and returns the exit code, stdout and stderr.
func runInProcess(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &App{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := a.Execute(ctx, args)
	return code, stdout.String(), stderr.String()
}

// requireOneLine checks that stderr is exactly one "redlock-cli: " line
// containing want.
func requireOneLine(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.Len(t, lines, 1, "stderr: %q", stderr)
	require.True(t, strings.HasPrefix(lines[0], "redlock-cli: "), "stderr: %q", stderr)
	require.Contains(t, lines[0], want)
	require.NotContains(t, stderr, "goroutine ")
}

// TestUsageErrors covers every input rejected before any network traffic:
// each exits 2 with one line on stderr.
func TestUsageErrors(t *testing.T) {
	const node = "redis://127.0.0.1:1"
	const tok = "0123456789abcdef0123456789abcdef"
	nodes := map[string]string{envNodes: node}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no nodes", nil, []string{"acquire", "r"}, "no nodes"},
		{"empty env nodes", map[string]string{envNodes: " , "}, []string{"status", "r"}, "no nodes"},
		{"no nodes doctor", nil, []string{"doctor"}, "no nodes"},
		{"malformed URL", nil, []string{"--nodes", "redis://host:port:x", "acquire", "r"}, "malformed node URL"},
		{"wrong scheme", nil, []string{"--nodes", "http://127.0.0.1:6379", "acquire", "r"}, "scheme must be redis:// or rediss://"},
		{"no host", nil, []string{"--nodes", "redis://", "acquire", "r"}, "no host"},
		{"bad URL in env", map[string]string{envNodes: node + ",localhost:6379"}, []string{"acquire", "r"}, "malformed node URL localhost:6379: missing redis:// scheme"},
		{"no scheme", nil, []string{"--nodes", "127.0.0.1:7301", "status", "r"}, "malformed node URL 127.0.0.1:7301: missing redis:// scheme"},
		{"no scheme doctor", nil, []string{"--nodes", "127.0.0.1:7301", "doctor"}, "missing redis:// scheme"},
		{"unknown flag", nodes, []string{"acquire", "r", "--bogus"}, "unknown flag: --bogus"},
		{"unknown command", nodes, []string{"aquire", "r"}, `unknown command "aquire"`},
		{"negative ttl", nodes, []string{"acquire", "r", "--ttl", "-1s"}, "--ttl must be a positive duration"},
		{"zero ttl", nodes, []string{"acquire", "r", "--ttl", "0"}, "--ttl must be a positive duration"},
		{"ttl not a duration", nodes, []string{"acquire", "r", "--ttl", "ten"}, `invalid argument "ten" for "--ttl"`},
		{"ttl below minimum", nodes, []string{"acquire", "r", "--ttl", "1ms"}, "below the minimum"},
		{"zero timeout", nodes, []string{"acquire", "r", "--timeout", "0s"}, "--timeout must be a positive duration"},
		{"negative timeout", nodes, []string{"status", "r", "--timeout", "-5ms"}, "--timeout must be a positive duration"},
		{"timeout over ttl", nodes, []string{"acquire", "r", "--ttl", "1s", "--timeout", "2s"}, "must be shorter than --ttl"},
		{"rejoin delay below ttl", nodes, []string{"acquire", "r", "--ttl", "30s", "--rejoin-delay", "1s"}, "--rejoin-delay 1s is shorter than --ttl 30s: a node that lost data would grant again while a lease taken with this --ttl may still be valid; set --rejoin-delay to at least the longest --ttl of every client of these nodes, or 0 to turn the wait off"},
		{"rejoin delay below default ttl", nodes, []string{"run", "r", "--rejoin-delay", "9s", "--", "true"}, "--rejoin-delay 9s is shorter than --ttl 10s"},
		{"rejoin delay below ttl doctor", nodes, []string{"doctor", "--ttl", "2s", "--rejoin-delay", "1999ms"}, "--rejoin-delay 1.999s is shorter than --ttl 2s"},
		{"negative rejoin delay", nodes, []string{"acquire", "r", "--rejoin-delay", "-1s"}, "--rejoin-delay must be 0 (off) or a positive duration"},
		{"zero wait", nodes, []string{"acquire", "r", "--wait", "0s"}, "--wait must be a positive duration"},
		{"negative wait", nodes, []string{"run", "r", "--wait", "-1s", "--", "true"}, "--wait must be a positive duration"},
		{"zero kill-after", nodes, []string{"run", "r", "--kill-after", "0s", "--", "true"}, "--kill-after must be a positive duration"},
		{"empty resource", nodes, []string{"acquire", ""}, "empty resource name"},
		{"long resource", nodes, []string{"status", strings.Repeat("x", 1025)}, "over the limit of 1024"},
		{"empty resource run", nodes, []string{"run", "", "--", "true"}, "empty resource name"},
		{"no resource", nodes, []string{"acquire"}, "acquire takes RESOURCE, got 0 arguments"},
		{"two resources", nodes, []string{"status", "a", "b"}, "status takes RESOURCE, got 2 arguments"},
		{"missing token", nodes, []string{"release", "r"}, "--token is required"},
		{"malformed token", nodes, []string{"renew", "r", "--token", "xyz"}, "--token must be 32 hex digits"},
		{"short token", nodes, []string{"release", "r", "--token", tok[:30]}, "--token must be 32 hex digits"},
		{"run without command", nodes, []string{"run", "r", "--"}, "no COMMAND"},
		{"run without resource", nodes, []string{"run", "--", "true"}, "no RESOURCE"},
		{"run a resource twice", nodes, []string{"run", "a", "b", "a", "--", "true"}, `"a" given twice`},
		{"doctor args", nodes, []string{"doctor", "x"}, "doctor takes no arguments"},
		{"doctor URL arg", nodes, []string{"doctor", "redis://:s3cretpw@h:1"}, `doctor takes no arguments, got ["redis://:xxxxx@h:1"]`},
		{"empty prefix", nodes, []string{"status", "r", "--prefix", ""}, "--prefix must not be empty"},
		{"newline in resource", nodes, []string{"acquire", "a\nb"}, `resource name "a\nb" holds a control character ("\n" at byte 1)`},
		{"newline in run resource", nodes, []string{"run", "x", "a\rb", "--", "true"}, `("\r" at byte 1)`},
		{"tab in status resource", nodes, []string{"status", "\tjob"}, `("\t" at byte 0)`},
		{"acquire --shared", nodes, []string{"acquire", "doc", "--shared"}, "acquire --shared is not supported: a reader's lease cannot be renewed or released by its token from another process; hold a shared lock over several steps with: redlock-cli run --shared doc -- sh -c"},
		{"acquire -n 0", nodes, []string{"acquire", "pool", "-n", "0"}, "-n must be between 1 and"},
		{"long owner", nodes, []string{"acquire", "r", "--owner", strings.Repeat("o", 257)}, "--owner is 257 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runInProcess(t, tt.env, tt.args...)
			require.Equal(t, exitUsage, code, "stderr: %s", stderr)
			require.Empty(t, stdout)
			requireOneLine(t, stderr, tt.want)
		})
	}
}

// TestUsageErrorJSON checks the JSON error object on stdout.
func TestUsageErrorJSON(t *testing.T) {
	code, stdout, stderr := runInProcess(t, nil, "acquire", "r", "--json")
	require.Equal(t, exitUsage, code)
	requireOneLine(t, stderr, "no nodes")
	require.JSONEq(t, `{"error":"usage","exit_code":2,"message":"no nodes: set --nodes or REDLOCK_NODES to redis:// URLs"}`, stdout)
}

// TestPasswordNeverEchoed checks that a password in a rejected URL does
// not appear in the message.
func TestPasswordNeverEchoed(t *testing.T) {
	for _, u := range []string{
		"redis://user:s3cretpw@host:port:x",
		"redis://:s3cretpw@host:99999999",
		"http://user:s3cretpw@host",
		"redis://:s3cretpw@127.0.0.1:6379/notadb",
		"redis://us er:s3cretpw@ho st",
		"redis//:s3cretpw@127.0.0.1:7306",
		"redis:/:s3cretpw@127.0.0.1:7306",
		"s3cretpw@127.0.0.1:7306",
		"redis://127.0.0.1:7306?password=s3cretpw",
		"redis://127.0.0.1:7306?db=0&sentinel_password=s3cretpw",
		"redis://u:s3cret%pw@127.0.0.1:7306",
		"redis://127.0.0.1:7306/s3cretpw",
		"redis://:s3cret#pw@127.0.0.1:7306",
	} {
		t.Run(u, func(t *testing.T) {
			for _, cmd := range [][]string{{"acquire", "r"}, {"doctor"}} {
				code, stdout, stderr := runInProcess(t, map[string]string{envNodes: u}, cmd...)
				require.Equal(t, exitUsage, code, "stderr: %s", stderr)
				requireOneLine(t, stderr, "node URL")
				require.NotContains(t, stderr+stdout, "s3cretpw")
			}
		})
	}
}

// TestNodeURLs: node URLs from --nodes, or else from REDLOCK_NODES.
func TestNodeURLs(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == envNodes {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name  string
		flags []string
		env   string
		want  []string
	}{
		{"env commas", nil, "redis://a:1,redis://b:2", []string{"redis://a:1", "redis://b:2"}},
		{"env spaces and empties", nil, " redis://a:1 , ,redis://b:2,", []string{"redis://a:1", "redis://b:2"}},
		{"flag list", []string{"redis://a:1,rediss://b:2"}, "redis://ignored:3", []string{"redis://a:1", "rediss://b:2"}},
		{"flag repeated", []string{"redis://a:1", "redis://b:2"}, "", []string{"redis://a:1", "redis://b:2"}},
		{"with password", []string{"redis://:pw@a:1/2"}, "", []string{"redis://:pw@a:1/2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := globals{nodes: tt.flags}
			got, err := g.nodeURLs(env(tt.env))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestCheckURL: what each malformed node URL is told, with the URL shown
// through redact.URL.
func TestCheckURL(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"redis://127.0.0.1:6379", ""},
		{"rediss://u:pw@h:6380/2?dial_timeout=1s", ""},
		{"127.0.0.1:7301", "malformed node URL 127.0.0.1:7301: missing redis:// scheme"},
		{"localhost", "malformed node URL localhost: missing redis:// scheme"},
		{"://h:1", "malformed node URL ://h:1: missing redis:// scheme"},
		{"redis//:s3cretPW@127.0.0.1:7306", "malformed node URL redis//:xxxxx@127.0.0.1:7306: missing redis:// scheme"},
		{"redis:/h:1", "missing redis:// scheme"},
		{"http://h:1", "scheme must be redis:// or rediss://"},
		{"redis://", "no host"},
		{"redis://h:99999", "port 99999 out of range"},
		{"redis://h :1", "malformed node URL"},
		// Every kind of node nodeurl parses, and its own reasons.
		{"unix:///run/redis.sock?db=1", ""},
		{"redis+cluster://u:pw@h:7000?addr=h2:7000&addr=h3:7000", ""},
		{"rediss+cluster://h:7000", ""},
		{"redis+sentinel://h:26379?master_name=locks&addr=h2:26379&password=pw", ""},
		{"rediss+sentinel://h:26379?master_name=locks", ""},
		{"redis+sentinel://:s3cretPW@h:26379?addr=h2:26379", "no master_name"},
		{"redis+cluster://h:7000?addr=h2:99999", "port 99999 out of range"},
		{"redis+cluster://:s3cretPW@h:1?bogus=1", "malformed node URL redis+cluster://:xxxxx@h:1?bogus=1: redis: unexpected option: bogus"},
		{"unix+cluster://h:1", "scheme must be redis:// or rediss://"},
		{"redis+cluster://", "no host"},
		// A password in the path: never shown, and told where it goes.
		{"redis://:s3cretPW@h:1/db", "malformed node URL redis://:xxxxx@h:1/xxxxx: the path must be a database number such as /0 (a password goes before the host: redis://:PASSWORD@host:port)"},
		{"redis://host:27211/s3cretPW", "malformed node URL redis://host:27211/xxxxx: the path must be a database number"},
		{"rediss://host:27211/s3cretPW?dial_timeout=1s", "malformed node URL rediss://host:27211/xxxxx?dial_timeout=1s: the path must be a database number"},
		{"redis://h:1/", ""},
		{"redis://h:1/15", ""},
		// A #, / or ? in a password must be percent-encoded.
		{"redis://:s3cret#PW@h:1", "malformed node URL redis://:xxxxx@h:1: the password (or user) holds a #, / or ? that is not percent-encoded: write # as %23, / as %2F and ? as %3F"},
		{"redis://u:s3cret/PW@h:1/0", "not percent-encoded"},
		{"rediss://u:s3cret?PW@h:1", "not percent-encoded"},
		{"redis+cluster://:s3cret#PW@h:7000", "not percent-encoded"},
		{"redis://:s3cret%23PW@h:1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			err := checkURL(tt.raw)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, exitUsage, classify(err).code)
			require.NotContains(t, err.Error(), "s3cretPW")
		})
	}
}

// TestRawURLsOfFlags: the node URLs of --nodes, or else of
// REDLOCK_NODES, as given, whether or not they are well-formed.
func TestRawURLsOfFlags(t *testing.T) {
	env := func(k string) string {
		if k == envNodes {
			return "redis://:envpw@h:1, redis//:envpw2@h:2,"
		}
		return ""
	}
	require.Equal(t, []string{"redis://:envpw@h:1", "redis//:envpw2@h:2"}, (&globals{}).rawURLs(env))
	g := globals{nodes: []string{"redis://u:flagpw@h:1", "127.0.0.1:7301"}}
	require.Equal(t, []string{"redis://u:flagpw@h:1", "127.0.0.1:7301"}, g.rawURLs(env))
}

// TestRedactMasksURLsOnly: a message is cleaned of the node URLs'
// passwords where it quotes a URL, and only there: a short password ("or")
// does not garble the words that contain it.
func TestRedactMasksURLsOnly(t *testing.T) {
	a := &App{g: globals{nodes: []string{"redis://:or@127.0.0.1:7301,user:or@127.0.0.1:7302"}}}
	tests := []struct{ in, want string }{
		{"cannot reach a majority of the nodes: 1 of 3 answered, the password or user", "cannot reach a majority of the nodes: 1 of 3 answered, the password or user"},
		{`malformed node URL redis://:or@127.0.0.1:7301: bad`, `malformed node URL redis://:xxxxx@127.0.0.1:7301: bad`},
		{`parse "user:or@127.0.0.1:7302": first path segment`, `parse "user:xxxxx@127.0.0.1:7302": first path segment`},
		{"dial redis://u:other@h:1?password=or failed", "dial redis://u:xxxxx@h:1?password=xxxxx failed"},
		{"token 0123456789abcdef0123456789abcdef", "token 01234567..."},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, a.redact(tt.in))
	}
}

// TestGlobalsDefaults: the call timeout in effect, from --ttl and
// --timeout.
func TestGlobalsDefaults(t *testing.T) {
	g := globals{ttl: 10 * time.Second}
	require.Equal(t, 3333333333*time.Nanosecond, g.callTimeout())
	g = globals{ttl: time.Minute}
	require.Equal(t, 5*time.Second, g.callTimeout())
	g.timeout = 200 * time.Millisecond
	require.Equal(t, 200*time.Millisecond, g.callTimeout())
	require.Equal(t, 200*time.Millisecond, g.config().NodeCallTimeout)
	require.False(t, g.config().DisableHandOver, "a release hands the lock over by default")
	g.noHand = true
	require.True(t, g.config().DisableHandOver)
}

// TestRejoinDelayFlag: --rejoin-delay at or above --ttl is taken as given,
// 0 turns the wait off, unset is the ttl; the Config each makes passes New
// (whose check a shorter delay would fail: validate refuses it first, see
// TestUsageErrors).
func TestRejoinDelayFlag(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		want   time.Duration // rejoinDelay()
		config time.Duration // config().RejoinDelay
	}{
		{"unset", []string{"--ttl", "30s"}, 30 * time.Second, 0},
		{"equal to the ttl", []string{"--ttl", "30s", "--rejoin-delay", "30s"}, 30 * time.Second, 30 * time.Second},
		{"longer than the ttl", []string{"--ttl", "30s", "--rejoin-delay", "1m"}, time.Minute, time.Minute},
		{"off", []string{"--ttl", "30s", "--rejoin-delay", "0"}, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g globals
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			g.register(fs)
			require.NoError(t, fs.Parse(tt.args))
			require.NoError(t, g.validate(fs))
			require.Equal(t, tt.want, g.rejoinDelay())
			cfg := g.config()
			require.Equal(t, tt.config, cfg.RejoinDelay)
			l, err := redlock.New(testutil.NewMiniCluster(t, 3).Nodes(), cfg)
			require.NoError(t, err)
			require.NoError(t, l.Close())
		})
	}
}

// TestCheckToken: a token is 32 hex digits.
func TestCheckToken(t *testing.T) {
	require.NoError(t, checkToken("0123456789abcdef0123456789ABCDEF"))
	for _, bad := range []string{"", "0123", "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef0"} {
		require.Error(t, checkToken(bad), bad)
	}
}

// TestHelpDocumentsExitCodes checks the exit-code table in --help.
func TestHelpDocumentsExitCodes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"acquire", "--help"}} {
		code, stdout, _ := runInProcess(t, nil, args...)
		require.Equal(t, exitOK, code)
		require.Contains(t, stdout, "Exit codes:")
		for _, line := range []string{"2      usage error", "3      cannot reach a majority", "4      lock busy", "5      token does not hold", "6      run: the lease was lost", "7      access denied", "128+N  interrupted"} {
			require.Contains(t, stdout, line)
		}
	}
	code, stdout, _ := runInProcess(t, nil, "--help")
	require.Equal(t, exitOK, code)
	for _, c := range []string{"acquire", "renew", "release", "status", "run", "doctor", "demo", "completion"} {
		require.Contains(t, stdout, "  "+c+" ")
	}
}

// TestParseErrorJSON: errors cobra finds still give the JSON object when
// --json is on the command line.
func TestParseErrorJSON(t *testing.T) {
	code, stdout, stderr := runInProcess(t, nil, "status", "--bogus", "--json", "r")
	require.Equal(t, exitUsage, code)
	requireOneLine(t, stderr, "unknown flag: --bogus")
	require.JSONEq(t, `{"error":"usage","exit_code":2,"message":"unknown flag: --bogus"}`, stdout)
	code, stdout, _ = runInProcess(t, nil, "run", "r", "--bogus", "--", "cmd", "--json")
	require.Equal(t, exitUsage, code)
	require.Empty(t, stdout)
}

// TestNoCommand: redlock-cli without a command (with --json or not) prints
// its usage on stderr and exits 2, with the JSON error object under
// --json; --help alone prints the help on stdout and exits 0.
func TestNoCommand(t *testing.T) {
	tests := []struct {
		name string
		args []string
		json bool
	}{
		{"nothing", nil, false},
		{"json", []string{"--json"}, true},
		{"json and a global flag", []string{"--json", "--ttl", "5s"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runInProcess(t, nil, tt.args...)
			require.Equal(t, exitUsage, code)
			require.Contains(t, stderr, "Usage:")
			require.True(t, strings.HasSuffix(stderr, "redlock-cli: no command given (see 'redlock-cli --help')\n"), "stderr: %s", stderr)
			if tt.json {
				require.JSONEq(t, `{"error":"usage","exit_code":2,"message":"no command given"}`, stdout)
			} else {
				require.Empty(t, stdout)
			}
		})
	}
	code, stdout, stderr := runInProcess(t, nil, "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "Usage:")
	require.Empty(t, stderr)

	code, _, stderr = runInProcess(t, nil, "aquire", "r")
	require.Equal(t, exitUsage, code)
	requireOneLine(t, stderr, `unknown command "aquire" for "redlock-cli"; did you mean acquire?`)
}
