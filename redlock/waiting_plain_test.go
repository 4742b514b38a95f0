package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"
)

// The waiting every lock kind shares (wait.go, wait_plain.go), driven with
// synthetic outcomes: one pause rule, one split-vote rule, and the wake-up
// by a release of any of the waiter's keys.

// refused is a refusal by a holder with ttl left; split a grant.
func refused(ttl time.Duration) reply[vote] { return reply[vote]{val: vote{holderTTL: ttl}} }

var split = reply[vote]{val: vote{ok: true}}

// TestWaitingPause: the pause after a failed attempt is the backoff's, no
// longer than the holder's TTL or the waiting's limits; a backoff that
// stops ends the waiting with the attempt's report.
func TestWaitingPause(t *testing.T) {
	nodes := newFakeNodes(3, nil)
	for name, tc := range map[string]struct {
		backoff     backoff.BackOff
		holder      time.Duration
		limit, kind time.Duration // the caller's limit, the waiting's (a writer's intent)
		want        time.Duration
	}{
		"the backoff":          {backoff: backoff.NewConstantBackOff(time.Second), want: time.Second},
		"the holder's TTL":     {backoff: backoff.NewConstantBackOff(time.Second), holder: 300 * time.Millisecond, want: 300 * time.Millisecond},
		"the caller's limit":   {backoff: backoff.NewConstantBackOff(time.Second), limit: 100 * time.Millisecond, want: 100 * time.Millisecond},
		"the waiting's limit":  {backoff: backoff.NewConstantBackOff(time.Second), kind: 50 * time.Millisecond, want: 50 * time.Millisecond},
		"no expiry is no cap":  {backoff: backoff.NewConstantBackOff(time.Second), holder: -1, want: time.Second},
		"the backoff stops":    {backoff: &backoff.StopBackOff{}, want: -1},
		"the shortest of them": {backoff: backoff.NewConstantBackOff(time.Second), holder: 70 * time.Millisecond, limit: 80 * time.Millisecond, kind: 90 * time.Millisecond, want: 70 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			l := fakeLocker(t, nodes, Config{NewBackOff: func() backoff.BackOff { return tc.backoff }})
			wb := l.newWaitBase("r", []string{l.Key("r")}, tc.kind)
			ttl := tc.holder
			if ttl == 0 {
				ttl = time.Minute
			}
			o := failedAttempt(l, time.Now(), map[int]reply[vote]{0: refused(ttl), 1: refused(ttl), 2: refused(ttl)})
			if tc.holder == 0 {
				o.err.HolderTTL = 0 // a refusal that names no holder's time
			}
			wait, err := wb.pause(o, tc.limit)
			if tc.want < 0 {
				var ae *AcquireError
				require.True(t, errors.As(err, &ae), "the attempt's report")
				require.ErrorIs(t, err, ErrNotAcquired)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, wait)
		})
	}
}

// TestWaitingSplitVotes: after an attempt that some nodes granted (split
// votes), the pause is a random point up to twice the attempt's duration,
// doubled for each split in a row; a refusal by a node sitting out after a
// loss of data is no contention and does not count; an attempt nobody
// granted starts the count again.
func TestWaitingSplitVotes(t *testing.T) {
	l := fakeLocker(t, newFakeNodes(3, nil), Config{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }})
	wb := l.newWaitBase("r", []string{l.Key("r")}, 0)
	const took = 10 * time.Millisecond
	for round := range 4 {
		start := time.Now().Add(-took)
		o := failedAttempt(l, start, map[int]reply[vote]{0: split, 1: refused(time.Minute), 2: refused(time.Minute)})
		wait, err := wb.pause(o, 0)
		bound := 2 * time.Since(start) << round
		require.NoError(t, err)
		require.LessOrEqual(t, wait, bound, "round %d", round)
		require.Equal(t, round+1, wb.splits)
	}

	rejoining := reply[vote]{val: vote{reason: rejoiningReason + ": the node sits out", holderTTL: time.Second}}
	o := failedAttempt(l, time.Now(), map[int]reply[vote]{0: split, 1: rejoining, 2: rejoining})
	_, err := wb.pause(o, 0)
	require.NoError(t, err)
	require.Equal(t, 4, wb.splits, "a rejoining node's refusal is no split")

	o = failedAttempt(l, time.Now(), map[int]reply[vote]{0: refused(time.Minute), 1: refused(time.Minute), 2: refused(time.Minute)})
	wait, err := wb.pause(o, 0)
	require.NoError(t, err)
	require.Equal(t, time.Minute, wait, "no split: the backoff, bounded by the holder")
	require.Zero(t, wb.splits)
}

// TestWaitingWakesOnAnyKey: a waiting over several keys (AcquireAll, a
// semaphore's slots) joins the hub once for all of them, a release of any
// wakes it, and it leaves every key's queue when it is done.
func TestWaitingWakesOnAnyKey(t *testing.T) {
	l := fakeLocker(t, newFakeNodes(3, nil), Config{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }})
	keys := []string{l.Key("s#0"), l.Key("s#1"), l.Key("s#2")}
	pw := l.waitOn("s", keys, 0)
	o := failedAttempt(l, time.Now(), map[int]reply[vote]{0: refused(time.Hour), 1: refused(time.Hour), 2: refused(time.Hour)})
	lease, wait, err := pw.next(context.Background(), o)
	require.NoError(t, err)
	require.Nil(t, lease)
	require.Equal(t, time.Hour, wait)
	for _, r := range []string{"s#0", "s#1", "s#2"} {
		require.Equal(t, 1, Waiting(l, r), r)
	}

	l.hub.released(keys[2], "12345678")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err = pw.sleep(ctx, wait)
	require.NoError(t, err, "woken by slot 2's release, long before the hour")
	require.Nil(t, lease)

	pw.done(false)
	for _, r := range []string{"s#0", "s#1", "s#2"} {
		require.Zero(t, Waiting(l, r), r)
	}
}

// TestWaitingAcquireStandsBack: a plain Acquire that follows this Locker's
// own release of a lock others listened for waits until the stand-back
// has passed; without one it starts at once.
func TestWaitingAcquireStandsBack(t *testing.T) {
	l := fakeLocker(t, newFakeNodes(3, nil), Config{QueueTTL: -1})
	key := l.Key("r")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.newWaiting(ctx, "r")
	require.NoError(t, err, "no stand-back: nothing to wait for")

	l.noteRelease(key, 5*time.Millisecond)
	l.yields[key] = time.Now().Add(time.Hour) // however loaded the machine
	_, err = l.newWaiting(ctx, "r")
	require.ErrorIs(t, err, context.Canceled, "it stands back (and its context ended meanwhile)")
	_, err = l.newWaiting(ctx, "r")
	require.NoError(t, err, "once only")
}
