package gateway_test

import (
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
)

// The gateway's handlers know nothing of a command line: flags, their parsing
// are internal/gatewayproc's, the process's life cmd/mail-gateway's.
func TestNoCommandLine(t *testing.T) {
	itest.ForbidDeps(t, "internal/gateway", []string{"github.com/urfave/cli", itest.Module + "internal/cliapp"}, nil)
}
