// Package redact hides secrets in text meant for people: passwords in Redis
// node URLs, and whole lock tokens. It is the project's one redactor:
// redisnode.Dial and every error, log line and JSON field of redlock-cli go
// through it, so that one set of rules decides what is a secret.
//
// The rules are conservative. A URL need not parse for its password to be
// found: whatever stands between the start of the authority and the last
// "@" of the string is taken for user information (the user name before the
// first ":" is kept unless it holds an "@", the rest hidden), and from the first query parameter
// whose name mentions a password, secret, token or auth, its value and the
// rest of the URL are hidden. The path of a redis:// URL is hidden unless it
// is a database number (a password typed there, redis://host:6379/PASSWORD,
// is no less secret). A malformed URL can thus lose more than its
// password (a host after an "@" in a path, options after a password); it
// never shows any part of one. In free text, every run
// of 32 or more hex digits (a lock token is 32) is cut to its first 8.
package redact

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// Mask replaces each hidden password, in URLs and in text.
const Mask = "xxxxx"

// altMask replaces a secret that Mask itself contains (a password of x's),
// so that replacing it does not recreate it.
const altMask = "*****"

// Hidden replaces a whole message that could not be cleaned with certainty
// (secrets that keep reappearing as they are replaced). It does not happen
// with real passwords.
const Hidden = "(message hidden: it may contain a secret)"

// TokenPrefixLen is how many leading hex digits of a lock token may be
// shown: enough to tell tokens apart, too few to use one.
const TokenPrefixLen = 8

// tokenLen is the length of a lock token in hex digits; any run of this
// many hex digits or more is treated as one.
const tokenLen = 32

// maxRounds bounds the replace-until-stable loop of String.
const maxRounds = 4

// maxLen is the longest text String returns; longer results (a short
// secret repeated throughout a long text) become Hidden.
const maxLen = 1 << 16

// URL returns raw, a Redis node URL as given by a user, with every password
// hidden by Mask: the password of the user information ("redis://:pw@h",
// "redis://user:pw@h", and "rediss://pw@h": a lone user name, which some
// clients take for a password) and query parameters such as password= or
// sentinel_password=. raw need not parse: "redis//:pw@h" and "user:pw@h"
// are handled alike. A raw with nothing to hide is returned unchanged.
func URL(raw string) string {
	sp := spans(raw)
	if len(sp) == 0 {
		return raw
	}
	var b strings.Builder
	last := 0
	for _, s := range sp {
		b.WriteString(raw[last:s.from])
		b.WriteString(Mask)
		last = s.to
	}
	b.WriteString(raw[last:])
	return b.String()
}

// Secrets returns the passwords that URL would hide in each of urls, as
// written and URL-decoded, for String and Error to remove from messages
// that may repeat them. Empty strings are left out.
func Secrets(urls ...string) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, raw := range urls {
		for _, s := range spans(raw) {
			v := raw[s.from:s.to]
			add(v)
			if d, err := url.PathUnescape(v); err == nil {
				add(d)
			}
			if d, err := url.QueryUnescape(v); err == nil {
				add(d)
			}
		}
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				add(pw) // as go-redis sends it
			}
		}
	}
	return out
}

// String returns s with every occurrence of each of secrets replaced by
// Mask, and every run of 32 or more hex digits (a whole lock token, or one
// inside a longer hex string) cut to its first TokenPrefixLen digits and
// "...". It repeats until nothing changes, so that a replacement cannot
// leave a secret behind; if that does not settle, it returns Hidden.
func String(s string, secrets ...string) string {
	secrets = slices.Clone(secrets)
	secrets = slices.DeleteFunc(secrets, func(x string) bool { return x == "" })
	// Longest first: a secret that contains another goes whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for range maxRounds {
		before := s
		for _, sec := range secrets {
			mask := Mask
			if strings.Contains(Mask, sec) {
				mask = altMask
			}
			s = strings.ReplaceAll(s, sec, mask)
		}
		s = hideTokens(s)
		if len(s) > maxLen {
			return Hidden
		}
		if s == before {
			return s
		}
	}
	if hasToken(s) || slices.ContainsFunc(secrets, func(sec string) bool { return strings.Contains(s, sec) }) {
		return Hidden
	}
	return s
}

// Error returns err's message cleaned as String does; "" for a nil err.
func Error(err error, secrets ...string) string {
	if err == nil {
		return ""
	}
	return String(err.Error(), secrets...)
}

