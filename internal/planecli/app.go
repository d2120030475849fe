// Package planecli is mail-plane's command line: the broker (serve), the
// operator's trial commands, and up, which runs a whole mailplane on one
// machine.
package planecli

import (
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/logging"
)

// App returns the mail-plane command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-plane",
		Usage: "the mailplane broker: owns the mail store and authorizes every call of the writer, inbox and gateway",
		Description: "mail-plane serve runs the broker on one Unix socket. mail-plane up runs the broker and the three\n" +
			"surfaces (mail-writer, mail-inbox, mail-gateway) as child processes with one trial, for one machine.\n" +
			"The trial and grant commands talk to a running broker with an admin grant.",
		Flags:                logging.Flags,
		Commands:             []*cli.Command{serveCommand(), upCommand(), trialCommand(), grantCommand(), envCommand(), redactCommand(), sidecarCommand(), waitCommand(), caCommand()},
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		// Values such as ROLE=UID,UID carry their own commas.
		DisableSliceFlagSeparator: true,
	}
}
