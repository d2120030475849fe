// Package console is the operator's console: server-rendered pages of
// every trial (its mail rendered in a sandboxed frame, its trail as a
// timeline), live updates over Server-Sent Events, and the plane's
// Prometheus metrics. It reads everything through the plane with the
// console grant, and every call carries the admin grant its own caller
// presented (Bearer, or the session a sign-in form opened), which the plane
// checks: the console holds no trial's credential, and its grant alone
// reads nothing.
package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of the console's own.
const (
	// maxStreams bounds the live streams open at once; each holds a plane
	// call.
	maxStreams = 64
	// pageSize is the trials list's page.
	pageSize = 100
	// callTimeout bounds a page's plane calls.
	callTimeout = 10 * time.Second
	// maxForm bounds a login form's body.
	maxForm = 4 << 10
)

// Console serves the operator's pages.
type Console struct {
	plane    *rpc.Client
	log      zerolog.Logger
	sessions *sessions
	streams  chan struct{}
	// reg holds the console's own metrics; /metrics adds the plane's.
	reg   *prometheus.Registry
	pages *prometheus.HistogramVec
}

// New returns the console over a plane client holding the console grant.
func New(plane *rpc.Client, log zerolog.Logger) *Console {
	c := &Console{plane: plane, log: log, sessions: newSessions(), streams: make(chan struct{}, maxStreams),
		reg: prometheus.NewRegistry(),
		pages: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mailplane_console_request_seconds",
			Help: "Time the console took to answer, by page and status.", Buckets: prometheus.DefBuckets}, []string{"page", "status"}),
	}
	c.reg.MustRegister(c.pages)
	return c
}

// statusWriter remembers a response's status for the console's metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// ServeHTTP routes a request: the login form and the static files are
// open; everything else needs the admin grant.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	page := c.route(sw, r)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	c.pages.WithLabelValues(page, http.StatusText(sw.status)).Observe(time.Since(start).Seconds())
	c.log.Debug().Str("page", page).Int("status", sw.status).Dur("took", time.Since(start)).Msg("console")
}

func (c *Console) route(w http.ResponseWriter, r *http.Request) string {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	path := r.URL.Path
	switch {
	case path == "/console.css" || path == "/console.js":
		serveAsset(w, r, path)
		return "asset"
	case path == "/healthz":
		c.health(w, r)
		return "healthz"
	case path == "/login":
		c.login(w, r)
		return "login"
	case strings.HasPrefix(path, framePrefix):
		v, ns, id, ok := c.frameOf(path)
		if !ok || r.Method != http.MethodGet && r.Method != http.MethodHead {
			c.notice(w, visit{}, http.StatusNotFound, "Not found", "No such page.")
			return "notfound"
		}
		c.messageHTML(w, r, v, ns, id)
		return "message"
	}
	// A session's pages are its capability's; the same pages without it
	// are a program's, with a Bearer.
	v, ok := visit{}, false
	if strings.HasPrefix(path, sessionPrefix) {
		var rest string
		if v, rest, ok = c.sessionOf(path); !ok {
			_, rest, _ = strings.Cut(strings.TrimPrefix(path, sessionPrefix), "/")
			c.unauthorized(w, r, "/"+rest)
			return "unauthorized"
		}
		if path = rest; path == "/logout" {
			c.logout(w, r, v)
			return "logout"
		}
	} else if v, ok = bearer(r); !ok {
		c.unauthorized(w, r, path)
		return "unauthorized"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		c.notice(w, v, http.StatusMethodNotAllowed, "Method not allowed", "The console only reads.")
		return "method"
	}
	switch {
	case path == "/":
		c.trials(w, r, v)
		return "trials"
	case path == "/metrics":
		c.metrics(w, r, v)
		return "metrics"
	case path == "/live":
		c.live(w, r, v)
		return "live"
	case strings.HasPrefix(path, "/trials/"):
		ns, rest, _ := strings.Cut(strings.TrimPrefix(path, "/trials/"), "/")
		if !ident.ValidNamespace(ns) {
			break
		}
		if rest == "" {
			c.trial(w, r, v, ns)
			return "trial"
		}
		// A session's frames come from framePrefix only.
		idText, ok := strings.CutSuffix(strings.TrimPrefix(rest, "messages/"), "/html")
		id, err := strconv.ParseInt(idText, 10, 64)
		if ok && strings.HasPrefix(rest, "messages/") && v.sess == nil && err == nil && id > 0 {
			c.messageHTML(w, r, v, ns, id)
			return "message"
		}
	}
	c.notice(w, v, http.StatusNotFound, "Not found", "No such page.")
	return "notfound"
}

// health answers /healthz, open to anyone: whether the plane and its
// store answer the console, and nothing else.
func (c *Console) health(w http.ResponseWriter, r *http.Request) {
	var h rpc.HealthResponse
	err := c.call(r.Context(), rpc.MethodHealth, &rpc.Empty{}, &h)
	w.Header().Set("Content-Type", "application/json")
	if err != nil || h.Store != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"unavailable"}` + "\n"))
		return
	}
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// call makes one plane call for op, bounded by callTimeout.
func (c *Console) call(ctx context.Context, method string, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.plane.Call(ctx, method, req, resp)
}

// answer is the console's page for a plane error; signIn ends the
// session that carried the credential the plane refused and asks for the
// grant again (401).
type answer struct {
	signIn          bool
	status          int
	title, sentence string
}

// planeAnswers is the console's answer to each class of plane error: a
// refused credential signs out, an outage is 503, a bug 500; a refusal
// not named here is the console's bug.
var planeAnswers = rpc.Answers[answer]{
	Refused: map[string]answer{
		rpc.CodeUnauthenticated:  {signIn: true},
		rpc.CodePermissionDenied: {signIn: true},
		rpc.CodeNotFound:         {status: http.StatusNotFound, title: "Not found", sentence: "No such trial."},
		rpc.CodeInvalidNamespace: {status: http.StatusNotFound, title: "Not found", sentence: "No such trial."},
		rpc.CodeBadRequest:       {status: http.StatusBadRequest, title: "Bad request", sentence: "The plane refused this request."},
	},
	Outage: answer{status: http.StatusServiceUnavailable, title: "Unavailable", sentence: "The plane or its store is unavailable; try again shortly."},
	Bug:    answer{status: http.StatusInternalServerError, title: "Internal error", sentence: "The console could not answer; its log says why."},
}

// fail answers a plane error, from planeAnswers.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v visit, err error) {
	if r.Context().Err() != nil {
		// The browser left (a page closed while its stream waited): no one
		// to answer, nothing to log.
		return
	}
	a, class := planeAnswers.For(err)
	code := rpc.CodeOf(err)
	switch class {
	case rpc.Outage:
		c.log.Warn().Str("code", code).Msg("the plane did not answer the console")
	case rpc.Bug:
		c.log.Error().Str("code", code).Msg("the plane failed or refused the console's call")
	default:
		c.log.Info().Str("code", code).Msg("the plane refused the console's call")
	}
	if a.signIn {
		if v.sess != nil {
			c.sessions.end(v.key)
		}
		c.unauthorized(w, r, strings.TrimPrefix(r.URL.Path, v.base))
		return
	}
	c.notice(w, v, a.status, a.title, a.sentence)
}
