package chaos_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Network namespaces for the partition scenario.
//
// Lock node j runs in a network namespace of its own,
// redlock-chaos-<pid>-<slot>-<j> (slot tells apart the topologies of soak
// lanes running at once), joined to the test's (root) namespace by a veth
// pair on the subnet
// 10.<s>.<j>.0/24: the node's end is 10.<s>.<j>.2 (the server binds it), the
// root end is 10.<s>.<j>.1 (the nemesis and the checks use it) and also
// carries one address per client, 10.<s>.<j>.<10+i>, which client i binds
// as the source of every connection to node j. The namespaces are not
// routed to each other or to anything else: a node can answer only the
// addresses on its own veth.
//
// A partition of client i from node j is one route in node j's namespace,
// "blackhole 10.<s>.<j>.<10+i>/32": the node's replies to that client are
// dropped, and with strict reverse-path filtering (rp_filter=1) so are the
// client's packets to the node, since their source no longer routes back
// through the veth. Without rp_filter the cut is one-way: the node hears
// the client and acts on its commands, the client hears nothing. Either way
// every other client and the nemesis still reach the node, so the cut is
// per client and asymmetric (client 0 may lose nodes 1 and 2 while client 3
// loses node 4 only).
//
// Everything is created by the suite and named with its process id; the
// test's cleanup deletes it even when the test fails, and a sweep at start
// deletes what runs killed before their cleanup left behind.

// requireNetnsEnv names the variable that turns a missing network namespace
// support (not root, no ip command) from a skipped scenario into a failed
// one, as CI sets it.
const requireNetnsEnv = "REDLOCK_REQUIRE_NETNS"

const (
	netnsPrefix = "redlock-chaos-" // + <pid>-<slot>-<node>
	vethPrefix  = "rlkc"           // + <pid>h<slot><node>: the root end (15 bytes at most)
	nodeVeth    = "veth0"          // the node's end, inside its namespace
	netnsSlots  = 10               // topologies at once; nodes < 10 too
)

var (
	netnsName = regexp.MustCompile(`^` + netnsPrefix + `(\d+)-\d+-\d+$`)
	vethName  = regexp.MustCompile(`^` + vethPrefix + `(\d+)h\d+$`)

	// netnsMu serialises the creation of topologies, so that two at once
	// (soak lanes) pick different slots and subnets.
	netnsMu   sync.Mutex
	slotInUse [netnsSlots]bool
)

// netTopo is one scenario's namespaces.
type netTopo struct {
	t      *testing.T
	pid    int
	slot   int
	subnet int // second octet of 10.<subnet>.0.0/16
	nodes  int

	// strict is the reverse-path filtering last set in every namespace
	// (by the nemesis goroutine only); strictSet says whether it was.
	strict, strictSet bool
}

// requireNetns skips the test with a reason when network namespaces cannot
// be used, or fails it when REDLOCK_REQUIRE_NETNS is set.
func requireNetns(t *testing.T) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "not root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		reason = "no ip command (iproute2)"
	}
	if reason != "" {
		netnsUnavailable(t, reason)
	}
}

func netnsUnavailable(t *testing.T, reason string) {
	t.Helper()
	msg := "network namespaces unavailable (" + reason + "); the partition scenario needs root and iproute2"
	if required, _ := strconv.ParseBool(os.Getenv(requireNetnsEnv)); required {
		t.Fatal(msg + " (" + requireNetnsEnv + " is set, so this is a failure)")
	}
	t.Skip(msg + "; set " + requireNetnsEnv + "=1 to make this a failure")
}

