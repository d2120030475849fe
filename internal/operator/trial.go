// Package operator is the operator's and the evaluator's side of
// mail-plane: clients of a running plane's socket (trial, grant, env) and
// tools that need no plane (wait reads the gateway; redact reads files).
package operator

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// adminFlags connect an operator command to a running plane.
func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "socket", Value: cliapp.DefaultSocket, Usage: "the plane's Unix socket", EnvVars: []string{"MAILPLANE_SOCKET"}},
		&cli.StringFlag{Name: "grant-file", Value: filepath.Join(cliapp.DefaultData, "admin.grant"), Usage: "file holding an admin grant", EnvVars: []string{"MAILPLANE_ADMIN_GRANT_FILE"}},
		&cli.BoolFlag{Name: "json", Usage: "print JSON"},
	}
}

func adminClient(c *cli.Context) (*rpc.Client, error) {
	g, err := rpc.ReadSecretFile(c.String("grant-file"))
	if err != nil {
		return nil, cliapp.Usagef("admin grant: %v", err)
	}
	return rpc.NewClient(c.String("socket"), g), nil
}

func callContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// answer makes one call of the plane under callContext and prints its
// answer: as the plane's JSON with --json, else by text.
func answer[T any](c *cli.Context, call func(context.Context) (T, error), text func(T)) error {
	ctx, cancel := callContext()
	defer cancel()
	v, err := call(ctx)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return cliapp.PrintJSON(v)
	}
	text(v)
	return nil
}

// namespaceAndClient returns the one NAMESPACE argument and an admin
// client of the plane: what every per-trial operator command starts with.
func namespaceAndClient(c *cli.Context) (string, *rpc.Client, error) {
	ns, err := namespaceArg(c)
	if err != nil {
		return "", nil, err
	}
	client, err := adminClient(c)
	return ns, client, err
}

// namespaceArg returns the one NAMESPACE argument.
func namespaceArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		if c.NArg() > 1 && strings.HasPrefix(c.Args().Get(1), "-") {
			return "", cliapp.Usagef("%s: options go before NAMESPACE (mail-plane trial %s [options] NAMESPACE)", c.Command.Name, c.Command.Name)
		}
		return "", cliapp.Usagef("%s takes one argument: the trial's namespace", c.Command.Name)
	}
	return c.Args().First(), nil
}

// TrialCommand is mail-plane trial.
func TrialCommand() *cli.Command {
	return &cli.Command{
		Name:  "trial",
		Usage: "open, close, create, rotate, seal, list and describe trials on a running plane, and plant labelled mail",
		Subcommands: []*cli.Command{
			trialOpenCommand(),
			trialCreateCommand(),
			trialRotateCommand(),
			trialInfoCommand(),
			plantCommand(),
			faultsCommand(),
			webhooksCommand(),
			simpleTrialCommand("seal", "stop a namespace from taking mail; the evaluator can still read it", func(ctx context.Context, cl *rpc.Client, ns string) error {
				return cl.TrialSeal(ctx, ns)
			}),
			simpleTrialCommand("close", "close a trial: revoke every grant, token and capability of it, and delete its mail", func(ctx context.Context, cl *rpc.Client, ns string) error {
				return cl.TrialClose(ctx, ns)
			}),
			simpleTrialCommand("destroy", "the same as close", func(ctx context.Context, cl *rpc.Client, ns string) error {
				return cl.TrialClose(ctx, ns)
			}),
			trialListCommand(),
		},
	}
}

