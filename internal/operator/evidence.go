package operator

import (
	"bufio"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// EvidenceCommand is mail-plane evidence: a trial's trail, exported from
// a running plane and verified offline.
func EvidenceCommand() *cli.Command {
	flags := adminFlags()[:2] // --socket, --grant-file; export prints JSONL only
	return &cli.Command{
		Name:  "evidence",
		Usage: "export a trial's trail of events (JSONL) and verify a kept one",
		Subcommands: []*cli.Command{
			{
				Name:      "export",
				Usage:     "write a namespace's whole trail to stdout, one event per line",
				ArgsUsage: "NAMESPACE",
				Description: "Works while the trial is open and for the retention period after it closed\n" +
					"(mail-plane serve --evidence-retention). Events the trail's budget left out are first\n" +
					"written down as one summary event.",
				Flags: flags,
				Action: func(c *cli.Context) error {
					ns, client, err := namespaceAndClient(c)
					if err != nil {
						return err
					}
					defer client.Close()
					w := bufio.NewWriter(os.Stdout)
					req := &rpc.EventsRequest{Namespace: ns}
					for {
						ctx, cancel := callContext()
						page, err := client.Export(ctx, req)
						cancel()
						if err != nil {
							return err
						}
						for _, line := range page.Events {
							w.Write(line)
							w.WriteByte('\n')
						}
						if len(page.Events) < rpc.MaxEventPage {
							return w.Flush()
						}
						last, err := evidence.Parse(page.Events[len(page.Events)-1])
						if err != nil {
							return fmt.Errorf("export: the plane answered a line that does not verify: %w", err)
						}
						req.After = last.Seq
					}
				},
			},
			{
				Name:        "verify",
				Usage:       "check a kept trail's hash chain: exit 0 intact, 1 broken (naming the first bad line)",
				ArgsUsage:   "FILE",
				Description: "Reads FILE (- for stdin) as written by mail-plane evidence export.",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cliapp.Usagef("verify takes one argument: the trail's file")
					}
					f := os.Stdin
					if name := c.Args().First(); name != "-" {
						var err error
						if f, err = os.Open(name); err != nil {
							return cliapp.Usagef("%v", err)
						}
						defer f.Close()
					}
					n, err := evidence.Verify(f)
					var br *evidence.Break
					switch {
					case errors.As(err, &br):
						return cli.Exit(fmt.Sprintf("%s: broken at %v", c.Args().First(), br), 1)
					case err != nil:
						return cli.Exit(fmt.Sprintf("%s: %v", c.Args().First(), err), 1)
					}
					fmt.Printf("%s: %d events, chain intact\n", c.Args().First(), n)
					return nil
				},
			},
		},
	}
}
