package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	gosmtp "github.com/emersion/go-smtp"
)

// The null servers are the ceilings of the ingest paths: the same loopback
// sockets, the same HTTP or SMTP stack, a process of their own (this
// program run again with -null), and no work at all behind them. They run
// as separate processes, as the writer does, so that the client and the
// server do not share a Go scheduler on one side only.

// nullID is what the null POST /emails handler answers: Resend's shape.
const nullID = `{"id":"00000000-0000-4000-8000-000000000000"}`

// serveNull serves kind ("http" or "smtp") on the listener passed as fd 3
// until SIGTERM.
func serveNull(kind string) error {
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return fmt.Errorf("null %s: fd 3: %w", kind, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch kind {
	case "http":
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, nullID)
		})}
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case "smtp":
		srv := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return nullSession{}, nil }))
		srv.Domain = "null.local"
		srv.MaxMessageBytes = 2 << 20
		srv.MaxRecipients = 16
		srv.ReadTimeout = 10 * time.Second
		srv.WriteTimeout = 10 * time.Second
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, gosmtp.ErrServerClosed) {
			return err
		}
		return nil
	}
	return fmt.Errorf("-null %q: want http or smtp", kind)
}

// nullSession accepts every message and keeps none.
type nullSession struct{}

func (nullSession) Reset()                                 {}
func (nullSession) Logout() error                          { return nil }
func (nullSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (nullSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (nullSession) Data(r io.Reader) error                 { _, err := io.Copy(io.Discard, r); return err }

// nullServer is a running null server.
type nullServer struct {
	*proc
	addr string
}

// startNull runs this program again as a null server of kind.
func (h *harness) startNull(ctx context.Context, kind string) (*nullServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ln, f, err := tcpListener()
	if err != nil {
		return nil, err
	}
	p, err := h.procs.start("null-"+kind, self, []string{"-null", kind}, nil, f)
	ln.Close()
	f.Close()
	if err != nil {
		return nil, err
	}
	n := &nullServer{proc: p, addr: ln.Addr().String()}
	// The socket listens already; ready is when the child answers on it.
	return n, p.poll(ctx, func() bool {
		if kind == "http" {
			return healthy("http://" + n.addr + "/")
		}
		c, err := smtpSession(tcpDialer(n.addr))
		if err != nil {
			return false
		}
		c.Quit()
		return true
	})
}
