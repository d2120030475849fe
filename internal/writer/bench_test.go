package writer_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Benchmark shape (the issue's): 8 concurrent clients, 512-byte bodies,
// every send durable on the embedded store.
const (
	benchConcurrency = 8
	benchBodyBytes   = 512
	benchPerConn     = 50
)

var benchText = strings.Repeat("Your code is 123456. ", benchBodyBytes/21+1)[:benchBodyBytes]

// BenchmarkWriter measures POST /emails and SMTP (one message per
// connection, and 50) through the real mail-writer in front of a real plane
// (quotas off), each next to a baseline measured in the same run: an HTTP
// handler that answers 200 without storing, and a go-smtp server that
// discards. The writer's results carry x-baseline, the ratio of its sends/s
// to its baseline's, and x-plane, the ratio to the plane's own send RPC
// (plane-send: the same 512-byte message straight into the plane at the
// same concurrency), which is the ceiling any door in front of it has.
func BenchmarkWriter(b *testing.B) {
	// Each measurement gets a plane of its own, so that none of them runs
	// on a database the one before filled.
	type env struct {
		id rpc.Identity
		w  *writertest.Writer
		pc *rpc.Client
	}
	fresh := func() env {
		p := startQuietPlane(b)
		id := p.Trial(b, rpc.ProfileCandidate)
		return env{id: id, w: writertest.Start(b, p, id, "fixed", "--log-level", "warn"), pc: p.Client(b, id.WriterGrant)}
	}
	planeEnv, postEnv, smtp1Env, smtp50Env := fresh(), fresh(), fresh(), fresh()

	base := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "application/json")
		io.WriteString(rw, `{"id":"00000000-0000-4000-8000-000000000000"}`)
	}))
	b.Cleanup(base.Close)
	discard := discardSMTP(b)

	body := bodyOf(with("text", benchText))
	postTo := func(url, token string) func(hc *http.Client) error {
		return func(hc *http.Client) error {
			req, _ := http.NewRequest(http.MethodPost, url+"/emails", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	}
	results := map[string]float64{}
	raw := []byte("Subject: bench\r\n\r\n" + benchText)
	b.Run("plane-send", func(b *testing.B) {
		results["plane"] = run(b, func(next func() bool, lat *itest.Latencies) error {
			for next() {
				if err := lat.Time(func() error {
					_, err := planeEnv.pc.Send(b.Context(), &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: raw})
					return err
				}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	pair := func(name string, run func(b *testing.B, target string) float64, baseline, writer string) {
		b.Run(name+"/baseline", func(b *testing.B) { results[name] = run(b, baseline) })
		b.Run(name+"/writer", func(b *testing.B) {
			rate := run(b, writer)
			if results[name] > 0 {
				b.ReportMetric(rate/results[name], "x-baseline")
			}
			if results["plane"] > 0 {
				b.ReportMetric(rate/results["plane"], "x-plane")
			}
		})
	}
	pair("POST", func(b *testing.B, url string) float64 {
		token := "" // the baseline ignores it
		if url == postEnv.w.URL {
			token = postEnv.id.MailAPIToken
		}
		return benchHTTP(b, postTo(url, token))
	}, base.URL, postEnv.w.URL)
	pair("SMTP-1", func(b *testing.B, addr string) float64 { return benchSMTP(b, addr, 1) }, discard, smtp1Env.w.SMTPAddr)
	pair("SMTP-50", func(b *testing.B, addr string) float64 { return benchSMTP(b, addr, benchPerConn) }, discard, smtp50Env.w.SMTPAddr)
}

// startQuietPlane runs mail-plane serve with quotas off and logging at
// warn, as a production plane would log, so that the benchmark measures
// the plane and not its debug log.
func startQuietPlane(b *testing.B) *itest.Plane {
	dir := itest.ShortTempDir(b)
	p := &itest.Plane{Socket: filepath.Join(dir, "plane.sock"), Data: filepath.Join(dir, "data")}
	p.Proc = itest.Start(b, "mail-plane", "--log-level", "warn", "serve", "--socket", p.Socket, "--data", p.Data,
		"--quota-messages", "0", "--quota-bytes", "0")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if g, err := rpc.ReadSecretFile(filepath.Join(p.Data, "admin.grant")); err == nil {
			p.Admin = p.Client(b, g)
			if _, err := p.Admin.Health(b.Context()); err == nil {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("plane did not start:\n%s", p.Output())
	return nil
}

// run spreads b.N operations over benchConcurrency workers and reports
// sends/s with p50 and p99 latency; it returns sends/s.
func run(b *testing.B, worker func(next func() bool, lat *itest.Latencies) error) float64 {
	var n atomic.Int64
	next := func() bool { return n.Add(1) <= int64(b.N) }
	lat := itest.NewLatencies()
	var wg sync.WaitGroup
	errs := make(chan error, benchConcurrency)
	b.ResetTimer()
	start := time.Now()
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := worker(next, lat); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "sends/s")
	b.ReportMetric(float64(lat.Percentile(50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat.Percentile(99).Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
	return rate
}

func benchHTTP(b *testing.B, op func(hc *http.Client) error) float64 {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency, MaxConnsPerHost: benchConcurrency}}
	b.Cleanup(hc.CloseIdleConnections)
	return run(b, func(next func() bool, lat *itest.Latencies) error {
		for next() {
			if err := lat.Time(func() error { return op(hc) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchSMTP sends perConn messages on each connection; a message's latency
// is MAIL to the DATA reply, plus the connection's setup and QUIT when
// there is one message per connection.
func benchSMTP(b *testing.B, addr string, perConn int) float64 {
	msg := []byte("From: " + rpc.CandidateSender + "\r\nTo: u@example.com\r\nSubject: bench\r\n\r\n" + benchText + "\r\n")
	send := func(c *smtp.Client) error {
		if err := c.Mail(rpc.CandidateSender); err != nil {
			return err
		}
		if err := c.Rcpt("u@example.com"); err != nil {
			return err
		}
		wc, err := c.Data()
		if err != nil {
			return err
		}
		wc.Write(msg)
		return wc.Close()
	}
	return run(b, func(next func() bool, lat *itest.Latencies) error {
		for {
			if perConn == 1 {
				if !next() {
					return nil
				}
				if err := lat.Time(func() error {
					c, err := smtp.Dial(addr)
					if err != nil {
						return err
					}
					defer c.Close()
					if err := send(c); err != nil {
						return err
					}
					return c.Quit()
				}); err != nil {
					return err
				}
				continue
			}
			c, err := smtp.Dial(addr)
			if err != nil {
				return err
			}
			for i := 0; i < perConn; i++ {
				if !next() {
					c.Quit()
					return nil
				}
				if err := lat.Time(func() error { return send(c) }); err != nil {
					c.Close()
					return err
				}
			}
			c.Quit()
		}
	})
}

// discardSMTP runs a go-smtp server that accepts every message and keeps
// none: the ceiling the writer's SMTP is measured against.
func discardSMTP(b *testing.B) string {
	srv := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return discardSession{}, nil }))
	srv.Domain = "baseline.local"
	srv.MaxMessageBytes = 1 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

type discardSession struct{}

func (discardSession) Reset()                                 {}
func (discardSession) Logout() error                          { return nil }
func (discardSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (discardSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (discardSession) Data(r io.Reader) error                 { _, err := io.Copy(io.Discard, r); return err }
