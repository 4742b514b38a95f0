package chaos_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e6344662/go-redlock/chaos"
)

// Environment variables of the soak (make soak).
const (
	// soakEnv sets how long TestSoak runs in all (time.ParseDuration
	// syntax); without it TestSoak is skipped.
	soakEnv = "REDLOCK_SOAK"
	// soakSliceEnv sets how long each scenario runs before the next one
	// takes over (default 30s).
	soakSliceEnv = "REDLOCK_SOAK_SLICE"
	// soakSummaryEnv names a file to which the soak writes its summary
	// (the table and the totals), for make soak to print.
	soakSummaryEnv = "REDLOCK_SOAK_SUMMARY"
	// soakLanesEnv sets how many rotations run at once (default 4), each
	// with its own servers: one scenario's clients contend for one lock,
	// so lanes are what make the soak check more writes per second.
	soakLanesEnv = "REDLOCK_SOAK_LANES"

	defaultSoakSlice = 30 * time.Second
	defaultSoakLanes = 4
	// minSoakSlice is the shortest run worth starting at the end.
	minSoakSlice = 5 * time.Second
)

// soakRow sums one scenario's runs.
type soakRow struct {
	runs, terms, writes, accepted, rejected int
	overlaps, regressions, duplicates       int
	staleAccepted, notLinearizable          int
	resource, lock                          int
	unsafe                                  bool
}

func (r *soakRow) add(rep *chaos.Report) {
	r.runs++
	r.terms += rep.Terms
	r.writes += rep.Writes
	r.accepted += rep.Accepted
	r.rejected += rep.Rejected
	r.overlaps += rep.Overlaps
	r.regressions += rep.TokenRegressions
	r.duplicates += rep.DuplicateTokens
	r.staleAccepted += rep.StaleAccepted
	if rep.NotLinearizable || rep.LinearizeUnknown {
		r.notLinearizable++
	}
	r.resource += rep.ResourceViolations()
	r.lock += rep.LockViolations()
}

// TestSoak runs the scenarios in rotation, each for REDLOCK_SOAK_SLICE
// (30s) with a new seed every round, until REDLOCK_SOAK has passed, and
// prints per scenario and in total the fenced writes the checkers read and
// the violations they found. Every run is checked as in TestChaos, so a
// violation fails the soak. Run it with make soak (SOAK=10m by default).
func TestSoak(t *testing.T) {
	v := os.Getenv(soakEnv)
	if v == "" {
		t.Skip("the soak runs only with " + soakEnv + " set (make soak SOAK=10m)")
	}
	total, err := time.ParseDuration(v)
	if err != nil || total <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10m", soakEnv, v)
	}
	slice := defaultSoakSlice
	if v := os.Getenv(soakSliceEnv); v != "" {
		if slice, err = time.ParseDuration(v); err != nil || slice <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 30s", soakSliceEnv, v)
		}
	}
	lanes := defaultSoakLanes
	if v := os.Getenv(soakLanesEnv); v != "" {
		if lanes, err = strconv.Atoi(v); err != nil || lanes < 1 || lanes > netnsSlots {
			t.Fatalf("%s=%q: want 1 to %d", soakLanesEnv, v, netnsSlots)
		}
	}
	seed := chaosSeed(t)
	start := time.Now()
	deadline := start.Add(total)
	var mu sync.Mutex
	rows := map[string]*soakRow{}
	var wg sync.WaitGroup
	for lane := range lanes {
		wg.Go(func() {
			// Each lane starts the rotation at its own scenario and draws
			// its own seeds.
			all := scenarios()
			for round := 0; ; round++ {
				for k := range all {
					sc := all[(k+lane*len(all)/lanes)%len(all)]
					left := time.Until(deadline)
					if left < minSoakSlice {
						return
					}
					runSeed := seed + uint64(lane)<<32 + uint64(round)
					var rep *chaos.Report
					t.Run(fmt.Sprintf("%s/lane-%d/round-%d", sc.name, lane, round), func(t *testing.T) {
						rep = runScenario(t, sc, runSeed, min(slice, left))
					})
					if rep == nil {
						continue // skipped
					}
					mu.Lock()
					if rows[sc.name] == nil {
						rows[sc.name] = &soakRow{unsafe: sc.unsafe}
					}
					rows[sc.name].add(rep)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var order []string
	for _, sc := range scenarios() {
		if rows[sc.name] != nil {
			order = append(order, sc.name)
		}
	}

	var b strings.Builder
	b.WriteString("| scenario | runs | terms | fenced writes checked | accepted | stale rejected | overlaps | token regressions | duplicate tokens | stale accepted | linearizable |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var sum soakRow
	var unsafeLock int
	for _, name := range order {
		r := rows[name]
		lin := "yes"
		if r.notLinearizable > 0 {
			lin = fmt.Sprintf("no (%d runs)", r.notLinearizable)
		}
		label := name
		if r.unsafe {
			label += " (assumption broken)"
			unsafeLock += r.lock
		} else {
			sum.lock += r.lock
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n",
			label, r.runs, r.terms, r.writes, r.accepted, r.rejected, r.overlaps, r.regressions, r.duplicates, r.staleAccepted, lin)
		sum.runs += r.runs
		sum.terms += r.terms
		sum.writes += r.writes
		sum.resource += r.resource
	}
	summary := fmt.Sprintf("soak per scenario (seed %d, %d lanes, runs of %s):\n\n%s\n"+
		"soak: %s, %d scenario runs, %d terms, %d fenced writes checked (%.0f/s); "+
		"violations: resource side %d, lock %d where its assumptions hold, %d reported where a scenario breaks one on purpose\n",
		seed, lanes, slice, b.String(),
		elapsed.Round(time.Second), sum.runs, sum.terms, sum.writes, float64(sum.writes)/elapsed.Seconds(), sum.resource, sum.lock, unsafeLock)
	t.Log(summary)
	if path := os.Getenv(soakSummaryEnv); path != "" {
		if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
			t.Errorf("soak summary: %v", err)
		}
	}
}
