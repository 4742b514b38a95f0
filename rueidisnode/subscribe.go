package rueidisnode

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/e6344662/go-redlock/redlock"
)

// releasedSuffix ends a lock key's release channel.
const releasedSuffix = ":released"

// Subscribe implements redlock.Node with one dedicated pub/sub connection,
// re-established after any error with a pause that grows to a second; after
// that every watched key is reported with an empty message, since releases
// may have been announced while it was away.
func (n *Node) Subscribe(onMessage func(key, msg string)) redlock.Subscription {
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscription{node: n, cancel: cancel, done: make(chan struct{}), keys: map[string]bool{}}
	go s.run(ctx, onMessage)
	return s
}

type subscription struct {
	node   *Node
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	conn   rueidis.DedicatedClient // nil while not connected
	keys   map[string]bool         // watched lock keys
	closed bool
}

// redialTimeout bounds the re-establishment of a subscription.
const redialTimeout = 2 * time.Second

func (s *subscription) run(ctx context.Context, onMessage func(key, msg string)) {
	defer close(s.done)
	pause := 50 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		conn, release := s.node.client.Dedicate()
		lost := conn.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
			if key, ok := strings.CutSuffix(m.Channel, releasedSuffix); ok && m.Message != "" {
				onMessage(key, m.Message)
			}
		}})
		keys, err := s.attach(ctx, conn)
		if err == nil {
			if !first {
				for _, k := range keys {
					onMessage(k, "")
				}
			}
			first = false
			pause = 50 * time.Millisecond
			select {
			case <-lost:
			case <-ctx.Done():
			}
		}
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
		conn.Close()
		release()
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, time.Second)
	}
}

// attach subscribes conn to every watched key's channel and makes it the
// subscription's connection; it returns the watched keys.
func (s *subscription) attach(ctx context.Context, conn rueidis.DedicatedClient) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, redialTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock() // Watch waits: no key is added between the SUBSCRIBE and s.conn
	keys := make([]string, 0, len(s.keys))
	chans := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
		chans = append(chans, k+releasedSuffix)
	}
	var err error
	if len(chans) == 0 {
		err = conn.Do(ctx, conn.B().Ping().Build()).Error()
	} else {
		err = conn.Do(ctx, conn.B().Subscribe().Channel(chans...).Build()).Error()
	}
	if err != nil {
		return nil, err
	}
	s.conn = conn
	return keys, nil
}

// Watch starts announcing releases of key. While the connection is down,
// the key is recorded and subscribed when it is back (reported then with
// an empty message).
func (s *subscription) Watch(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.keys[key] = true
	if s.conn == nil {
		return nil
	}
	return s.conn.Do(ctx, s.conn.B().Subscribe().Channel(key+releasedSuffix).Build()).Error()
}

// Unwatch stops announcing releases of key.
func (s *subscription) Unwatch(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, key)
	if s.conn == nil || s.closed {
		return nil
	}
	return s.conn.Do(ctx, s.conn.B().Unsubscribe().Channel(key+releasedSuffix).Build()).Error()
}

// Close ends the subscription and waits for its goroutine.
func (s *subscription) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
	return nil
}

var errClosed = closedError{}

type closedError struct{}

func (closedError) Error() string { return "rueidisnode: subscription closed" }
