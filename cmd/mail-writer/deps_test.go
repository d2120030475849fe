package main

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The writer reads no mail and touches no storage, so nothing that opens a
// store may be in the binary (docs/design.md, rule 7), nor the other surfaces.
func TestDependencyFence(t *testing.T) {
	const mp = itest.Module
	itest.ForbidDeps(t, "mail-writer", []string{
		mp + "internal/ledger", mp + "internal/msgstore", mp + "internal/plane", mp + "internal/planecli", mp + "internal/serve", mp + "internal/supervisor", mp + "internal/operator", mp + "internal/credfiles",
		mp + "internal/gateway", mp + "internal/inbox", mp + "internal/otp",
		"modernc.org", "github.com/jackc/pgx", "database/sql",
		mp + "internal/inboximap", "github.com/emersion/go-imap", // the agent's IMAP door is the inbox's only
		"runtime/pprof", "net/http/pprof", // profiles only in make profile's builds (internal/cliapp/profile.go)
	}, nil)
}
