package serve

import (
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/plane"
)

// PolicyCommand is `mail-plane policy`: the plane's policy table as this
// binary was built with it, in markdown (docs/rpc.md shows it) or JSON
// (internal/plane/testdata/policy.json pins it).
func PolicyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "print the broker's policy table: every method, who may call it, how its call is bound, what it reads",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print it as JSON"}},
		Action: func(c *cli.Context) error {
			p := plane.Policy()
			var err error
			if c.Bool("json") {
				_, err = c.App.Writer.Write(p.JSON())
			} else {
				_, err = c.App.Writer.Write([]byte(p.Markdown()))
			}
			return err
		},
	}
}
