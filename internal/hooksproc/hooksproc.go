// Package hooksproc is the hooks process (mail-plane hooks), the one
// process that connects to candidates' webhook URLs. It holds only the
// hooks grant: it takes events due for delivery from the plane, each a
// request built and signed there (webhooks.take, a waiting call), POSTs
// each with a short timeout, at most limits.TrialWebhookDeliveries of one
// trial at once, and reports every attempt (webhooks.report). It reads no
// mail, holds no trial's key, and chooses no URL: a hostile endpoint can
// hold only its own trial's share of it, for a bounded time.
package hooksproc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Plane is what the hooks process asks of the plane.
type Plane interface {
	WebhooksTake(ctx context.Context, req *rpc.WebhooksTakeRequest) (rpc.WebhooksTakeResponse, error)
	WebhooksReport(ctx context.Context, r *rpc.WebhookReport) error
}

// takeWait is how long one take waits for an event.
const takeWait = 25 * time.Second

// DoorDialer connects to addr inside the network namespace of a netns
// trial's door (the supervisor makes the connection there).
type DoorDialer func(ctx context.Context, door, addr string) (net.Conn, error)

// Deliverer delivers webhook events until its context ends.
type Deliverer struct {
	plane  Plane
	client *http.Client
	log    zerolog.Logger
	// DialDoor, if set, delivers a netns trial's events inside its
	// namespace; without it they fail ("connect").
	DialDoor DoorDialer

	doorMu      sync.Mutex
	doorClients map[string]*http.Client

	mu     sync.Mutex
	shares map[int64]int // deliveries in flight per trial
	wg     sync.WaitGroup
}

// New returns a deliverer for plane.
func New(plane Plane, log zerolog.Logger) *Deliverer {
	return &Deliverer{plane: plane, log: log, shares: map[int64]int{}, doorClients: map[string]*http.Client{},
		client: newClient((&net.Dialer{Timeout: limits.WebhookTimeout}).DialContext)}
}

// newClient is a delivery client that dials with dial.
func newClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{
		Timeout: limits.WebhookTimeout,
		// A provider posts to the URL it was given: a redirect is the
		// endpoint's answer, not a new destination.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Proxy: nil, DialContext: dial,
			MaxIdleConnsPerHost: limits.TrialWebhookDeliveries, IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: limits.WebhookTimeout,
			MaxResponseHeaderBytes: limits.WebhookAnswerHeaderBytes},
	}
}

// clientFor is the client of w's trial: the host's, or one whose every
// connection is made inside its netns door's namespace (and so pools
// only that namespace's connections).
func (d *Deliverer) clientFor(w rpc.WebhookDelivery) (*http.Client, bool) {
	if w.Door == "" {
		return d.client, true
	}
	if d.DialDoor == nil {
		return nil, false
	}
	d.doorMu.Lock()
	defer d.doorMu.Unlock()
	c, ok := d.doorClients[w.Door]
	if !ok {
		door := w.Door
		c = newClient(func(ctx context.Context, _, addr string) (net.Conn, error) { return d.DialDoor(ctx, door, addr) })
		d.doorClients[door] = c
	}
	return c, true
}

// Run takes and delivers events until ctx ends, then waits for the
// deliveries in flight.
func (d *Deliverer) Run(ctx context.Context) error {
	defer d.wg.Wait()
	for ctx.Err() == nil {
		resp, err := d.plane.WebhooksTake(ctx, &rpc.WebhooksTakeRequest{WaitMillis: takeWait.Milliseconds()})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			d.log.Warn().Err(err).Msg("taking webhook events failed; will retry")
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for _, w := range resp.Deliveries {
			if !d.take(w.Trial) {
				// Over the trial's share: not attempted now; its lease ends
				// and the plane hands it out again.
				continue
			}
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer d.give(w.Trial)
				d.deliver(ctx, w)
			}()
		}
	}
	return nil
}

func (d *Deliverer) take(trial int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shares[trial] >= limits.TrialWebhookDeliveries {
		return false
	}
	d.shares[trial]++
	return true
}

func (d *Deliverer) give(trial int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shares[trial]--; d.shares[trial] <= 0 {
		delete(d.shares, trial)
	}
}

// deliver makes one attempt and reports it. Neither the log nor the
// report names the URL (it may carry Basic credentials) or the body.
func (d *Deliverer) deliver(ctx context.Context, w rpc.WebhookDelivery) {
	report := rpc.WebhookReport{Trial: w.Trial, Seq: w.Seq}
	start := time.Now()
	report.Status, report.Error = d.post(ctx, w)
	report.LatencyMillis = time.Since(start).Milliseconds()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.plane.WebhooksReport(rctx, &report); err != nil {
		d.log.Warn().Err(err).Str("event", w.EventID).Msg("reporting a webhook attempt failed; the event will be tried again")
	}
	d.log.Debug().Str("event", w.EventID).Str("provider", w.Provider).Int("status", report.Status).Str("error", report.Error).
		Int64("latency_ms", report.LatencyMillis).Msg("webhook attempt")
}

// post sends w's request: the endpoint's status, or a fixed error code.
func (d *Deliverer) post(ctx context.Context, w rpc.WebhookDelivery) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(w.Body))
	if err != nil {
		return 0, "request"
	}
	for k, v := range w.Header {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "mailplane-webhooks/1 ("+w.Provider+")")
	client, ok := d.clientFor(w)
	if !ok {
		return 0, "connect"
	}
	resp, err := client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, "timeout"
		}
		return 0, "connect"
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, limits.WebhookAnswerBytes)); err != nil {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, ""
}
