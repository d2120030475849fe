// Package apiroute is the API port of mail-plane sidecar: the
// reference's one port, served by two of mailplane's processes. Writes
// (POST /emails, /internal/bootstrap) go to mail-writer, everything else
// to mail-gateway. It holds no credential, adds nothing and keeps nothing;
// the supervisor binds the port and wires it.
package apiroute

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Serve serves the API port on ln until ctx ends, with the reference's
// limits, like every door of its.
func Serve(ctx context.Context, ln net.Listener, writerURL, gatewayURL string, log zerolog.Logger) error {
	return httpserve.Serve(ctx, ln, Handler(writerURL, gatewayURL, log), httpserve.Limits{
		Conns:          connlimit.Limits{MaxConns: connlimit.DefaultMaxConns, Lifetime: connlimit.DefaultLifetime},
		ReadTimeout:    connlimit.DefaultIdle,
		WriteTimeout:   rpc.MaxWait + 15*time.Second, // a proxied wait at the gateway
		IdleTimeout:    connlimit.DefaultIdle,
		MaxHeaderBytes: 16 << 10,
	}, log)
}

// writeRouteTimeout bounds one write routed to the writer.
const writeRouteTimeout = 30 * time.Second

// Handler serves the reference's API port from two processes: the
// writer's routes (POST /emails, /internal/bootstrap) go to the writer,
// everything else to the gateway. It adds nothing and keeps nothing.
func Handler(writerURL, gatewayURL string, log zerolog.Logger) http.Handler {
	proxy := func(target string) *httputil.ReverseProxy {
		u, _ := url.Parse(target)
		return &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) },
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				log.Warn().Err(err).Str("to", target).Msg("api router: the surface did not answer")
				apierr.Unavailable.Write(w)
			},
		}
	}
	writer, gateway := proxy(writerURL), proxy(gatewayURL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/emails", "/internal/bootstrap":
			// A write runs to its answer even if its client half-closes
			// after the request (as HTTP/1.0 clients and body-to-EOF senders
			// do), as at the writer itself: the client's going quiet is not
			// an outage. The writer's own limits bound it.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeRouteTimeout)
			defer cancel()
			if r.Method == http.MethodPost && r.Header.Get("Content-Length") == "" && len(r.TransferEncoding) == 0 {
				// A POST with no framing: a proxy would add Content-Length: 0,
				// and the writer must judge the request as it came.
				forwardUnframed(ctx, w, r, writerURL, log)
				return
			}
			writer.ServeHTTP(w, r.WithContext(ctx))
		default:
			gateway.ServeHTTP(w, r)
		}
	})
}

// forwardUnframed hands the writer a POST that came with neither a
// Content-Length nor chunked framing exactly so (its header, no body), so
// that the writer answers it in the reference's check order (a wrong
// credential 401, a wrong type 415, else 411), and copies the answer back.
func forwardUnframed(ctx context.Context, w http.ResponseWriter, r *http.Request, writerURL string, log zerolog.Logger) {
	u, _ := url.Parse(writerURL)
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		log.Warn().Err(err).Msg("api router: the writer did not answer")
		apierr.Unavailable.Write(w)
		return
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	out := r.Clone(ctx)
	out.URL = &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	out.Host = u.Host
	out.Header.Del("Content-Length")
	out.Close = true
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", out.Method, out.URL.RequestURI(), out.Host)
	out.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := c.Write(head.Bytes()); err != nil {
		apierr.Unavailable.Write(w)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), out)
	if err != nil {
		log.Warn().Err(err).Msg("api router: the writer's answer was unreadable")
		apierr.Unavailable.Write(w)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
