// Package writer is mail-writer's mail APIs: Resend-style POST /emails and
// POST /emails/batch, GET /internal/bootstrap and GET /healthz (docs/reference.md
// §4.4, §5), and the send APIs of SendGrid, Postmark, Mailgun and SES
// (providers.go: package sendapi's parsers, matched by pattern, since
// Mailgun's path holds a domain; each is judged and composed as POST
// /emails is). SMTP is package smtpd's; the process around both
// (listeners, TLS, per-trial ports, reports) is package writerproc's.
//
// The writer decides nothing about who may send what. It checks that a
// request is well formed, in the reference's order, composes the message,
// and hands the plane the credential its client presented; the plane
// checks the credential, the sender policy, quotas and idempotency, and
// stores the message. The plane's verdict becomes the answer: a refusal by
// policy is a 4xx, an outage of the plane or its store is a 503, never the
// other way round.
//
// What POST /emails accepts beyond the reference's {from,to,subject,text}
// is Resend's: html (text is derived from it when absent), cc, bcc,
// reply_to, tags, a safe subset of headers, "Name <addr>" in any address
// field (the envelope and the stored From/To use the bare address; a
// list, group or comment is refused), and a chunked body (Resend's own
// SDKs send one). A Content-Length that is not a number is refused by
// net/http with 400 before any handler runs, as RFC 9112 §6.3 requires.
package writer

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Plane is what the writer asks of the plane; *rpc.Client is one.
type Plane interface {
	Health(ctx context.Context) (rpc.HealthResponse, error)
	Send(ctx context.Context, req *rpc.SendRequest) (rpc.SendResponse, error)
	ResolveCredential(ctx context.Context, req *rpc.CredentialRequest) (rpc.CredentialResponse, error)
	Refused(ctx context.Context, req *rpc.RefusalRequest) error
	Bootstrap(ctx context.Context, token string) (rpc.BootstrapResponse, error)
}

// Defaults of the HTTP listener (docs/reference.md §11).
const (
	// planeTimeout bounds one plane call; a slower plane is an outage.
	planeTimeout = 10 * time.Second
	// maxHeaderBytes bounds a request's header block.
	maxHeaderBytes = 64 << 10
)

// Config of the HTTP API.
type Config struct {
	MaxBodyBytes  int64  // POST /emails body
	MaxRecipients int    // to + cc + bcc
	SMTPHost      string // advertised by /internal/bootstrap
	SMTPPort      int    // the bound port, advertised by /internal/bootstrap
	// Idle is the listener's idle bound; with a connection's lifetime it
	// decides when a connection is no longer offered for reuse.
	Idle time.Duration
}

// Handler serves the writer's HTTP API.
type Handler struct {
	cfg   Config
	plane Plane
	log   zerolog.Logger
	now   func() time.Time
	// running are the idempotency keys of requests still being answered
	// (idempotency.go).
	running inflight
	// shares bound the requests in flight per trial and door: one
	// trial's flood is refused 429 while the others are served.
	shares *connlimit.Shares
	// known are the credentials the plane accepted recently (caller.go).
	known connlimit.Callers
	// preauth bounds the bodies read before their caller is known (an
	// SES request's).
	preauth *connlimit.Preauth
	// bodyBytes bound the body bytes each trial (its namespace) has this
	// process hold at once (caller.go).
	bodyBytes *connlimit.Shares
}

// NewHandler returns the API over plane.
func NewHandler(cfg Config, plane Plane, log zerolog.Logger) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = limits.MessageBytes
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = limits.Recipients
	}
	if cfg.Idle <= 0 {
		cfg.Idle = connlimit.DefaultIdle
	}
	return &Handler{cfg: cfg, plane: plane, log: log, now: time.Now, shares: connlimit.NewShares(limits.TrialRequests),
		preauth: connlimit.NewPreauth(limits.PreauthBytes, limits.PreauthRequests),
		// A trial with nothing held may always send the largest batch,
		// whatever --max-message-bytes says.
		bodyBytes: connlimit.NewShares(max(limits.TrialBodyBytes, cfg.MaxBodyBytes*batchBodyFactor))}
}

// route is one endpoint of the mail APIs: the method it answers and what
// serves it.
type route struct {
	method string
	serve  func(*Handler, http.ResponseWriter, *http.Request)
}

// routes are the writer's endpoints by raw path. A send API registers here:
// its handler reads the provider's request, checks it in that provider's
// order, and offers the message to the plane with the credential its
// client presented, as emails does. Another method on a known path is 405
// with the route's method in Allow; a path not here, or GET /emails (the
// reference's), is 404.
var routes = map[string]route{
	"/emails":             {http.MethodPost, (*Handler).emails},
	"/emails/batch":       {http.MethodPost, (*Handler).batch}, // batch.go
	"/healthz":            {http.MethodGet, (*Handler).health},
	"/internal/bootstrap": {http.MethodGet, (*Handler).bootstrap},
}

