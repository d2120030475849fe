package peercred

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestOfReportsOwnIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", path)
		if err == nil {
			defer c.Close()
			buf := make([]byte, 1)
			c.Read(buf)
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cred, err := Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if cred.UID != uint32(os.Getuid()) || cred.GID != uint32(os.Getgid()) {
		t.Fatalf("got %+v, want uid %d gid %d", cred, os.Getuid(), os.Getgid())
	}
}

func TestPolicy(t *testing.T) {
	roles := []string{"writer", "admin"}
	p := Policy{}
	if err := p.ParseAllow([]string{"writer=1001,1002"}, false, roles); err != nil {
		t.Fatal(err)
	}
	if err := p.ParseAllow([]string{"writer=2000"}, true, roles); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role string
		cred Cred
		want bool
	}{
		{"writer", Cred{1001, 2000}, true},
		{"writer", Cred{1002, 2000}, true},
		{"writer", Cred{1003, 2000}, false},
		{"writer", Cred{1001, 1}, false},
		{"admin", Cred{0, 0}, true}, // no rule: the socket's mode decides
	} {
		if got := p[c.role].Admits(c.cred); got != c.want {
			t.Errorf("%s %+v: got %v", c.role, c.cred, got)
		}
	}
	for _, bad := range []string{"writer", "nobody=1", "writer=x", "writer=-1"} {
		if err := (Policy{}).ParseAllow([]string{bad}, false, roles); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
