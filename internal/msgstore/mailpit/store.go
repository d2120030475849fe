// Package mailpit is the plane's message store over a real Mailpit, reached
// only through its two Unix sockets: SMTP (smtp.sock) to write, the HTTP API
// (http.sock) to read, and its delete-by-search to purge a closed trial's
// namespaces by their private tag. It never uses Mailpit's release, tag,
// send or UI endpoints.
//
// The plane's ledger keeps the index and every policy decision; Mailpit
// only keeps bytes. Each message carries exactly one X-Tags header, the
// namespace's private tag, added here after the plane has scrubbed the
// sender's own (docs/reference.md §8.8). A read goes by the ref the ledger kept,
// and is still re-checked on Mailpit's detailed record (the tag, and every
// envelope recipient in To/Cc/Bcc): what Mailpit says is never an
// authorization. Every call has a deadline of CallTimeout and every answer
// is bounded by MaxResponseBytes.
//
// The package can also run a private Mailpit for the plane (ephemeral.go),
// from a binary or as a container, as the reference does.
package mailpit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/wbenv"
)

// Limits on every call to Mailpit (docs/reference.md §11).
const (
	// CallTimeout bounds one store operation (all its round trips), unless
	// the caller's context ends sooner.
	CallTimeout = 5 * time.Second
	// MaxResponseBytes bounds one HTTP answer; a larger one is a failure.
	MaxResponseBytes = 8 << 20
	// maxAddressLen is the longest envelope address Mailpit takes.
	maxAddressLen = 1024
	// maxIdleSMTP sessions are kept open between messages, each at most
	// maxSMTPIdle (Mailpit closes idle sessions after 5 minutes).
	maxIdleSMTP = 8
	maxSMTPIdle = time.Minute
)

// Environment variable through which a Mailpit is named to the plane, as the
// reference reads it, and the reference's texts when it does not help.
const (
	SocketEnv = wbenv.MailpitHTTPSocket
)

var (
	// ErrNotReady: the named Mailpit does not answer /readyz.
	ErrNotReady = errors.New("Mailpit is not ready on its configured HTTP socket")
)

// Config names a running Mailpit.
type Config struct {
	// HTTPSocket is Mailpit's HTTP API socket (http.sock).
	HTTPSocket string
	// SMTPSocket is its SMTP socket; default smtp.sock beside HTTPSocket.
	SMTPSocket string
	Log        zerolog.Logger
}

// Store keeps message bodies in Mailpit.
type Store struct {
	smtpSocket string
	hc         *http.Client
	log        zerolog.Logger

	mu   sync.Mutex
	idle []*smtpConn
}

var _ msgstore.Store = (*Store)(nil)

// New returns a store over the Mailpit cfg names. It does not contact it.
func New(cfg Config) (*Store, error) {
	if strings.TrimSpace(cfg.HTTPSocket) == "" {
		return nil, errors.New("mailpit: no HTTP socket")
	}
	smtpSocket := cfg.SMTPSocket
	if smtpSocket == "" {
		smtpSocket = filepath.Join(filepath.Dir(cfg.HTTPSocket), "smtp.sock")
	}
	return &Store{smtpSocket: smtpSocket, hc: httpClient(cfg.HTTPSocket), log: cfg.Log}, nil
}

// httpClient talks HTTP/1.1 to one Unix socket.
func httpClient(socket string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConnsPerHost:    16,
			IdleConnTimeout:        maxSMTPIdle,
			DisableCompression:     true, // a local socket: compressing only costs CPU
			MaxResponseHeaderBytes: 64 << 10,
		},
		// Mailpit's API does not redirect; following one would leave the
		// endpoints this store allows itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Options name the running Mailpit Open connects to.
type Options struct {
	HTTPSocket string
	SMTPSocket string // default: smtp.sock beside HTTPSocket
	Log        zerolog.Logger
}

// readyWait is how long Open gives a named Mailpit to answer /readyz: long
// enough for one started beside the plane, short enough to fail clearly.
const readyWait = CallTimeout

// Open returns a store over the Mailpit o names, once it is ready, or
// ErrNotReady. It never starts a Mailpit: the plane's edge does
// (mailpitrun), when none is named.
func Open(ctx context.Context, o Options) (*Store, error) {
	s, err := New(Config{HTTPSocket: o.HTTPSocket, SMTPSocket: o.SMTPSocket, Log: o.Log})
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, readyWait); err != nil {
		s.Close()
		o.Log.Error().Err(err).Msg("mailpit not ready")
		return nil, ErrNotReady
	}
	return s, nil
}

