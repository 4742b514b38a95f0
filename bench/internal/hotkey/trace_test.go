package hotkey

import (
	"slices"
	"testing"
	"time"
)

// rec is a record of worker w of process p, called at c, acquired at a and
// released at l (milliseconds).
func rec(p, w int, c, a, l int64) Record {
	ms := int64(time.Millisecond)
	return Record{Proc: p, Worker: w, Called: c * ms, Acquired: a * ms, Released: l * ms}
}

func TestMergeMutex(t *testing.T) {
	recs := []Record{ // out of order, as from two processes' files
		rec(1, 0, 0, 3, 4),   // hand-off from (0,0), another process: 1ms
		rec(0, 0, 0, 1, 2),   // first
		rec(0, 1, 1, 6, 7),   // hand-off from (1,0), another process: 2ms
		rec(0, 1, 7, 8, 9),   // same worker again: no hand-off
		rec(0, 0, 3, 12, 13), // hand-off within process 0: 3ms
	}
	m := Merge(recs, Layout{Procs: 2, Workers: 2, Limit: 1}, 0)
	ms := time.Millisecond
	if m.Acquisitions != 5 || m.Elapsed != 12*ms {
		t.Errorf("acquisitions %d, elapsed %v; want 5, 12ms", m.Acquisitions, m.Elapsed)
	}
	if want := []time.Duration{ms, 2 * ms, 3 * ms}; !slices.Equal(m.Handoffs, want) {
		t.Errorf("hand-offs %v, want %v", m.Handoffs, want)
	}
	if want := []time.Duration{ms, 2 * ms}; !slices.Equal(m.CrossHandoffs, want) {
		t.Errorf("cross-process hand-offs %v, want %v", m.CrossHandoffs, want)
	}
	if want := []time.Duration{ms, 3 * ms, 5 * ms, ms, 9 * ms}; !slices.Equal(m.Waits, want) {
		t.Errorf("waits %v, want %v", m.Waits, want)
	}
	if want := []int{2, 2, 1, 0}; !slices.Equal(m.PerWorker, want) {
		t.Errorf("per worker %v, want %v", m.PerWorker, want)
	}
	if r, starved := m.ShareRatio(); r != 2 || starved != 1 {
		t.Errorf("share %v, starved %d; want 2, 1", r, starved)
	}
	if m.Overlaps != 0 || m.MaxHolders != 1 {
		t.Errorf("overlaps %d, max holders %d; want 0, 1", m.Overlaps, m.MaxHolders)
	}
}

func TestMergeOverlap(t *testing.T) {
	recs := []Record{
		rec(0, 0, 0, 1, 10),
		rec(1, 0, 0, 5, 6),   // returned before (0,0) called Release
		rec(1, 1, 0, 8, 9),   // still before it
		rec(0, 1, 0, 10, 11), // at the same nanosecond as the release: fine
	}
	m := Merge(recs, Layout{Procs: 2, Workers: 2, Limit: 1}, 0)
	if m.Overlaps != 2 || m.MaxHolders != 2 {
		t.Errorf("overlaps %d, max holders %d; want 2, 2", m.Overlaps, m.MaxHolders)
	}
}

func TestMergeSemaphore(t *testing.T) {
	slot := func(r Record, s string) Record { r.Resource = s; return r }
	recs := []Record{
		slot(rec(0, 0, 0, 1, 10), "s#0"),
		slot(rec(0, 1, 0, 2, 10), "s#1"),
		slot(rec(1, 0, 0, 3, 4), "s#0"), // two holders, but of the same slot
		slot(rec(1, 1, 0, 5, 6), "s#1"), // the same again
	}
	m := Merge(recs, Layout{Procs: 2, Workers: 2, Limit: 4}, 0)
	if m.Overlaps != 2 || m.MaxHolders != 3 || m.Handoffs != nil {
		t.Errorf("overlaps %d, max holders %d, hand-offs %v; want 2, 3, none", m.Overlaps, m.MaxHolders, m.Handoffs)
	}
	recs[2].Resource, recs[3].Resource = "s#2", "s#3"
	m = Merge(recs, Layout{Procs: 2, Workers: 2, Limit: 3}, 0)
	if m.Overlaps != 0 || m.MaxHolders != 3 {
		t.Errorf("overlaps %d, max holders %d; want 0, 3", m.Overlaps, m.MaxHolders)
	}
	m = Merge(recs, Layout{Procs: 2, Workers: 2, Limit: 2}, 0)
	if m.Overlaps != 2 {
		t.Errorf("limit 2: overlaps %d, want 2 (the third and fourth holders)", m.Overlaps)
	}
}
