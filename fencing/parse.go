package fencing

import (
	"fmt"
	"strconv"
)

// ParseToken parses the canonical decimal form of a token, the form
// Token.String writes: ASCII digits only, no sign, spaces or leading zeros,
// at most 18446744073709551615. Zero is rejected, as redlock never issues
// it. Errors wrap ErrInvalidToken. For every token t > 0,
// ParseToken(t.String()) returns t.
func ParseToken(s string) (Token, error) {
	t, reason := parseToken(s)
	if reason != "" {
		return 0, fmt.Errorf("%w %s: %s", ErrInvalidToken, quoteShort(s), reason)
	}
	return t, nil
}

// parseToken is ParseToken without the error value: it returns the token,
// or a non-empty reason why s is not one.
func parseToken(s string) (Token, string) {
	t, reason := parseDecimal(s)
	if reason == "" && t == 0 {
		return 0, "redlock never issues token 0"
	}
	return t, reason
}

// parseDecimal parses a canonical unsigned decimal (zero allowed) and
// returns it, or a non-empty reason why s is not one.
func parseDecimal(s string) (Token, string) {
	if s == "" {
		return 0, "empty"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, "not a decimal number (digits only, no sign or spaces)"
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, "leading zero"
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil { // only digits, so only a range error is possible
		return 0, "exceeds 18446744073709551615"
	}
	return Token(n), ""
}

// quoteShort quotes s for an error message, cut to a readable length, so
// that untrusted input cannot make an error arbitrarily long.
func quoteShort(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
