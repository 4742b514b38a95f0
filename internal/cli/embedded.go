package cli

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// maxEmbedded caps bench --embedded.
const maxEmbedded = 25

// startMiniredis starts n independent in-process Redis servers (miniredis)
// on free 127.0.0.1 ports. With wallClock, key TTLs run down with the wall
// clock as on a real server; otherwise they move only by FastForward. On
// failure, the servers already started are stopped.
func startMiniredis(n int, wallClock bool) ([]*miniredis.Miniredis, error) {
	servers := make([]*miniredis.Miniredis, 0, n)
	for range n {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			stopMiniredis(servers)
			return nil, fmt.Errorf("start embedded Redis: %w", err)
		}
		if wallClock {
			m.ClockTTL(true)
		}
		servers = append(servers, m)
	}
	return servers, nil
}

// stopMiniredis stops every server.
func stopMiniredis(servers []*miniredis.Miniredis) {
	for _, m := range servers {
		m.Close()
	}
}

// miniredisURLs returns the redis:// URLs of servers.
func miniredisURLs(servers []*miniredis.Miniredis) []string {
	urls := make([]string, len(servers))
	for i, m := range servers {
		urls[i] = "redis://" + m.Addr()
	}
	return urls
}
