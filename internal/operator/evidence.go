package operator

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
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
				Usage:     "write a namespace's whole trail to stdout, one event per line, then its head signed by the plane",
				ArgsUsage: "NAMESPACE",
				Description: "Works while the trial is open and for the retention period after it closed\n" +
					"(mail-plane serve --evidence-retention). Events the trail's budget left out are first\n" +
					"written down as one summary event. The last line is the trail's head (namespace, last seq\n" +
					"and hash, closed, time) signed by the plane's evidence key.",
				Flags:  flags,
				Action: evidenceExport,
			},
			{
				Name:      "verify",
				Usage:     "check a kept trail: exit 0 intact, 1 broken (naming the first bad line), 2 bad usage",
				ArgsUsage: "FILE",
				Description: "Reads FILE (- for stdin) as written by mail-plane evidence export. With --key, the trail\n" +
					"must end with a head signed by that key, at its last event: a trail cut short, with events\n" +
					"dropped or moved, or rewritten and re-hashed, does not verify. Without --key only the hash\n" +
					"chain is checked, which anyone who rewrites a trail can recompute: the answer says unanchored.\n" +
					"A signed head says nothing of freshness: an older export, or one cut back to an earlier head,\n" +
					"is signed too. --min-seq and --closed say how far the trail must go.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "key", Usage: "the plane's evidence public key (evidence_public_key of a bundle, base64), or a file holding it"},
					&cli.Int64Flag{Name: "min-seq", Usage: "exit 1 unless the trail goes at least to event seq `N` (e.g. the seq of an event already seen)"},
					&cli.BoolFlag{Name: "closed", Usage: "exit 1 unless the trail ends with the trial's close or expiry"},
				},
				Action: evidenceVerify,
			},
		},
	}
}

func evidenceExport(c *cli.Context) error {
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
			if len(page.Head) == 0 {
				w.Flush()
				return errors.New("export: the plane signed no head for the trail")
			}
			w.Write(page.Head)
			w.WriteByte('\n')
			return w.Flush()
		}
		last, err := evidence.Parse(page.Events[len(page.Events)-1])
		if err != nil {
			return fmt.Errorf("export: the plane answered a line that does not verify: %w", err)
		}
		req.After = last.Seq
	}
}

func evidenceVerify(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliapp.Usagef("verify takes one argument: the trail's file")
	}
	if c.Int64("min-seq") < 0 {
		return cliapp.Usagef("--min-seq must not be negative")
	}
	var key ed25519.PublicKey
	if c.IsSet("key") {
		var err error
		if key, err = readPublicKey(c.String("key")); err != nil {
			return cliapp.Usagef("--key: %v", err)
		}
	}
	f := os.Stdin
	if name := c.Args().First(); name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return cliapp.Usagef("%v", err)
		}
		defer f.Close()
	}
	res, err := evidence.Check(f, key)
	var br *evidence.Break
	switch {
	case errors.As(err, &br):
		return cli.Exit(fmt.Sprintf("%s: broken at %v", c.Args().First(), br), 1)
	case err != nil:
		return cli.Exit(fmt.Sprintf("%s: %v", c.Args().First(), err), 1)
	case res.LastSeq < c.Int64("min-seq"):
		return cli.Exit(fmt.Sprintf("%s: ends at seq %d, before seq %d: an older export, or one cut back to an earlier head",
			c.Args().First(), res.LastSeq, c.Int64("min-seq")), 1)
	case c.Bool("closed") && !res.Ended():
		return cli.Exit(fmt.Sprintf("%s: ends at seq %d with %q, not with the trial's close or expiry: the trial was open when it was exported, or the trail was cut back",
			c.Args().First(), res.LastSeq, res.LastAction), 1)
	case key == nil:
		fmt.Printf("%s: %d events, chain intact; unanchored: no --key, so a trail cut short or rewritten and re-hashed would pass too\n",
			c.Args().First(), res.Events)
	default:
		closed := "open"
		if res.Head.Closed {
			closed = "closed"
		}
		fmt.Printf("%s: %d events, chain intact, head signed by the key at seq %d on %s (trial %s)\n",
			c.Args().First(), res.Events, res.Head.Seq, res.Head.Time, closed)
	}
	return nil
}

// maxKeyFile bounds a key file read (a key is 44 bytes of base64).
const maxKeyFile = 4 << 10

// readPublicKey reads --key: the key itself (base64 of 32 bytes), else a
// file holding it.
func readPublicKey(arg string) (ed25519.PublicKey, error) {
	if key, err := evidence.ParsePublicKey(arg); err == nil {
		return key, nil
	}
	f, err := os.Open(arg)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("neither a key (%v) nor a file that exists", evidence.ErrKeySyntax)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", arg, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s: longer than a key file", arg)
	}
	key, err := evidence.ParsePublicKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", arg, err)
	}
	return key, nil
}
