package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Sessions of the login form: the browser holds a random session id in an
// HttpOnly, SameSite=Strict cookie; the console holds, under the id's
// digest, the admin grant the form was given, and forwards it with every
// plane call as a Bearer would be. A grant the plane stops accepting
// (revoked) ends the session at its next call.
const (
	cookieName  = "mailplane_console"
	sessionTTL  = 12 * time.Hour
	maxSessions = 256
)

type session struct {
	grant   string
	expires time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]session
}

func newSessions() *sessions { return &sessions{m: map[[32]byte]session{}} }

// open mints a session for grant and returns its id.
func (s *sessions) open(grant string) string {
	var b [32]byte
	rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		// The oldest goes: an operator who logs in always gets in.
		var oldest [32]byte
		first := true
		for k, v := range s.m {
			if first || v.expires.Before(s.m[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = session{grant: grant, expires: now.Add(sessionTTL)}
	return id
}

// grant is the grant of r's session cookie. The map is keyed by the id's
// digest: finding it tells nothing about another id.
func (s *sessions) grant(r *http.Request) (string, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil || len(ck.Value) != 43 {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sha256.Sum256([]byte(ck.Value))
	v, ok := s.m[k]
	if !ok || time.Now().After(v.expires) {
		delete(s.m, k)
		return "", false
	}
	return v.grant, true
}

// end forgets r's session, if any.
func (s *sessions) end(r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		delete(s.m, sha256.Sum256([]byte(ck.Value)))
		s.mu.Unlock()
	}
}

// operator is the admin grant r presents: "Authorization: Bearer
// <grant>", or a session's. Only the shape is checked here; the plane
// checks the grant with every call.
func (c *Console) operator(r *http.Request) (rpc.Operator, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || !grantShaped(tok) {
			return rpc.Operator{}, false
		}
		return rpc.Operator{AdminGrant: tok}, true
	}
	g, ok := c.sessions.grant(r)
	return rpc.Operator{AdminGrant: g}, ok
}

// grantShaped: a grant is its prefix and 64 hex digits.
func grantShaped(s string) bool {
	return len(s) == len(ident.GrantPrefix)+64 && strings.HasPrefix(s, ident.GrantPrefix)
}

// unauthorized answers 401 with the login form and no data.
func (c *Console) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="mailplane console"`)
	if r.URL.Path == "/metrics" || r.URL.Path == "/live" || !strings.Contains(r.Header.Get("Accept"), "text/html") && r.Header.Get("Authorization") != "" {
		http.Error(w, "401 unauthorized: present the admin grant", http.StatusUnauthorized)
		return
	}
	c.render(w, http.StatusUnauthorized, "login", pageData{Title: "Sign in", Next: nextOf(r)})
}

// login shows the form (GET) or checks its grant with the plane and opens
// a session (POST).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.render(w, http.StatusOK, "login", pageData{Title: "Sign in", Next: nextOf(r)})
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		c.notice(w, http.StatusMethodNotAllowed, "Method not allowed", "Sign in with the form.")
		return
	}
	if !sameOrigin(r) {
		c.notice(w, http.StatusForbidden, "Forbidden", "The form was posted from another site.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.notice(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return
	}
	grant := strings.TrimSpace(r.PostForm.Get("grant"))
	next := safeNext(r.PostForm.Get("next"))
	if !grantShaped(grant) {
		c.render(w, http.StatusUnauthorized, "login", pageData{Title: "Sign in", Next: next, Error: "That is not the admin grant."})
		return
	}
	var v rpc.ConsoleWaitResponse
	if err := c.call(r.Context(), rpc.MethodConsoleWait, &rpc.ConsoleWaitRequest{Operator: rpc.Operator{AdminGrant: grant}}, &v); err != nil {
		if code := rpc.CodeOf(err); code == rpc.CodeUnauthenticated || code == rpc.CodePermissionDenied {
			c.render(w, http.StatusUnauthorized, "login", pageData{Title: "Sign in", Next: next, Error: "That is not the admin grant."})
			return
		}
		c.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.sessions.open(grant), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session (POST only: a link cannot log anyone out).
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		c.notice(w, http.StatusMethodNotAllowed, "Method not allowed", "Sign out with the button.")
		return
	}
	if sameOrigin(r) {
		c.sessions.end(r)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// sameOrigin: a form posted by a browser names its origin; it must be
// this console's.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// nextOf is where a login returns to: the page asked for.
func nextOf(r *http.Request) string {
	if r.URL.Path == "/login" {
		return safeNext(r.URL.Query().Get("next"))
	}
	return safeNext(r.URL.RequestURI())
}

// safeNext keeps a redirect on this console's own pages (the trials list
// with its filters, a trial's page), and anything else is "/": never a
// scheme, another host, or text the form would only echo.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Fragment != "" {
		return "/"
	}
	ns, ok := strings.CutPrefix(u.Path, "/trials/")
	if u.Path != "/" && !(ok && ident.ValidNamespace(ns)) {
		return "/"
	}
	return u.RequestURI()
}
