package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// The console section: the operator's trials page ({console_url}/, its
// first page of 100, newest first) on one mail-plane up holding
// consoleTrials open trials, and the same page filtered by namespace,
// taking turns with the console's sign-in page (the same process and
// socket, no plane call) as the baseline. Issue #28's goal: the trials
// page answers within 300 ms at 10,000 trials.

const (
	consoleTrials = 10000
	consoleTurns  = 60
	consoleWarmup = 5
	consoleGoalMS = 300
)

// ConsolePage is the section's figures.
type ConsolePage struct {
	Trials   int     `json:"trials"`
	Page     Latency `json:"trials_page"`
	Filtered Latency `json:"trials_page_filtered"`
	Login    Latency `json:"login_page"`
}

func (h *harness) consolePage(ctx context.Context) error {
	up, admin, err := h.startUpAdmin(ctx)
	if err != nil {
		return err
	}
	defer up.stop()
	defer admin.Close()
	if up.bundle.ConsoleURL == "" {
		return fmt.Errorf("mail-plane up --json has no console_url")
	}
	grant, err := rpc.ReadSecretFile(up.bundle.AdminGrantFile)
	if err != nil {
		return err
	}
	var last string
	for i := range consoleTrials {
		id, err := admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
		if err != nil {
			return fmt.Errorf("trial %d: %w", i, err)
		}
		last = id.Namespace
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, up.bundle.ConsoleURL+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+grant)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return took, err
	}
	var page, filtered, login []time.Duration
	for i := range consoleWarmup + consoleTurns {
		for _, c := range []struct {
			path string
			into *[]time.Duration
		}{{"/", &page}, {"/?ns=" + last[len(last)-8:], &filtered}, {"/login", &login}} {
			took, err := get(c.path)
			if err != nil {
				return err
			}
			if i >= consoleWarmup {
				*c.into = append(*c.into, took)
			}
		}
	}
	cp := &ConsolePage{Trials: consoleTrials, Page: latencyOf(page), Filtered: latencyOf(filtered), Login: latencyOf(login)}
	h.report.Console = cp
	h.report.goal(fmt.Sprintf("the console's trials page within %d ms at %d trials", consoleGoalMS, consoleTrials),
		fmt.Sprintf("p99 %.1f ms (filtered %.1f ms; sign-in page %.1f ms), %d each in turns", cp.Page.P99, cp.Filtered.P99, cp.Login.P99, consoleTurns),
		cp.Page.P99 <= consoleGoalMS && cp.Filtered.P99 <= consoleGoalMS)
	h.logf("console: trials page p99 %.1f ms at %d trials", cp.Page.P99, consoleTrials)
	return nil
}

// consoleMarkdown is the section's table.
func consoleMarkdown(w func(string, ...any), c *ConsolePage) {
	w("\n## The operator's console\n\n`GET {console_url}/` with the admin grant (the first 100 of %d open trials, newest first, each with its trail's counts), the same filtered by namespace, and the sign-in page (no plane call) taking turns with them.\n\n", c.Trials)
	w("| page | n | p50 ms | p99 ms | max ms |\n|---|--:|--:|--:|--:|\n")
	w("| trials | %d | %.2f | %.2f | %.1f |\n", c.Page.N, c.Page.P50, c.Page.P99, c.Page.Max)
	w("| trials, filtered | %d | %.2f | %.2f | %.1f |\n", c.Filtered.N, c.Filtered.P50, c.Filtered.P99, c.Filtered.Max)
	w("| sign-in | %d | %.2f | %.2f | %.1f |\n", c.Login.N, c.Login.P50, c.Login.P99, c.Login.Max)
}
