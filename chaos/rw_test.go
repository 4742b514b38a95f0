package chaos_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/e6344662/go-redlock/chaos"
	"github.com/e6344662/go-redlock/fencing"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/testutil"
)

func TestCheckRW(t *testing.T) {
	ms := time.Millisecond
	w := func(client int, fence fencing.Token, called, from, until time.Duration) chaos.RWLease {
		return chaos.RWLease{Lock: "doc", Client: client, Fence: fence, CalledAt: called * ms, AcquiredAt: from * ms, Until: until * ms}
	}
	r := func(client int, fence fencing.Token, called, from, until time.Duration) chaos.RWLease {
		l := w(client, fence, called, from, until)
		l.Shared = true
		return l
	}
	for _, tc := range []struct {
		name              string
		leases            []chaos.RWLease
		overlaps, ordered int
	}{
		{"clean", []chaos.RWLease{w(0, 10, 0, 1, 5), r(1, 12, 4, 5, 9), r(2, 11, 4, 6, 8), w(0, 13, 6, 9, 12)}, 0, 0},
		{"readers share, in any token order", []chaos.RWLease{r(1, 12, 0, 1, 9), r(2, 11, 0, 2, 8)}, 0, 0},
		{"a writer overlaps a reader", []chaos.RWLease{r(1, 12, 0, 1, 9), w(2, 13, 0, 5, 8)}, 1, 0},
		{"two writers overlap", []chaos.RWLease{w(1, 12, 0, 1, 9), w(2, 13, 0, 5, 12)}, 1, 0},
		{"touching windows do not overlap", []chaos.RWLease{w(1, 12, 0, 1, 5), w(2, 13, 0, 5, 12)}, 0, 0},
		{"an empty window overlaps nothing", []chaos.RWLease{w(1, 12, 0, 1, 9), w(2, 13, 0, 5, 5)}, 0, 0},
		{"a reader below an earlier writer", []chaos.RWLease{w(1, 12, 0, 1, 3), r(2, 11, 4, 5, 8)}, 0, 1},
		{"a writer below an earlier reader", []chaos.RWLease{r(1, 12, 0, 1, 3), w(2, 11, 4, 5, 8)}, 0, 1},
		{"overlapping calls are not ordered", []chaos.RWLease{w(1, 12, 0, 3, 4), w(2, 11, 2, 5, 8)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := chaos.CheckRW(tc.leases)
			require.Equal(t, tc.overlaps, rep.WriterOverlaps, rep.String())
			require.Equal(t, tc.ordered, rep.TokenOrder, rep.String())
		})
	}
}

func TestCheckMulti(t *testing.T) {
	ms := time.Millisecond
	set := func(client int, res []string, fences []fencing.Token, called, from, until time.Duration) chaos.MultiLease {
		return chaos.MultiLease{Client: client, Resources: res, Fences: fences, CalledAt: called * ms, AcquiredAt: from * ms, Until: until * ms}
	}
	for _, tc := range []struct {
		name                       string
		sets                       []chaos.MultiLease
		partial, overlaps, ordered int
	}{
		{"clean", []chaos.MultiLease{
			set(0, []string{"a", "b"}, []fencing.Token{5, 7}, 0, 1, 4),
			set(1, []string{"b", "c"}, []fencing.Token{8, 2}, 2, 4, 6),
			set(2, []string{"c"}, []fencing.Token{3}, 5, 6, 9)}, 0, 0, 0},
		{"partial", []chaos.MultiLease{set(0, []string{"a", "b"}, []fencing.Token{5}, 0, 1, 4)}, 1, 0, 0},
		{"overlap on one resource", []chaos.MultiLease{
			set(0, []string{"a", "b"}, []fencing.Token{5, 7}, 0, 1, 4),
			set(1, []string{"c", "b"}, []fencing.Token{1, 8}, 0, 3, 6)}, 0, 1, 0},
		{"token order on one resource", []chaos.MultiLease{
			set(0, []string{"a", "b"}, []fencing.Token{5, 7}, 0, 1, 4),
			set(1, []string{"b"}, []fencing.Token{6}, 5, 6, 8)}, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := chaos.CheckMulti(tc.sets)
			require.Equal(t, tc.partial, rep.Partial, rep.String())
			require.Equal(t, tc.overlaps, rep.Overlaps, rep.String())
			require.Equal(t, tc.ordered, rep.TokenOrder, rep.String())
		})
	}
}

