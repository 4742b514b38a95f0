package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/internal/redact"
)

func TestURL(t *testing.T) {
	tests := []struct{ raw, want string }{
		// Nothing to hide.
		{"", ""},
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"rediss://h:6380/2?dial_timeout=1s&db=3", "rediss://h:6380/2?dial_timeout=1s&db=3"},
		{"127.0.0.1:7301", "127.0.0.1:7301"},
		{"redis://u:@h:1", "redis://u:@h:1"},
		{"redis://@h:1", "redis://@h:1"},
		// Well-formed user information.
		{"redis://:pw@h:1", "redis://:xxxxx@h:1"},
		{"redis://user:pw@h:1/0", "redis://user:xxxxx@h:1/0"},
		{"rediss://:pw@h", "rediss://:xxxxx@h"},
		{"rediss://pw@h:1", "rediss://xxxxx@h:1"},
		{"redis://u:p%40ss@h:1", "redis://u:xxxxx@h:1"},
		// Malformed: no "://", unescaped "@", "/", "?", "#" in the password.
		{"redis//:s3cretPW@127.0.0.1:7306", "redis//:xxxxx@127.0.0.1:7306"},
		{"redis:/:pw@h:1", "redis:xxxxx@h:1"},
		{"redis:pw@h:1", "redis:xxxxx@h:1"},
		{"user:pw@h:1", "user:xxxxx@h:1"},
		{":pw@h:1", ":xxxxx@h:1"},
		{"redis://u:p@ss@h:1", "redis://u:xxxxx@h:1"},
		{"redis://u:p/ss@h:1/0", "redis://u:xxxxx@h:1/0"},
		{"redis://u:p?ss@h:1", "redis://u:xxxxx@h:1"},
		{"redis://u:p#ss@h:1", "redis://u:xxxxx@h:1"},
		{"redis://u:p://ss@h", "redis://u:xxxxx@h"},
		{"u:p://ss@h", "u:xxxxx@h"},
		{"u:pw@a://b", "u:xxxxx@a://b"},
		{"redis://:hunter2@[::1", "redis://:xxxxx@[::1"},
		{"redis://u:p w@h:port:x", "redis://u:xxxxx@h:port:x"},
		// An "@" in a path is taken for the end of user information:
		// more is hidden than needed, never less.
		{"redis://h:1/a@b", "redis://h:xxxxx@b"},
		// A path that is not a database number: a password in the wrong
		// place; a Unix socket's path is shown.
		{"redis://host:27211/S3cr3t-pw", "redis://host:27211/xxxxx"},
		{"rediss://u:pw@h:1/S3cr3t?dial_timeout=1s", "rediss://u:xxxxx@h:1/xxxxx?dial_timeout=1s"},
		{"redis+sentinel://h:1/pw#frag", "redis+sentinel://h:1/xxxxx#frag"},
		{"redis://h:1/", "redis://h:1/"},
		{"redis://h:1/15", "redis://h:1/15"},
		{"unix:///run/redis/redis.sock", "unix:///run/redis/redis.sock"},
		{"unix://:pw@/run/redis.sock?db=1", "unix://:xxxxx@/run/redis.sock?db=1"},
		// Query parameters.
		{"redis://h:1?password=pw", "redis://h:1?password=xxxxx"},
		{"redis://h:1?Password=pw&db=1", "redis://h:1?Password=xxxxx"},
		{"redis://h:1?db=1&sentinel_password=pw&dial_timeout=1s", "redis://h:1?db=1&sentinel_password=xxxxx"},
		{"redis://h:1?pass%77ord=pw", "redis://h:1?pass%77ord=xxxxx"},
		{"redis://h:1?password=a?b=c&db=1", "redis://h:1?password=xxxxx"},
		{"redis://h:1?password=a&b", "redis://h:1?password=xxxxx"},
		{"redis://h:1?password=", "redis://h:1?password="},
		{"redis://h:1?client_name=me", "redis://h:1?client_name=me"},
		// Both, overlapping: one mask.
		{"redis://h:1?password=p@ss", "redis://h:xxxxx"},
		{"redis://:mypassword=1@h", "redis://:xxxxx"},
		{"redis://u:pw@h:1?sentinel_password=pw2", "redis://u:xxxxx@h:1?sentinel_password=xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			require.Equal(t, tt.want, redact.URL(tt.raw))
		})
	}
}

