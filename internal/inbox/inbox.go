// Package inbox is mail-inbox's HTTP surface: the agent's HTML inbox for
// exactly one namespace (BEHAVIOR.md §6), reachable with no credential but
// the inbox token in its path.
//
// It routes before it reads: the path's shape and the token (compared in
// constant time) are checked before the plane is asked anything, so a wrong
// token is "Not found" even while the plane is down. Its plane calls are
// list and get with an empty namespace: its inbox grant binds it to its
// trial, so no request can name a second mailbox. It shows no JSON message
// data and no OTP; message bodies are escaped text whose URLs are links.
package inbox

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// healthTimeout bounds the plane's health call behind /healthz.
const healthTimeout = 5 * time.Second

// Inbox answers the agent's browser.
type Inbox struct {
	plane          *rpc.Client
	token          []byte // digest of the inbox token
	base           string // "/inbox/{token}", the inbox page's path
	noRootRedirect bool
	log            zerolog.Logger
}

// New returns the inbox for token, reading through plane (a client holding
// the trial's inbox grant). With noRootRedirect, GET / does not hand out
// the token URL (for agents that were given the full URL).
func New(plane *rpc.Client, token string, noRootRedirect bool, log zerolog.Logger) *Inbox {
	return &Inbox{
		plane:          plane,
		token:          ident.Digest(token),
		base:           "/inbox/" + url.PathEscape(token),
		noRootRedirect: noRootRedirect,
		log:            log,
	}
}

// kind is what a request path asks for.
type kind int

const (
	routeNotFound kind = iota
	routeRoot          // / (redirect to the inbox)
	routeHealth        // /healthz
	routeInbox         // /inbox/{token}
	routeMessage       // /inbox/{token}/messages/{id}
)

var kindNames = [...]string{"not_found", "root", "healthz", "inbox", "message"}

func (k kind) String() string { return kindNames[k] }

// parseRoute maps the escaped path of a request to a route, as the
// reference does (§6.1): strip slashes, split on "/", percent-decode each
// segment; the second must be the token. id is 0 for a message id that no
// message can have (zero, or too large).
func parseRoute(escapedPath string, token []byte) (kind, int64) {
	switch escapedPath {
	case "/healthz":
		return routeHealth, 0
	case "", "/":
		return routeRoot, 0
	}
	raw := strings.Split(strings.Trim(escapedPath, "/"), "/")
	seg := make([]string, len(raw))
	for i, s := range raw {
		d, err := url.PathUnescape(s)
		if err != nil {
			return routeNotFound, 0
		}
		seg[i] = d
	}
	if len(seg) < 2 || seg[0] != "inbox" || !ident.Equal(seg[1], token) {
		return routeNotFound, 0
	}
	switch {
	case len(seg) == 2:
		return routeInbox, 0
	case len(seg) == 4 && seg[2] == "messages" && isID(seg[3]):
		n, err := strconv.ParseInt(strings.TrimLeft(seg[3], "0"), 10, 64)
		if err != nil {
			n = 0
		}
		return routeMessage, n
	}
	return routeNotFound, 0
}

// isID reports whether s is ASCII digits (leading zeros are fine).
func isID(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// ServeHTTP answers one request. Every answer, the redirect included,
// carries no-store, no-referrer and the content security policy.
func (in *Inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", render.ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	rt, id := parseRoute(r.URL.EscapedPath(), in.token)
	status := in.serve(w, r, rt, id)
	// The path holds the token: only the route's name is logged.
	ev := in.log.Debug()
	if status >= 500 {
		ev = in.log.Warn()
	}
	ev.Str("method", r.Method).Str("route", rt.String()).Int("status", status).Dur("took", time.Since(start)).Msg("request")
}

func (in *Inbox) serve(w http.ResponseWriter, r *http.Request, rt kind, id int64) int {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return write(w, http.StatusMethodNotAllowed, "text/html; charset=utf-8", render.Notice("Method not allowed", "Only GET is supported."))
	}
	switch rt {
	case routeHealth:
		return in.health(w, r)
	case routeRoot:
		if in.noRootRedirect {
			return notFound(w)
		}
		w.Header().Set("Location", in.base)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusFound)
		return http.StatusFound
	case routeInbox:
		msgs, err := in.plane.List(r.Context(), &rpc.ReadRequest{})
		if err != nil {
			return in.planeError(w, r, err)
		}
		return write(w, http.StatusOK, "text/html; charset=utf-8", render.Inbox(msgs, in.base))
	case routeMessage:
		if id < 1 {
			return notFound(w)
		}
		m, err := in.plane.Get(r.Context(), &rpc.ReadRequest{ID: id})
		if err != nil {
			return in.planeError(w, r, err)
		}
		return write(w, http.StatusOK, "text/html; charset=utf-8", render.Message(m, in.base))
	}
	return notFound(w)
}

// health answers /healthz from the plane's health call.
func (in *Inbox) health(w http.ResponseWriter, r *http.Request) int {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if h, err := in.plane.Health(ctx); err != nil || h.Store != "ok" {
		return unavailable(w)
	}
	return write(w, http.StatusOK, jsonType, []byte(`{"status":"ok"}`))
}

// planeError answers a failed read: an outage is 503; anything else (no
// such message, or a grant that no longer opens anything because its trial
// was destroyed) is "Not found".
func (in *Inbox) planeError(w http.ResponseWriter, r *http.Request, err error) int {
	if r.Context().Err() != nil {
		in.log.Debug().Msg("request ended before the plane answered")
		return unavailable(w)
	}
	if rpc.IsOutage(err) {
		in.log.Warn().Err(err).Msg("plane unavailable")
		return unavailable(w)
	}
	if code := rpc.CodeOf(err); code != rpc.CodeNotFound {
		in.log.Error().Str("code", code).Msg("the plane refused the inbox's read")
	}
	return notFound(w)
}

const jsonType = "application/json; charset=utf-8"

func unavailable(w http.ResponseWriter) int {
	return write(w, http.StatusServiceUnavailable, jsonType, []byte(`{"status":"unavailable"}`))
}

func notFound(w http.ResponseWriter) int {
	return write(w, http.StatusNotFound, "text/html; charset=utf-8", render.NotFound())
}

func write(w http.ResponseWriter, status int, contentType string, body []byte) int {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
	return status
}
