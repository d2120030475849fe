package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Sessions of the sign-in form. A browser sends a cookie to every port of
// its host (cookies are not scoped by port), so a page a candidate serves
// on another port of 127.0.0.1 would receive one. The session is instead a
// capability in the path, /s/<capability>/…, as the agent's inbox has: a
// URL of the console's own origin, which the browser sends to that origin
// only, and every page links within it. Pages carry Referrer-Policy:
// no-referrer, link nowhere else, and a message's HTML is framed from a
// URL that names the session only by the digest of its capability, with a
// MAC that opens that one message (frameURL): a link in the mail that
// sends its Referer carries out nothing but the mail itself.
//
// The console holds, under the capability's digest, the admin grant the
// form was given, and forwards it with every plane call as a Bearer would
// be. A grant the plane stops accepting (revoked) ends the session at its
// next call.
const (
	sessionTTL  = 12 * time.Hour
	maxSessions = 256
	// capLen is a capability's length: 32 random bytes, base64url.
	capLen = 43
	// sessionPrefix and framePrefix start a session's pages and a
	// message's frame.
	sessionPrefix = "/s/"
	framePrefix   = "/frames/"
)

type session struct {
	grant   string
	expires time.Time
	// frameKey signs the URLs of this session's frames.
	frameKey [32]byte
}

type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]*session
}

func newSessions() *sessions { return &sessions{m: map[[32]byte]*session{}} }

