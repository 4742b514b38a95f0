package redisfence_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/fencing/redisfence"
	"github.com/e6344662/go-redlock/scripts"
)

func newStore(t *testing.T, prefix string) (*redisfence.Store, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	return redisfence.New(client, prefix), mr, client
}

// requireRead asserts what Read returns for key.
func requireRead(t *testing.T, s *redisfence.Store, key, value string, highest fencing.Token, found bool) {
	t.Helper()
	v, h, ok, err := s.Read(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, value, v, "value")
	require.Equal(t, highest, h, "highest")
	require.Equal(t, found, ok, "found")
}

func TestStoreWriteRead(t *testing.T) {
	type write struct {
		value   string
		tok     fencing.Token
		stale   bool
		highest fencing.Token // StaleError.Highest when stale
	}
	tests := []struct {
		name      string
		writes    []write
		wantValue string
		wantHigh  fencing.Token
	}{
		{"one write", []write{{"v1", 5, false, 0}}, "v1", 5},
		{"higher overwrites", []write{{"v1", 5, false, 0}, {"v2", 6, false, 0}}, "v2", 6},
		{"equal token accepted", []write{{"v1", 5, false, 0}, {"v2", 5, false, 0}}, "v2", 5},
		{"stale rejected, value unchanged", []write{{"v1", 7, false, 0}, {"old", 5, true, 7}}, "v1", 7},
		{"across digit lengths", []write{{"a", 99, false, 0}, {"b", 100, false, 0}, {"c", 99, true, 100}, {"d", 9, true, 100}}, "b", 100},
		{"max token", []write{{"a", ^fencing.Token(0), false, 0}, {"b", ^fencing.Token(0) - 1, true, ^fencing.Token(0)}}, "a", ^fencing.Token(0)},
		{"empty and binary values", []write{{"x", 1, false, 0}, {"", 2, false, 0}, {"\x00\xff\r\n", 3, false, 0}}, "\x00\xff\r\n", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newStore(t, "res:")
			ctx := context.Background()
			for i, w := range tc.writes {
				err := s.Write(ctx, "k", w.value, w.tok)
				if w.stale {
					requireStale(t, err, "k", w.tok, w.highest)
				} else {
					require.NoError(t, err, "write %d", i)
				}
			}
			requireRead(t, s, "k", tc.wantValue, tc.wantHigh, true)
		})
	}
}

func TestStoreKeyLayout(t *testing.T) {
	ctx := context.Background()
	for _, prefix := range []string{"", "res:", "{app}:"} {
		t.Run(strconv.Quote(prefix), func(t *testing.T) {
			s, mr, _ := newStore(t, prefix)
			require.NoError(t, s.Write(ctx, "k", "v", 42))
			require.ElementsMatch(t, []string{prefix + "k", prefix + "k:fence"}, mr.Keys())
			mr.CheckGet(t, prefix+"k", "v")
			mr.CheckGet(t, prefix+"k:fence", "42")
			require.False(t, mr.Exists("k:fence") && prefix != "")
		})
	}
}

func TestStoreKeysIndependent(t *testing.T) {
	s, _, _ := newStore(t, "p:")
	ctx := context.Background()
	require.NoError(t, s.Write(ctx, "a", "A", 10))
	require.NoError(t, s.Write(ctx, "b", "B", 2))
	requireStale(t, s.Write(ctx, "a", "A2", 9), "a", 9, 10)
	requireRead(t, s, "a", "A", 10, true)
	requireRead(t, s, "b", "B", 2, true)
}

func TestStoreReadMissing(t *testing.T) {
	s, mr, _ := newStore(t, "p:")
	requireRead(t, s, "nothing", "", 0, false)

	// Someone deleted the value but not the fence: the fence still holds.
	require.NoError(t, s.Write(context.Background(), "k", "v", 3))
	mr.Del("p:k")
	requireRead(t, s, "k", "", 3, false)
	requireStale(t, s.Write(context.Background(), "k", "old", 2), "k", 2, 3)

	// An empty value is found, unlike a missing one.
	require.NoError(t, s.Write(context.Background(), "e", "", 1))
	requireRead(t, s, "e", "", 1, true)
}

