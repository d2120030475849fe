// Package inbox is mail-inbox's HTTP surface: the agent's HTML inbox
// (docs/reference.md §6), each mailbox reachable with no credential but the
// inbox token in its path.
//
// The caller is decided from the path before any body is read. A shared
// inbox (no token of its own) serves every trial of its plane: the token
// in the path is handed to the plane's reader check (rpc.MethodReadCheck,
// which records nothing), and a token it accepted is remembered for a few
// seconds (connlimit.Callers). A trial-bound inbox (strict mode,
// --token-file) compares its one token in constant time before the plane
// is asked anything, so a wrong token is refused even while the plane is
// down, and its grant binds it to its trial. Either way a wrong token is
// answered as a malformed one is ("Not found"; 405 for a POST), at once,
// and a body sent with it is never read (connlimit.GuardHTTP closes the
// connection); an accepted one takes its trial's share of the inbox. Either way no request can name a
// namespace, GET / reveals no token unless --root-redirect asks for the
// reference's redirect, and the pages show no JSON message data and no
// OTP. The list is newest first, with times and unread marks (the
// plane's record of the agent's opens); a message's text is escaped text
// whose URLs are links, and its HTML part shows as sent in a sandboxed
// frame (/messages/{id}/html, sanitized, under its own stricter policy),
// its text one click away (/messages/{id}/text).
//
// The same mailbox is an MCP server at /mcp/{token} (package inboxmcp),
// under the same token and rules. Each link of a message page keeps the
// sender's href and pings /inbox/{token}/messages/{id}/ping/{link} when
// followed (HTML's hyperlink auditing), which the plane records as a
// click; a link of the HTML pings the text's link with the same URL.
// Opening a message is recorded as an open (its frame's read is not).
package inbox