// ServeHTTP routes on the raw path, as the reference does: /email%73 is
// not /emails.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h.closeIfOld(w, r)
	if api := sendAPI(r.URL.EscapedPath()); api != nil {
		// A provider API's route (providers.go): it answers every method
		// in the provider's shape and takes its own fair share, by the
		// trial its credential opens.
		h.provider(w, r, api)
		return
	}
	rt, known := routes[r.URL.EscapedPath()]
	switch r.Method {
	case http.MethodGet, http.MethodPost:
		if !known || rt.method != r.Method {
			writeError(w, errNotFound)
			return
		}
		rt.serve(h, w, r)
	default:
		methods := "GET, POST"
		if known {
			methods = rt.method
		}
		w.Header().Set("Allow", methods)
		writeError(w, errMethod)
	}
}

// closeIfOld asks the client not to reuse a connection that will reach its
// lifetime before another request could be answered on it (an idle wait
// plus a plane call), so that the lifetime bound does not cut a request of
// a well-behaved client.
func (h *Handler) closeIfOld(w http.ResponseWriter, r *http.Request) {
	if connlimit.Remaining(r.Context()) < h.cfg.Idle+planeTimeout {
		w.Header().Set("Connection", "close")
	}
}

// planeContext bounds a plane call made for r. It is not cancelled when
// the client goes away: a client that half-closes after its request (as
// HTTP/1.0 clients may) still gets its answer, and a message the plane is
// storing is never abandoned halfway.
func planeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), planeTimeout)
}

// bearer returns the credential of "Authorization: Bearer <credential>"
// (exactly that prefix, as the reference), or false.
func bearer(r *http.Request) (string, bool) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return cred, ok && cred != ""
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := planeContext(r)
	defer cancel()
	hr, err := h.plane.Health(ctx)
	if err != nil || hr.Store != "ok" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// bootstrapBody is GET /internal/bootstrap's answer, keys in order.
type bootstrapBody struct {
	Capability string `json:"capability"`
	Namespace  string `json:"namespace"`
	SMTPHost   string `json:"smtp_host"`
	SMTPPort   int    `json:"smtp_port"`
}

// bootstrap trades the trial's bootstrap token (checked by the plane) for
// write coordinates: the namespace, the capability the plane hands out for
// it, and this writer's SMTP address.
func (h *Handler) bootstrap(w http.ResponseWriter, r *http.Request) {
	token, ok := bearer(r)
	if !ok {
		writeError(w, errForbidden)
		return
	}
	// The plane judges the token with the call (it has no body): its
	// share is the token's, on this door.
	release, ok := h.shares.Take(doorKey(r) + "\x00bootstrap\x00" + token)
	if !ok {
		writeError(w, errTrialBusy)
		return
	}
	defer release()
	ctx, cancel := planeContext(r)
	defer cancel()
	br, err := h.plane.Bootstrap(ctx, token)
	if err != nil {
		a := h.planeAnswer(err).resend
		if a == errUnauthorized {
			// A bootstrap token is no API key: whichever credential the
			// plane refused (the token, or the writer's grant with its
			// trial), the bootstrap is forbidden.
			a = errForbidden
		}
		writeError(w, a)
		return
	}
	host, port := h.cfg.SMTPHost, h.cfg.SMTPPort
	if br.SMTPPort != 0 {
		port = br.SMTPPort // the trial's own, on a shared writer
	}
	if d, ok := r.Context().Value(doorCtxKey{}).(door); ok && d.smtpPort != 0 {
		host, port = d.smtpHost, d.smtpPort // the trial's door inside its namespace (AtDoor)
	}
	writeJSON(w, http.StatusOK, bootstrapBody{Capability: br.Capability, Namespace: br.Namespace, SMTPHost: host, SMTPPort: port})
}

// idResponse is POST /emails' answer, Resend's shape.
type idResponse struct {
	ID string `json:"id"`
}

