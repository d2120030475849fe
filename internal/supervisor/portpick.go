package supervisor

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Choosing a new per-trial port. Binding port 0 lets the kernel search
// its ephemeral range, and that search slows as the range fills: measured
// on this project's 2-core machine, bind(0) took about 8 µs with up to
// 6,000 ports bound and 0.7 ms at its median (18 ms at its p99) past
// 7,000, CPU the supervisor spends on each trial.open, next to the plane.
// A bind to a port named outright costs the same 7 µs with 10,000 bound.
// So the keeper names a random port of the same range itself (never one
// the host reserved), tries a few, and binds port 0 only if all of them
// are taken: the ports stay as unpredictable as the kernel's.

// pickTries is how many random ports the keeper tries before binding 0:
// with the range two-thirds full, all of them are taken about once in
// 17,000 picks, which then cost what bind(0) costs.
const pickTries = 24

// portRange is the ports the keeper picks from: the kernel's ephemeral
// range less its reserved ports.
type portRange struct {
	lo, hi   int
	reserved func(int) bool
}

// hostPortRange reads the host's range, or falls back to Linux's default
// (and no reserved ports) where /proc does not say.
func hostPortRange() portRange {
	r := portRange{lo: 32768, hi: 60999, reserved: func(int) bool { return false }}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if lo, hi, ok := parseRange(string(b)); ok {
			r.lo, r.hi = lo, hi
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_reserved_ports"); err == nil {
		r.reserved = parseReserved(string(b))
	}
	return r
}

// parseRange reads ip_local_port_range: two numbers, low then high.
func parseRange(s string) (lo, hi int, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

// parseReserved reads ip_local_reserved_ports: ports and ranges, comma
// separated ("8080,9000-9010"). What does not read is ignored.
func parseReserved(s string) func(int) bool {
	type span struct{ lo, hi int }
	var spans []span
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		a, b, isRange := strings.Cut(strings.TrimSpace(part), "-")
		lo, err := strconv.Atoi(a)
		if err != nil {
			continue
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(b); err != nil {
				continue
			}
		}
		spans = append(spans, span{lo, hi})
	}
	return func(p int) bool {
		for _, s := range spans {
			if p >= s.lo && p <= s.hi {
				return true
			}
		}
		return false
	}
}

// listenAny binds a new port on host: a random free one of r, else one
// the kernel picks.
func (r portRange) listenAny(host string) (net.Listener, error) {
	for i := 0; i < pickTries && r.hi > 0; i++ {
		p := r.lo + rand.IntN(r.hi-r.lo+1)
		if r.reserved(p) {
			continue
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}
