package main

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The plane links the store and the ledger by design; what its release
// build must not link is a profiler (make profile's builds have one:
// internal/cliapp/profile.go).
func TestDependencyFence(t *testing.T) {
	itest.ForbidDeps(t, "mail-plane", []string{"runtime/pprof", "net/http/pprof"}, nil)
}

// mail-plane builds its children's command lines from their typed
// configurations (internal/supervisor/services.go), which live apart from
// the surfaces' handlers: it runs an inbox, a gateway and a console as
// processes of their own, and links none of them (nor the inbox's MCP SDK or IMAP library).
func TestLinksNoSurfaceHandlers(t *testing.T) {
	const mp = itest.Module
	itest.ForbidDeps(t, "mail-plane", []string{
		mp + "internal/inbox", mp + "internal/inboxmcp", mp + "internal/inboximap", mp + "internal/gateway", mp + "internal/console",
		"github.com/modelcontextprotocol/go-sdk", "github.com/emersion/go-imap",
	}, nil)
}