// waitReady polls Ping until it succeeds or wait passes.
func (s *Store) waitReady(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		err := s.Ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Put sends raw to Mailpit with the namespace's tag and returns its ref
// once Mailpit has committed it.
func (s *Store) Put(ctx context.Context, ns msgstore.Namespace, env msgstore.Envelope, raw []byte) (string, error) {
	if !validTag(ns.Tag) {
		return "", errors.New("mailpit: the namespace has no valid storage tag")
	}
	if err := checkEnvelope(env); err != nil {
		return "", err
	}
	// Mailpit rejects a message whose header it cannot parse, after the
	// fact and with a 451; find out first, with the same parser, and say
	// no before anything is written. A first line that continues a header
	// would continue ours instead: not a message either.
	if len(raw) > 0 && (raw[0] == ' ' || raw[0] == '\t') {
		return "", fmt.Errorf("mailpit: the message starts with a continuation line: %w", msgstore.ErrRefused)
	}
	if _, err := mail.ReadMessage(io.MultiReader(bytes.NewReader(header(ns.Tag, env.From, lineEnding(raw))), bytes.NewReader(raw))); err != nil {
		return "", fmt.Errorf("mailpit: Mailpit cannot parse the message header: %w", msgstore.ErrRefused)
	}
	// A pooled connection would not notice that the caller is gone: store
	// nothing for it.
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f := newFrame(ns.Tag, env.From, raw)
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		c, reused, err := s.conn(ctx)
		if err != nil {
			return "", err
		}
		if dl, ok := ctx.Deadline(); ok {
			c.nc.SetDeadline(dl)
		}
		id, err := c.send(env.From, env.To, f)
		if err == nil {
			s.release(c)
			f.ref.id = id
			return f.ref.String(), nil
		}
		// Not QUIT: mid-DATA it would be read as message text. Mailpit
		// drops a DATA its client hung up on.
		c.nc.Close()
		var stale errStale
		if reused && attempt == 0 && errors.As(err, &stale) {
			continue
		}
		return "", err
	}
}

// checkEnvelope refuses addresses that cannot go into an SMTP command as
// they are (the plane's own checks are stricter; this keeps the store safe
// on its own).
func checkEnvelope(env msgstore.Envelope) error {
	bad := func(a string) bool {
		if a == "" || len(a) > maxAddressLen {
			return true
		}
		for i := 0; i < len(a); i++ {
			if c := a[i]; c <= ' ' || c == 0x7f || c == '<' || c == '>' {
				return true
			}
		}
		return false
	}
	if bad(env.From) {
		return fmt.Errorf("mailpit: sender cannot be sent to Mailpit: %w", msgstore.ErrRefused)
	}
	if len(env.To) == 0 {
		return fmt.Errorf("mailpit: no recipient: %w", msgstore.ErrRefused)
	}
	for _, r := range env.To {
		if bad(r) {
			return fmt.Errorf("mailpit: recipient cannot be sent to Mailpit: %w", msgstore.ErrRefused)
		}
	}
	return nil
}

// conn returns an idle SMTP session or a new one; reused says which.
func (s *Store) conn(ctx context.Context) (*smtpConn, bool, error) {
	s.mu.Lock()
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if time.Since(c.idle) < maxSMTPIdle {
			s.mu.Unlock()
			return c, true, nil
		}
		c.close()
	}
	s.mu.Unlock()
	c, err := dialSMTP(ctx, s.smtpSocket)
	return c, false, err
}

