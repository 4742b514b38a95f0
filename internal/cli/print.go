package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e6344662/go-redlock/internal/redact"
)

// The printers of every command: results go to stdout, as a table or text
// for people or, with --json, as one JSON object per result; errors and
// warnings go to stderr as one "redlock-cli: " line, cleaned by redact.

// report prints a command's result: v as one JSON object with --json,
// else what text prints.
func (a *App) report(v any, text func()) {
	if a.g.json {
		a.emit(v)
		return
	}
	text()
}

// emit writes v as one JSON object on one line of stdout.
func (a *App) emit(v any) {
	enc := json.NewEncoder(a.Stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// printf writes human-readable output to stdout.
func (a *App) printf(format string, args ...any) {
	fmt.Fprintf(a.Stdout, format, args...)
}

// warnf writes a one-line warning to stderr, cleaned by redact.
func (a *App) warnf(format string, args ...any) {
	fmt.Fprintf(a.Stderr, "redlock-cli: %s\n", a.redact(fmt.Sprintf(format, args...)))
}

// redact returns s without the passwords of the node URLs and without any
// whole lock token (see package redact). Every error, warning and error
// field of the JSON output goes through it. Only URLs are masked: each
// node URL as given (however malformed), and every URL-shaped part of s
// (scheme://..., or user:password@host), by redact.URL, which hides their
// user information, password options and non-numeric paths. A password's
// text elsewhere in s is left alone: a password "or" must not turn
// "majority" into "majxxxxxity", and no server or library message quotes a
// password outside its URL.
func (a *App) redact(s string) string {
	for _, raw := range a.g.rawURLs(a.Getenv) {
		if shown := redact.URL(raw); shown != raw {
			s = strings.ReplaceAll(s, raw, shown)
		}
	}
	s = urlShaped.ReplaceAllStringFunc(s, func(u string) string {
		// Punctuation that ends a sentence or a list is not the URL's.
		trimmed := strings.TrimRight(u, ":,;.)")
		return redact.URL(trimmed) + u[len(trimmed):]
	})
	return redact.String(s)
}

// urlShaped matches the parts of a message that may be URLs with a
// secret: a scheme and "://" up to white space or a quote, or
// "word:...@..." (user information without a scheme, or with a mistyped
// one: "redis//:pw@host", "user:pw@host").
var urlShaped = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*:/*[^\s"'<>]*@[^\s"'<>]*|[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+|:[^\s"'<>:@/]+@[^\s"'<>]+`)

// table returns a writer that aligns the tab-separated columns of the
// lines written to it on stdout; Flush it at the end.
func (a *App) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
}

// Formats for people.

// fmtDuration formats d for people: "9.95s", "320ms".
func fmtDuration(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return roundDur(d).String()
}

// roundDur rounds d for display to about three significant digits, and
// to no finer than a microsecond.
func roundDur(d time.Duration) time.Duration {
	abs := max(d, -d)
	switch {
	case abs < time.Millisecond:
		return d.Round(time.Microsecond)
	case abs < 100*time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case abs < 10*time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// wallClock converts an instant on this process's monotonic clock to wall
// time, for printing.
func wallClock(t time.Time) time.Time {
	return time.Now().Add(time.Until(t)).Round(time.Millisecond).UTC()
}

// expiresAt formats the instant a lease valid until until expires, in the
// expires_at field of the JSON output (RFC 3339, UTC).
func expiresAt(until time.Time) string {
	return wallClock(until).Format(time.RFC3339Nano)
}

// ttlMillis is a lock's TTL in the output: milliseconds, or -1 when the
// key has no expiry (the library reports that as a negative TTL, which
// Milliseconds would round to 0).
func ttlMillis(ttl time.Duration) int64 {
	if ttl < 0 {
		return -1
	}
	return ttl.Milliseconds()
}

// ttlText formats a TTL in milliseconds; negative means no expiry.
func ttlText(ms int64) string {
	if ms < 0 {
		return "no expiry"
	}
	return fmtDuration(time.Duration(ms) * time.Millisecond)
}

// plural formats n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