// ip runs the ip command and returns its error with its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// setupNetns creates one namespace per lock node, with its veth pair and
// addresses for every client, and registers their removal. Call it before
// starting the servers, so that their cleanup (which kills them) runs
// first.
func setupNetns(t *testing.T, nodes, clients int) *netTopo {
	t.Helper()
	requireNetns(t)
	netnsMu.Lock()
	defer netnsMu.Unlock()
	sweepStaleNetns(t)
	n := &netTopo{t: t, pid: os.Getpid(), nodes: nodes, slot: -1}
	for k, used := range slotInUse {
		if !used {
			n.slot = k
			break
		}
	}
	if n.slot < 0 {
		t.Fatalf("more than %d network topologies at once", netnsSlots)
	}
	slotInUse[n.slot] = true
	t.Cleanup(n.remove)
	var err error
	if n.subnet, err = freeSubnet(n.pid + n.slot); err != nil {
		netnsUnavailable(t, err.Error())
	}
	for j := range nodes {
		if err := n.create(j, clients); err != nil {
			if j == 0 && !isRequired() {
				netnsUnavailable(t, err.Error())
			}
			t.Fatalf("network namespace for node %d: %v", j, err)
		}
	}
	t.Logf("network namespaces %s%d-%d-{0..%d}, subnet 10.%d.0.0/16", netnsPrefix, n.pid, n.slot, nodes-1, n.subnet)
	return n
}

func isRequired() bool {
	required, _ := strconv.ParseBool(os.Getenv(requireNetnsEnv))
	return required
}

func (n *netTopo) ns(j int) string   { return fmt.Sprintf("%s%d-%d-%d", netnsPrefix, n.pid, n.slot, j) }
func (n *netTopo) veth(j int) string { return fmt.Sprintf("%s%dh%d%d", vethPrefix, n.pid, n.slot, j) }

// NodeIP is the address node j's server binds.
func (n *netTopo) NodeIP(j int) string { return fmt.Sprintf("10.%d.%d.2", n.subnet, j) }

// ClientIP is the source address of client i's connections to node j.
func (n *netTopo) ClientIP(i, j int) string { return fmt.Sprintf("10.%d.%d.%d", n.subnet, j, 10+i) }

func (n *netTopo) create(j, clients int) error {
	ns, veth := n.ns(j), n.veth(j)
	if err := ip("netns", "add", ns); err != nil {
		return err
	}
	// The node's end is created in its namespace: it never exists in ours.
	if err := ip("link", "add", veth, "type", "veth", "peer", "name", nodeVeth, "netns", ns); err != nil {
		return err
	}
	cmds := [][]string{{"addr", "add", fmt.Sprintf("10.%d.%d.1/24", n.subnet, j), "dev", veth}}
	for i := range clients {
		cmds = append(cmds, []string{"addr", "add", n.ClientIP(i, j) + "/24", "dev", veth})
	}
	cmds = append(cmds,
		[]string{"link", "set", veth, "up"},
		[]string{"-n", ns, "addr", "add", n.NodeIP(j) + "/24", "dev", nodeVeth},
		[]string{"-n", ns, "link", "set", nodeVeth, "up"},
		[]string{"-n", ns, "link", "set", "lo", "up"},
	)
	for _, c := range cmds {
		if err := ip(c...); err != nil {
			return err
		}
	}
	return nil
}

// ServerPrefix is the command prefix that starts node j's server in its
// namespace (testutil.WithCommandPrefix).
func (n *netTopo) ServerPrefix(j int) []string { return []string{"ip", "netns", "exec", n.ns(j)} }

// Cut drops the traffic between client i and node j: both ways while node
// j's namespace filters strictly (SetStrict), else node j's replies only.
func (n *netTopo) Cut(i, j int) error {
	return ip("-n", n.ns(j), "route", "add", "blackhole", n.ClientIP(i, j)+"/32")
}

// Heal removes the cut of client i from node j.
func (n *netTopo) Heal(i, j int) error {
	return ip("-n", n.ns(j), "route", "del", "blackhole", n.ClientIP(i, j)+"/32")
}