// emails is POST /emails, checked in docs/reference.md §5's order. The
// credential is checked by the plane before the body is read (admit): a
// wrong credential answers 401 whatever else is wrong with the request,
// and nobody without a credential learns how the rest is judged. A
// request that then fails a later check is shown to the plane with no
// message at all, which records the refusal in the trial's trail.
func (h *Handler) emails(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		writeError(w, errNotFound)
		return
	}
	cred, ok := bearer(r)
	if !ok {
		writeError(w, errMissingKey)
		return
	}
	done, err := h.admit(r, rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: cred}, h.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, h.callerAnswer(err))
		return
	}
	defer done()
	e, idemKey, fail := h.readEmail(w, r)
	if fail != nil {
		writeError(w, h.authenticated(r, cred, fail))
		return
	}
	release, ok := h.running.claim(w, cred, "emails", idemKey)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := planeContext(r)
	defer cancel()
	req := &rpc.SendRequest{
		Via:        rpc.ViaHTTP,
		Credential: cred,
		From:       e.From,
		To:         e.Recipients(),
		Raw:        compose(e, h.now()),
	}
	if idemKey != "" {
		// The plane compares fingerprints only under a key (a marshalling
		// and a digest of the whole request, skipped without one).
		req.IdempotencyKey, req.Fingerprint = idempotencyDigest(idemKey), e.Fingerprint()
	}
	resp, err := h.plane.Send(ctx, req)
	if err != nil {
		writeError(w, h.refusal(err))
		return
	}
	if answerFault(w, r, resp.Fault) { // faults.go
		return
	}
	h.log.Debug().Str("namespace", resp.Namespace).Int64("seq", resp.Seq).Bool("replayed", resp.Replayed).Msg("http: accepted")
	writeJSON(w, http.StatusOK, idResponse{ID: resp.ID})
}

// readEmail applies checks 3 to 12: media type, length, body, JSON, fields,
// values, idempotency key.
func (h *Handler) readEmail(w http.ResponseWriter, r *http.Request) (*email, string, *apierr.Error) {
	body, fail := h.readBody(w, r, h.cfg.MaxBodyBytes)
	if fail != nil {
		return nil, "", fail
	}
	e, fail := parseEmail(body, h.cfg.MaxRecipients)
	if fail != nil {
		return nil, "", fail
	}
	key, fail := idempotencyKey(r)
	return e, key, fail
}

// readBody applies checks 3 to 6: media type, length, body of at most
// limit bytes.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apierr.Error) {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if strings.ToLower(strings.TrimSpace(mt)) != "application/json" {
		return nil, errMediaType
	}
	// A body needs a length, or chunked framing (which Resend's own SDKs
	// send); net/http answers 400 itself to a Content-Length that is not a
	// number, as RFC 9112 §6.3 requires.
	_, hasLength := r.Header["Content-Length"]
	if !hasLength && len(r.TransferEncoding) == 0 {
		return nil, errLengthRequired
	}
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	body, err := readAll(w, r, limit)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) || errors.Is(err, connlimit.ErrBodyTooLarge) {
			return nil, errTooLarge
		}
		return nil, errIncomplete
	}
	return body, nil
}

// readAll reads r's body of at most limit bytes (and its Content-Length,
// which admit counted) into a buffer grown as it arrives: a body that
// stops short costs what it sent, not what it declared.
func readAll(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return connlimit.ReadBody(http.MaxBytesReader(w, r.Body, limit), declared(r, limit))
}

// declared is the most of r's body that is read under limit: its
// Content-Length, or limit for a chunked body.
func declared(r *http.Request, limit int64) int64 {
	if r.ContentLength >= 0 {
		return min(r.ContentLength, limit)
	}
	return limit
}

// idempotencyKey is check 12: the request's Idempotency-Key, if valid.
func idempotencyKey(r *http.Request) (string, *apierr.Error) {
	keys := r.Header.Values("Idempotency-Key")
	if !validIdempotencyKey(keys) {
		return "", errIdemKey
	}
	if len(keys) > 0 {
		return keys[0], nil
	}
	return "", nil
}

// authenticated shows the plane a request refused as fail whose
// credential admit accepted: the plane records the refusal in the
// trial's trail. It returns fail, or the plane's answer if cred no longer
// opens the trial.
func (h *Handler) authenticated(r *http.Request, cred string, fail *apierr.Error) *apierr.Error {
	ctx, cancel := planeContext(r)
	defer cancel()
	// The plane records fail's code in the trial's trail if cred opens it.
	err := h.plane.Refused(ctx, &rpc.RefusalRequest{CredentialRequest: rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: cred}, Code: fail.Code})
	if err != nil {
		return h.callerAnswer(err)
	}
	return fail
}

// refusal maps the plane's verdict on a well-formed message to an
// answer; a refused envelope names its field.
func (h *Handler) refusal(err error) *apierr.Error {
	a := h.planeAnswer(err)
	if a.resend == errMessage {
		if field, must := envelopeRule(err); field != "" {
			return invalid(field, must)
		}
	}
	return a.resend
}
