package redisnode

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/e6344662/go-redlock/redlock"
)

// Subscribe implements redlock.Node with one pub/sub connection, which follows
// the node: it is re-established after any error, on a Sentinel group's
// current primary or on any reachable primary of a cluster (where every
// node hears every announcement), and every watched key is then reported
// with an empty release id, since releases may have been announced while
// it was away.
func (n *Node) Subscribe(onRelease func(key, id string)) redlock.Subscription {
	ctx, cancel := context.WithCancel(context.Background())
	s := &redisSubscription{node: n, cancel: cancel, done: make(chan struct{}), channels: make(map[string]bool)}
	go s.receive(ctx, onRelease)
	if n.failover != nil {
		s.following = make(chan struct{})
		go s.followPrimary(ctx)
	}
	return s
}

type redisSubscription struct {
	node   *Node
	cancel context.CancelFunc
	done   chan struct{}

	following chan struct{} // closed when followPrimary ends; nil without it

	mu       sync.Mutex
	ps       *redis.PubSub   // nil until the first connection
	sentinel *redis.PubSub   // followPrimary's, if any
	channels map[string]bool // the watched release channels
	closed   bool
}

// followPrimary listens to the Sentinel group's sentinels, one at a time,
// for the switch of its primary, and cuts the subscription when it comes:
// the subscription is re-established on the new primary at once. Without
// it, the subscription would stay on the old primary until the sentinels
// demote it (about ten seconds later, measured with Redis 7), and releases
// announced on the new primary meanwhile would reach no one.
func (s *redisSubscription) followPrimary(ctx context.Context) {
	defer close(s.following)
	o := s.node.failover
	pause := 50 * time.Millisecond
	for i := 0; ; i = (i + 1) % len(o.SentinelAddrs) {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: o.SentinelAddrs[i], Username: o.SentinelUsername, Password: o.SentinelPassword,
			TLSConfig: o.TLSConfig, Dialer: o.Dialer, DialTimeout: o.DialTimeout, DialerRetries: 1, MaxRetries: -1,
		})
		ps := sc.Subscribe(ctx, "+switch-master")
		s.mu.Lock()
		s.sentinel = ps
		s.mu.Unlock()
		for {
			msg, err := ps.ReceiveTimeout(ctx, 30*time.Second)
			var nerr interface{ Timeout() bool }
			if err == nil {
				pause = 50 * time.Millisecond
				// "<master name> <old ip> <old port> <new ip> <new port>"
				if m, ok := msg.(*redis.Message); ok && strings.HasPrefix(m.Payload, o.MasterName+" ") {
					s.cut()
				}
				continue
			}
			if ctx.Err() == nil && errors.As(err, &nerr) && nerr.Timeout() && ps.Ping(ctx) == nil {
				continue
			}
			break
		}
		_ = ps.Close()
		_ = sc.Close()
		if pauseFor(ctx, pause) != nil {
			return
		}
		pause = min(2*pause, time.Second)
	}
}

// cut closes the current pub/sub connection: receive re-establishes it.
func (s *redisSubscription) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != nil {
		_ = s.ps.Close()
	}
}

// redialTimeout bounds the re-establishment of a subscription.
const redialTimeout = 2 * time.Second

// receive delivers release messages until Close. After an error (the
// server is down, the connection was killed by a failover) it pauses, with
// a pause that grows to a second, then re-establishes the subscription.
func (s *redisSubscription) receive(ctx context.Context, onRelease func(key, id string)) {
	defer close(s.done)
	pause := 50 * time.Millisecond
	first := true
	for {
		keys, err := s.redial(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && !first:
			for _, k := range keys {
				onRelease(k, "")
			}
		}
		first = false
		if err == nil {
			pause = 50 * time.Millisecond
			s.deliver(ctx, onRelease)
		}
		if pauseFor(ctx, pause) != nil {
			return
		}
		pause = min(2*pause, time.Second)
	}
}

// deliver passes on the current connection's messages until it fails or
// ctx ends.
func (s *redisSubscription) deliver(ctx context.Context, onRelease func(key, id string)) {
	s.mu.Lock()
	ps := s.ps
	s.mu.Unlock()
	for {
		msg, err := ps.ReceiveTimeout(ctx, 30*time.Second)
		var nerr interface{ Timeout() bool }
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if m, ok := msg.(*redis.Message); ok {
				if key, ok := strings.CutSuffix(m.Channel, ":released"); ok && m.Payload != "" {
					onRelease(key, m.Payload)
				}
			}
		case errors.As(err, &nerr) && nerr.Timeout() && ps.Ping(ctx) == nil:
			// An idle connection, known to be alive.
		default:
			return
		}
	}
}

// redial replaces the pub/sub connection with a new one subscribed to every
// watched channel, and returns the watched keys.
func (s *redisSubscription) redial(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, redialTimeout)
	defer cancel()
	ps := s.dial(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != nil {
		_ = s.ps.Close()
	}
	s.ps = ps
	if ctx.Err() != nil { // closed meanwhile
		return nil, ctx.Err()
	}
	chans := make([]string, 0, len(s.channels))
	keys := make([]string, 0, len(s.channels))
	for ch := range s.channels {
		chans = append(chans, ch)
		keys = append(keys, strings.TrimSuffix(ch, ":released"))
	}
	if len(chans) == 0 {
		return nil, ps.Ping(ctx)
	}
	return keys, ps.Subscribe(ctx, chans...)
}

// dial opens a pub/sub connection (go-redis connects on its first
// command): on the node's server, a Sentinel group's current primary, or a
// cluster's first primary that answers a PING.
func (s *redisSubscription) dial(ctx context.Context) *redis.PubSub {
	cc, ok := s.node.client.(*redis.ClusterClient)
	if !ok {
		return s.node.client.Subscribe(context.Background())
	}
	var mu sync.Mutex
	var live *redis.Client
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		err := m.Ping(ctx).Err()
		mu.Lock()
		defer mu.Unlock()
		if err == nil && live == nil {
			live = m
		}
		return err
	})
	if live == nil {
		return cc.Subscribe(context.Background()) // fails on use; retried
	}
	return live.Subscribe(context.Background())
}

// Watch records key as watched and subscribes to its release channel. A
// failure cuts the connection: the key stays watched, the subscription is
// re-established in the background and the key is then reported with an
// empty release id.
func (s *redisSubscription) Watch(ctx context.Context, key string) error {
	ch := key + ":released"
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[ch] = true
	if s.ps != nil && s.ps.Subscribe(ctx, ch) != nil {
		_ = s.ps.Close() // receive re-establishes it
	}
	return nil
}

func (s *redisSubscription) Unwatch(ctx context.Context, key string) error {
	ch := key + ":released"
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.channels, ch)
	if s.ps == nil {
		return nil
	}
	return s.ps.Unsubscribe(ctx, ch)
}

func (s *redisSubscription) Close() error {
	s.cancel()
	s.mu.Lock()
	var err error
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.ps != nil {
		// Ends a receive that ignores its context. A connection that a
		// failover or a failed Watch cut is closed already.
		if err = s.ps.Close(); errors.Is(err, redis.ErrClosed) {
			err = nil
		}
	}
	if s.sentinel != nil {
		_ = s.sentinel.Close()
	}
	s.mu.Unlock()
	<-s.done
	if s.following != nil {
		<-s.following
	}
	return err
}

// pauseFor waits for d, or until ctx ends (its error).
func pauseFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
