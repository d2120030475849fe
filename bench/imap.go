package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/tlsca"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Issue #35's goals for the agent's mailbox over IMAP.
const (
	// imapFetchGoal: FETCH of a message's body p99 at most this many
	// times the HTML message page's, through the same mail-inbox.
	imapFetchGoal = 2.0
	// idleWakeGoal: an IDLE client is told of a message within this
	// long of its send (p99).
	idleWakeGoal = 10 * time.Millisecond
	// idleWakes is how many sends the IDLE figure times.
	idleWakes = 200
)

// imap measures the IMAP door of a shared mail-inbox (as mail-plane up
// runs it, TLS under a local CA) on one mailbox of listSize messages: UID
// FETCH of a message's body over implicit TLS, one logged-in connection
// per client as a mail client keeps it, next to the HTML message page,
// taking turns; then how soon an IDLE connection hears of a send.
func (h *harness) imap(ctx context.Context) error {
	pl, err := h.startPlane(ctx, "plane-imap")
	if err != nil {
		return err
	}
	id, err := fillTrial(ctx, pl, listSize)
	if err != nil {
		return err
	}
	grant, err := pl.admin.GrantCreate(ctx, rpc.RoleInbox)
	if err != nil {
		return err
	}
	in, imaps, roots, err := h.startIMAPInbox(ctx, pl, grant)
	if err != nil {
		return err
	}
	defer in.stop()
	dial := func() (*imapConn, error) { return dialIMAP(imaps, roots, id.InboxToken) }
	page := in.url + "/inbox/" + id.InboxToken + "/messages/1"
	for _, conc := range readConcurrencies {
		conc = min(conc, limits.IMAPTrialConns)
		hc := httpClient(conc)
		s, b, err := pair(ctx, h.cell, conc, "IMAP UID FETCH BODY[]", imapFetchWorkers(dial), "HTML message page", getWorkers(hc, page, ""))
		hc.CloseIdleConnections()
		if err != nil {
			return err
		}
		h.report.add(Pair{Section: "imap", Store: "embedded", Path: "IMAP FETCH body", Conc: conc, Mailplane: s, Baseline: b})
		h.logf("  imap fetch c%d  IMAP %7.0f/s p99 %5.2fms  HTML page %7.0f/s p99 %5.2fms", conc, s.Rate, s.P99, b.Rate, b.P99)
		if b.P99 > 0 {
			h.report.Notes = append(h.report.Notes, fmt.Sprintf("IMAP (#35), c%d: UID FETCH of a body p99 %.2f ms is %.2f× the HTML message page's %.2f ms (goal ≤ %.0f×: %s).",
				conc, s.P99, s.P99/b.P99, b.P99, imapFetchGoal, verdict(s.P99 <= imapFetchGoal*b.P99)))
		}
	}
	wakes, err := idleWakeups(ctx, pl, id, dial)
	if err != nil {
		return err
	}
	p50, p99 := wakes[len(wakes)/2], wakes[len(wakes)*99/100]
	h.logf("  imap idle  wake-up p50 %v p99 %v (%d sends)", p50, p99, len(wakes))
	h.report.Notes = append(h.report.Notes, fmt.Sprintf("IMAP (#35): IDLE hears of a send (the plane's send answered to * N EXISTS read) "+
		"p50 %.2f ms, p99 %.2f ms over %d sends (goal p99 < %v: %s).",
		ms(p50), ms(p99), len(wakes), idleWakeGoal, verdict(p99 < idleWakeGoal)))
	return nil
}