// open mints a session for grant and returns its capability.
func (s *sessions) open(grant string) string {
	var b [32]byte
	rand.Read(b[:])
	capability := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now()
	sess := &session{grant: grant, expires: now.Add(sessionTTL)}
	rand.Read(sess.frameKey[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		// The oldest goes: an operator who signs in always gets in.
		var oldest [32]byte
		var first *session
		for k, v := range s.m {
			if first == nil || v.expires.Before(first.expires) {
				oldest, first = k, v
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(capability))] = sess
	return capability
}

// lookup finds the live session under key. The map is keyed by the
// capability's digest: finding one tells nothing about another.
func (s *sessions) lookup(key [32]byte) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if ok && time.Now().After(v.expires) {
		delete(s.m, key)
		return nil, false
	}
	return v, ok
}

// end forgets the session under key.
func (s *sessions) end(key [32]byte) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// visit is who asks for a page: the admin grant to forward, and, for a
// session, where its pages live.
type visit struct {
	op rpc.Operator
	// base prefixes every link of the page: /s/<capability> for a
	// session, empty for a Bearer.
	base string
	sess *session // nil for a Bearer
	key  [32]byte // the session's key
}

// frameURL is where message id of ns is framed from: for a session, a URL
// that names it by its key and opens that message only; for a Bearer, the
// message's own route.
func (v visit) frameURL(ns string, id int64) string {
	path := "/trials/" + ns + "/messages/" + strconv.FormatInt(id, 10) + "/html"
	if v.sess == nil {
		return path
	}
	return framePrefix + base64.RawURLEncoding.EncodeToString(v.key[:]) + "/" + ns + "/" + strconv.FormatInt(id, 10) + "/" + frameMAC(v.sess, ns, id)
}

func frameMAC(s *session, ns string, id int64) string {
	m := hmac.New(sha256.New, s.frameKey[:])
	m.Write([]byte(ns + "/" + strconv.FormatInt(id, 10)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionOf splits a session's path, /s/<capability>/rest, into the
// session and rest (with its leading slash).
func (c *Console) sessionOf(path string) (visit, string, bool) {
	capability, rest, _ := strings.Cut(strings.TrimPrefix(path, sessionPrefix), "/")
	if len(capability) != capLen {
		return visit{}, "", false
	}
	key := sha256.Sum256([]byte(capability))
	sess, ok := c.sessions.lookup(key)
	if !ok {
		return visit{}, "", false
	}
	return visit{op: rpc.Operator{AdminGrant: sess.grant}, base: sessionPrefix + capability, sess: sess, key: key}, "/" + rest, true
}

// frameOf checks a frame's path, /frames/<key>/<ns>/<id>/<mac>, and
// returns its session, namespace and message id.
func (c *Console) frameOf(path string) (visit, string, int64, bool) {
	parts := strings.Split(strings.TrimPrefix(path, framePrefix), "/")
	if len(parts) != 4 || !ident.ValidNamespace(parts[1]) {
		return visit{}, "", 0, false
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	raw, kerr := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || id <= 0 || kerr != nil || len(raw) != 32 {
		return visit{}, "", 0, false
	}
	key := [32]byte(raw)
	sess, ok := c.sessions.lookup(key)
	if !ok || !ident.Equal(parts[3], ident.Digest(frameMAC(sess, parts[1], id))) {
		return visit{}, "", 0, false
	}
	return visit{op: rpc.Operator{AdminGrant: sess.grant}, sess: sess, key: key}, parts[1], id, true
}

// bearer is the admin grant r presents as "Authorization: Bearer
// <grant>", for programs. Only the shape is checked here; the plane
// checks the grant with every call.
func bearer(r *http.Request) (visit, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !grantShaped(tok) {
		return visit{}, false
	}
	return visit{op: rpc.Operator{AdminGrant: tok}}, true
}

// grantShaped: a grant is its prefix and 64 hex digits.
func grantShaped(s string) bool {
	return len(s) == len(ident.GrantPrefix)+64 && strings.HasPrefix(s, ident.GrantPrefix)
}

// unauthorized answers 401 with the sign-in form and no data; next is
// the page asked for, without any capability.
func (c *Console) unauthorized(w http.ResponseWriter, r *http.Request, next string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="mailplane console"`)
	if next == "/metrics" || next == "/live" || !strings.Contains(r.Header.Get("Accept"), "text/html") && r.Header.Get("Authorization") != "" {
		http.Error(w, "401 unauthorized: present the admin grant", http.StatusUnauthorized)
		return
	}
	u := url.URL{Path: next, RawQuery: r.URL.RawQuery}
	c.render(w, http.StatusUnauthorized, "login", pageData{Title: "Sign in", Next: safeNext(u.RequestURI())})
}

// login shows the form (GET) or checks its grant with the plane and opens
// a session (POST), whose pages the browser is sent to.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.render(w, http.StatusOK, "login", pageData{Title: "Sign in", Next: safeNext(r.URL.Query().Get("next"))})
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		c.notice(w, visit{}, http.StatusMethodNotAllowed, "Method not allowed", "Sign in with the form.")
		return
	}
	if !sameOrigin(r) {
		c.notice(w, visit{}, http.StatusForbidden, "Forbidden", "The form was posted from another site.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.notice(w, visit{}, http.StatusBadRequest, "Bad request", "The form could not be read.")
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
		if a, _ := planeAnswers.For(err); a.signIn {
			c.render(w, http.StatusUnauthorized, "login", pageData{Title: "Sign in", Next: next, Error: "That is not the admin grant."})
			return
		}
		c.fail(w, r, visit{}, err)
		return
	}
	http.Redirect(w, r, sessionPrefix+c.sessions.open(grant)+next, http.StatusSeeOther)
}

// logout ends the session (POST only, from the console's own pages: a
// link or another site cannot sign anyone out).
func (c *Console) logout(w http.ResponseWriter, r *http.Request, v visit) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		c.notice(w, v, http.StatusMethodNotAllowed, "Method not allowed", "Sign out with the button.")
		return
	}
	if !sameOrigin(r) {
		c.notice(w, v, http.StatusForbidden, "Forbidden", "The form was posted from another site.")
		return
	}
	c.sessions.end(v.key)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// sameOrigin: a form posted by a browser comes from this console's own
// origin (scheme, host and port). Every port of a host is the same site
// to a browser, so Sec-Fetch-Site: same-site is not enough. Under
// Referrer-Policy: no-referrer a browser posts a form with Origin: null;
// then Sec-Fetch-Site decides. A browser sends no Sec-Fetch-Site to a
// plain-HTTP name other than loopback, and a program sends neither: such
// a post is taken. Signing out needs the session's capability in the
// path besides, which no other site holds, and signing in the admin
// grant.
func sameOrigin(r *http.Request) bool {
	o, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return false
	}
	if o == "" || o == "null" {
		return true
	}
	u, err := url.Parse(o)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return err == nil && u.Scheme == scheme && u.Host == r.Host && u.Path == ""
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