func TestSecrets(t *testing.T) {
	require.Empty(t, redact.Secrets("redis://h:1", "127.0.0.1:7301", ""))
	require.Equal(t, []string{"pw"}, redact.Secrets("redis://:pw@h:1"))
	require.Equal(t, []string{"p%40ss", "p@ss"}, redact.Secrets("redis://u:p%40ss@h:1"))
	require.Equal(t, []string{"s3cretPW"}, redact.Secrets("redis//:s3cretPW@127.0.0.1:7306"))
	require.Equal(t, []string{"a", "b+c", "b c"}, redact.Secrets("redis://:a@h:1", "redis://h:2?password=b+c"))
}

func TestString(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"nothing", "connection refused", []string{"pw"}, "connection refused"},
		{"password", "AUTH s3cret failed; s3cret again", []string{"s3cret"}, "AUTH xxxxx failed; xxxxx again"},
		{"longest first", "abcdef", []string{"abc", "abcdef"}, "xxxxx"},
		{"empty secret ignored", "text", []string{""}, "text"},
		{"token", "token " + token + " held", nil, "token 01234567... held"},
		{"upper-case token", "T=" + strings.ToUpper(token) + ".", nil, "T=01234567...."},
		{"token in a longer hex run", "sha 0123456789abcdef0123456789abcdef01234567", nil, "sha 01234567..."},
		{"31 hex digits stay", token[:31], nil, token[:31]},
		{"two tokens", token + " " + token, nil, "01234567... 01234567..."},
		{"secret of mask characters", "key xx here", []string{"xx"}, "key ***** here"},
		{"password hiding a token", "a" + token, []string{"a0"}, "xxxxx123456789abcdef0123456789abcdef"},
		{"masks that recreate secrets", "x*", []string{"x", "*"}, redact.Hidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, redact.String(tt.in, tt.secrets...))
		})
	}
}

func TestError(t *testing.T) {
	require.Equal(t, "", redact.Error(nil, "pw"))
	err := fmt.Errorf("node 10.0.0.1:6379: %w", errors.New("ERR invalid password s3cretPW for token 0123456789abcdef0123456789abcdef"))
	require.Equal(t, "node 10.0.0.1:6379: ERR invalid password xxxxx for token 01234567...", redact.Error(err, redact.Secrets("redis://:s3cretPW@10.0.0.1:6379")...))
}

func TestURLError(t *testing.T) {
	require.Equal(t, "", redact.URLError("redis://h", nil))
	require.Equal(t, `redis: invalid database number: "99999999999999999999"`,
		redact.URLError("redis://h:1/99999999999999999999", errors.New(`redis: invalid database number: "99999999999999999999"`)))
	// A path that is not a number may be a password typed in the wrong place.
	require.NotContains(t, redact.URLError("redis://h:1/S3cr3t-pw", errors.New(`redis: invalid database number: "S3cr3t-pw"`)), "S3cr3t")
	// url.Error repeats the whole URL: only its cause is kept.
	badPort := fmt.Sprintf("redis://h:%s", "port") // not a literal: staticcheck flags invalid URL literals (SA1007)
	_, perr := url.Parse(badPort)
	require.Error(t, perr)
	require.Equal(t, `invalid port ":port" after host`, redact.URLError(badPort, perr))
	// A URL with something to hide gets a hint, whatever the parser said.
	for _, raw := range []string{"redis://:zq/jk@h:1", "redis://h:1?password=zq%zzjk"} {
		msg := redact.URLError(raw, errors.New(`bad "zq" in "jk"`))
		require.Contains(t, msg, "malformed URL")
		require.NotContains(t, msg, "zq")
		require.NotContains(t, msg, "jk")
	}
}

func TestTokenPrefix(t *testing.T) {
	require.Equal(t, "01234567", redact.TokenPrefix("0123456789abcdef0123456789abcdef"))
	require.Equal(t, "0123", redact.TokenPrefix("0123"))
	require.Equal(t, "", redact.TokenPrefix(""))
}
