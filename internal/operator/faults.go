package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// faultsCommand is mail-plane trial faults: replace an open trial's fault
// schedule.
func faultsCommand() *cli.Command {
	return &cli.Command{
		Name:      "faults",
		Usage:     "replace an open trial's fault schedule (an empty list clears it); its sends count again from 1",
		ArgsUsage: "NAMESPACE",
		Description: "FILE holds a JSON list of rules, each {\"door\": \"http\"|\"smtp\"|\"any\", \"sends\": [N, …] | \"first\": N |\n" +
			"\"every\": N, \"do\": \"refuse\"|\"timeout\"|\"delay\"|\"duplicate\"|\"drop\", and status, retry_after, smtp_code,\n" +
			"seconds or copies as the do needs}. A schedule that is not valid is refused whole, naming its bad rule.",
		Flags: append(adminFlags(), &cli.StringFlag{Name: "file", Required: true, Usage: "the schedule's JSON file (- for stdin)"}),
		Action: func(c *cli.Context) error {
			ns, client, err := namespaceAndClient(c)
			if err != nil {
				return err
			}
			schedule, err := readFaults(c.String("file"))
			if err != nil {
				return err
			}
			return answer(c, func(ctx context.Context) (map[string]string, error) {
				return map[string]string{"namespace": ns, "result": "faults"}, client.TrialFaults(ctx, ns, schedule)
			}, func(map[string]string) { fmt.Printf("%s: faults\n", ns) })
		},
	}
}

// readFaults reads a schedule file (- for stdin), bounded; the plane
// judges what it says.
func readFaults(path string) (json.RawMessage, error) {
	if path == "" {
		return nil, nil
	}
	r := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, cliapp.Usagef("faults file: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limits.FaultScheduleBytes+1))
	if err != nil {
		return nil, cliapp.Usagef("faults file: %v", err)
	}
	if len(b) > limits.FaultScheduleBytes {
		return nil, cliapp.Usagef("faults file: longer than %d bytes", limits.FaultScheduleBytes)
	}
	if !json.Valid(b) {
		return nil, cliapp.Usagef("faults file: not JSON")
	}
	return json.RawMessage(b), nil
}

// faultsColumn is trial list's summary of a trial's schedule.
func faultsColumn(t rpc.TrialInfo) string {
	if len(t.Faults) == 0 && t.FaultsInjected == 0 {
		return "-"
	}
	var rules []json.RawMessage
	json.Unmarshal(t.Faults, &rules)
	return fmt.Sprintf("%d rules, %d injected", len(rules), t.FaultsInjected)
}

// faultsLine describes a trial's schedule and what it has injected.
func faultsLine(schedule json.RawMessage, injected int64) string {
	if len(schedule) == 0 {
		return fmt.Sprintf("none (%d injected)", injected)
	}
	return fmt.Sprintf("%s (%d injected)", schedule, injected)
}
