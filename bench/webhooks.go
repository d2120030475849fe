package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// The webhooks section (issue #34), on one mail-plane up --trials 0: how
// soon after what caused it a webhook event reaches a listening endpoint.
// webhookSends sends go through POST /emails one at a time, webhookGap
// apart, into a trial with a Resend webhook on a real HTTP server on
// 127.0.0.1; each email.sent event's latency is when the endpoint read it
// minus the time its cause was committed (the trail event's time, which
// the event carries as data.created_at, to the millisecond).

const (
	webhookSends = 200
	webhookGap   = 10 * time.Millisecond
	// webhookGoal is the issue's: an event reaches a listening endpoint
	// within 50 ms of what caused it (p99).
	webhookGoal = 50.0
)

// HookBench is the section's figures.
type HookBench struct {
	Sent Latency `json:"sent_event_after_cause"`
}

func (h *harness) webhooks(ctx context.Context) error {
	up, admin, err := h.startUpAdmin(ctx)
	if err != nil {
		return err
	}
	defer up.stop()
	defer admin.Close()
	var mu sync.Mutex
	var lat []time.Duration
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		now := time.Now()
		var ev struct {
			Type string
			Data struct {
				CreatedAt time.Time `json:"created_at"`
			}
		}
		if json.Unmarshal(body, &ev) == nil && ev.Type == "email.sent" {
			mu.Lock()
			lat = append(lat, now.Sub(ev.Data.CreatedAt))
			mu.Unlock()
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Webhooks: []rpc.Webhook{{Provider: "resend", URL: "http://" + ln.Addr().String() + "/hook"}}})
	if err != nil {
		return err
	}
	defer admin.TrialClose(context.WithoutCancel(ctx), b.Namespace)
	hc := httpClient(1)
	env := b.CandidateEnvironment
	for i := range webhookSends {
		body, _ := json.Marshal(map[string]string{"from": env["WEBSITEBENCH_MAIL_FROM"], "to": recipient, "subject": fmt.Sprint("hook ", i), "text": "Your code is 123456."})
		req, _ := http.NewRequest(http.MethodPost, env["WEBSITEBENCH_MAIL_API_URL"], bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+env["WEBSITEBENCH_MAIL_API_TOKEN"])
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST /emails: HTTP %d", resp.StatusCode)
		}
		time.Sleep(webhookGap)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= webhookSends {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d email.sent events arrived", n, webhookSends)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	f := &HookBench{Sent: latencyOf(lat)}
	mu.Unlock()
	h.report.Webhooks = f
	h.report.goal("a webhook event reaches a listening endpoint within 50 ms of its cause (p99)",
		fmt.Sprintf("p99 %.1f ms, max %.1f ms, %d events", f.Sent.P99, f.Sent.Max, f.Sent.N), f.Sent.P99 < webhookGoal)
	h.logf("webhooks: email.sent p50 %.1f ms, p99 %.1f ms after its cause", f.Sent.P50, f.Sent.P99)
	return nil
}
