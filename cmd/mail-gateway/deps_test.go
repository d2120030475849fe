package main

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The gateway reads mail only through the plane: it must not link the
// store, the ledger or the broker, nor the other surfaces.
func TestDependencyFence(t *testing.T) {
	const mp = itest.Module
	itest.ForbidDeps(t, "mail-gateway", []string{
		mp + "internal/ledger", mp + "internal/msgstore", mp + "internal/plane", mp + "internal/planecli", mp + "internal/serve", mp + "internal/supervisor", mp + "internal/operator", mp + "internal/credfiles",
		mp + "internal/peercred", mp + "internal/inbox", mp + "internal/writer", mp + "internal/smtpd",
		"modernc.org", "github.com/jackc/pgx", "database/sql",
		mp + "internal/inboximap", "github.com/emersion/go-imap", // the agent's IMAP door is the inbox's only
		"runtime/pprof", "net/http/pprof", // profiles only in make profile's builds (internal/cliapp/profile.go)
	}, nil)
}
