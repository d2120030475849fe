package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The inbox faces an untrusted agent: it must not link the store, the
// ledger or the broker, the other surfaces, or the code that extracts
// one-time codes (the agent reads codes out of the page, as a person would).
func TestDependencyFence(t *testing.T) {
	const mp = "github.com/websitebench/mailplane/"
	forbidden := []string{
		mp + "internal/ledger", mp + "internal/msgstore", mp + "internal/plane", mp + "internal/planecli",
		mp + "internal/peercred", mp + "internal/gateway", mp + "internal/writer", mp + "internal/smtpd",
		mp + "internal/otp", mp + "pkg/mailclient", "modernc.org/", "database/sql",
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			// A prefix ending in "/" covers a tree; otherwise the package and
			// its subpackages, except internal/otp/urls (link finding only).
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") && d != mp+"internal/otp/urls" {
				t.Errorf("mail-inbox links %s", d)
			}
		}
	}
}
