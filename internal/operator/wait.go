package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// WaitCommand is mail-plane wait.
func WaitCommand() *cli.Command {
	return &cli.Command{
		Name:  "wait",
		Usage: "wait for mail to a recipient through mail-gateway and print its code or link (for evaluators in a shell)",
		Description: "Holds a request at the gateway until a message to --recipient with an id greater than --after\n" +
			"arrives, then prints its one-time code (--link: its action link, the one link a person is asked to\n" +
			"click; --json: the whole message). Exits 1 when --timeout passes first, or when the message has no\n" +
			"code (with --link: no action link).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "api", Required: true, Usage: "the gateway's origin, e.g. http://127.0.0.1:8027"},
			&cli.StringFlag{Name: "namespace", Required: true, Usage: "the trial's namespace"},
			&cli.StringFlag{Name: "capability-file", Required: true, Usage: "file holding the namespace's read capability"},
			&cli.StringFlag{Name: "recipient", Required: true, Usage: "the address the mail is sent to"},
			&cli.Int64Flag{Name: "after", Usage: "only messages with a larger id"},
			&cli.DurationFlag{Name: "timeout", Value: defaultWait, Usage: "how long to wait"},
			&cli.BoolFlag{Name: "link", Usage: "print the action link (verify, confirm, sign in, reset, invitation) instead of the code"},
			&cli.BoolFlag{Name: "json", Usage: "print the whole message as JSON"},
		},
		Action: func(c *cli.Context) error {
			capability, err := rpc.ReadSecretFile(c.String("capability-file"))
			if err != nil {
				return cliapp.Usagef("capability: %v", err)
			}
			if c.Duration("timeout") <= 0 {
				return cliapp.Usagef("--timeout must be positive")
			}
			ctx, cancel := context.WithTimeout(context.Background(), c.Duration("timeout"))
			defer cancel()
			client := mailclient.New(c.String("api"), c.String("namespace"), capability)
			m, err := client.Wait(ctx, c.String("recipient"), c.Int64("after"))
			if errors.Is(err, context.DeadlineExceeded) {
				return cli.Exit(fmt.Sprintf("no mail to %s within %v", c.String("recipient"), c.Duration("timeout")), 1)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return cliapp.PrintJSON(m)
			}
			if c.Bool("link") {
				if m.ActionLink == nil {
					return cli.Exit(fmt.Sprintf("message %d to %s has no action link (--json prints it)", m.ID, c.String("recipient")), 1)
				}
				fmt.Println(*m.ActionLink)
				return nil
			}
			if m.OTP == nil {
				return cli.Exit(fmt.Sprintf("message %d to %s has no one-time code (--json prints it)", m.ID, c.String("recipient")), 1)
			}
			fmt.Println(*m.OTP)
			return nil
		},
	}
}

const defaultWait = 30 * time.Second
