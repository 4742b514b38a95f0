package chaos_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proxy is a TCP relay on 127.0.0.1 in front of one lock node; in the
// latency-loss scenario the clients reach the nodes only through their
// proxies (the nemesis and the final checks go straight to the nodes). It
// stands in for tc netem, which the CI kernel does not have ("Specified
// qdisc kind is unknown"). What it does to every chunk of bytes it relays,
// in each direction:
//
//   - delay: the chunk is held for the latency plus a random jitter; the
//     order of a connection's bytes is kept, so a chunk never overtakes an
//     earlier one;
//   - loss: with the loss probability the connection's direction stalls for
//     a retransmission timeout before the chunk goes through, which is what
//     a lost segment costs a TCP stream (nothing is lost, everything behind
//     it waits);
//   - drop: with the drop probability the chunk is discarded and both
//     connections are reset, so a request may be lost before the node saw
//     it, or after (the reply is lost).
//
// All of them apply to new and open connections at once when the nemesis
// changes them, and stop when it heals them (chunks already held keep their
// delay).
type proxy struct {
	target string
	ln     net.Listener
	faults atomic.Pointer[proxyFaults]

	rngMu sync.Mutex
	rng   *rand.Rand

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// proxyFaults is what the proxy does to the traffic; the zero value relays
// it untouched.
type proxyFaults struct {
	delay, jitter time.Duration
	// loss is the probability that a chunk waits for a stall drawn from
	// [stallMin, stallMax] first.
	loss               float64
	stallMin, stallMax time.Duration
	// drop is the probability that a chunk resets its connection.
	drop float64
}

// startProxy listens on a free 127.0.0.1 port and relays every connection
// to target until close.
func startProxy(target string, seed uint64) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{target: target, ln: ln, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), conns: map[net.Conn]struct{}{}}
	p.faults.Store(&proxyFaults{})
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the clients dial instead of the node's.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// set replaces the faults; heal is set(proxyFaults{}).
func (p *proxy) set(f proxyFaults) { p.faults.Store(&f) }

// close stops accepting, closes every connection and waits for every
// goroutine of the proxy.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *proxy) float() float64 {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.Float64()
}

func (p *proxy) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return lo + time.Duration(p.rng.Int64N(int64(hi-lo)+1))
}

// track registers c for close; it reports false (and closes c) once the
// proxy is closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve relays one client connection; when either side ends or a drop
// hits, both connections are reset.
func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	node, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		_ = client.Close() // the node is down: the client sees the refusal as EOF
		return
	}
	if !p.track(node) {
		_ = client.Close()
		return
	}
	defer p.untrack(node)
	var once sync.Once
	done := make(chan struct{})
	reset := func() {
		once.Do(func() {
			close(done)
			for _, c := range []net.Conn{client, node} {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, as a dropped connection looks
				}
				_ = c.Close()
			}
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(client, node, done, reset) })
	wg.Go(func() { p.pipe(node, client, done, reset) })
	wg.Wait()
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe relays src to dst through a queue: a reader stamps each chunk with
// its due time (never before the previous chunk's), a writer sends it then.
func (p *proxy) pipe(src, dst net.Conn, done chan struct{}, reset func()) {
	queue := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(queue)
		var last time.Time
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				f := p.faults.Load()
				if f.drop > 0 && p.float() < f.drop {
					reset()
					return
				}
				due := time.Now().Add(f.delay + p.between(0, f.jitter))
				if f.loss > 0 && p.float() < f.loss {
					due = due.Add(p.between(f.stallMin, f.stallMax))
				}
				if due.Before(last) {
					due = last
				}
				last = due
				select {
				case queue <- chunk{data: append([]byte(nil), buf[:n]...), due: due}:
				case <-done:
					return
				}
			}
			if err != nil {
				reset()
				return
			}
		}
	})
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for c := range queue { // after done, drains until the reader stops
		if d := time.Until(c.due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-done:
				timer.Stop()
				continue
			}
		}
		select {
		case <-done:
			continue
		default:
		}
		if _, err := dst.Write(c.data); err != nil {
			reset()
		}
	}
	wg.Wait()
}

// TestProxy checks the proxy on an echo server: untouched traffic, added
// latency in both directions, a stall for a loss, and a reset for a drop.
func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var echoes sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		echoes.Wait()
	})
	echoes.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			echoes.Go(func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			})
		}
	})
	p, err := startProxy(ln.Addr().String(), 1)
	require.NoError(t, err)
	t.Cleanup(p.close)

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	roundTrip := func() (time.Duration, error) {
		start := time.Now()
		if err := c.SetDeadline(start.Add(5 * time.Second)); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			return 0, err
		}
		line, err := r.ReadString('\n')
		if err == nil && line != "ping\n" {
			err = fmt.Errorf("echo %q", line)
		}
		return time.Since(start), err
	}

	_, err = roundTrip()
	require.NoError(t, err)

	p.set(proxyFaults{delay: 40 * time.Millisecond})
	d, err := roundTrip()
	require.NoError(t, err)
	require.GreaterOrEqual(t, d, 80*time.Millisecond, "40ms each way")

	p.set(proxyFaults{loss: 1, stallMin: 150 * time.Millisecond, stallMax: 150 * time.Millisecond})
	d, err = roundTrip()
	require.NoError(t, err)
	require.GreaterOrEqual(t, d, 300*time.Millisecond, "a stall each way")

	p.set(proxyFaults{})
	d, err = roundTrip()
	require.NoError(t, err)
	require.Less(t, d, 2*time.Second)

	p.set(proxyFaults{drop: 1})
	_, err = roundTrip()
	require.Error(t, err, "the connection is reset")
}
