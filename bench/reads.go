package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Reads are measured on stores that already hold other trials' mail
// (backgroundMessages), as a plane in use does, through mail-gateway (the
// evaluator's door), next to the same read asked of Mailpit's own API.
const (
	backgroundMessages = 1000
	listSize           = 32
	wakeRounds         = 200
	// wakePark is how long a waiting read gets to reach the plane before
	// the mail it waits for is sent (not measured).
	wakePark = 5 * time.Millisecond
)

var readConcurrencies = []int{1, 8}

// readsAll measures reads on the embedded store and on the Mailpit store,
// each next to Mailpit's API on the same Mailpit.
func (h *harness) readsAll(ctx context.Context) error {
	mp, err := h.startMailpit(ctx, "mailpit-reads")
	if err != nil {
		return err
	}
	if err := fillMailpit(mp, backgroundMessages); err != nil {
		return err
	}
	embedded, err := h.startPlane(ctx, "plane-sqlite-reads")
	if err != nil {
		return err
	}
	if err := h.reads(ctx, "embedded", embedded, mp); err != nil {
		return err
	}
	onMailpit, err := h.startPlane(ctx, "plane-mailpit-reads", "--store", "mailpit", "--mailpit-socket", mp.http, "--mailpit-smtp-socket", mp.smtp)
	if err != nil {
		return err
	}
	return h.reads(ctx, "Mailpit", onMailpit, mp)
}

// fillMailpit sends n messages straight into Mailpit, 8 sessions at once.
func fillMailpit(mp *mailpit, n int) error {
	data := rfc5322(512)
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			c, err := smtpSession(unixDialer(mp.smtp))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := w; i < n; i += 8 {
				if err := smtpSend(c, data); err != nil {
					errs <- err
					return
				}
			}
			errs <- c.Quit()
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return fmt.Errorf("filling Mailpit: %w", err)
		}
	}
	return nil
}

// sendRPC offers one message to the plane with a writer's client.
func sendRPC(ctx context.Context, c *rpc.Client, raw []byte) error {
	ctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	_, err := c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: sender, To: []string{recipient}, Raw: raw})
	return err
}

// fillTrial sends n messages into a fresh trial of pl through the plane's
// socket, with subjects and codes that differ, 8 at a time.
func fillTrial(ctx context.Context, pl *plane, n int) (rpc.Identity, error) {
	id, err := pl.trial(ctx)
	if err != nil {
		return id, err
	}
	c := rpc.NewClient(pl.socket, id.WriterGrant)
	defer c.Close()
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := w; i < n; i += 8 {
				raw := crlf(fmt.Sprintf("From: %s\nTo: %s\nSubject: Message %d\n\nHello,\n\nYour verification code is %d.\nOr open https://site.example/verify?t=%d to sign in.\n",
					sender, recipient, i, 410000+i, i))
				if err := sendRPC(ctx, c, raw); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return id, fmt.Errorf("filling a trial: %w", err)
		}
	}
	return id, nil
}

// readTarget fills pl with backgroundMessages of one trial and listSize of
// another, starts a gateway, and returns it with the URL of the second
// trial's messages there.
func (h *harness) readTarget(ctx context.Context, pl *plane) (gw *surface, api string, id rpc.Identity, err error) {
	if _, err = fillTrial(ctx, pl, backgroundMessages); err != nil {
		return nil, "", id, err
	}
	if id, err = fillTrial(ctx, pl, listSize); err != nil {
		return nil, "", id, err
	}
	gg, err := rpc.ReadSecretFile(pl.data + "/gateway.grant")
	if err != nil {
		return nil, "", id, err
	}
	if gw, err = h.startSurface(ctx, "mail-gateway", pl, gg, ""); err != nil {
		return nil, "", id, err
	}
	return gw, gw.url + "/api/namespaces/" + id.Namespace + "/messages", id, nil
}

func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

