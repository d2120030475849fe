package operator

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/wbenv"
)

// EnvCommand is mail-plane env.
func EnvCommand() *cli.Command {
	out := &cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of KEY=VALUE lines"}
	trialDir := &cli.StringFlag{Name: "trial-dir", Required: true, Usage: "the trial's credential directory (mail-plane trial create --dir)"}
	smtpPort := &cli.IntFlag{Name: "smtp-port", Required: true, Usage: "the writer's SMTP port"}
	return &cli.Command{
		Name:  "env",
		Usage: "print the WEBSITEBENCH_* environment of a trial for a candidate, an authoring capture or a runner",
		Subcommands: []*cli.Command{
			{
				Name:  "candidate",
				Usage: "the variables a candidate may be handed (docs/reference.md §9.1; with --ca-file, the writer's TLS), checked before printing",
				Flags: []cli.Flag{out, trialDir, smtpPort,
					&cli.IntFlag{Name: "writer-port", Required: true, Usage: "the writer's HTTP port"},
					&cli.StringFlag{Name: "ca-file", Usage: "the CA certificate that verifies the writer's --tls-cert (mail-plane ca export): names it, STARTTLS and the TLS ports below"},
					&cli.IntFlag{Name: "smtp-tls-port", Usage: "with --ca-file: the writer's implicit-TLS SMTP port (--smtp-tls-listen)"},
					&cli.IntFlag{Name: "https-port", Usage: "with --ca-file: the writer's HTTPS port (--https-listen)"},
					&cli.StringFlag{Name: "socket", Value: cliapp.DefaultSocket, Usage: "the plane's socket (its path must not leak)", EnvVars: []string{"MAILPLANE_SOCKET"}},
				},
				Action: func(c *cli.Context) error {
					id, err := credfiles.ReadIdentity(c.String("trial-dir"))
					if err != nil {
						return cliapp.UsageError{Err: err}
					}
					env := wbenv.Candidate(wbenv.LocalURL(c.Int("writer-port")), "127.0.0.1", c.Int("smtp-port"), id.MailAPIToken, id.BootstrapToken)
					var https string
					if p := c.Int("https-port"); p > 0 {
						https = "https://127.0.0.1:" + strconv.Itoa(p)
					}
					if c.String("ca-file") == "" && (https != "" || c.Int("smtp-tls-port") > 0) {
						return cliapp.Usagef("--smtp-tls-port and --https-port need --ca-file: a client cannot verify them without it")
					}
					wbenv.WithTLS(env, c.String("ca-file"), c.Int("smtp-tls-port"), https)
					if err := wbenv.Check(env, c.String("socket"), os.Getenv(wbenv.MailpitHTTPSocket), id.ReadCapability); err != nil {
						return err
					}
					return printEnv(env, c.Bool("json"))
				},
			},
			{
				Name:  "authoring",
				Usage: "the 12 variables of an authoring capture (docs/reference.md §9.2)",
				Flags: []cli.Flag{out, trialDir, smtpPort,
					&cli.StringFlag{Name: "api-url", Required: true, Usage: "origin of the API port (http://HOST:PORT)"},
					&cli.StringFlag{Name: "smtp-host", Value: "127.0.0.1", Usage: "SMTP host to advertise"},
				},
				Action: func(c *cli.Context) error {
					id, err := credfiles.ReadIdentity(c.String("trial-dir"))
					if err != nil {
						return cliapp.UsageError{Err: err}
					}
					return printEnv(wbenv.Authoring(id, c.String("api-url"), c.String("smtp-host"), c.Int("smtp-port")), c.Bool("json"))
				},
			},
			{
				Name:  "runner",
				Usage: "what a trial runner needs to reach the plane (and Mailpit, when the Mailpit store is used)",
				Flags: []cli.Flag{out,
					&cli.StringFlag{Name: "socket", Value: cliapp.DefaultSocket, Usage: "the plane's socket", EnvVars: []string{"MAILPLANE_SOCKET"}},
					&cli.StringFlag{Name: "grant-file", Value: filepath.Join(cliapp.DefaultData, "admin.grant"), Usage: "the runner's admin grant file", EnvVars: []string{"MAILPLANE_ADMIN_GRANT_FILE"}},
				},
				Action: func(c *cli.Context) error {
					env := map[string]string{
						"MAILPLANE_SOCKET":           c.String("socket"),
						"MAILPLANE_ADMIN_GRANT_FILE": c.String("grant-file"),
					}
					if s := os.Getenv(wbenv.MailpitHTTPSocket); s != "" {
						env[wbenv.MailpitHTTPSocket] = s
					}
					return printEnv(env, c.Bool("json"))
				},
			},
		},
	}
}

func printEnv(env map[string]string, asJSON bool) error {
	if asJSON {
		return cliapp.PrintJSON(env)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s=%s\n", k, env[k])
	}
	return nil
}