func TestStoreInvalidInput(t *testing.T) {
	s, mr, _ := newStore(t, "p:")
	ctx := context.Background()

	err := s.Write(ctx, "k", "v", 0)
	require.ErrorIs(t, err, fencing.ErrInvalidToken)
	require.Empty(t, mr.Keys(), "token 0 must not reach the server")

	for _, key := range []string{":fence", "k:fence", "a:b:fence"} {
		require.ErrorIs(t, s.Write(ctx, key, "v", 1), redisfence.ErrInvalidKey, key)
		_, _, _, err := s.Read(ctx, key)
		require.ErrorIs(t, err, redisfence.ErrInvalidKey, key)
	}
	require.Empty(t, mr.Keys())

	// The rule is about the Redis key, prefix included.
	s2 := redisfence.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), "x:fen")
	require.ErrorIs(t, s2.Write(ctx, "ce", "v", 1), redisfence.ErrInvalidKey)
	require.NoError(t, s2.Write(ctx, "ced", "v", 1))

	require.Panics(t, func() { redisfence.New(nil, "") })
}

func TestStoreWrongType(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(mr *miniredis.Miniredis)
	}{
		{"fence holds text", func(mr *miniredis.Miniredis) { require.NoError(t, mr.Set("p:k:fence", "abc")) }},
		{"fence holds a signed number", func(mr *miniredis.Miniredis) { require.NoError(t, mr.Set("p:k:fence", "-5")) }},
		{"fence is a hash", func(mr *miniredis.Miniredis) { mr.HSet("p:k:fence", "f", "1") }},
		{"fence is a list", func(mr *miniredis.Miniredis) { _, err := mr.Lpush("p:k:fence", "1"); require.NoError(t, err) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, mr, _ := newStore(t, "p:")
			require.NoError(t, mr.Set("p:k", "precious"))
			tc.setup(mr)

			err := s.Write(ctx, "k", "new", 9)
			require.Error(t, err)
			require.ErrorContains(t, err, "WRONGTYPE")
			require.ErrorContains(t, err, `"k"`)
			require.NotErrorIs(t, err, fencing.ErrStaleToken)
			mr.CheckGet(t, "p:k", "precious")

			_, _, _, err = s.Read(ctx, "k")
			require.Error(t, err)
			require.ErrorContains(t, err, "p:k:fence")
		})
	}

	t.Run("value is a hash", func(t *testing.T) {
		s, mr, _ := newStore(t, "p:")
		mr.HSet("p:k", "f", "1")
		_, _, _, err := s.Read(ctx, "k")
		require.ErrorContains(t, err, "WRONGTYPE")
		require.ErrorContains(t, err, "p:k")
	})
}

// TestStoreCorruptFenceKeyIsNotAnInvalidToken: a fence key holding
// something that is not a counter ("007") makes Read fail with an error
// that names the fence key and does not match fencing.ErrInvalidToken
// (Write's error for a caller's token 0, refused before anything is sent);
// Write over it fails too, without that error, and writes nothing. A
// malformed token in a write reply does not match it either.
func TestStoreCorruptFenceKeyIsNotAnInvalidToken(t *testing.T) {
	ctx := context.Background()
	s, mr, _ := newStore(t, "p:")
	require.NoError(t, mr.Set("p:k", "precious"))
	require.NoError(t, mr.Set("p:k:fence", "007"))

	_, _, _, err := s.Read(ctx, "k")
	require.Error(t, err)
	require.NotErrorIs(t, err, fencing.ErrInvalidToken)
	require.ErrorContains(t, err, `"p:k:fence"`)
	require.ErrorContains(t, err, `"007" is not a counter`)

	err = s.Write(ctx, "k", "new", 9)
	require.Error(t, err)
	require.NotErrorIs(t, err, fencing.ErrInvalidToken)
	mr.CheckGet(t, "p:k", "precious")
	mr.CheckGet(t, "p:k:fence", "007")

	_, _, err = redisfence.ParseWriteReply([]any{int64(0), "007"})
	require.Error(t, err)
	require.NotErrorIs(t, err, fencing.ErrInvalidToken)
}

// TestStoreScriptFlush checks that Write still works after the server's
// script cache is emptied (go-redis falls back from EVALSHA to EVAL).
func TestStoreScriptFlush(t *testing.T) {
	s, _, client := newStore(t, "p:")
	ctx := context.Background()
	require.NoError(t, s.Write(ctx, "k", "v1", 1))

	require.NoError(t, client.ScriptLoad(ctx, scripts.FencedWrite.Source()).Err())
	exists, err := client.ScriptExists(ctx, scripts.FencedWrite.Hash()).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{true}, exists)

	require.NoError(t, client.ScriptFlush(ctx).Err())
	exists, err = client.ScriptExists(ctx, scripts.FencedWrite.Hash()).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, exists, "SCRIPT FLUSH emptied the cache")

	require.NoError(t, s.Write(ctx, "k", "v2", 2))
	requireStale(t, s.Write(ctx, "k", "v0", 1), "k", 1, 2)
	requireRead(t, s, "k", "v2", 2, true)
}