// trialOpenCommand is trial open: a trial on a running stack of shared surfaces.
func trialOpenCommand() *cli.Command {
	return &cli.Command{
		Name:  "open",
		Usage: "open a trial on a running stack of shared surfaces (mail-plane up, or serve --advertise-*)",
		Description: "Prints the trial's bundle, in the shape of mail-plane up --json: namespace, candidate_environment,\n" +
			"inbox_url (with the token path), api_url, read_capability, smtp_port (the trial's own) and\n" +
			"writer_url. With --ttl the plane closes the trial by itself once the TTL has passed. With --netns, the\n" +
			"stack's supervisor binds the trial's candidate doors (mail API and bootstrap, SMTP, implicit-TLS SMTP)\n" +
			"on the loopback of that network namespace, and the candidate environment names them there. With\n" +
			"--agent-netns, it binds the agent's doors on the loopback of that namespace: IMAP, where LOGIN needs\n" +
			"no TLS (only that namespace's processes reach it), and the inbox's pages and MCP; the bundle's\n" +
			"inbox_url, inbox_mcp_url and inbox_imap name them.",
		Flags: append(adminFlags(),
			&cli.DurationFlag{Name: "ttl", Usage: "close the trial this long after it opens (0: never)"},
			&cli.StringFlag{Name: "profile", Value: rpc.ProfileCandidate, Usage: "candidate, sidecar or authoring"},
			&cli.StringFlag{Name: "netns", Usage: "the candidate's network namespace file (/proc/PID/ns/net, /run/netns/NAME): its doors are bound there"},
			&cli.StringFlag{Name: "agent-netns", Usage: "the agent's network namespace file: its inbox doors (IMAP with plain LOGIN, pages, MCP) are bound there"},
			&cli.StringFlag{Name: "faults", Usage: "the trial's fault schedule: a JSON file of rules (- for stdin; see mail-plane trial faults)"},
			webhookFlag(),
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cliapp.Usagef("trial open takes no arguments")
			}
			hooks, err := readWebhooks(c) // webhooks.go
			if err != nil {
				return err
			}
			if c.Duration("ttl") < 0 {
				return cliapp.Usagef("--ttl must not be negative")
			}
			schedule, err := readFaults(c.String("faults")) // faults.go
			if err != nil {
				return err
			}
			client, err := adminClient(c)
			if err != nil {
				return err
			}
			req := &rpc.TrialOpenRequest{Profile: c.String("profile"), TTLMillis: c.Duration("ttl").Milliseconds(), Netns: c.String("netns"),
				AgentNetns: c.String("agent-netns"), Faults: schedule, Webhooks: hooks}
			return answer(c, func(ctx context.Context) (rpc.Bundle, error) { return client.TrialOpen(ctx, req) }, printBundle)
		},
	}
}

// trialCreateCommand is trial create: a trial minted with its credential files.
func trialCreateCommand() *cli.Command {
	return &cli.Command{
		Name:  "create",
		Usage: "mint a trial: a namespace with its capabilities, tokens and surface grants",
		Description: "Prints the whole identity once (--json: one JSON object; for --profile authoring, the capture's 12\n" +
			"WEBSITEBENCH_* variables of docs/reference.md §9.2 instead). With --dir, also writes one file per\n" +
			"secret (0600), so each surface and party can be handed only its own: writer.grant, inbox.grant,\n" +
			"inbox.token, evaluator.capability, candidate.mail-api-token, candidate.bootstrap-token, namespace.\n" +
			"--party-dir PARTY=DIR writes only that party's files into DIR (writer: writer.grant; inbox:\n" +
			"inbox.grant, inbox.token; evaluator: evaluator.capability, namespace; candidate: its two tokens),\n" +
			"so that each DIR can be a volume only that party's container mounts.",
		Flags: append(adminFlags(),
			&cli.StringFlag{Name: "profile", Value: rpc.ProfileCandidate, Usage: "candidate, sidecar or authoring"},
			&cli.StringFlag{Name: "namespace", Usage: "namespace to create (default: minted)"},
			&cli.StringSliceFlag{Name: "allowed-sender", Usage: "envelope sender the trial accepts (repeatable; default: the candidate sender for candidate trials, anyone otherwise)"},
			&cli.StringFlag{Name: "dir", Usage: "write one credential file per party into this directory (created 0700)"},
			&cli.StringSliceFlag{Name: "party-dir", Usage: "PARTY=DIR: write only PARTY's files into DIR (repeatable; PARTY: " + strings.Join(credfiles.Parties, ", ") + ")"},
			&cli.BoolFlag{Name: "group-readable", Usage: "write the files 0640, not 0600: for directories whose set-group-ID group is the party's (containers)"},
			&cli.StringFlag{Name: "api-url", Value: "http://127.0.0.1:8025", Usage: "authoring: origin of the API port the capture uses"},
			&cli.StringFlag{Name: "smtp-host", Value: "127.0.0.1", Usage: "authoring: SMTP host the capture uses"},
			&cli.IntFlag{Name: "smtp-port", Value: 1025, Usage: "authoring: SMTP port the capture uses"},
			&cli.StringFlag{Name: "agent-netns", Usage: "the agent's network namespace file: its inbox doors (IMAP with plain LOGIN, pages, MCP) are bound there"},
			&cli.StringFlag{Name: "faults", Usage: "the trial's fault schedule: a JSON file of rules (- for stdin; see mail-plane trial faults)"},
		),
		Action: trialCreate,
	}
}