import (
	"context"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/inboxmcp"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// healthTimeout bounds the plane's health call behind /healthz.
const healthTimeout = 5 * time.Second

// Inbox answers the agent's browser.
type Inbox struct {
	plane        *rpc.Client
	token        []byte // digest of the inbox token; nil for a shared inbox
	base         string // "/inbox/{token}", the one inbox page of a trial-bound inbox
	rootRedirect bool
	log          zerolog.Logger
	// shares bound the requests in flight per trial: the namespace the
	// plane resolved from the token (oneTrial on a trial-bound inbox).
	shares *connlimit.Shares
	// known are the tokens the plane accepted recently, by digest.
	known connlimit.Callers
	mcp   *inboxmcp.Handler // the same mailbox as MCP tools, at /mcp/{token}
	// door, for a shared inbox's agent door inside the agent's network
	// namespace, is the one trial whose token it takes (NewDoor).
	door string
}

// oneTrial is the share key of a trial-bound inbox's requests: all are
// its one trial's.
const oneTrial = "trial"

// New returns the inbox for token, reading through plane (a client holding
// the trial's inbox grant), or with an empty token a shared inbox for
// every trial of the plane (a client holding a shared inbox grant). With
// rootRedirect, GET / redirects to the one token URL, as the reference
// does; a shared inbox has none.
func New(plane *rpc.Client, token string, rootRedirect bool, log zerolog.Logger) *Inbox {
	in := &Inbox{plane: plane, rootRedirect: rootRedirect && token != "", log: log, shares: connlimit.NewShares(limits.TrialRequests),
		mcp: inboxmcp.New(plane, log)}
	if token != "" {
		in.token = ident.Digest(token)
		in.base = "/inbox/" + url.PathEscape(token)
	}
	return in
}

// NewDoor returns a shared inbox for trial ns's agent door inside the
// agent's network namespace: the same pages and MCP, for that trial's
// token only; another trial's names nothing there, as a wrong one.
func NewDoor(plane *rpc.Client, ns string, log zerolog.Logger) *Inbox {
	in := New(plane, "", false, log)
	in.door = ns
	return in
}

// kind is what a request path asks for.
type kind int

const (
	routeNotFound kind = iota
	routeRoot          // / (redirect to the inbox)
	routeHealth        // /healthz
	routeInbox         // /inbox/{token}
	routeMessage       // /inbox/{token}/messages/{id}: its HTML in a frame, or its text if it has none
	routeText          // /inbox/{token}/messages/{id}/text: its text
	routeFrame         // /inbox/{token}/messages/{id}/html: the frame's document (render.FrameDocument)
	routePing          // POST /inbox/{token}/messages/{id}/ping/{link}: a click (render.PingPath)
	routeMCP           // /mcp/{token}: the mailbox as MCP tools
)

var kindNames = [...]string{"not_found", "root", "healthz", "inbox", "message", "text", "frame", "ping", "mcp"}

func (k kind) String() string { return kindNames[k] }

// route is a parsed request path.
type route struct {
	kind  kind
	token string // the inbox token in the path
	id    int64  // routeMessage, routeText, routeFrame, routePing: 0 for an id no message can have (zero, or too large)
	link  int    // routePing: the link's index, -1 for one no message has
}

// maxPathSegments bounds the segments a path is split into: no route has
// more than six.
const maxPathSegments = 7

// parseRoute maps the escaped path of a request to a route, as the
// reference does (§6.1): strip slashes, split on "/", percent-decode each
// segment; the second is the token: a trial-bound inbox's own (token, a
// digest), or for a shared inbox (token nil) any well-formed one.
func parseRoute(escapedPath string, token []byte) route {
	switch escapedPath {
	case "/healthz":
		return route{kind: routeHealth}
	case "", "/":
		return route{kind: routeRoot}
	}
	raw := strings.SplitN(strings.Trim(escapedPath, "/"), "/", maxPathSegments)
	seg := make([]string, len(raw))
	for i, s := range raw {
		d, err := url.PathUnescape(s)
		if err != nil {
			return route{kind: routeNotFound}
		}
		seg[i] = d
	}
	if len(seg) < 2 || (seg[0] != "inbox" && seg[0] != "mcp") || !ValidToken(seg[1]) {
		return route{kind: routeNotFound}
	}
	if token != nil && !ident.Equal(seg[1], token) {
		return route{kind: routeNotFound}
	}
	switch {
	case seg[0] == "mcp":
		if len(seg) == 2 {
			return route{kind: routeMCP, token: seg[1]}
		}
	case len(seg) == 2:
		return route{kind: routeInbox, token: seg[1]}
	case len(seg) == 4 && seg[2] == "messages" && isID(seg[3]):
		return route{kind: routeMessage, token: seg[1], id: parseID(seg[3])}
	case len(seg) == 5 && seg[2] == "messages" && isID(seg[3]) && (seg[4] == "text" || seg[4] == "html"):
		k := routeText
		if seg[4] == "html" {
			k = routeFrame
		}
		return route{kind: k, token: seg[1], id: parseID(seg[3])}
	case len(seg) == 6 && seg[2] == "messages" && isID(seg[3]) && seg[4] == "ping" && isID(seg[5]):
		link := parseID(seg[5])
		if link > maxLink {
			link = -1
		}
		return route{kind: routePing, token: seg[1], id: parseID(seg[3]), link: int(link)}
	}
	return route{kind: routeNotFound}
}

// maxLink bounds a ping's link index to an int on every platform; no
// message has that many links.
const maxLink = 1<<31 - 1

// parseID reads digits as a positive id, or 0 for one too large.
func parseID(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimLeft(s, "0"), 10, 64)
	if err != nil {
		return 0
	}
	return n
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
	h.Set("Content-Security-Policy", render.AgentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	rt := parseRoute(r.URL.EscapedPath(), in.token)
	status := in.serve(w, r, rt)
	// The path holds the token: only the route's name is logged.
	ev := in.log.Debug()
	if status >= 500 {
		ev = in.log.Warn()
	}
	ev.Str("method", r.Method).Str("route", rt.kind.String()).Int("status", status).Dur("took", time.Since(start)).Msg("request")
}

func (in *Inbox) serve(w http.ResponseWriter, r *http.Request, rt route) int {
	share := ""
	if rt.token != "" {
		// The caller before anything else, the body included: a wrong
		// token is a path that names nothing, as a malformed one is.
		key, err := in.caller(r, rt)
		switch {
		case rpc.CodeOf(err) == rpc.CodeNotFound:
			rt = route{kind: routeNotFound}
		case err != nil:
			return in.planeError(w, r, err)
		default:
			share = key
			connlimit.Known(r.Context())
		}
	}
	switch {
	case rt.kind == routeMCP:
		// The SDK answers every method: POST, and 405 for the rest.
	case rt.kind == routePing && r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST")
		return write(w, http.StatusMethodNotAllowed, "text/html; charset=utf-8", render.Notice("Method not allowed", "Only POST is supported."))
	case rt.kind != routePing && r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		return write(w, http.StatusMethodNotAllowed, "text/html; charset=utf-8", render.Notice("Method not allowed", "Only GET is supported."))
	}
	if share != "" {
		release, ok := in.shares.Take(share)
		if !ok {
			return write(w, http.StatusTooManyRequests, "text/html; charset=utf-8", render.Notice("Too many requests", "This inbox has too many requests in flight; reload when one is answered."))
		}
		defer release()
	}
	switch rt.kind {
	case routeHealth:
		return in.health(w, r)
	case routeRoot:
		if !in.rootRedirect {
			return notFound(w)
		}
		w.Header().Set("Location", in.base)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusFound)
		return http.StatusFound
	case routeInbox:
		// Newest first: the plane's newest page, however much mail
		// there is (the oldest page would leave the newest out).
		req := in.read(rt)
		req.Newest = true
		msgs, err := in.plane.List(r.Context(), req)
		if err != nil {
			return in.planeError(w, r, err)
		}
		return write(w, http.StatusOK, "text/html; charset=utf-8", render.AgentInbox(msgs, "/inbox/"+url.PathEscape(rt.token)))
	case routeMessage, routeText, routeFrame:
		if rt.id < 1 {
			return notFound(w)
		}
		req := in.read(rt)
		req.ID = rt.id
		if rt.kind == routeFrame {
			req.Door = rpc.DoorInboxFrame // its page recorded the open
		}
		m, err := in.plane.Get(r.Context(), req)
		if err != nil {
			return in.planeError(w, r, err)
		}
		base := "/inbox/" + url.PathEscape(rt.token)
		if rt.kind != routeFrame {
			return write(w, http.StatusOK, "text/html; charset=utf-8", render.AgentMessage(m, base, rt.kind == routeText))
		}
		if m.HTML == "" {
			return notFound(w)
		}
		// The frame's own policy: only the inbox's message page may show
		// it, sandboxed even if opened alone.
		w.Header().Set("Content-Security-Policy", render.FrameSecurityPolicy)
		return write(w, http.StatusOK, "text/html; charset=utf-8", render.FrameDocument(m, func(i int) string { return render.PingPath(base, m.ID, i) }))
	case routePing:
		return in.ping(w, r, rt)
	case routeMCP:
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		in.mcp.Serve(sw, r, *in.read(rt))
		return sw.status
	}
	return notFound(w)
}

