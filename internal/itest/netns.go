package itest

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Netns makes a network namespace with a unique name (ip netns add; what
// goes into the name), removed when the test ends, and returns its name
// and file. It skips the test where namespaces cannot be made (not root).
func Netns(t testing.TB, what string) (name, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ip := Require(t, "ip")
	name = fmt.Sprintf("mpt-%s-%d-%s", what, os.Getpid(), strings.ToLower(rand.Text()[:6]))
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "netns", "del", name).Run() })
	return name, "/run/netns/" + name
}

// DoorPorts are a netns trial's ports inside its namespace: the mail
// API's, SMTP's and implicit-TLS SMTP's.
func DoorPorts(t testing.TB, b rpc.Bundle) []int {
	t.Helper()
	return []int{URLPort(t, b.WriterURL), b.SMTPPort, b.SMTPTLSPort}
}

// URLPort is the port of an http:// or https:// URL.
func URLPort(t testing.TB, rawURL string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://"))
	if err != nil {
		t.Fatalf("%s: %v", rawURL, err)
	}
	n, _ := strconv.Atoi(p)
	return n
}
