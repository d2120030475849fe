package connlimit

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/websitebench/mailplane/internal/limits"
)

// Pool is one cap on the open connections of a process, shared by all
// its listeners (Limits.Pool), for the surfaces that serve many trials. A
// connection over the cap does not wait and is not refused while a place
// can be freed: the connection that has been quiet longest and is not
// answering a request (MarkBusy) is closed to make room, so that a flood
// of idle connections costs its sender its oldest ones, never a new
// client its service. Only when every open connection is busy is the new
// one closed at once.
type Pool struct {
	max   int
	mu    sync.Mutex
	conns map[*Conn]struct{}
	shed  atomic.Int64
}

// NewPool returns a pool of at most max connections.
func NewPool(max int) *Pool {
	return &Pool{max: max, conns: make(map[*Conn]struct{})}
}

// Max is the pool's cap.
func (p *Pool) Max() int { return p.max }

// Open is how many connections the pool holds.
func (p *Pool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Shed is how many connections were closed for room or refused when
// every place was busy.
func (p *Pool) Shed() int { return int(p.shed.Load()) }

// admit takes c into the pool, closing the quietest idle connection if it
// is full. It reports false, and takes nothing, when every place is busy.
func (p *Pool) admit(c *Conn) bool {
	p.mu.Lock()
	var victim *Conn
	if len(p.conns) >= p.max {
		victim = p.quietest()
		if victim == nil {
			p.mu.Unlock()
			return false
		}
		delete(p.conns, victim)
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	if victim != nil {
		p.shed.Add(1)
		victim.Close()
		if victim.onShed != nil {
			victim.onShed()
		}
	}
	return true
}

// quietest is the open connection, not busy, to close first: of those
// whose request a stranger sent (answered and closing, then still reading
// an unknown caller's body), else of all, the one whose last byte is
// oldest. A scan: it runs only when the pool is full, and costs
// microseconds for thousands of connections.
func (p *Pool) quietest() *Conn {
	var best *Conn
	var bestRank int32
	var bestAt int64
	for c := range p.conns {
		if c.busy.Load() > 0 {
			continue
		}
		rank, at := c.stranger.Load(), c.last.Load()
		if best == nil || rank > bestRank || (rank == bestRank && at < bestAt) {
			best, bestRank, bestAt = c, rank, at
		}
	}
	return best
}

func (p *Pool) remove(c *Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// MarkBusy marks the connection under c (a *Conn, or a *tls.Conn over
// one) as answering a request (busy) or not: a busy connection is never
// closed to make room. It does nothing for other connections.
func MarkBusy(c net.Conn, busy bool) {
	if lc := under(c); lc != nil && busy {
		lc.busy.Add(1)
	} else if lc != nil {
		lc.busy.Add(-1)
	}
}

// HTTPConnState is an http.Server.ConnState that ends a request's busy
// mark (Known) when it is answered: a connection waiting for its first
// request, between requests, or reading a request whose caller is not yet
// known may be closed to make room; one whose known caller's request is
// being answered may not.
func HTTPConnState() func(net.Conn, http.ConnState) {
	return func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateIdle, http.StateHijacked, http.StateClosed:
			answered(c)
		}
	}
}

// ProcessCap is the connection cap a shared surface's process can hold:
// two descriptors per connection (its own and a plane connection) out of
// RLIMIT_NOFILE, which Go raises to the hard limit at start, less
// limits.ConnFDReserve; and limits.ConnBytes per connection out of a
// 1/limits.ConnMemoryShare part of the memory (the cgroup's limit if it
// has one). Never below the reference's DefaultMaxConns.
func ProcessCap() int {
	var r syscall.Rlimit
	fds := DefaultMaxConns
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur > limits.ConnFDReserve {
		fds = int(min(r.Cur-limits.ConnFDReserve, 1<<30) / 2)
	}
	mem := memoryBytes() / limits.ConnMemoryShare / limits.ConnBytes
	return max(DefaultMaxConns, min(fds, int(min(mem, 1<<30))))
}

// memoryBytes is the cgroup's memory limit (v2), or else the machine's.
func memoryBytes() int64 {
	var total int64
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		total = int64(si.Totalram) * int64(si.Unit)
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			return n
		}
	}
	return total
}

// touch records activity on c, for the pool's choice of the quietest.
func (c *Conn) touch() { c.last.Store(time.Now().UnixNano()) }

// connKey carries a request's connection in its context (HTTPConnContext).
type connKey struct{}

// HTTPConnContext is an http.Server.ConnContext that keeps each
// connection in its requests' contexts, for Remaining: the listener's own
// *Conn, also beneath TLS.
func HTTPConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc := under(c); lc != nil {
		c = lc
	}
	return context.WithValue(ctx, connKey{}, c)
}

// Remaining is how long the connection a request came in on has left to
// live (its Conn's Remaining): a request that holds its answer (a long
// wait) answers before then. Very large when there is no bound.
func Remaining(ctx context.Context) time.Duration {
	if c, ok := ctx.Value(connKey{}).(*Conn); ok {
		return c.Remaining()
	}
	return 1<<63 - 1
}
