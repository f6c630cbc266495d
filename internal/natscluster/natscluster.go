// Package natscluster starts NATS JetStream clusters inside a test's (or
// a benchmark's) process: several nats-server instances on loopback, routed to each
// other, each with its own store, which tests stop and start again one by
// one (what a cluster of weir servers runs on).
//
// It may import internal/await, github.com/nats-io/nats-server/v2,
// github.com/nats-io/nats.go and the standard library.
package natscluster

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir/internal/await"
)

// Cluster is a running NATS cluster of a test (or of a benchmark).
type Cluster struct {
	opts    []*server.Options
	servers []*server.Server
}

// Start starts n routed JetStream servers named n1..nN (one standalone
// server for n = 1) with their stores under the test's temporary
// directories, waits until JetStream answers, and stops them when the
// test ends. maxPayload, when positive, is every server's payload limit.
func Start(t testing.TB, n int, maxPayload int32) *Cluster {
	t.Helper()
	var dirs []string
	for range n {
		dirs = append(dirs, t.TempDir())
	}
	c, err := New(dirs, maxPayload)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// New starts one server per store directory of dirs, as Start does, and
// returns once JetStream answers; the caller closes the cluster.
func New(dirs []string, maxPayload int32) (_ *Cluster, err error) {
	n := len(dirs)
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	clientPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routePorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for _, p := range routePorts {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	for i := 0; i < n; i++ {
		o := &server.Options{ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: clientPorts[i],
			JetStream: true, StoreDir: dirs[i], NoLog: true, NoSigs: true,
			// NoAdvertise: a client given one server's URL stays on it, so
			// stopping that server cuts the client off (a partition).
			Cluster: server.ClusterOpts{Name: "weir-test", Host: "127.0.0.1", Port: routePorts[i], NoAdvertise: true}, Routes: routes}
		if n == 1 { // a single server: JetStream standalone
			o.Cluster, o.Routes = server.ClusterOpts{}, nil
		}
		if maxPayload > 0 {
			o.MaxPayload = maxPayload
		}
		c.opts = append(c.opts, o)
		c.servers = append(c.servers, nil)
	}
	for i := range c.opts {
		if err := c.StartServer(i); err != nil {
			return nil, err
		}
	}
	if err := c.WaitReady(60 * time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// Close stops every server.
func (c *Cluster) Close() {
	for i := range c.servers {
		c.StopServer(i)
	}
}

// URLs returns the client URLs of servers idx (all when none is given),
// comma-separated (what --nats-url takes). A client learns no other
// server's URL from them.
func (c *Cluster) URLs(idx ...int) string {
	if len(idx) == 0 {
		for i := range c.opts {
			idx = append(idx, i)
		}
	}
	var u []string
	for _, i := range idx {
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port))
	}
	return strings.Join(u, ",")
}

// StopServer shuts server i down (its store stays for StartServer).
func (c *Cluster) StopServer(i int) {
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// StartServer starts server i (again), with its store.
func (c *Cluster) StartServer(i int) error {
	s, err := server.NewServer(c.opts[i])
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("NATS server %s did not start", c.opts[i].ServerName)
	}
	c.servers[i] = s
	return nil
}

// WaitReady waits until JetStream answers through a connection to the
// running servers (a meta leader is elected).
func (c *Cluster) WaitReady(d time.Duration) error {
	var err error
	if await.Until(d, 200*time.Millisecond, func() bool { err = c.jetStreamAnswers(); return err == nil }) {
		return nil
	}
	return fmt.Errorf("the NATS cluster's JetStream did not answer within %s: %w", d, err)
}

// jetStreamAnswers asks JetStream for the account's information through
// a new connection to the running servers.
func (c *Cluster) jetStreamAnswers() error {
	nc, err := nats.Connect(c.URLs(), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(nats.MaxWait(2 * time.Second))
	return err
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