// trialRotateCommand is trial rotate: a trial moved to a fresh namespace.
func trialRotateCommand() *cli.Command {
	return &cli.Command{
		Name: "rotate", Usage: "move a trial to a fresh namespace and capability; the previous namespace is sealed",
		ArgsUsage: "NAMESPACE",
		Flags:     append(adminFlags(), &cli.StringFlag{Name: "new-namespace", Usage: "the new namespace (default: minted)"}),
		Action: func(c *cli.Context) error {
			ns, client, err := namespaceAndClient(c)
			if err != nil {
				return err
			}
			req := &rpc.TrialRotateRequest{Namespace: ns, NewNamespace: c.String("new-namespace")}
			return answer(c, func(ctx context.Context) (rpc.RotateResponse, error) { return client.TrialRotate(ctx, req) },
				func(r rpc.RotateResponse) {
					fmt.Printf("namespace        %s\nread capability  %s\nsealed           %s\n", r.Namespace, r.ReadCapability, r.Sealed)
				})
		},
	}
}

// trialInfoCommand is trial info: one open trial, without its secrets.
func trialInfoCommand() *cli.Command {
	return &cli.Command{
		Name: "info", Usage: "describe one open trial (no secrets): profile, state, SMTP port, age, TTL, messages",
		ArgsUsage: "NAMESPACE",
		Description: "NAMESPACE is any of the trial's namespaces. --json prints the plane's answer: namespace,\n" +
			"profile, state, namespaces, messages, bytes, created, expires, smtp_port, age_ms, ttl_ms and\n" +
			"plane (the identity of the plane that serves its SMTP port), faults (its fault schedule) and\n" +
			"faults_injected. A trial's SMTP port changes only\n" +
			"when up, restarted, finds another process holding it: the trail then records port_moved.",
		Flags: adminFlags(),
		Action: func(c *cli.Context) error {
			ns, client, err := namespaceAndClient(c)
			if err != nil {
				return err
			}
			return answer(c, func(ctx context.Context) (rpc.TrialInfo, error) { return client.TrialInfo(ctx, ns) }, printInfo)
		},
	}
}

// trialListCommand is trial list: a page of open trials, without their secrets.
func trialListCommand() *cli.Command {
	return &cli.Command{
		Name: "list", Usage: "describe open trials (no secrets), a page of at most 10,000 at a time",
		Description: "Without --json, a table with each trial's message count and age; when more trials remain,\n" +
			"the last line names the --after that lists the next page. --json prints the page as the\n" +
			"plane answers it: {\"trials\": [...], \"next\": N}.",
		Flags: append(adminFlags(),
			&cli.Int64Flag{Name: "after", Usage: "list the page after this cursor (the previous page's next)"},
			&cli.IntFlag{Name: "limit", Value: rpc.MaxTrialPage, Usage: "trials per page (at most 10000)"},
		),
		Action: func(c *cli.Context) error {
			client, err := adminClient(c)
			if err != nil {
				return err
			}
			req := &rpc.TrialListRequest{After: c.Int64("after"), Limit: c.Int("limit")}
			return answer(c, func(ctx context.Context) (rpc.TrialListResponse, error) { return client.TrialList(ctx, req) }, printList)
		},
	}
}

