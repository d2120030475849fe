// Package consoleproc is mail-console's configuration: its typed Config,
// the flags that say it and the command line that writes it. It links
// none of the console's handlers, so that a supervisor building a
// mail-console child (mail-plane up) does not; the process's life is
// cmd/mail-console's.
package consoleproc

import (
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
)

// DefaultListen is the console's port: loopback, for the operator's own
// browser.
const DefaultListen = "127.0.0.1:8027"

// Config is mail-console's whole configuration: what its flags say
// (FromContext), and what a supervisor builds to start one (Args). It is
// a surface's and one listener's, nothing of its own.
type Config = cliapp.Listener

// Defaults is mail-console without flags or environment.
func Defaults() Config { return cliapp.DefaultListener(DefaultListen) }

// Flags are mail-console's flags.
func Flags() []cli.Flag { return cliapp.ListenerFlags(DefaultListen, "MAILPLANE_CONSOLE_LISTEN") }

// FromContext reads Flags.
func FromContext(c *cli.Context) Config { return cliapp.ListenerFromContext(c) }
