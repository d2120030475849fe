package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"strings"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// The message every ingest path carries: a sign-up mail with a code, its
// text padded to the body size with lines an SMTP server takes (RFC 5321
// allows 998 octets; these are 72).
const (
	sender    = rpc.CandidateSender
	recipient = "agent@example.com"
	subject   = "Your sign-up code"
)

// Body sizes the issue asks for.
var sizes = []struct {
	Name  string
	Bytes int
}{{"512 B", 512}, {"100 KiB", 100 << 10}}

// bodyText is n bytes of text in 72-byte lines ending in "\n".
func bodyText(n int) string {
	const line = "Your code is 123456. Open https://site.example/verify?t=abc to sign in.\n"
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(line)
	}
	s := b.String()[:n]
	return s[:len(s)-1] + "\n"
}

// emailJSON is a POST /emails body with text of n bytes.
func emailJSON(n int) []byte {
	b, _ := json.Marshal(map[string]any{"from": sender, "to": recipient, "subject": subject, "text": bodyText(n)})
	return b
}

// mailpitSendJSON is the same message for Mailpit's own send API (POST
// /api/v1/send), the peer's answer to POST /emails.
func mailpitSendJSON(n int) []byte {
	b, _ := json.Marshal(map[string]any{"From": map[string]string{"Email": sender}, "To": []map[string]string{{"Email": recipient}},
		"Subject": subject, "Text": bodyText(n)})
	return b
}

// rfc5322 is the same message as SMTP DATA; net/smtp's writer turns "\n"
// into CRLF and dot-stuffs.
func rfc5322(n int) []byte {
	return []byte("From: " + sender + "\nTo: " + recipient + "\nSubject: " + subject +
		"\nContent-Type: text/plain; charset=utf-8\n\n" + bodyText(n))
}

// clientTimeout bounds one operation of any client.
const clientTimeout = 30 * time.Second

// httpClient is a keep-alive client for conc workers.
func httpClient(conc int) *http.Client {
	return &http.Client{Timeout: clientTimeout, Transport: &http.Transport{
		MaxIdleConns: conc, MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc,
		DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}

// unixHTTPClient speaks HTTP over a Unix socket (Mailpit's API).
func unixHTTPClient(socket string, conc int) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: conc, MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc,
		DisableCompression: true,
	}
	return &http.Client{Timeout: clientTimeout, Transport: tr}
}

// do sends req and reads the whole answer; any status but want fails.
func do(hc *http.Client, req *http.Request, want int) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: HTTP %d: %.200s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
	return nil
}

// postWorkers make workers that POST body to url with token, sharing one
// keep-alive client.
func postWorkers(url, token string, body []byte, conc int) (workerFactory, func()) {
	hc := httpClient(conc)
	mk := func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			return timed(func() error {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				return do(hc, req, http.StatusOK)
			})
		}}, nil
	}
	return mk, hc.CloseIdleConnections
}

// getWorkers make workers that GET url (with a Bearer value when given).
func getWorkers(hc *http.Client, url, bearer string) workerFactory {
	return func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			return timed(func() error {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if bearer != "" {
					req.Header.Set("Authorization", "Bearer "+bearer)
				}
				return do(hc, req, http.StatusOK)
			})
		}}, nil
	}
}

// dialer opens one SMTP transport connection (TCP or a Unix socket).
type dialer func() (net.Conn, error)

func tcpDialer(addr string) dialer {
	return func() (net.Conn, error) { return net.DialTimeout("tcp", addr, clientTimeout) }
}

func unixDialer(path string) dialer {
	return func() (net.Conn, error) { return net.DialTimeout("unix", path, clientTimeout) }
}

// smtpSession is an open SMTP connection, greeted.
func smtpSession(dial dialer) (*smtp.Client, error) {
	nc, err := dial()
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(clientTimeout))
	c, err := smtp.NewClient(nc, "localhost")
	if err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.Hello("bench.local"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// smtpSend runs one mail transaction on c.
func smtpSend(c *smtp.Client, data []byte) error {
	if err := c.Mail(sender); err != nil {
		return err
	}
	if err := c.Rcpt(recipient); err != nil {
		return err
	}
	wc, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := wc.Write(data); err != nil {
		return err
	}
	return wc.Close()
}

// smtpWorkers make workers that send perConn messages per connection. With
// one per connection an operation is the whole connection (dial, greeting,
// EHLO, the transaction, QUIT), as a site that connects per mail pays it;
// with more, an operation is one transaction, and the reconnect every
// perConn messages is counted in throughput but not in latency.
func smtpWorkers(dial dialer, data []byte, perConn int) workerFactory {
	return func(int) (worker, error) {
		if perConn == 1 {
			return worker{do: func() (time.Duration, error) {
				return timed(func() error {
					c, err := smtpSession(dial)
					if err != nil {
						return err
					}
					defer c.Close()
					if err := smtpSend(c, data); err != nil {
						return err
					}
					return c.Quit()
				})
			}}, nil
		}
		var c *smtp.Client
		sent := 0
		w := worker{close: func() {
			if c != nil {
				c.Quit()
				c.Close()
			}
		}}
		w.do = func() (time.Duration, error) {
			if c == nil || sent == perConn {
				if c != nil {
					c.Quit()
					c.Close()
					c = nil
				}
				var err error
				if c, err = smtpSession(dial); err != nil {
					return 0, err
				}
				sent = 0
			}
			lat, err := timed(func() error { return smtpSend(c, data) })
			sent++
			if err != nil {
				c.Close()
				c = nil
			}
			return lat, err
		}
		return w, nil
	}
}

// rpcSendWorkers make workers that send straight into the plane over its
// socket with clients[i % len(clients)] (a writer grant per trial).
func rpcSendWorkers(clients []*rpc.Client, raw []byte) workerFactory {
	return func(i int) (worker, error) {
		c := clients[i%len(clients)]
		return worker{do: func() (time.Duration, error) {
			return timed(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
				defer cancel()
				_, err := c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: sender, To: []string{recipient}, Raw: raw})
				return err
			})
		}}, nil
	}
}

// rpcHealthWorkers make workers that ask the plane for its health: the same
// socket, grant check and JSON as a send, with nothing stored.
func rpcHealthWorkers(c *rpc.Client) workerFactory {
	return func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			return timed(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
				defer cancel()
				_, err := c.Health(ctx)
				return err
			})
		}}, nil
	}
}
