package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Fair shares (issue 23): on one `mail-plane up --trials 0`, trial B's
// POST /emails (one client, kept alive) alone, and while trial A holds
// fairIdle idle connections on every shared listener (the writer's HTTP
// and shared SMTP ports, A's own SMTP port, the inbox, the gateway),
// opening a new one for each the server drops, plus fairSlow clients per
// listener that trickle a header or command a byte every 2 s. Alone and
// flooded take fairTurns turns each, of fairPosts and at least fairTurn:
// long enough that the server drops A's idle connections (after
// limits.SharedIdle) and A opens them again while B posts.
const (
	fairIdle  = 600
	fairSlow  = 20
	fairTurns = 2
	fairPosts = 300
	fairTurn  = 7 * time.Second
	// fairPath names the figure in the report.
	fairPath = "POST /emails, B under A's flood"
	// goalFairRatio: B's p99 under A's flood within 2× B's p99 alone.
	goalFairRatio = 2.0
)

// fair measures B alone and under A's flood and records the pair.
func (h *harness) fair(ctx context.Context) error {
	up, admin, err := h.startUpAdmin(ctx)
	if err != nil {
		return err
	}
	defer up.stop()
	defer admin.Close()
	a, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		return fmt.Errorf("trial.open A: %w", err)
	}
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		return fmt.Errorf("trial.open B: %w", err)
	}
	targets, err := fairTargets(up.bundle, a)
	if err != nil {
		return err
	}
	hc := httpClient(1)
	defer hc.CloseIdleConnections()
	flood := []string{"-flood", strings.Join(targets, ",")}
	return h.aloneAndUnder(ctx, "fair", fairPath, "B under A's flood", fairPoster(hc, b), fairTurns, fairPosts, fairTurn, func() (func(), error) {
		f, err := h.startLoad(ctx, "flood", "A's flood", flood, fairIdle*len(targets)*9/10)
		if err != nil {
			return nil, err
		}
		return func() {
			held := sockets(f.pid())
			f.stop()
			h.logf("  A held %d connections on %d listeners at the turn's end", held, len(targets))
		}, nil
	})
}

// aloneAndUnder measures B's post alone and under a load, taking turns:
// turns turns each, of at least posts posts and d; load starts the load
// for one turn and returns what stops it. It records the pair as
// section's figure path.
func (h *harness) aloneAndUnder(ctx context.Context, section, path, under string, post func() error, turns, posts int, d time.Duration, load func() (stop func(), err error)) error {
	alone, loaded := Load{Label: "B alone"}, Load{Label: under}
	if err := postTurn(ctx, post, 50, 0, &Load{}); err != nil { // warm-up
		return err
	}
	for range turns {
		if err := postTurn(ctx, post, posts, d, &alone); err != nil {
			return err
		}
		stop, err := load()
		if err != nil {
			return err
		}
		err = postTurn(ctx, post, posts, d, &loaded)
		stop()
		if err != nil {
			return err
		}
	}
	alone.finish()
	loaded.finish()
	h.report.add(Pair{Section: section, Store: "embedded", Path: path, Conc: 1, Mailplane: loaded, Baseline: alone})
	h.logf("  %-40s p50 %6.2fms p99 %6.2fms; alone p50 %6.2fms p99 %6.2fms", path, loaded.P50, loaded.P99, alone.P50, alone.P99)
	return nil
}

// fairTargets are the listeners A floods, as -flood takes them:
// http:ADDR or smtp:ADDR.
func fairTargets(u upBundle, a rpc.Bundle) ([]string, error) {
	var out []string
	for _, base := range []string{u.WriterURL, u.InboxBaseURL, u.APIURL} {
		p, err := url.Parse(base)
		if err != nil || p.Host == "" {
			return nil, fmt.Errorf("mail-plane up --json: URL %q", base)
		}
		out = append(out, "http:"+p.Host)
	}
	if u.SharedSMTPPort <= 0 || a.SMTPPort <= 0 {
		return nil, fmt.Errorf("mail-plane up --json: no shared SMTP port, or trial A has no port of its own")
	}
	for _, port := range []int{u.SharedSMTPPort, a.SMTPPort} {
		out = append(out, "smtp:"+net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	return out, nil
}

// startLoad runs this harness with args in a process of its own (a load
// of the fair or preauth section, as an attacker on the host would run
// it), and waits until it holds want sockets.
func (h *harness) startLoad(ctx context.Context, name, what string, args []string, want int) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p, err := h.procs.start(name, self, args, nil)
	if err != nil {
		return nil, err
	}
	if err := p.poll(ctx, func() bool { return sockets(p.pid()) >= want }); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %d connections held, want %d: %w", what, sockets(p.pid()), want, err)
	}
	return p, nil
}

