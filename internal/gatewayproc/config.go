// Package gatewayproc is mail-gateway's configuration: its typed Config,
// the flags that say it and the command line that writes it. It links
// none of the gateway's handlers, so that a supervisor building a
// mail-gateway child (mail-plane up) does not; the process's life is
// cmd/mail-gateway's.
package gatewayproc

import (
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
)

// DefaultListen is the reference's API port.
const DefaultListen = "127.0.0.1:8025"

// Config is mail-gateway's whole configuration: what its flags say
// (FromContext), and what a supervisor builds to start one (Args). It is
// a surface's and one listener's, nothing of its own.
type Config = cliapp.Listener

// Defaults is mail-gateway without flags or environment.
func Defaults() Config { return cliapp.DefaultListener(DefaultListen) }

// Flags are mail-gateway's flags.
func Flags() []cli.Flag { return cliapp.ListenerFlags(DefaultListen, "MAILPLANE_GATEWAY_LISTEN") }

// FromContext reads Flags.
func FromContext(c *cli.Context) Config { return cliapp.ListenerFromContext(c) }
