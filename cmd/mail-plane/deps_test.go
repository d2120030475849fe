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