// printList prints a page of trials as a table.
func printList(page rpc.TrialListResponse) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPROFILE\tSTATE\tMESSAGES\tBYTES\tAGE\tSMTP PORT\tEXPIRES\tFAULTS")
	now := time.Now()
	for _, t := range page.Trials {
		expires := "-"
		if t.Expires != nil {
			expires = t.Expires.Sub(now).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\n", t.Namespace, t.Profile, t.State, t.Messages, t.Bytes,
			now.Sub(t.Created).Round(time.Second), t.SMTPPort, expires, faultsColumn(t))
	}
	if page.Next != 0 {
		fmt.Fprintf(tw, "more: --after %d\n", page.Next)
	}
	tw.Flush()
}

// printInfo prints one trial's description.
func printInfo(t rpc.TrialInfo) {
	ttl := "-"
	if t.TTLMillis > 0 {
		ttl = (time.Duration(t.TTLMillis) * time.Millisecond).String()
	}
	fmt.Printf("namespace   %s (%s, %s)\n", t.Namespace, t.Profile, t.State)
	fmt.Printf("namespaces  %s\n", strings.Join(t.Namespaces, " "))
	fmt.Printf("messages    %d (%d bytes)\n", t.Messages, t.Bytes)
	fmt.Printf("age         %s\nttl         %s\n", (time.Duration(t.AgeMillis) * time.Millisecond).Round(time.Second), ttl)
	fmt.Printf("smtp port   %d\n", t.SMTPPort)
	fmt.Printf("faults      %s\n", faultsLine(t.Faults, t.FaultsInjected))
	for _, w := range t.Webhooks {
		fmt.Printf("webhook     %s %s\n", w.Provider, w.URL) // the URL without its credentials (trial.info)
	}
}

// printBundle prints what each party needs of one trial.
func printBundle(b rpc.Bundle) {
	fmt.Printf("namespace   %s\n", b.Namespace)
	fmt.Printf("agent       inbox            %s\n", b.InboxURL)
	fmt.Printf("            inbox (MCP)      %s\n", b.InboxMCPURL)
	fmt.Printf("evaluator   API              %s\n", b.APIURL)
	fmt.Printf("            read capability  %s\n", b.ReadCapability)
	fmt.Printf("candidate   environment:\n")
	for _, k := range slices.Sorted(maps.Keys(b.CandidateEnvironment)) {
		fmt.Printf("              %s=%s\n", k, b.CandidateEnvironment[k])
	}
	if p := b.Providers; p != nil {
		fmt.Printf("            provider APIs (docs/providers.md):\n")
		fmt.Printf("              sendgrid, postmark, mailgun  %s  key: the mail-API token\n", p.SendGrid.BaseURL)
		fmt.Printf("              ses  %s  region %s  access key id %s  secret %s\n", p.SES.Endpoint, p.SES.Region, p.SES.AccessKeyID, p.SES.SecretAccessKey)
	}
}

func simpleTrialCommand(name, usage string, do func(context.Context, *rpc.Client, string) error) *cli.Command {
	return &cli.Command{
		Name: name, Usage: usage, ArgsUsage: "NAMESPACE", Flags: adminFlags(),
		Action: func(c *cli.Context) error {
			ns, client, err := namespaceAndClient(c)
			if err != nil {
				return err
			}
			ctx, cancel := callContext()
			defer cancel()
			if err := do(ctx, client, ns); err != nil {
				return err
			}
			if c.Bool("json") {
				return cliapp.PrintJSON(map[string]string{"namespace": ns, "result": name})
			}
			fmt.Printf("%s: %s\n", ns, name)
			return nil
		},
	}
}