// ping records the agent's click on a link (HTML's hyperlink auditing:
// the browser posts "PING" as text/ping to the link's ping URL). The
// plane checks that the link is one the page showed in this mailbox; a
// ping for anything else is "Not found".
func (in *Inbox) ping(w http.ResponseWriter, r *http.Request, rt route) int {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "text/ping" {
		return write(w, http.StatusUnsupportedMediaType, "text/html; charset=utf-8", render.Notice("Unsupported media type", "A ping is text/ping."))
	}
	if rt.id < 1 || rt.link < 0 {
		return notFound(w)
	}
	req := in.read(rt)
	if err := in.plane.Click(r.Context(), &rpc.ClickRequest{InboxToken: req.InboxToken, ID: rt.id, Link: rt.link}); err != nil {
		return in.planeError(w, r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// statusWriter keeps the status an answer was given, for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// caller is the share key of the trial rt's token opens: a trial-bound
// inbox's token was compared with its own (parseRoute); a shared inbox's
// is remembered, or the plane's reader check answers its namespace.
func (in *Inbox) caller(r *http.Request, rt route) (string, error) {
	if in.token != nil {
		return oneTrial, nil
	}
	ns, err := in.known.Resolve(rt.token, time.Now(), func() (string, error) {
		resp, err := in.plane.ResolveReader(r.Context(), &rpc.ReadRequest{InboxToken: rt.token})
		return resp.Namespace, err
	})
	if err == nil && in.door != "" && ns != in.door {
		return "", rpc.Errorf(rpc.CodeNotFound, "another trial's token")
	}
	return ns, err
}

// read is the plane request for rt: a shared inbox names the token, which
// selects the trial; a trial-bound one names nothing.
func (in *Inbox) read(rt route) *rpc.ReadRequest {
	if in.token != nil {
		return &rpc.ReadRequest{}
	}
	return &rpc.ReadRequest{InboxToken: rt.token}
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

// planeAnswers is the inbox's answer to each class of plane error: an
// outage is 503, a bug 500; no such message, or a grant that no longer
// opens anything because its trial was destroyed, is "Not found", as a
// wrong token is. Any other refusal is the inbox's bug.
var planeAnswers = rpc.Answers[func(http.ResponseWriter) int]{
	Refused: map[string]func(http.ResponseWriter) int{
		rpc.CodeNotFound:         notFound,
		rpc.CodeForbidden:        notFound,
		rpc.CodeUnauthenticated:  notFound,
		rpc.CodePermissionDenied: notFound,
	},
	Outage: unavailable,
	Bug:    internalError,
}

// planeError answers a failed read, from planeAnswers.
func (in *Inbox) planeError(w http.ResponseWriter, r *http.Request, err error) int {
	if r.Context().Err() != nil {
		in.log.Debug().Msg("request ended before the plane answered")
		return unavailable(w)
	}
	answer, class := planeAnswers.For(err)
	switch code := rpc.CodeOf(err); {
	case class == rpc.Outage:
		in.log.Warn().Err(err).Msg("plane unavailable")
	case class == rpc.Bug:
		in.log.Error().Str("code", code).Msg("the plane failed or refused the inbox's read")
	case code != rpc.CodeNotFound:
		in.log.Error().Str("code", code).Msg("the plane refused the inbox's grant")
	}
	return answer(w)
}

const jsonType = "application/json; charset=utf-8"

func unavailable(w http.ResponseWriter) int {
	return write(w, http.StatusServiceUnavailable, jsonType, []byte(`{"status":"unavailable"}`))
}

func internalError(w http.ResponseWriter) int {
	return write(w, http.StatusInternalServerError, "text/html; charset=utf-8", render.Notice("Internal error", "The inbox could not be read; try again later."))
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
