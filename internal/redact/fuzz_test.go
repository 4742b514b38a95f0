package redact

import (
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
)

// urlForms are the ways a password is written into a node URL, well-formed
// or not; %u, %p and %h stand for the user, the password and the host.
var urlForms = []string{
	"redis://%u:%p@%h",
	"redis://:%p@%h",
	"rediss://%p@%h",
	"rediss://%u:%p@%h/0?dial_timeout=1s",
	"redis//:%p@%h",
	"redis//%u:%p@%h",
	"redis:/:%p@%h",
	"redis:%p@%h",
	"%u:%p@%h",
	":%p@%h",
	"redis://%h?password=%p",
	"redis://%h?db=1&sentinel_password=%p&dial_timeout=1s",
	"redis://%u:%p@%h?sentinel_password=%p",
}

// FuzzURL writes a password into a node URL in each of urlForms, with any
// user, password and host, and checks that every byte of the password is
// hidden by URL, so that the password never appears in its output (except
// where the input repeats it outside the password's place, or where it is
// made of the mask's own characters), and that String with Secrets hides
// it in any text.
//
// Run with: go test -run='^$' -fuzz='^FuzzURL$' -fuzztime=30s ./internal/redact/
func FuzzURL(f *testing.F) {
	for form := range urlForms {
		f.Add(uint8(form), "user", "s3cretPW", "127.0.0.1:7306")
		f.Add(uint8(form), "", "p@ss/w?rd#&x=1", "h:1")
		f.Add(uint8(form), "u:v", "a:b", "[::1]:6379")
	}
	f.Add(uint8(0), "u@v", "pw", "h@x/y?password=q")
	f.Fuzz(func(t *testing.T, form uint8, user, pw, host string) {
		tmpl := urlForms[int(form)%len(urlForms)]
		if strings.HasPrefix(tmpl, "rediss://%p@") && strings.Contains(pw, ":") {
			return // "a:b" there is user a, password b: nothing tells them apart
		}
		// Build the URL, noting where the password's copies are.
		var raw strings.Builder
		var slots []int
		for i := 0; i < len(tmpl); i++ {
			if tmpl[i] != '%' {
				raw.WriteByte(tmpl[i])
				continue
			}
			i++
			switch tmpl[i] {
			case 'u':
				raw.WriteString(user)
			case 'p':
				slots = append(slots, raw.Len())
				raw.WriteString(pw)
			case 'h':
				raw.WriteString(host)
			}
		}
		s := raw.String()

		if i := strings.Index(s, "://"); i >= 0 {
			for _, at := range slots {
				if i < at+len(pw) && at < i+len("://") {
					return // the password makes the scheme's "://": no longer a password
				}
			}
		}

		// Every byte of every copy of the password is inside a hidden span.
		sp := spans(s)
		for _, at := range slots {
			for i := at; i < at+len(pw); i++ {
				if !covered(sp, i) {
					t.Fatalf("URL(%q) = %q: byte %d of the password %q is not hidden", s, URL(s), i-at, pw)
				}
			}
		}

		// Hence the output does not show it, unless it stands elsewhere
		// in the input too, or a mask could spell it.
		out := URL(s)
		if pw != "" && strings.Count(s, pw) == len(slots) && !strings.ContainsRune(pw, 'x') && strings.Contains(out, pw) {
			t.Fatalf("URL(%q) = %q shows the password %q", s, out, pw)
		}
		if strings.Count(s, "@") == 0 && !strings.Contains(s, "=") && out != s {
			t.Fatalf("URL(%q) = %q: changed a URL with nothing to hide", s, out)
		}

		// Whatever the password go-redis would send, Secrets holds it.
		secrets := Secrets(s)
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" && !contains(secrets, p) {
				t.Fatalf("Secrets(%q) = %q misses the parsed password %q", s, secrets, p)
			}
		}
		// And String removes each from any text.
		for _, sec := range secrets {
			msg := String("ERR "+sec+" and "+sec+".", secrets...)
			if strings.Contains(msg, sec) && !strings.Contains(Hidden, sec) {
				t.Fatalf("String(...%q..., Secrets(%q)) = %q still shows it", sec, s, msg)
			}
		}
	})
}

// FuzzError puts a password and a lock token into any error text and
// checks that Error's output holds neither, nor any whole token.
//
// Run with: go test -run='^$' -fuzz='^FuzzError$' -fuzztime=30s ./internal/redact/
func FuzzError(f *testing.F) {
	f.Add("node 10.0.0.1:6379: WRONGPASS invalid username-password pair", "s3cretPW", []byte("0123456789abcdef"), uint16(5), uint16(40))
	f.Add("acquire \"r\": token held on 0 of 3 nodes", "x", []byte("\x00\x01"), uint16(0), uint16(0))
	f.Add("abc", "xxxxx", []byte("0123456789abcdef"), uint16(1), uint16(2))
	f.Add("deadbeef", "*", []byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0"), uint16(8), uint16(3))
	f.Fuzz(func(t *testing.T, msg, pw string, tok []byte, atPW, atTok uint16) {
		token := hex.EncodeToString(tok)
		insert := func(s, ins string, at uint16) string {
			i := int(at) % (len(s) + 1)
			return s[:i] + ins + s[i:]
		}
		text := insert(insert(msg, pw, atPW), token, atTok)
		out := Error(errors.New(text), pw)
		if pw != "" && strings.Contains(out, pw) && !strings.Contains(Hidden, pw) {
			t.Fatalf("Error(%q, %q) = %q shows the password", text, pw, out)
		}
		if hasToken(out) {
			t.Fatalf("Error(%q) = %q holds a whole token", text, out)
		}
		if len(token) >= tokenLen && strings.Contains(out, token) {
			t.Fatalf("Error(%q) = %q holds the token %q", text, out, token)
		}
		if pw == "" && !hasToken(text) && out != text {
			t.Fatalf("Error(%q) = %q: changed a text with nothing to hide", text, out)
		}
	})
}

func covered(sp []span, i int) bool {
	for _, s := range sp {
		if s.from <= i && i < s.to {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
