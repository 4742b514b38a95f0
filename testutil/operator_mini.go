package testutil

import (
	"strings"

	"github.com/alicebob/miniredis/v2/server"
)

// SetReplID makes node i of the cluster answer INFO replication as a
// Redis primary whose replication id (master_replid) is replid, in a
// script as outside one. Miniredis has no replication section, so the
// data-loss rule (scripts/trust.lua) counts a plain miniredis node as a
// stand-in and does not check it; with an id it checks it as a real
// server's: its marker, its sit-out after a loss, the floor of its
// counters, the lost-key check. Give a new id to stand for a restart, a
// failover or a failback (the rule reads a changed id as a loss); replid
// "" puts the node back to a stand-in. Move the node's TIME with
// Server(i).SetTime: the rule counts the rejoin delay on it.
func (c *MiniCluster) SetReplID(i int, replid string) {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	if replid == "" {
		s.m.Server().SetPreHook(nil)
		return
	}
	section := "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_replid:" + replid +
		"\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\n"
	s.m.Server().SetPreHook(func(p *server.Peer, cmd string, args ...string) bool {
		if cmd != "INFO" || len(args) != 1 || !strings.EqualFold(args[0], "replication") {
			return false
		}
		p.WriteBulk(section)
		return true
	})
}