func trialCreate(c *cli.Context) error {
	partyDirs, err := parsePartyDirs(c.StringSlice("party-dir"))
	if err != nil {
		return err
	}
	groupReadable := c.Bool("group-readable")
	authoringEnv := c.String("profile") == rpc.ProfileAuthoring && c.Bool("json")
	if authoringEnv && c.String("dir") == "" && len(partyDirs) == 0 {
		return cliapp.Usagef("--profile authoring --json prints the capture's environment, not the grants: give --dir (or --party-dir) to keep them")
	}
	schedule, err := readFaults(c.String("faults"))
	if err != nil {
		return err
	}
	client, err := adminClient(c)
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	id, err := client.TrialCreate(ctx, &rpc.TrialCreateRequest{
		Profile: c.String("profile"), Namespace: c.String("namespace"), AllowedSenders: c.StringSlice("allowed-sender"), Faults: schedule,
	})
	if err != nil {
		return err
	}
	if dir := c.String("dir"); dir != "" {
		if err := credfiles.WriteDir(dir, credfiles.All(id), groupReadable); err != nil {
			return err
		}
	}
	parts := credfiles.Of(id)
	for _, party := range credfiles.Parties {
		if dir, ok := partyDirs[party]; ok {
			if err := credfiles.WriteDir(dir, parts[party], groupReadable); err != nil {
				return err
			}
		}
	}
	if authoringEnv {
		return cliapp.PrintJSON(wbenv.Authoring(id, c.String("api-url"), c.String("smtp-host"), c.Int("smtp-port")))
	}
	if c.Bool("json") {
		return cliapp.PrintJSON(id)
	}
	fmt.Printf("namespace            %s (%s)\n", id.Namespace, id.Profile)
	fmt.Printf("evaluator            read capability  %s\n", id.ReadCapability)
	fmt.Printf("agent                inbox token      %s\n", id.InboxToken)
	fmt.Printf("candidate            mail-API token   %s\n", id.MailAPIToken)
	fmt.Printf("                     bootstrap token  %s\n", id.BootstrapToken)
	fmt.Printf("mail-writer          grant            %s\n", id.WriterGrant)
	fmt.Printf("mail-inbox           grant            %s\n", id.InboxGrant)
	return nil
}

// parsePartyDirs parses --party-dir PARTY=DIR entries, before anything is
// minted, so that a typo changes nothing.
func parsePartyDirs(entries []string) (map[string]string, error) {
	dirs := map[string]string{}
	for _, e := range entries {
		party, dir, ok := strings.Cut(e, "=")
		if !ok || dir == "" || !slices.Contains(credfiles.Parties, party) {
			return nil, cliapp.Usagef("--party-dir %q: want PARTY=DIR with PARTY one of %s", e, strings.Join(credfiles.Parties, ", "))
		}
		if _, dup := dirs[party]; dup {
			return nil, cliapp.Usagef("--party-dir: %s named twice", party)
		}
		dirs[party] = dir
	}
	return dirs, nil
}

// GrantCommand is mail-plane grant.
func GrantCommand() *cli.Command {
	return &cli.Command{
		Name:  "grant",
		Usage: "mint grants for roles not bound to a trial",
		Subcommands: []*cli.Command{{
			Name:  "create",
			Usage: "mint a grant for a surface that serves every trial (gateway, console) or for admin",
			Flags: append(adminFlags(),
				&cli.StringFlag{Name: "role", Required: true, Usage: "gateway, console or admin (writer and inbox, for surfaces shared by every trial)"},
				&cli.StringFlag{Name: "out", Usage: "write the grant to this new file (0600) instead of stdout"},
				&cli.BoolFlag{Name: "group-readable", Usage: "write --out 0640, not 0600: for a directory whose set-group-ID group is the grant holder's (containers)"},
			),
			Action: func(c *cli.Context) error {
				client, err := adminClient(c)
				if err != nil {
					return err
				}
				ctx, cancel := callContext()
				defer cancel()
				g, err := client.GrantCreate(ctx, rpc.Role(c.String("role")))
				if err != nil {
					return err
				}
				if out := c.String("out"); out != "" {
					return credfiles.WriteDir(filepath.Dir(out), map[string]string{filepath.Base(out): g}, c.Bool("group-readable"))
				}
				fmt.Println(g)
				return nil
			},
		}},
	}
}