// SetStrict turns strict reverse-path filtering on or off in node j's
// namespace: on, a cut drops both directions; off, only the node's replies.
func (n *netTopo) SetStrict(j int, strict bool) error {
	v := "0"
	if strict {
		v = "1"
	}
	script := fmt.Sprintf("echo %s > /proc/sys/net/ipv4/conf/all/rp_filter && echo %s > /proc/sys/net/ipv4/conf/%s/rp_filter", v, v, nodeVeth)
	out, err := exec.Command("ip", "netns", "exec", n.ns(j), "sh", "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rp_filter=%s in %s: %v: %s", v, n.ns(j), err, bytes.TrimSpace(out))
	}
	return nil
}

// setStrictAll sets SetStrict in every node's namespace, when it changes.
func (n *netTopo) setStrictAll(strict bool) error {
	if n.strictSet && n.strict == strict {
		return nil
	}
	for j := range n.nodes {
		if err := n.SetStrict(j, strict); err != nil {
			return err
		}
	}
	n.strict, n.strictSet = strict, true
	return nil
}

// remove deletes the veth pairs and the namespaces; it reports what it could
// not delete. The servers in them are gone by then (their cleanup ran
// first).
func (n *netTopo) remove() {
	for j := range n.nodes {
		removeVeth(n.t, n.veth(j))
		removeNetns(n.t, n.ns(j))
	}
	netnsMu.Lock()
	slotInUse[n.slot] = false
	netnsMu.Unlock()
}

func removeVeth(t *testing.T, name string) {
	if err := ip("link", "del", name); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		t.Errorf("cleanup: %v", err)
	}
}

func removeNetns(t *testing.T, name string) {
	if _, err := os.Stat("/run/netns/" + name); errors.Is(err, os.ErrNotExist) {
		return
	}
	// A namespace is deleted once its last process has gone; a server that
	// was just killed may take a moment.
	var err error
	for try := 0; try < 20; try++ {
		if err = ip("netns", "del", name); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("cleanup: %v", err)
}

// sweepStaleNetns deletes namespaces and veths of this suite whose process
// is gone (a run killed before its cleanup).
func sweepStaleNetns(t *testing.T) {
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if m := netnsName.FindStringSubmatch(name); m != nil && !alive(m[1]) {
				t.Logf("removing stale network namespace %s", name)
				removeNetns(t, name)
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if m := vethName.FindStringSubmatch(name); m != nil && !alive(m[1]) {
				t.Logf("removing stale veth %s", name)
				removeVeth(t, name)
			}
		}
	}
}

// alive reports whether process pid exists.
func alive(pid string) bool {
	p, err := strconv.Atoi(pid)
	if err != nil || p <= 0 {
		return false
	}
	err = syscall.Kill(p, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freeSubnet picks a 10.x.0.0/16 that no address or route of this machine
// overlaps, starting from one derived from pid so that two runs at once
// pick different ones.
func freeSubnet(pid int) (int, error) {
	var used []*net.IPNet
	for _, args := range [][]string{{"-4", "-o", "addr", "show"}, {"-4", "route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			return 0, fmt.Errorf("ip %s: %v", strings.Join(args, " "), err)
		}
		for _, f := range strings.Fields(string(out)) {
			if _, p, err := net.ParseCIDR(f); err == nil {
				used = append(used, p)
			} else if a := net.ParseIP(f); a != nil && a.To4() != nil {
				used = append(used, &net.IPNet{IP: a.To4(), Mask: net.CIDRMask(32, 32)})
			}
		}
	}
	const lo, span = 150, 100 // 10.150.0.0/16 to 10.249.0.0/16
	for k := range span {
		x := lo + (pid+k)%span
		cand := &net.IPNet{IP: net.IPv4(10, byte(x), 0, 0).To4(), Mask: net.CIDRMask(16, 32)}
		free := true
		for _, p := range used {
			if ones, _ := p.Mask.Size(); ones > 0 && (p.Contains(cand.IP) || cand.Contains(p.IP)) {
				free = false
				break
			}
		}
		if free {
			return x, nil
		}
	}
	return 0, errors.New("no free 10.x.0.0/16 subnet")
}