// URLError returns the message of err, an error from parsing the node URL
// raw, fit to print next to URL(raw). Parsers quote parts of their input,
// and a part of a malformed password would escape String's whole-password
// match, so when raw holds anything URL would hide, the message is a
// generic hint instead.
func URLError(raw string, err error) string {
	if err == nil {
		return ""
	}
	if len(spans(raw)) > 0 {
		return "malformed URL (want redis://[user:password@]host:port[/db] or rediss://...)"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error repeats the whole URL
	}
	return String(err.Error())
}

// TokenPrefix returns the part of a lock token that may be shown: its
// first TokenPrefixLen characters.
func TokenPrefix(token string) string {
	if len(token) <= TokenPrefixLen {
		return token
	}
	return token[:TokenPrefixLen]
}

// span is a half-open byte range [from, to) of a URL to hide.
type span struct{ from, to int }

// spans returns the sorted, disjoint ranges of raw that URL hides.
func spans(raw string) []span {
	var sp []span
	// User information: from the authority's start (after the first "://"
	// when a scheme precedes it and an "@" follows it, else the start of
	// raw) to the last "@".
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		start := 0
		if i := strings.Index(raw, "://"); i >= 0 && isScheme(raw[:i]) && i+len("://") <= at {
			start = i + len("://")
		}
		from := start
		if colon := strings.IndexByte(raw[start:at], ':'); colon >= 0 && !strings.Contains(raw[start:start+colon], "@") {
			from = start + colon + 1 // keep the user name
		}
		if from < at {
			sp = append(sp, span{from, at})
		}
	}
	// The path of a redis:// or rediss:// URL (not unix://, whose path is
	// the socket's) holds a database number; anything else there may be a
	// password written in the wrong place (redis://host:6379/PASSWORD), so
	// it is hidden up to the query or fragment.
	if p := dbPath(raw); p.from < p.to {
		sp = append(sp, p)
	}
	// Query parameters naming a secret, wherever they are: at every "=",
	// the name runs back to the previous "?" or "&", and the value is
	// hidden to the end of raw: a password may hold an unescaped "&", and
	// what follows it is no less secret.
	for k := 0; k < len(raw); k++ {
		if raw[k] != '=' {
			continue
		}
		name := raw[strings.LastIndexAny(raw[:k], "?&")+1 : k]
		if secretName(name) && k+1 < len(raw) {
			sp = append(sp, span{k + 1, len(raw)})
			break
		}
	}
	return merge(sp)
}

// dbPath returns the range of raw's path after the "/" that ends the
// authority, when raw is a redis URL (its scheme starts with "redis") and
// the path is not a database number; an empty span otherwise.
func dbPath(raw string) span {
	i := strings.Index(raw, "://")
	if i < 0 || !isScheme(raw[:i]) || !strings.HasPrefix(strings.ToLower(raw[:i]), "redis") {
		return span{}
	}
	host := i + len("://")
	if at := strings.LastIndex(raw, "@"); at >= host {
		host = at + 1
	}
	slash := strings.IndexByte(raw[host:], '/')
	if slash < 0 {
		return span{}
	}
	from := host + slash + 1
	to := len(raw)
	if end := strings.IndexAny(raw[from:], "?#"); end >= 0 {
		to = from + end
	}
	if strings.Trim(raw[from:to], "0123456789") == "" {
		return span{} // a database number, or nothing
	}
	return span{from, to}
}

// secretName reports whether a query parameter name (possibly
// percent-encoded, possibly preceded by the rest of a malformed URL) names a
// credential.
func secretName(name string) bool {
	if d, err := url.QueryUnescape(name); err == nil {
		name = d
	}
	name = strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "secret", "token", "auth", "credential"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// merge sorts sp and joins overlapping or touching ranges.
func merge(sp []span) []span {
	if len(sp) < 2 {
		return sp
	}
	slices.SortFunc(sp, func(a, b span) int { return a.from - b.from })
	out := sp[:1]
	for _, s := range sp[1:] {
		last := &out[len(out)-1]
		if s.from <= last.to {
			last.to = max(last.to, s.to)
			continue
		}
		out = append(out, s)
	}
	return out
}

// isScheme reports whether s is a URL scheme: a letter, then letters,
// digits, "+", "-" or ".".
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// isHex reports whether c is a hex digit, in either case.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// hideTokens cuts every run of tokenLen or more hex digits in s to its
// first TokenPrefixLen and "...".
func hideTokens(s string) string {
	if !hasToken(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !isHex(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isHex(s[j]) {
			j++
		}
		if j-i >= tokenLen {
			b.WriteString(s[i : i+TokenPrefixLen])
			b.WriteString("...")
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

// hasToken reports whether s holds a run of tokenLen or more hex digits.
func hasToken(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if isHex(s[i]) {
			if run++; run >= tokenLen {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}
