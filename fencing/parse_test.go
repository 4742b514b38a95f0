package fencing_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
)

// badTokens are header values and strings that are not tokens.
var badTokens = []string{
	"", "0", "-1", "+1", "1.5", " 7", "7 ", "\t7", "abc", "0x10", "1e3", "007", "00",
	"1_000", "1,2", "7\n", "٣", // Arabic-Indic digit three
	"18446744073709551616", "99999999999999999999", "184467440737095516150",
	strings.Repeat("9", 1000),
}

func TestParseToken(t *testing.T) {
	good := []struct {
		in   string
		want fencing.Token
	}{
		{"1", 1},
		{"7", 7},
		{"10", 10},
		{"1234567890", 1234567890},
		{"18446744073709551615", ^fencing.Token(0)},
	}
	for _, tc := range good {
		got, err := fencing.ParseToken(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, tc.in, got.String())
	}
	for _, in := range badTokens {
		_, err := fencing.ParseToken(in)
		require.ErrorIs(t, err, fencing.ErrInvalidToken, "%q", in)
		require.Less(t, len(err.Error()), 200, "error messages stay short")
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range append(badTokens, "1", "42", "18446744073709551615") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := fencing.ParseToken(s)
		if err != nil {
			require.ErrorIs(t, err, fencing.ErrInvalidToken)
			return
		}
		require.NotZero(t, tok)
		require.Equal(t, s, tok.String(), "only the canonical form parses")
	})
}
