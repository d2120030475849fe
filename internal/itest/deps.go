package itest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is this repository's module path, for naming its packages.
const Module = "github.com/websitebench/mailplane/"

// TestOnly are the modules that only tests link: the mail providers' SDKs
// that drive the writer's send APIs (Resend, SendGrid, Postmark, Mailgun,
// Amazon SES), and the providers' webhook verifiers (Svix's for
// Resend; SendGrid's and Mailgun's are in their SDKs). No binary may link
// one; ForbidDeps adds them to every binary's list.
var TestOnly = []string{
	"github.com/resend/resend-go", "github.com/sendgrid", "github.com/mrz1836/postmark",
	"github.com/mailgun", "github.com/aws", "github.com/svix",
}

// ForbidDeps fails t for every package that the package in the current
// directory (a binary's) links and must not: one of forbidden or TestOnly,
// or below it, unless it is one of allowed. It is how each binary proves
// that it does not link what its zone may not touch.
func ForbidDeps(t *testing.T, binary string, forbidden, allowed []string) {
	t.Helper()
	forbidden = append(slices.Clone(forbidden), TestOnly...)
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q: not a dependency list", deps)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			f = strings.TrimSuffix(f, "/")
			if (d == f || strings.HasPrefix(d, f+"/")) && !slices.Contains(allowed, d) {
				t.Errorf("%s links %s", binary, d)
			}
		}
	}
}
