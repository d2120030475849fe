package supervisor

import (
	"net"
	"strconv"
	"testing"
)

func TestParsePortRange(t *testing.T) {
	if lo, hi, ok := parseRange("32768\t60999\n"); !ok || lo != 32768 || hi != 60999 {
		t.Fatalf("parseRange: %d %d %v", lo, hi, ok)
	}
	for _, bad := range []string{"", "1", "9 8", "0 10", "1 70000", "a b"} {
		if _, _, ok := parseRange(bad); ok {
			t.Errorf("parseRange(%q) read", bad)
		}
	}
	r := parseReserved("8080, 9000-9010,x,12-y\n")
	for p, want := range map[int]bool{8080: true, 9000: true, 9005: true, 9010: true, 9011: false, 8081: false, 12: false} {
		if r(p) != want {
			t.Errorf("reserved(%d) = %v", p, !want)
		}
	}
	if parseReserved("\n")(1) {
		t.Error("an empty list reserves a port")
	}
}

// TestListenAnyPicksInRange: a new port is a free one of the range, never
// a reserved one, and when every port of the range is taken the kernel
// picks one.
func TestListenAnyPicksInRange(t *testing.T) {
	// A range of three ports, the middle one reserved.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	base, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lo := base.Addr().(*net.TCPAddr).Port
	base.Close()
	if lo+2 > 65535 {
		t.Skip("no room above the kernel's port")
	}
	r := portRange{lo: lo, hi: lo + 2, reserved: func(p int) bool { return p == lo+1 }}
	got := map[int]bool{}
	for range 2 {
		ln, err := r.listenAny("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		got[ln.Addr().(*net.TCPAddr).Port] = true
	}
	if got[lo+1] {
		t.Fatalf("picked the reserved port: %v", got)
	}
	// Every free port of the range held (the two picks may have missed
	// one, once in about 17,000 runs, and the kernel picked instead): the
	// next one is the kernel's, outside the range.
	for _, p := range []int{lo, lo + 2} {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			held = append(held, ln)
		}
	}
	ln, err := r.listenAny("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, ln)
	if p := ln.Addr().(*net.TCPAddr).Port; p >= lo && p <= lo+2 {
		t.Fatalf("a port of a full range: %d", p)
	}
	// The zero value lets the kernel pick.
	ln, err = portRange{}.listenAny("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	held = append(held, ln)
}