// sockets counts the open sockets of process pid.
func sockets(pid int) int {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// fairPoster is one of B's POST /emails, answered 200.
func fairPoster(hc *http.Client, b rpc.Bundle) func() error {
	env := b.CandidateEnvironment
	body, _ := json.Marshal(map[string]string{"from": env["WEBSITEBENCH_MAIL_FROM"], "to": recipient, "subject": subject, "text": bodyText(512)})
	return func() error {
		req, _ := http.NewRequest(http.MethodPost, env["WEBSITEBENCH_MAIL_API_URL"], bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+env["WEBSITEBENCH_MAIL_API_TOKEN"])
		return do(hc, req, http.StatusOK)
	}
}

// postTurn makes POSTs one after the other into l, at least n and for at
// least d; any failure ends the section (B must be served).
func postTurn(ctx context.Context, post func() error, n int, d time.Duration, l *Load) error {
	start := time.Now()
	for i := 0; i < n || time.Since(start) < d; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lat, err := timed(post)
		if err != nil {
			return fmt.Errorf("B's POST /emails (%s): %w", l.Label, err)
		}
		l.add(lat)
	}
	l.Seconds += time.Since(start).Seconds()
	return nil
}

// holdFlood is the -flood process: it holds fairIdle idle and fairSlow
// slow connections on every listener of spec until it is killed.
func holdFlood(spec string) {
	for _, t := range strings.Split(spec, ",") {
		kind, addr, _ := strings.Cut(t, ":")
		prefix := "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
		if kind == "smtp" {
			prefix = "EHLO "
		}
		for range fairIdle {
			go holdIdle(addr)
		}
		for range fairSlow {
			go holdSlow(addr, prefix)
		}
	}
	select {}
}

// holdIdle holds one connection on addr, reading whatever comes, and
// opens another when the server closes it.
func holdIdle(addr string) {
	buf := make([]byte, 512)
	for {
		c := redial(addr)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		c.Close()
	}
}

// holdSlow writes prefix on addr a byte every 2 s, and starts again when
// cut.
func holdSlow(addr, prefix string) {
	for {
		c := redial(addr)
		go io.Copy(io.Discard, c)
		for i := 0; ; i++ {
			if _, err := io.WriteString(c, prefix[min(i, len(prefix)-1):min(i+1, len(prefix))]); err != nil {
				break
			}
			time.Sleep(2 * time.Second)
		}
		c.Close()
	}
}

// fairGoal: B's p99 under A's flood within goalFairRatio × B's p99 alone.
func (r *Report) fairGoal() {
	r.aloneGoal("fair", fairPath, "under A's flood", goalFairRatio)
}

// fairMarkdown is the section's table.
func (r *Report) fairMarkdown(w func(string, ...any)) {
	r.aloneMarkdown(w, "fair", "Fair shares: one trial's flood against another's POST /emails", fmt.Sprintf(
		"One `mail-plane up --trials 0` with trials A and B. B posts 512 B one at a time on one kept-alive connection, %d turns alone and %d under A's flood, each of at least %d posts and %v. The flood runs in a process of its own: %d idle connections on each of the writer's HTTP and shared SMTP ports, A's own SMTP port, the inbox and the gateway (a new one for each the server drops), and %d clients per listener trickling a header or command a byte every 2 s.",
		fairTurns, fairTurns, fairPosts, fairTurn, fairIdle, fairSlow))
}

// aloneGoal: B's p99 in section's figure path under load (what) within
// goal × B's p99 alone.
func (r *Report) aloneGoal(section, path, what string, goal float64) {
	p, ok := r.find(section, "embedded", path, "", 1)
	if !ok || p.Baseline.P99 <= 0 {
		return
	}
	ratio := p.Mailplane.P99 / p.Baseline.P99
	r.goal(fmt.Sprintf("B's p99 POST /emails %s ≤ %.0f× B's p99 alone", what, goal),
		fmt.Sprintf("%.2f× (p99 %.2f ms %s, %.2f ms alone)", ratio, p.Mailplane.P99, what, p.Baseline.P99), ratio <= goal)
}

// aloneMarkdown writes section's table: each figure under load against
// the same alone, then how it was measured (note).
func (r *Report) aloneMarkdown(w func(string, ...any), section, title, note string) {
	rows := r.section(section, "")
	if len(rows) == 0 {
		return
	}
	w("\n## %s\n\n", title)
	w("| figure | ops | p50 ms | p99 ms | alone: p50 ms | p99 ms | p99 ratio |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range rows {
		w("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f× |\n", p.Path, p.Mailplane.Ops, p.Mailplane.P50, p.Mailplane.P99, p.Baseline.P50, p.Baseline.P99, p.Mailplane.P99/max(p.Baseline.P99, 1e-9))
	}
	r.errorLines(w, rows)
	w("\n%s\n", note)
}

// redial connects to addr, trying again every 100 ms until it can: a load
// that the server cut opens its connection again.
func redial(addr string) net.Conn {
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			return c
		}
		time.Sleep(100 * time.Millisecond)
	}
}