// TestRWAndMultiUnderPauses: readers and writers of one read-write lock,
// and callers of AcquireAll with overlapping sets in opposite orders
// beside a plain mutex client, on three redis-servers while a nemesis
// pauses one node at a time (SIGSTOP) for up to a lease; the RW and
// multi-lock checkers find no violation.
func TestRWAndMultiUnderPauses(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := testutil.StartRedis(t, 3)
	cfg := redlock.Config{LeaseDuration: 600 * time.Millisecond}
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()

	var mu sync.Mutex
	var rwLeases []chaos.RWLease
	var sets []chaos.MultiLease
	var wg sync.WaitGroup
	hold := func(ls []*redlock.Lease, rng *rand.Rand) (until time.Duration) {
		t := time.NewTimer(time.Duration(rng.IntN(30)+5) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ls[0].Context().Done():
		}
		released := now()
		until = released
		for _, l := range ls {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			_ = l.Release(rctx)
			rcancel()
			until = min(until, l.ValidUntil().Sub(start))
		}
		return until
	}
	newClient := func() *redlock.Locker {
		l, err := redlock.New(c.Nodes(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	for id := range 5 {
		l := newClient()
		rw, err := l.NewRWLock("doc")
		require.NoError(t, err)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			for ctx.Err() == nil {
				shared := id >= 2
				called := now()
				actx, acancel := context.WithTimeout(ctx, time.Second)
				var ls *redlock.Lease
				var err error
				if shared {
					ls, err = rw.AcquireShared(actx)
				} else {
					ls, err = rw.Acquire(actx)
				}
				acancel()
				if err != nil {
					continue
				}
				acquired := now()
				until := hold([]*redlock.Lease{ls}, rng)
				mu.Lock()
				rwLeases = append(rwLeases, chaos.RWLease{Lock: "doc", Shared: shared, Client: id, Fence: ls.Fence(), CalledAt: called, AcquiredAt: acquired, Until: until})
				mu.Unlock()
				if !shared {
					// Writers pause between writes: the lock prefers
					// writers, and two writing back to back keep readers
					// out (docs/design.md §14).
					time.Sleep(time.Duration(rng.IntN(60)+20) * time.Millisecond)
				}
			}
		})
	}
	for id, set := range [][]string{{"r1", "r2", "r3"}, {"r3", "r2"}, {"r2"}} {
		l := newClient()
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 2))
			for ctx.Err() == nil {
				called := now()
				actx, acancel := context.WithTimeout(ctx, time.Second)
				var ls []*redlock.Lease
				var err error
				if len(set) == 1 {
					var one *redlock.Lease
					if one, err = l.Acquire(actx, set[0]); err == nil {
						ls = []*redlock.Lease{one}
					}
				} else {
					ls, err = l.AcquireAll(actx, set...)
				}
				acancel()
				if err != nil {
					continue
				}
				acquired := now()
				s := chaos.MultiLease{Client: id, CalledAt: called, AcquiredAt: acquired}
				for _, lease := range ls {
					s.Resources = append(s.Resources, lease.Resource())
					s.Fences = append(s.Fences, lease.Fence())
				}
				s.Until = hold(ls, rng)
				mu.Lock()
				sets = append(sets, s)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() { // the nemesis: one node paused at a time
		rng := rand.New(rand.NewPCG(9, 9))
		for ctx.Err() == nil {
			s := c.Server(rng.IntN(3))
			if s.Pause() == nil {
				time.Sleep(time.Duration(rng.IntN(500)+50) * time.Millisecond)
				_ = s.Resume()
			}
			time.Sleep(time.Duration(rng.IntN(200)+50) * time.Millisecond)
		}
	})
	wg.Wait()

	rw := chaos.CheckRW(rwLeases)
	multi := chaos.CheckMulti(sets)
	t.Log(rw)
	t.Log(multi)
	require.Zero(t, rw.Violations(), rw.String())
	require.Zero(t, multi.Violations(), multi.String())
	require.Positive(t, rw.Writers)
	require.Positive(t, rw.Readers)
	require.Positive(t, multi.Sets)
}
