package main

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The inbox faces an untrusted agent: it must not link the store, the
// ledger or the broker, the other surfaces, or the code that extracts
// one-time codes (the agent reads codes out of the page, as a person would;
// internal/otp/urls only finds links).
func TestDependencyFence(t *testing.T) {
	const mp = itest.Module
	itest.ForbidDeps(t, "mail-inbox", []string{
		mp + "internal/ledger", mp + "internal/msgstore", mp + "internal/plane", mp + "internal/planecli", mp + "internal/serve", mp + "internal/supervisor", mp + "internal/operator", mp + "internal/credfiles",
		mp + "internal/peercred", mp + "internal/gateway", mp + "internal/writer", mp + "internal/smtpd",
		mp + "internal/otp", mp + "pkg/mailclient", "modernc.org", "github.com/jackc/pgx", "database/sql",
		"runtime/pprof", "net/http/pprof", // profiles only in make profile's builds (internal/cliapp/profile.go)
	}, []string{mp + "internal/otp/urls"})
}
