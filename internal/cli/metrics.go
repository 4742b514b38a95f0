package cli

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e6344662/go-redlock/internal/lockresult"
	"github.com/e6344662/go-redlock/redlock"
)

// acquireBuckets are the bounds, in seconds, of the acquire latency
// histogram: from a fast local round trip to a long wait for a busy lock.
var acquireBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// metrics are the Prometheus metrics of --metrics-addr, fed by the Locker's
// events. It is a redlock.Observer: Observe only updates counters and
// histograms (lock-free or nearly so), safe for concurrent use.
type metrics struct {
	acquireDuration prometheus.Histogram
	attempts        map[string]prometheus.Counter // by result
	grants          prometheus.Histogram
	renewals        prometheus.Counter
	leasesLost      prometheus.Counter
	releases        map[string]prometheus.Counter // by result
	nodeErrors      *prometheus.CounterVec        // by node, op

	// The metrics redlockotel also exports, under the names its
	// OpenTelemetry instruments take through a Prometheus exporter
	// (docs/observability.md): one set of names for library and CLI.
	wait             prometheus.Histogram
	hold             *prometheus.HistogramVec // by redlock_lease_end
	slack            prometheus.Histogram
	failing          prometheus.Counter
	waiters, holders prometheus.Gauge
	handOff          prometheus.Histogram
	node             *prometheus.HistogramVec // by server_address, server_port, redlock_node_operation, redlock_vote

	// released holds when each resource was last released, for the
	// hand-off time (bounded by maxReleased).
	mu       sync.Mutex
	released map[string]time.Time
}

// maxReleased bounds the release times kept for hand-off times.
const maxReleased = 4096

var _ redlock.ContextObserver = (*metrics)(nil)

// newMetrics defines the metrics for a Locker over nodes nodes and
// registers them with reg.
func newMetrics(reg prometheus.Registerer, nodes int) (*metrics, error) {
	m := &metrics{
		acquireDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redlock_acquire_duration_seconds",
			Help:    "Time Acquire or TryAcquire took to return a lease, waiting for a busy lock included.",
			Buckets: acquireBuckets,
		}),
		grants: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "redlock_attempt_grants",
			Help:    "Nodes that granted the lock, per acquisition attempt.",
			Buckets: prometheus.LinearBuckets(0, 1, nodes+1),
		}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redlock_renewals_total",
			Help: "Renewal cycles that extended a lease.",
		}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redlock_leases_lost_total",
			Help: "Leases lost: no majority renewed them in time.",
		}),
		nodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlock_node_errors_total",
			Help: "Failed calls to one node, by node address and operation.",
		}, []string{"node", "op"}),
	}
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_acquire_attempts_total",
		Help: "Acquisition attempts, by result: acquired, busy (held by another token), no_quorum (too many nodes failed), error (cut short or failed otherwise).",
	}, []string{"result"})
	m.attempts = children(attempts, lockresult.AttemptAcquired, lockresult.AttemptBusy, lockresult.AttemptNoQuorum, lockresult.AttemptError)
	releases := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlock_releases_total",
		Help: "Leases released, by result: released (by a majority), no_quorum, error.",
	}, []string{"result"})
	m.releases = children(releases, lockresult.ReleaseOK, lockresult.ReleaseNoQuorum, lockresult.ReleaseError)
	m.wait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "redlock_acquire_wait_duration_seconds",
		Help:    "Time an acquisition waited before the lock was its (to the attempt that won, or the hand-over).",
		Buckets: acquireBuckets,
	})
	m.hold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "redlock_lease_hold_duration_seconds",
		Help:    "Time a lease was held, from its acquisition to its end, by how it ended: released, lost, orphaned.",
		Buckets: acquireBuckets,
	}, []string{"redlock_lease_end"})
	m.slack = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "redlock_renew_slack_seconds",
		Help:    "Validity a lease still had when its renewal landed.",
		Buckets: acquireBuckets,
	})
	m.failing = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlock_renew_failing_total",
		Help: "Renewal rounds that failed while the lease was still valid (the early warning).",
	})
	m.waiters = prometheus.NewGauge(prometheus.GaugeOpts{Name: "redlock_waiters", Help: "Acquire calls waiting for a lock."})
	m.holders = prometheus.NewGauge(prometheus.GaugeOpts{Name: "redlock_holders", Help: "Leases held."})
	m.handOff = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "redlock_handoff_duration_seconds",
		Help:    "Time from a release to the next holder's acquisition of the same resource, within one process.",
		Buckets: acquireBuckets,
	})
	m.node = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "redlock_node_duration_seconds",
		Help:    "Duration of one call to one node, by node, operation and vote.",
		Buckets: acquireBuckets,
	}, []string{"server_address", "server_port", "redlock_node_operation", "redlock_vote"})
	m.released = map[string]time.Time{}
	for _, c := range []prometheus.Collector{m.acquireDuration, attempts, m.grants, m.renewals, m.leasesLost, releases, m.nodeErrors,
		m.wait, m.hold, m.slack, m.failing, m.waiters, m.holders, m.handOff, m.node} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// children resolves the counters of vec for every value of its one label,
