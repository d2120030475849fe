package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// The netns section: trial.open of a trial whose candidate doors up's
// supervisor binds inside a network namespace (trial open --netns), next
// to a host trial's open, the two taking turns on one stack, each trial
// closed again at once. It needs root (ip netns add, setns); elsewhere
// the report says it was not measured.

// netnsOpens is how many opens of each kind are timed, after
// netnsWarmup of each.
const (
	netnsOpens  = 300
	netnsWarmup = 20
)

// NetnsOpen is the section's figures.
type NetnsOpen struct {
	Host  Latency `json:"trial_open_host"`
	Netns Latency `json:"trial_open_netns"`
}

func (h *harness) netnsOpen(ctx context.Context) error {
	ip, err := exec.LookPath("ip")
	if os.Geteuid() != 0 || err != nil {
		h.report.Notes = append(h.report.Notes, "trial open --netns was not measured: it needs root and ip (iproute2).")
		return nil
	}
	name := fmt.Sprintf("mpb-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command(ip, "netns", "del", name).Run()
	up, admin, err := h.startUpAdmin(ctx)
	if err != nil {
		return err
	}
	defer up.stop()
	defer admin.Close()
	var host, netns []time.Duration
	for i := range netnsWarmup + netnsOpens {
		for _, req := range []*rpc.TrialOpenRequest{{}, {Netns: "/run/netns/" + name}} {
			start := time.Now()
			b, err := admin.TrialOpen(ctx, req)
			took := time.Since(start)
			if err != nil {
				return fmt.Errorf("trial.open (netns %q): %w", req.Netns, err)
			}
			if err := admin.TrialClose(ctx, b.Namespace); err != nil {
				return err
			}
			switch {
			case i < netnsWarmup:
			case req.Netns == "":
				host = append(host, took)
			default:
				netns = append(netns, took)
			}
		}
	}
	n := &NetnsOpen{Host: latencyOf(host), Netns: latencyOf(netns)}
	h.report.Netns = n
	diff := n.Netns.P99 - n.Host.P99
	h.report.goal("trial open --netns p99 within 2 ms of a host trial's open",
		fmt.Sprintf("p99 %.2f ms vs %.2f ms (%+.2f ms), %d each in turns", n.Netns.P99, n.Host.P99, diff, netnsOpens), diff <= 2)
	h.logf("netns: trial.open p99 %.2f ms with --netns, %.2f ms on the host", n.Netns.P99, n.Host.P99)
	return nil
}

// netnsMarkdown is the section's table.
func netnsMarkdown(w func(string, ...any), n *NetnsOpen) {
	w("\n## Opening a trial in a network namespace\n\n`trial.open` with `netns` (up's supervisor binds the trial's three doors inside the namespace and hands them to the writer) and without (the trial takes a spare host port), taking turns on one stack, each trial closed again at once.\n\n")
	w("| open | n | p50 ms | p99 ms | max ms |\n|---|--:|--:|--:|--:|\n")
	w("| with --netns | %d | %.2f | %.2f | %.1f |\n", n.Netns.N, n.Netns.P50, n.Netns.P99, n.Netns.Max)
	w("| host trial | %d | %.2f | %.2f | %.1f |\n", n.Host.N, n.Host.P50, n.Host.P99, n.Host.Max)
}
