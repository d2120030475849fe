package operator

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// webhookFlag is --webhook PROVIDER=URL, repeatable.
func webhookFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "webhook", Usage: "PROVIDER=URL: a provider webhook of the trial (resend, sendgrid, mailgun, postmark; repeatable; docs/webhooks.md)"}
}

// readWebhooks reads --webhook flags; the plane judges the URLs.
func readWebhooks(c *cli.Context) ([]rpc.Webhook, error) {
	var out []rpc.Webhook
	for _, f := range c.StringSlice("webhook") {
		provider, url, ok := strings.Cut(f, "=")
		if !ok || provider == "" {
			return nil, cliapp.Usagef("--webhook takes PROVIDER=URL")
		}
		out = append(out, rpc.Webhook{Provider: provider, URL: url})
	}
	return out, nil
}

// webhooksCommand is trial webhooks: replace an open trial's webhooks.
func webhooksCommand() *cli.Command {
	return &cli.Command{
		Name:      "webhooks",
		Usage:     "replace an open trial's provider webhooks (none clears them)",
		ArgsUsage: "NAMESPACE",
		Description: "Each --webhook PROVIDER=URL names an endpoint (resend, sendgrid, mailgun, postmark; http or https) that\n" +
			"receives the trial's events as that provider sends them, on its own retry schedule.",
		Flags: append(adminFlags(), webhookFlag()),
		Action: func(c *cli.Context) error {
			ns, client, err := namespaceAndClient(c)
			if err != nil {
				return err
			}
			hooks, err := readWebhooks(c)
			if err != nil {
				return err
			}
			return answer(c, func(ctx context.Context) (map[string]string, error) {
				return map[string]string{"namespace": ns, "result": "webhooks"}, client.TrialWebhooks(ctx, ns, hooks)
			}, func(map[string]string) { fmt.Printf("%s: webhooks\n", ns) })
		},
	}
}
