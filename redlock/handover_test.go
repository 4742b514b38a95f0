package redlock_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/scripts"
	"github.com/e6344662/go-redlock/testutil"
)

const (
	handKey    = "redlock:{hand-over}"
	handHolder = "11111111111111111111111111111111"
	handWaiter = "22222222222222222222222222222222"
)

// handOverSetup leaves on s a lock held by handHolder, its fence counter
// at 6, and a waiter queued behind it whose place asks for a hand-over.
func handOverSetup(t *testing.T, s *testutil.RedisServer) {
	t.Helper()
	ctx := testutil.Context(t)
	require.NoError(t, s.Client().FlushAll(ctx).Err())
	require.NoError(t, s.Client().Set(ctx, handKey+":fence", "5", 0).Err())
	keys := []string{handKey, handKey + ":fence", handKey + ":queue", handKey + ":queue:exp", testutil.DefaultMarker}
	// The marker vouches for the data from long ago (no floor above 5).
	require.NoError(t, s.Client().Set(ctx, testutil.DefaultMarker, "v4 "+replID(t, s)+" 1 1 -", 0).Err())
	reply, err := s.Client().Eval(ctx, scripts.Acquire.Source(), keys, handHolder, "h", 60000, "none", "", "alone").Slice()
	require.NoError(t, err)
	require.Equal(t, []any{"granted", "6", int64(0), int64(0), int64(0), ""}, reply)
	reply, err = s.Client().Eval(ctx, scripts.Acquire.Source(), keys, handWaiter, "w", 60000, "none", "",
		"queue", "w1", "propose", 0, 60000, "handover", 60000, "-", handWaiter, "w").Slice()
	require.NoError(t, err)
	require.Equal(t, "held", reply[0], "queued behind the holder")
	require.Positive(t, reply[3], "with a ticket")
}

// handRelease runs the release script as the holder with rejoin delay
// delay and returns its reply.
func handRelease(t *testing.T, s *testutil.RedisServer, delay string) []any {
	t.Helper()
	keys := []string{handKey, handKey + ":fence", handKey + ":queue", handKey + ":queue:exp", testutil.DefaultMarker}
	reply, err := s.Client().Eval(testutil.Context(t), scripts.Release.Source(), keys, handHolder, handKey+":released", "11111111", "announce", "handover", delay, "none", "").Slice()
	require.NoError(t, err)
	return reply
}

// TestAHandOverKeepsTheRejoinRule: a node hands a lock over only when it
// may grant (scripts/trust.lua): not while it sits out after a loss it
// notices in the release (here its marker was deleted), whatever the
// delay; with the delay off it hands over at once, and counts the new
// holder from above the time it noticed the loss, as an acquisition
// would (docs/design.md §6.2).
func TestAHandOverKeepsTheRejoinRule(t *testing.T) {
	s := testutil.StartRedisServer(t)
	ctx := testutil.Context(t)

	handOverSetup(t, s)
	require.NoError(t, s.Client().Del(ctx, testutil.DefaultMarker).Err())
	reply := handRelease(t, s, "60000")
	require.Equal(t, []any{"released", "w1", ""}, []any{reply[0], reply[2], reply[3]}, "named, not handed over: the node noticed a loss")
	require.Zero(t, s.Client().Exists(ctx, handKey).Val(), "the lock is free")

	handOverSetup(t, s)
	reply = handRelease(t, s, "-1")
	require.Equal(t, []any{"handed", reply[1], "w1", "7"}, reply, "the marker vouches: handed over, counted on from 6")
	require.Equal(t, handWaiter+" w", s.Client().Get(ctx, handKey).Val())

	handOverSetup(t, s)
	require.NoError(t, s.Client().Del(ctx, testutil.DefaultMarker).Err())
	tv, err := s.Client().Time(ctx).Result()
	require.NoError(t, err)
	reply = handRelease(t, s, "-1")
	require.Equal(t, "handed", reply[0], "the delay off: handed over at once")
	counter, err := strconv.ParseInt(reply[3].(string), 10, 64)
	require.NoError(t, err)
	require.Greater(t, counter, tv.UnixMicro(), "counted on from when the loss was noticed, not from 6")
}

// replID is s's replication id.
func replID(t *testing.T, s *testutil.RedisServer) string {
	id, err := testutil.ReplID(testutil.Context(t), s)
	require.NoError(t, err)
	return id
}

// TestAFullNodeDoesNotHandOver: a node out of memory refuses a grant's
// first write, so a release there frees the lock and names the head
// instead of handing the lock over; the fence counter is untouched.
func TestAFullNodeDoesNotHandOver(t *testing.T) {
	s := testutil.StartRedisServer(t)
	ctx := testutil.Context(t)
	handOverSetup(t, s)
	require.NoError(t, s.Do(ctx, "DEBUG", "POPULATE", 20000, "filler", 100).Err())
	require.NoError(t, s.Do(ctx, "CONFIG", "SET", "maxmemory", "1mb").Err())
	err := s.Do(ctx, "SET", "probe", "x").Err()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "OOM"), err.Error())

	reply := handRelease(t, s, "-1")
	require.Equal(t, []any{"released", "w1", ""}, []any{reply[0], reply[2], reply[3]}, "named, not handed over")
	require.Zero(t, s.Client().Exists(ctx, handKey).Val(), "the lock is free")
	require.Equal(t, "6", s.Client().Get(ctx, handKey+":fence").Val())
}