// startIMAPInbox runs a shared mail-inbox with its HTTP, IMAP and IMAPS
// listeners and a leaf of a fresh local CA; it answers the inbox, the
// IMAPS address and the CA's pool.
func (h *harness) startIMAPInbox(ctx context.Context, pl *plane, grant string) (*surface, string, *x509.CertPool, error) {
	dir, err := os.MkdirTemp(h.procs.dir, "s")
	if err != nil {
		return nil, "", nil, err
	}
	ca, err := tlsca.Ensure(filepath.Join(dir, "ca"), []string{"127.0.0.1"})
	if err != nil {
		return nil, "", nil, err
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := ca.WriteLeaf([]string{"127.0.0.1"}, cert, key); err != nil {
		return nil, "", nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	grantFile, err := writeSecret(dir, "grant", grant)
	if err != nil {
		return nil, "", nil, err
	}
	var files []*os.File
	var addrs []string
	for range 3 { // HTTP, IMAP (STARTTLS), IMAPS
		ln, f, err := tcpListener()
		if err != nil {
			return nil, "", nil, err
		}
		addrs = append(addrs, ln.Addr().String())
		defer ln.Close()
		defer f.Close()
		files = append(files, f)
	}
	args := append(h.globalArgs("mail-inbox"), "--plane-socket", pl.socket, "--grant-file", grantFile, "--listen", "fd:3",
		"--imap-listen", "fd:4", "--imaps-listen", "fd:5", "--tls-cert", cert, "--tls-key", key)
	p, err := h.procs.start("mail-inbox", h.bin("mail-inbox"), args, nil, files...)
	if err != nil {
		return nil, "", nil, err
	}
	s := &surface{proc: p, url: "http://" + addrs[0]}
	return s, addrs[2], roots, p.poll(ctx, func() bool { return healthy(s.url + "/healthz") })
}

// imapConn is a logged-in IMAP connection with INBOX selected.
type imapConn struct {
	c   *tls.Conn
	r   *bufio.Reader
	tag int
}

func dialIMAP(addr string, roots *x509.CertPool, token string) (*imapConn, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	ic := &imapConn{c: c, r: bufio.NewReader(c)}
	if _, err := ic.r.ReadString('\n'); err != nil { // the greeting
		c.Close()
		return nil, err
	}
	for _, cmd := range []string{"LOGIN agent " + token, "SELECT INBOX"} {
		if err := ic.do(cmd, nil); err != nil {
			c.Close()
			return nil, err
		}
	}
	return ic, nil
}

// do sends one command and reads to its tagged answer, skipping
// literals; untagged lines go to untagged, if set.
func (ic *imapConn) do(cmd string, untagged func(string)) error {
	ic.tag++
	tag := "b" + strconv.Itoa(ic.tag)
	ic.c.SetDeadline(time.Now().Add(clientTimeout))
	if _, err := io.WriteString(ic.c, tag+" "+cmd+"\r\n"); err != nil {
		return err
	}
	for {
		line, err := ic.r.ReadString('\n')
		if err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(line, tag+" "); ok {
			if !strings.HasPrefix(rest, "OK") {
				return fmt.Errorf("imap %s: %s", strings.Fields(cmd)[0], strings.TrimSpace(rest))
			}
			return nil
		}
		if i := strings.LastIndexByte(line, '{'); i >= 0 && strings.HasSuffix(line, "}\r\n") {
			n, err := strconv.Atoi(line[i+1 : len(line)-3])
			if err != nil {
				return err
			}
			if _, err := ic.r.Discard(n); err != nil {
				return err
			}
		}
		if untagged != nil {
			untagged(line)
		}
	}
}

func imapFetchWorkers(dial func() (*imapConn, error)) workerFactory {
	return func(int) (worker, error) {
		ic, err := dial()
		if err != nil {
			return worker{}, err
		}
		return worker{
			do: func() (time.Duration, error) {
				return timed(func() error { return ic.do("UID FETCH 1 (BODY[])", nil) })
			},
			close: func() { ic.c.Close() },
		}, nil
	}
}

// idleWakeups times idleWakes sends into the trial, each from the start
// of its send to an IDLE connection reading * N EXISTS.
func idleWakeups(ctx context.Context, pl *plane, id rpc.Identity, dial func() (*imapConn, error)) ([]time.Duration, error) {
	ic, err := dial()
	if err != nil {
		return nil, err
	}
	defer ic.c.Close()
	w := rpc.NewClient(pl.socket, id.WriterGrant)
	defer w.Close()
	if _, err := io.WriteString(ic.c, "i IDLE\r\n"); err != nil {
		return nil, err
	}
	ic.c.SetDeadline(time.Now().Add(clientTimeout))
	if line, err := ic.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+") {
		return nil, fmt.Errorf("IDLE: %q %v", line, err)
	}
	want := listSize
	var out []time.Duration
	for i := range idleWakes {
		want++
		start := time.Now()
		if err := sendRPC(ctx, w, crlf(fmt.Sprintf("From: %s\nTo: %s\nSubject: Idle %d\n\nHello.\n", sender, recipient, i))); err != nil {
			return nil, err
		}
		ic.c.SetDeadline(time.Now().Add(clientTimeout))
		for {
			line, err := ic.r.ReadString('\n')
			if err != nil {
				return nil, err
			}
			if f := strings.Fields(line); len(f) == 3 && f[2] == "EXISTS" {
				if n, _ := strconv.Atoi(f[1]); n >= want {
					break
				}
			}
		}
		out = append(out, time.Since(start))
	}
	if _, err := io.WriteString(ic.c, "DONE\r\n"); err != nil && !errors.Is(err, net.ErrClosed) {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}