func TestStoreServerErrors(t *testing.T) {
	s, mr, _ := newStore(t, "p:")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Write(ctx, "k", "v", 1), context.Canceled)
	_, _, _, err := s.Read(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)

	// A server that is gone: no retries, to keep the test fast.
	down := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	mr.Close()
	s = redisfence.New(down, "p:")
	require.Error(t, s.Write(context.Background(), "k", "v", 1))
	_, _, _, err = s.Read(context.Background(), "k")
	require.Error(t, err)
}

// TestStoreConcurrentWrites races writers with random tokens: the survivor
// is the value written with the largest token.
func TestStoreConcurrentWrites(t *testing.T) {
	s, _, _ := newStore(t, "p:")
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				tok := fencing.Token(1 + (g*37+i*11)%200)
				err := s.Write(ctx, "k", tok.String(), tok)
				if err != nil && !errors.Is(err, fencing.ErrStaleToken) {
					t.Errorf("Write: %v", err)
				}
			}
		})
	}
	wg.Wait()
	var want fencing.Token
	for g := range 16 {
		for i := range 20 {
			want = max(want, fencing.Token(1+(g*37+i*11)%200))
		}
	}
	requireRead(t, s, "k", want.String(), want, true)
}

func TestParseWriteReply(t *testing.T) {
	tests := []struct {
		name    string
		reply   any
		written bool
		tok     fencing.Token
		wantErr bool
	}{
		{"written string", []any{int64(1), "5"}, true, 5, false},
		{"stale string", []any{int64(0), "7"}, false, 7, false},
		{"stale integer", []any{int64(0), int64(7)}, false, 7, false},
		{"max", []any{int64(1), "18446744073709551615"}, true, ^fencing.Token(0), false},
		{"zero highest", []any{int64(0), "0"}, false, 0, false},
		{"nil", nil, false, 0, true},
		{"not an array", "OK", false, 0, true},
		{"integer", int64(1), false, 0, true},
		{"empty array", []any{}, false, 0, true},
		{"one element", []any{int64(1)}, false, 0, true},
		{"three elements", []any{int64(1), "5", "x"}, false, 0, true},
		{"status 2", []any{int64(2), "5"}, false, 0, true},
		{"status -1", []any{int64(-1), "5"}, false, 0, true},
		{"status string", []any{"1", "5"}, false, 0, true},
		{"status nil", []any{nil, "5"}, false, 0, true},
		{"token nil", []any{int64(1), nil}, false, 0, true},
		{"token negative", []any{int64(0), int64(-3)}, false, 0, true},
		{"token text", []any{int64(0), "abc"}, false, 0, true},
		{"token empty", []any{int64(0), ""}, false, 0, true},
		{"token signed", []any{int64(0), "+5"}, false, 0, true},
		{"token leading zero", []any{int64(0), "007"}, false, 0, true},
		{"token overflow", []any{int64(0), "18446744073709551616"}, false, 0, true},
		{"token float", []any{int64(0), 5.0}, false, 0, true},
		{"token bytes", []any{int64(0), []byte("5")}, false, 0, true},
		{"token array", []any{int64(0), []any{"5"}}, false, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			written, tok, err := redisfence.ParseWriteReply(tc.reply)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.written, written)
			require.Equal(t, tc.tok, tok)
		})
	}
}

func TestTokenFromReply(t *testing.T) {
	tok, err := redisfence.TokenFromReply(int64(12))
	require.NoError(t, err)
	require.Equal(t, fencing.Token(12), tok)
	tok, err = redisfence.TokenFromReply("12")
	require.NoError(t, err)
	require.Equal(t, fencing.Token(12), tok)
	_, err = redisfence.TokenFromReply(" 12")
	require.Error(t, err)
}

// requireStale asserts that err is a *fencing.StaleError for key, tok and
// highest.
func requireStale(t *testing.T, err error, key string, tok, highest fencing.Token) {
	t.Helper()
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	var se *fencing.StaleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, fencing.StaleError{Key: key, Token: tok, Highest: highest}, *se)
}