// reads measures one store: a namespace of listSize messages among
// backgroundMessages of another trial, read through a gateway.
func (h *harness) reads(ctx context.Context, store string, pl *plane, mp *mailpit) error {
	gw, api, id, err := h.readTarget(ctx, pl)
	if err != nil {
		return err
	}
	var list struct{ Messages []json.RawMessage }
	if err := getJSON(api, id.ReadCapability, &list); err != nil || len(list.Messages) != listSize {
		return fmt.Errorf("list through the gateway: %d messages, %v", len(list.Messages), err)
	}
	mpc := unixHTTPClient(mp.http, 8)
	defer mpc.CloseIdleConnections()
	for _, conc := range readConcurrencies {
		hc := httpClient(conc)
		figures := []struct {
			path, url, baseLabel, baseURL string
		}{
			{"list of 32", api, "Mailpit API: list of 32", "http://mailpit/api/v1/messages?limit=" + strconv.Itoa(listSize)},
			{"latest", api + "/latest", "Mailpit API: latest", "http://mailpit/api/v1/message/latest"},
		}
		for _, f := range figures {
			s, b, err := pair(ctx, h.cell, conc, "mailplane", getWorkers(hc, f.url, id.ReadCapability), f.baseLabel, getWorkers(mpc, f.baseURL, ""))
			if err != nil {
				return err
			}
			h.addRead(Pair{Section: "reads", Store: store, Path: f.path, Conc: conc, Mailplane: s, Baseline: b})
		}
		hc.CloseIdleConnections()
	}
	// Wake-up: POST /emails through a writer of this trial while the
	// evaluator waits on latest?wait=.
	w, err := h.startSurface(ctx, "mail-writer", pl, id.WriterGrant, "")
	if err != nil {
		return err
	}
	wakeUp, e2e, err := wake(ctx, w.url+"/emails", id.MailAPIToken, api+"/latest", id.ReadCapability, listSize)
	if err != nil {
		return err
	}
	for _, p := range []Pair{wakeUp, e2e} {
		p.Store = store
		h.addRead(p)
	}
	w.stop()
	gw.stop()
	return nil
}

func (h *harness) addRead(p Pair) {
	h.report.add(p)
	h.logf("  %-8s %-11s c%d  mailplane %7.0f/s p50 %5.2fms p99 %5.2fms  %s %7.0f/s p50 %5.2fms p99 %5.2fms  %s",
		p.Store, p.Path, p.Conc, p.Mailplane.Rate, p.Mailplane.P50, p.Mailplane.P99,
		p.Baseline.Label, p.Baseline.Rate, p.Baseline.P50, p.Baseline.P99, p.errNote())
}

// wake measures, wakeRounds times, a candidate's POST /emails while the
// evaluator's GET …/latest?wait=10s&after=N is already waiting, next to
// the best a poller could do: the same POST, then one plain GET …/latest
// the moment it is acknowledged (no poller can know that moment, so real
// polling is slower). Two figures come out:
//   - "wait wake-up": from the POST's acknowledgement to the waiting
//     read's answer, next to the plain GET's own duration. The plane wakes
//     waiters when the message commits, before the writer acknowledges,
//     so a wake-up can be negative.
//   - "POST to read": from the start of the POST to the waiting read's
//     answer, next to POST then GET.
//
// Rates are not meaningful here and are left 0.
func wake(ctx context.Context, postURL, token, latest, capability string, after int) (wakeUp, e2e Pair, err error) {
	wakeUp = Pair{Section: "reads", Path: "wait wake-up", Conc: 1,
		Mailplane: Load{Label: "mailplane"}, Baseline: Load{Label: "GET latest at the ack"}}
	e2e = Pair{Section: "reads", Path: "POST to read", Conc: 1,
		Mailplane: Load{Label: "mailplane"}, Baseline: Load{Label: "POST, then GET latest"}}
	post := emailJSON(512)
	hc := httpClient(4)
	defer hc.CloseIdleConnections()
	send := func() error {
		req, _ := http.NewRequest(http.MethodPost, postURL, bytes.NewReader(post))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		return do(hc, req, http.StatusOK)
	}
	get := func(url string) error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+capability)
		return do(hc, req, http.StatusOK)
	}
	for i := range wakeRounds {
		if ctx.Err() != nil {
			return wakeUp, e2e, ctx.Err()
		}
		// The waiting read, parked at the plane before the POST starts.
		answered := make(chan error, 1)
		var at time.Time
		go func() {
			err := get(latest + "?wait=10s&after=" + strconv.Itoa(after))
			at = time.Now()
			answered <- err
		}()
		time.Sleep(wakePark)
		start := time.Now()
		if err := send(); err != nil {
			return wakeUp, e2e, err
		}
		acked := time.Now()
		after++
		if err := <-answered; err != nil {
			return wakeUp, e2e, fmt.Errorf("waiting read %d: %w", i, err)
		}
		wakeUp.Mailplane.add(at.Sub(acked))
		e2e.Mailplane.add(at.Sub(start))

		start = time.Now()
		if err := send(); err != nil {
			return wakeUp, e2e, err
		}
		acked = time.Now()
		if err := get(latest + "?after=" + strconv.Itoa(after)); err != nil {
			return wakeUp, e2e, err
		}
		read := time.Now()
		after++
		wakeUp.Baseline.add(read.Sub(acked))
		e2e.Baseline.add(read.Sub(start))
	}
	for _, l := range []*Load{&wakeUp.Mailplane, &wakeUp.Baseline, &e2e.Mailplane, &e2e.Baseline} {
		l.finish()
		l.Rate = 0
	}
	return wakeUp, e2e, nil
}

// getJSON GETs url with a Bearer value and decodes the answer.
func getJSON(url, bearer string, v any) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := probe.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}