// so that each is exported (as 0) from the start and Observe needs no
// label lookup.
func children(vec *prometheus.CounterVec, values ...string) map[string]prometheus.Counter {
	out := make(map[string]prometheus.Counter, len(values))
	for _, v := range values {
		out[v] = vec.WithLabelValues(v)
	}
	return out
}

// Observe records one event of a Locker.
func (m *metrics) Observe(e redlock.Event) {
	switch e.Kind {
	case redlock.EventAttempt:
		m.attempts[lockresult.Attempt(e.Err)].Inc()
		m.grants.Observe(float64(e.Granted))
	case redlock.EventAcquired:
		m.acquireDuration.Observe(e.Latency.Seconds())
	case redlock.EventRenewed:
		m.renewals.Inc()
	case redlock.EventLost:
		m.leasesLost.Inc()
	case redlock.EventReleased:
		m.releases[lockresult.Release(e.Err)].Inc()
	case redlock.EventNodeError:
		m.nodeErrors.WithLabelValues(e.Node, e.Op).Inc()
	}
}

// ObserveContext records one event of a Locker: the six kinds Observe
// records, and the acquisitions' waits, the leases' hold times and the
// renewals' slack and early warnings.
func (m *metrics) ObserveContext(ctx context.Context, e redlock.Event) context.Context {
	switch e.Kind {
	case redlock.EventAcquireStart:
		if e.Op == "acquire" {
			m.waiters.Inc()
		}
	case redlock.EventAcquireEnd:
		if e.Op == "acquire" {
			m.waiters.Dec()
		}
		if e.Err == nil {
			m.wait.Observe(e.Waited.Seconds())
			if e.Lock != redlock.LockSemaphore { // its slot's acquisition counted the lease
				m.holders.Add(float64(e.Count))
			}
			m.mu.Lock()
			at, ok := m.released[e.Resource]
			if ok && time.Since(at) <= e.Latency {
				delete(m.released, e.Resource)
			} else {
				ok = false
			}
			m.mu.Unlock()
			if ok && (e.Waited > 0 || e.HandOver) {
				m.handOff.Observe(time.Since(at).Seconds())
			}
		}
	case redlock.EventReleaseEnd:
		if e.Err == nil {
			m.mu.Lock()
			if len(m.released) >= maxReleased {
				clear(m.released)
			}
			m.released[e.Resource] = time.Now()
			m.mu.Unlock()
		}
	case redlock.EventNodeCall:
		host, port, err := net.SplitHostPort(e.Node)
		if err != nil {
			host, port = e.Node, ""
		}
		m.node.WithLabelValues(host, port, e.Op, string(e.Vote)).Observe(e.Latency.Seconds())
	case redlock.EventLeaseEnd:
		m.hold.WithLabelValues(lockresult.LeaseEnd(e.Err)).Observe(e.Held.Seconds())
		m.holders.Dec()
	case redlock.EventRenewEnd:
		if e.Err == nil {
			m.slack.Observe(e.Left.Seconds())
		}
	case redlock.EventRenewFailing:
		m.failing.Inc()
	default:
		m.Observe(e)
	}
	return ctx
}