func (s *Store) release(c *smtpConn) {
	c.idle = time.Now()
	c.nc.SetDeadline(time.Time{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) < maxIdleSMTP {
		s.idle = append(s.idle, c)
		return
	}
	go c.close()
}

// record is what the store reads of Mailpit's detailed message record.
type record struct {
	ID   string
	Tags []string
	To   []address
	Cc   []address
	Bcc  []address
}

type address struct{ Address string }

// Get returns the plane's bytes for ref, after checking on Mailpit's
// record that the message carries ns's tag and is addressed to every
// recipient of env. A message that fails a check is ErrNotFound.
func (s *Store) Get(ctx context.Context, ns msgstore.Namespace, refText string, env msgstore.Envelope) ([]byte, error) {
	r, err := parseRef(refText)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", msgstore.ErrNotFound, err)
	}
	if !validTag(ns.Tag) {
		return nil, errors.New("mailpit: the namespace has no valid storage tag")
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	path := "/api/v1/message/" + url.PathEscape(r.id)

	// The raw source is fetched while the record is checked; it is only
	// returned if the record passes.
	type result struct {
		body []byte
		err  error
	}
	rawc := make(chan result, 1)
	go func() {
		b, err := s.fetch(ctx, path+"/raw")
		rawc <- result{b, err}
	}()
	body, err := s.fetch(ctx, path)
	if err != nil {
		cancel()
		<-rawc
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(body, &rec); err != nil {
		cancel()
		<-rawc
		return nil, errors.New("mailpit: invalid message record")
	}
	if err := authorize(rec, r.id, ns.Tag, env.To); err != nil {
		cancel()
		<-rawc
		return nil, err
	}
	res := <-rawc
	if res.err != nil {
		return nil, res.err
	}
	raw, err := unwrap(res.body, r, ns.Tag, env.From)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", msgstore.ErrNotFound, err)
	}
	return raw, nil
}

// authorize re-checks Mailpit's record: its own ID, the namespace's tag,
// and every envelope recipient among To, Cc and Bcc. Mailpit may title-case
// tags (MP_TAGS_TITLE_CASE); the tag is lower-case hex, so comparing
// without case loses nothing.
func authorize(rec record, id, tag string, to []string) error {
	if rec.ID != id {
		return fmt.Errorf("%w: Mailpit answered for another message", msgstore.ErrNotFound)
	}
	tagged := false
	for _, t := range rec.Tags {
		if strings.EqualFold(t, tag) {
			tagged = true
		}
	}
	if !tagged {
		return fmt.Errorf("%w: the message does not carry the namespace's tag", msgstore.ErrNotFound)
	}
	for _, want := range to {
		found := false
		for _, list := range [][]address{rec.To, rec.Cc, rec.Bcc} {
			for _, a := range list {
				if mailmsg.SameAddress(a.Address, want) {
					found = true
				}
			}
		}
		if !found {
			return fmt.Errorf("%w: the message is not addressed to the envelope's recipients", msgstore.ErrNotFound)
		}
	}
	return nil
}

// fetch GETs path from Mailpit's API: 200 gives the body (at most
// MaxResponseBytes), 404 ErrNotFound, anything else an outage.
func (s *Store) fetch(ctx context.Context, path string) ([]byte, error) {
	status, body, err := s.request(ctx, path)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: Mailpit does not hold the message", msgstore.ErrNotFound)
	}
	return nil, statusErr("API", status)
}

// Purge deletes every message stored under ns's tag, indexed or not (a
// send that lost a race at the quota's edge leaves an unindexed copy).
func (s *Store) Purge(ctx context.Context, ns msgstore.Namespace) error {
	if !validTag(ns.Tag) {
		return errors.New("mailpit: the namespace has no valid storage tag")
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	status, _, err := s.do(ctx, http.MethodDelete, "/api/v1/search?query="+url.QueryEscape("tag:"+ns.Tag))
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return statusErr("delete by tag", status)
	}
	return nil
}

func (s *Store) request(ctx context.Context, path string) (int, []byte, error) {
	return s.do(ctx, http.MethodGet, path)
}

func (s *Store) do(ctx context.Context, method, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("mailpit: API request failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxResponseBytes {
		return 0, nil, errors.New("mailpit: response exceeded limit")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, nil, fmt.Errorf("mailpit: API response: %w", err)
	}
	if len(body) > MaxResponseBytes {
		return 0, nil, errors.New("mailpit: response exceeded limit")
	}
	return resp.StatusCode, body, nil
}

// Ping reports whether Mailpit can take and serve mail now: its /readyz
// answers 200 and its SMTP socket holds a session.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	status, _, err := s.request(ctx, "/readyz")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("mailpit: /readyz answered HTTP %d: %w", status, errDown)
	}
	for attempt := 0; ; attempt++ {
		c, reused, err := s.conn(ctx)
		if err != nil {
			return err
		}
		if dl, ok := ctx.Deadline(); ok {
			c.nc.SetDeadline(dl)
		}
		if err := c.noop(); err != nil {
			c.nc.Close()
			if reused && attempt == 0 {
				continue
			}
			return err
		}
		s.release(c)
		return nil
	}
}

// Close closes idle sessions.
func (s *Store) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	s.hc.CloseIdleConnections()
	return nil
}
