// Package planecli is mail-plane's command line, assembled from its three
// parts: the broker (package serve), the supervisors that run a whole
// mailplane on one machine (package supervisor: up, sidecar), and the
// operator's and evaluator's tools (package operator: trial, grant, env,
// wait, redact).
package planecli

import (
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/operator"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/internal/supervisor"
)

// App returns the mail-plane command line.
func App() *cli.App {
	return &cli.App{
		Name:  "mail-plane",
		Usage: "the mailplane broker: owns the mail store and authorizes every call of the writer, inbox and gateway",
		Description: "mail-plane serve runs the broker on one Unix socket. mail-plane up runs the broker and the three\n" +
			"surfaces (mail-writer, mail-inbox, mail-gateway), shared by every trial, as child processes, for one machine.\n" +
			"The trial and grant commands talk to a running broker with an admin grant.",
		Flags: logging.Flags,
		Commands: []*cli.Command{serve.Command(), supervisor.UpCommand(), operator.TrialCommand(), operator.GrantCommand(),
			operator.EnvCommand(), operator.RedactCommand(), supervisor.SidecarCommand(), operator.WaitCommand(), operator.CACommand(),
			operator.EvidenceCommand(), supervisor.RouteCommand(), serve.PolicyCommand(), supervisor.HooksCommand()},
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		// Values such as ROLE=UID,UID carry their own commas.
		DisableSliceFlagSeparator: true,
	}
}
