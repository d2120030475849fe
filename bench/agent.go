package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Issue #27's goals for the agent's doors.
const (
	// mcpReadGoal: MCP read_message's p99 at most this many times the HTML
	// message page's, through the same mail-inbox, same run.
	mcpReadGoal = 2.0
	// pingCostGoal: what recording opens and clicks adds to the message
	// page, as a share of the page's p50. An open is the event every
	// inbox read of a message already wrote (get, now open); the page's
	// added work is its links' ping attributes, measured here in process.
	pingCostGoal = 0.10
)

// agent measures the agent's two doors onto one mailbox of listSize
// messages, on a trial-bound mail-inbox: read_message over MCP (raw
// JSON-RPC, a fresh stateless request each time) next to the HTML message
// page, taking turns; and the cost of the pings on the page.
func (h *harness) agent(ctx context.Context) error {
	pl, err := h.startPlane(ctx, "plane-agent")
	if err != nil {
		return err
	}
	id, err := fillTrial(ctx, pl, listSize)
	if err != nil {
		return err
	}
	in, err := h.startSurface(ctx, "mail-inbox", pl, id.InboxGrant, id.InboxToken)
	if err != nil {
		return err
	}
	defer in.stop()
	page := in.url + "/inbox/" + id.InboxToken + "/messages/1"
	mcpURL := in.url + "/mcp/" + id.InboxToken
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_message","arguments":{"id":1}}}`)
	for _, conc := range readConcurrencies {
		hc := httpClient(conc)
		s, b, err := pair(ctx, h.cell, conc, "MCP read_message", mcpWorkers(hc, mcpURL, body), "HTML message page", getWorkers(hc, page, ""))
		hc.CloseIdleConnections()
		if err != nil {
			return err
		}
		h.report.add(Pair{Section: "agent", Store: "embedded", Path: "MCP read_message", Conc: conc, Mailplane: s, Baseline: b})
		h.logf("  agent read c%d  MCP %7.0f/s p99 %5.2fms  HTML page %7.0f/s p99 %5.2fms", conc, s.Rate, s.P99, b.Rate, b.P99)
		if b.P99 > 0 {
			h.report.Notes = append(h.report.Notes, fmt.Sprintf("Agent (#27), c%d: MCP read_message p99 %.2f ms is %.2f× the HTML message page's %.2f ms (goal ≤ %.0f×: %s).",
				conc, s.P99, s.P99/b.P99, b.P99, mcpReadGoal, verdict(s.P99 <= mcpReadGoal*b.P99)))
		}
		if conc == 1 {
			h.pingCost(ctx, b.P50)
		}
	}
	return nil
}

// pingCost measures, in this process, what the pings add to rendering the
// message page of a message with many links, against the page's p50 over
// HTTP.
func (h *harness) pingCost(ctx context.Context, pageP50 float64) {
	var text strings.Builder
	for i := range 20 {
		fmt.Fprintf(&text, "Line %d of the message: see https://site.example/path/%d?t=abc&u=%d for more.\r\n", i, i, i)
	}
	m := rpc.Message{ID: 1, Subject: "Links", EnvelopeFrom: sender, Recipients: []string{recipient}, Text: text.String()}
	base := "/inbox/" + strings.Repeat("t", 43)
	median := func(f func()) float64 {
		var runs []time.Duration
		for end := time.Now().Add(h.cell / 2); time.Now().Before(end) && ctx.Err() == nil; {
			start := time.Now()
			for range 100 {
				f()
			}
			runs = append(runs, time.Since(start)/100)
		}
		slices.Sort(runs)
		return float64(runs[len(runs)/2].Nanoseconds()) / 1e6
	}
	plain := median(func() { render.Message(m, base) })
	pinged := median(func() { render.AgentMessage(m, base, true) })
	share := (pinged - plain) / pageP50
	h.report.Notes = append(h.report.Notes, fmt.Sprintf("Agent (#27): the pings of a message page with 20 links add %.4f ms to its rendering "+
		"(%.4f → %.4f ms, in process), %.2f%% of the page's p50 %.2f ms over HTTP (goal < %.0f%%: %s); its open is the one event the read already wrote.",
		pinged-plain, plain, pinged, 100*share, pageP50, 100*pingCostGoal, verdict(share < pingCostGoal)))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// mcpWorkers make workers that POST one JSON-RPC request to an MCP
// endpoint and expect 200.
func mcpWorkers(hc *http.Client, url string, body []byte) workerFactory {
	return func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			return timed(func() error {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				return do(hc, req, http.StatusOK)
			})
		}}, nil
	}
}
