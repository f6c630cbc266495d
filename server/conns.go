package server

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Defaults of the connection caps (Config.MaxConnections,
// Config.MaxConnectionsPerAddress) and timeouts.
const (
	// DefaultMaxConnectionsPerAddress bounds one client address's open
	// connections, unless the total cap is lower.
	DefaultMaxConnectionsPerAddress = 256
	// MaxDefaultConnections is the highest total cap the descriptor limit
	// yields by default.
	MaxDefaultConnections = 8192
	// DefaultReadHeaderTimeout bounds the arrival of a request's headers
	// (and of a TLS handshake) from the connection's first read: a
	// connection that sends nothing is closed after it.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection that sends no new
	// request.
	DefaultIdleTimeout = 2 * time.Minute
)

// descriptorReserve is how many of the process's descriptors the default
// caps leave to everything but client connections: the state store's
// files, the embedded broker's, SQLite databases, sinks' files, the
// listeners. A quarter of the limit, and at least 128.
func descriptorReserve(limit uint64) uint64 { return max(128, limit/4) }

// DefaultMaxConnections returns the total connection cap this process
// takes when Config.MaxConnections is 0: its descriptor limit less the
// reserve, at most MaxDefaultConnections.
func DefaultMaxConnections() int {
	limit, known := descriptorLimit()
	total, _, _ := connCaps(0, 0, limit, known)
	return total
}

// connCaps works out the caps of cfg: the total cap stays below the
// descriptor limit less its reserve, whatever was asked (a note says so
// when it had to lower a cap); 0 asks for the default, a negative cap is
// none (0 in the result).
func connCaps(maxConns, perAddr int, limit uint64, known bool) (total, each int, notes []string) {
	budget := 0 // 0: unknown
	if known {
		if free := int64(limit) - int64(descriptorReserve(limit)); free >= 16 {
			budget = int(free)
		} else {
			budget = max(1, int(limit/2))
		}
	}
	switch {
	case maxConns < 0:
		total = 0
	case maxConns == 0 && budget > 0:
		total = min(budget, MaxDefaultConnections)
	case maxConns == 0:
		total = MaxDefaultConnections
	default:
		total = maxConns
	}
	if budget > 0 && (total == 0 || total > budget) {
		if maxConns != 0 {
			notes = append(notes, fmt.Sprintf("--max-connections lowered to %d: the descriptor limit is %d, and %d of them stay for the data directory, the broker and sinks (raise the limit with ulimit -n)", budget, limit, limit-uint64(budget)))
		}
		total = budget
	}
	switch {
	case perAddr < 0:
		each = 0
	case perAddr == 0:
		each = DefaultMaxConnectionsPerAddress
	default:
		each = perAddr
	}
	if total > 0 && (each == 0 || each > total) {
		each = total
	}
	return total, each, notes
}

// connLimiter counts the open connections of the process's listeners, in
// all and per client address, and refuses new ones past the caps.
type connLimiter struct {
	total, perAddr int // 0: no cap
	log            *slog.Logger

	mu       sync.Mutex
	all      int            // guarded by mu: open connections
	byAddr   map[string]int // guarded by mu: open connections per address
	accepted int            // guarded by mu: connections admitted or refused so far
	refused  int            // guarded by mu: refused since the last warning
	warned   time.Time      // guarded by mu: when the last warning was logged
}

func newConnLimiter(total, perAddr int, log *slog.Logger) *connLimiter {
	return &connLimiter{total: total, perAddr: perAddr, log: log, byAddr: map[string]int{}}
}

// admit counts a new connection of addr, or says it is over a cap.
func (l *connLimiter) admit(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accepted++
	over := ""
	switch {
	case l.total > 0 && l.all >= l.total:
		over = fmt.Sprintf("the process holds %d connections, its cap (--max-connections)", l.all)
	case l.perAddr > 0 && l.byAddr[addr] >= l.perAddr:
		over = fmt.Sprintf("%s holds %d connections, its cap (--max-connections-per-address)", addr, l.byAddr[addr])
	}
	if over == "" {
		l.all++
		l.byAddr[addr]++
		return true
	}
	l.refused++
	if now := time.Now(); now.Sub(l.warned) >= 10*time.Second {
		l.log.Warn("refusing new API connections: "+over, "refused", l.refused)
		l.warned, l.refused = now, 0
	}
	return false
}

// release uncounts a closed connection of addr.
func (l *connLimiter) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

// open returns the open connections of addr, or of every address for "".
func (l *connLimiter) open(addr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if addr == "" {
		return l.all
	}
	return l.byAddr[addr]
}

// seen returns how many connections were admitted or refused so far.
func (l *connLimiter) seen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// wrap returns ln with its connections counted: one over a cap is closed
// as soon as it is accepted, before anything is read from it (a TLS
// listener wraps the result, so no handshake is spent on it either).
func (l *connLimiter) wrap(ln net.Listener) net.Listener { return &limitedListener{Listener: ln, l: l} }

type limitedListener struct {
	net.Listener
	l *connLimiter
}

// Accept returns the next connection within the caps, closing those over.
func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(addr); err == nil {
			addr = h
		}
		if ll.l.admit(addr) {
			return &limitedConn{Conn: c, l: ll.l, addr: addr}, nil
		}
		c.Close()
	}
}

// limitedConn uncounts itself at its first Close.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	addr string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
