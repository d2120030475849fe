package operator

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// plantCommand is mail-plane trial plant: the evaluator's labelled mail.
func plantCommand() *cli.Command {
	return &cli.Command{
		Name:      "plant",
		Usage:     "plant labelled mail in a trial: mail the agent cannot tell from the candidate's (a stale code, a look-alike)",
		ArgsUsage: "NAMESPACE",
		Description: "The message goes to the trial's current namespace, to the recipients of its latest message (or --to),\n" +
			"from --from (an address or \"Name <address>\"; default: the trial's sender). It does not count toward\n" +
			"the quota. The agent's inbox and MCP tools show it as any other mail; the gateway's JSON carries\n" +
			"\"label\", and the trail records its planting and every open and click of it with the label.\n" +
			"Prints the message's id (--json: {\"id\": N}).",
		Flags: append(adminFlags(),
			&cli.StringFlag{Name: "label", Required: true, Usage: "the label (1 to 64 of A-Z a-z 0-9 . _ : -)"},
			&cli.StringFlag{Name: "subject", Required: true, Usage: "the subject"},
			&cli.StringFlag{Name: "text", Usage: "the text part"},
			&cli.StringFlag{Name: "html", Usage: "file holding the HTML part"},
			&cli.StringFlag{Name: "from", Usage: "the sender: an address or \"Name <address>\""},
			&cli.StringSliceFlag{Name: "to", Usage: "a recipient (repeatable; default: the latest message's)"},
		),
		Action: func(c *cli.Context) error {
			ns, client, err := namespaceAndClient(c)
			if err != nil {
				return err
			}
			req := &rpc.PlantRequest{Namespace: ns, Label: c.String("label"), Subject: c.String("subject"),
				Text: c.String("text"), From: c.String("from"), To: c.StringSlice("to")}
			if path := c.String("html"); path != "" {
				b, err := readBounded(path, limits.MessageBytes)
				if err != nil {
					return cliapp.Usagef("--html: %v", err)
				}
				req.HTML = string(b)
			}
			if req.Text == "" && req.HTML == "" {
				return cliapp.Usagef("plant needs --text or --html")
			}
			ctx, cancel := callContext()
			defer cancel()
			r, err := client.TrialPlant(ctx, req)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return cliapp.PrintJSON(r)
			}
			fmt.Println(r.ID)
			return nil
		},
	}
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	return b, err
}
