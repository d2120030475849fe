// Package gateway is mail-gateway's HTTP surface: the evaluator's
// Bearer-gated JSON API over any namespace whose read capability the
// caller presents (docs/reference.md §4.1–4.3), with waiting reads, and the
// Bearer-gated HTML view of the same mail.
//
// The gateway decides nothing about access itself: it passes the caller's
// Bearer value to the plane as the read capability, and the plane answers
// forbidden or not. It never touches storage and holds only its gateway
// grant.
//
// The caller is known before a request waits: the plane's reader check
// (rpc.MethodReadCheck, which records nothing) says whether the
// capability opens the namespace the path names, and a pair it accepted
// is remembered for a few seconds (connlimit.Callers), so the hot path
// asks once. Only then does the request take a fair share, keyed by that
// namespace: a stranger's wrong capability is refused before it holds
// anything, and cannot take the share of the trial it names.
package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Limits of one request.
const (
	// maxCredential bounds the Bearer value passed to the plane; read
	// capabilities are 64 characters.
	maxCredential = 512
	// healthTimeout bounds the plane's health call behind /healthz.
	healthTimeout = 5 * time.Second
)

// Gateway answers the evaluator's requests.
type Gateway struct {
	plane *rpc.Client
	log   zerolog.Logger
	// shares bound the requests in flight per namespace, taken once the
	// caller's capability was checked against it.
	shares *connlimit.Shares
	// known are the capabilities the plane accepted recently, with the
	// namespace each was checked against.
	known connlimit.Callers
}

// New returns a gateway that reads through plane, a client holding the
// gateway grant.
func New(plane *rpc.Client, log zerolog.Logger) *Gateway {
	return &Gateway{plane: plane, log: log, shares: connlimit.NewShares(limits.TrialRequests)}
}

// ServeHTTP routes first and reads second: a request's shape, namespace
// syntax, credential syntax and query are all checked before the plane is
// asked anything.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rt := parseRoute(r.URL.EscapedPath())
	status, code := g.serve(w, r, rt)
	ev := g.log.Debug()
	if status >= 500 {
		ev = g.log.Warn()
	}
	// The namespace is logged once the plane has taken the caller's
	// capability for it; before that it is whatever the caller put in
	// the path, which may be a secret.
	if ident.ValidNamespace(rt.ns) && (status < 400 || code == mailclient.CodeMessageNotFound || code == mailclient.CodeRecipientForbidden) {
		ev = ev.Str("namespace", rt.ns)
	}
	ev.Str("method", r.Method).Str("route", rt.kind.String()).Int("status", status).Str("code", code).
		Dur("took", time.Since(start)).Msg("request")
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, rt route) (int, string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return writeError(w, mailclient.CodeMethodNotAllowed)
	}
	switch rt.kind {
	case routeNotFound:
		return writeError(w, mailclient.CodeNotFound)
	case routeHealth:
		return g.health(w, r)
	}
	if !ident.ValidNamespace(rt.ns) {
		return writeError(w, mailclient.CodeInvalidNamespace)
	}
	cred, ok := bearer(r)
	if !ok {
		return writeError(w, mailclient.CodeForbidden)
	}
	req := &rpc.ReadRequest{Namespace: rt.ns, Capability: cred, ID: rt.id}
	if rt.kind == routeList || rt.kind == routeLatest || rt.kind == routeEvents {
		q := r.URL.Query()
		wait, err := parseWait(firstValue(q, "wait"))
		if err != nil {
			return writeError(w, mailclient.CodeInvalidWait)
		}
		after, err := parseAfter(firstValue(q, "after"))
		if err != nil {
			return writeError(w, mailclient.CodeInvalidAfter)
		}
		req.Recipient = firstValue(q, "recipient")
		req.After = after
		// Round up, so that a wait of under a millisecond still waits.
		req.WaitMillis = int64((wait + time.Millisecond - 1) / time.Millisecond)
	}
	// The request is well formed: its caller, then its trial's share.
	if err := g.caller(r, rt.ns, cred); err != nil {
		return g.planeError(w, r, err)
	}
	connlimit.Known(r.Context())
	release, ok := g.shares.Take(rt.ns)
	if !ok {
		apierr.TrialBusy.Write(w)
		return apierr.TrialBusy.Status, apierr.TrialBusy.Code
	}
	defer release()
	ctx := r.Context()
	base := "/inbox/" + url.PathEscape(rt.ns)
	switch rt.kind {
	case routeWebhooks:
		list, err := g.plane.WebhooksList(ctx, &rpc.WebhooksListRequest{Namespace: rt.ns, Capability: cred})
		if err != nil {
			return g.planeError(w, r, err)
		}
		return writeJSON(w, http.StatusOK, list)
	case routeEvents:
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			return g.eventStream(w, r, rt.ns, cred, req.After)
		}
		// The same Bearer, after and wait as messages; after is a seq.
		page, err := g.plane.Events(ctx, &rpc.EventsRequest{Namespace: rt.ns, Capability: cred, After: req.After, WaitMillis: req.WaitMillis})
		if err != nil {
			return g.planeError(w, r, err)
		}
		return writeJSON(w, http.StatusOK, mailclient.Events{Events: page.Events})
	case routeList:
		msgs, err := g.plane.List(ctx, req)
		if err != nil {
			return g.planeError(w, r, err)
		}
		out := mailclient.List{Messages: make([]mailclient.Message, 0, len(msgs))}
		for _, m := range msgs {
			out.Messages = append(out.Messages, wire(m))
		}
		return writeJSON(w, http.StatusOK, out)
	case routeLatest:
		m, err := g.plane.Latest(ctx, req)
		if err != nil {
			return g.planeError(w, r, err)
		}
		return writeJSON(w, http.StatusOK, wire(m))
	case routeMessage:
		m, err := g.plane.Get(ctx, req)
		if err != nil {
			return g.planeError(w, r, err)
		}
		return writeJSON(w, http.StatusOK, wire(m))
	case routeInbox:
		msgs, err := g.plane.List(ctx, req)
		if err != nil {
			return g.planeError(w, r, err)
		}
		return writeHTML(w, http.StatusOK, render.Inbox(msgs, base))
	case routeInboxMessage:
		m, err := g.plane.Get(ctx, req)
		if err != nil {
			return g.planeError(w, r, err)
		}
		return writeHTML(w, http.StatusOK, render.Message(m, base))
	}
	return writeError(w, mailclient.CodeNotFound)
}

// caller checks that cred opens namespace ns: remembered, or the plane's
// reader check.
func (g *Gateway) caller(r *http.Request, ns, cred string) error {
	_, err := g.known.Resolve(ns+"\x00"+cred, time.Now(), func() (string, error) {
		_, err := g.plane.ResolveReader(r.Context(), &rpc.ReadRequest{Namespace: ns, Capability: cred})
		return ns, err
	})
	return err
}

// eventStream serves a trail as Server-Sent Events: each event as
// "id: SEQ" and "data: LINE", from after (or the Last-Event-ID an
// EventSource sends when it reconnects), for at most rpc.MaxWait; then the
// stream ends and the client reconnects where it left off. The first page
// is asked for before anything is written, so a wrong capability is the
// same JSON refusal as on the list.
func (g *Gateway) eventStream(w http.ResponseWriter, r *http.Request, ns, cred string, after int64) (int, string) {
	if id, err := parseAfter(r.Header.Get("Last-Event-ID")); err == nil && id > after {
		after = id
	}
	ctx, cancel := context.WithTimeout(r.Context(), rpc.MaxWait)
	defer cancel()
	flusher, _ := w.(http.Flusher)
	started := false
	for {
		wait := time.Until(deadlineOf(ctx))
		if !started {
			wait = 0 // the first page answers at once: the stream opens now
		} else if wait < time.Millisecond {
			return http.StatusOK, ""
		}
		page, err := g.plane.Events(ctx, &rpc.EventsRequest{Namespace: ns, Capability: cred, After: after,
			WaitMillis: max(int64(wait/time.Millisecond), 0)})
		if err != nil {
			if started {
				return http.StatusOK, "" // the client reconnects, as after a wait that ran out
			}
			return g.planeError(w, r, err)
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		for _, line := range page.Events {
			var e struct{ Seq int64 }
			json.Unmarshal(line, &e)
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, line)
			after = e.Seq
		}
		if flusher != nil {
			flusher.Flush()
		}
		if len(page.Events) == 0 && ctx.Err() != nil {
			return http.StatusOK, ""
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// bearer returns the credential of "Authorization: Bearer <credential>".
// Exactly "Bearer " (case-sensitive, one space) must begin the header;
// anything else, an empty or over-long value, or one that is not
// printable ASCII, is a wrong credential that the plane need not see.
func bearer(r *http.Request) (string, bool) {
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || cred == "" || len(cred) > maxCredential {
		return "", false
	}
	for i := 0; i < len(cred); i++ {
		if cred[i] <= ' ' || cred[i] >= 0x7f {
			return "", false
		}
	}
	return cred, true
}

// health answers /healthz from the plane's health call.
func (g *Gateway) health(w http.ResponseWriter, r *http.Request) (int, string) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	h, err := g.plane.Health(ctx)
	if err != nil || h.Store != "ok" {
		if err != nil {
			g.log.Warn().Str("code", rpc.CodeOf(err)).Msg("health: plane unavailable")
		}
		return writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// planeAnswers is the gateway's answer to each class of plane error, by
// the gateway's code (apiErrors has its status and body). A refusal not
// named here is the plane refusing the gateway itself (a revoked or wrong
// grant): the caller did nothing wrong, and retrying will not help.
var planeAnswers = rpc.Answers[string]{
	Refused: map[string]string{
		rpc.CodeInvalidNamespace:   mailclient.CodeInvalidNamespace,
		rpc.CodeForbidden:          mailclient.CodeForbidden,
		rpc.CodeRecipientForbidden: mailclient.CodeRecipientForbidden,
		rpc.CodeNotFound:           mailclient.CodeMessageNotFound,
	},
	Outage: mailclient.CodeUnavailable,
	Bug:    mailclient.CodeInternal,
}

// planeError answers a refused or failed plane call, from planeAnswers.
func (g *Gateway) planeError(w http.ResponseWriter, r *http.Request, err error) (int, string) {
	if r.Context().Err() != nil {
		// The caller went away (or the gateway is stopping) while the plane
		// was still answering: not an outage worth a warning. Should anyone
		// still listen, it is told to try again.
		g.log.Debug().Msg("request ended before the plane answered")
		return writeError(w, mailclient.CodeUnavailable)
	}
	code, class := planeAnswers.For(err)
	switch class {
	case rpc.Outage:
		g.log.Warn().Err(err).Msg("plane unavailable")
	case rpc.Bug:
		g.log.Error().Err(err).Msg("the plane failed or refused the gateway's call")
	}
	return writeError(w, code)
}

// wire is the evaluator's view of a message: the reference's keys plus the
// codes and links found in it, the sender's display name, the HTML part
// and when it arrived. The plane found the codes and links when it
// accepted the message (package mailindex), so a read parses nothing.
func wire(m rpc.Message) mailclient.Message {
	out := mailclient.Message{
		Attachments:  make([]mailclient.Attachment, 0, len(m.Attachments)),
		Codes:        []string{},
		EnvelopeFrom: m.EnvelopeFrom,
		Fault:        m.Fault,
		FromName:     m.FromName,
		HTML:         m.HTML,
		ID:           m.ID,
		Label:        m.Label,
		Links:        []string{},
		Namespace:    m.Namespace,
		ReceivedAt:   m.Received.UTC(),
		Recipients:   m.Recipients,
		Subject:      m.Subject,
		Text:         m.Text,
	}
	if f := m.Found; f != nil {
		out.Codes, out.Links = f.Codes, f.Links
		if c := f.OTP; c != "" {
			out.OTP = &c
		}
		if l := f.ActionLink; l != "" {
			out.ActionLink = &l
		}
	}
	if out.Recipients == nil {
		out.Recipients = []string{}
	}
	// The two Attachments are copies that cannot share a type (mailclient
	// links nothing, mail-inbox must not link mailclient); TestWireCopiesAgree
	// pins them, and Checksums converts only while they agree.
	for _, a := range m.Attachments {
		out.Attachments = append(out.Attachments, mailclient.Attachment{
			Checksums:   mailclient.Checksums(a.Checksums),
			ContentID:   a.ContentID,
			ContentType: a.ContentType,
			FileName:    a.FileName,
			PartID:      a.PartID,
			Size:        a.Size,
		})
	}
	return out
}

// apiErrors are the gateway's fixed answers, by code (package apierr has
// the envelope).
var apiErrors = map[string]*apierr.Error{
	mailclient.CodeInvalidNamespace:   {Code: mailclient.CodeInvalidNamespace, Status: http.StatusBadRequest, Name: "validation_error", Message: "The namespace is not a valid namespace name."},
	mailclient.CodeInvalidWait:        {Code: mailclient.CodeInvalidWait, Status: http.StatusBadRequest, Name: "validation_error", Message: "wait must be a duration such as 5s or 1500ms, or a number of seconds, of at most 60s."},
	mailclient.CodeInvalidAfter:       {Code: mailclient.CodeInvalidAfter, Status: http.StatusBadRequest, Name: "validation_error", Message: "after must be a message id."},
	mailclient.CodeForbidden:          {Code: mailclient.CodeForbidden, Status: http.StatusForbidden, Name: "invalid_api_key", Message: "The Bearer capability does not open this namespace."},
	mailclient.CodeRecipientForbidden: {Code: mailclient.CodeRecipientForbidden, Status: http.StatusForbidden, Name: "validation_error", Message: "Nothing was ever delivered to that recipient."},
	mailclient.CodeMessageNotFound:    {Code: mailclient.CodeMessageNotFound, Status: http.StatusNotFound, Name: "not_found", Message: "No such message."},
	mailclient.CodeNotFound:           {Code: mailclient.CodeNotFound, Status: http.StatusNotFound, Name: "not_found", Message: "No such route."},
	mailclient.CodeMethodNotAllowed:   {Code: mailclient.CodeMethodNotAllowed, Status: http.StatusMethodNotAllowed, Name: "method_not_allowed", Message: "Only GET and HEAD are supported."},
	mailclient.CodeInternal:           {Code: mailclient.CodeInternal, Status: http.StatusInternalServerError, Name: "internal_server_error", Message: "The gateway cannot read mail; its log says why."},
	mailclient.CodeUnavailable:        apierr.Unavailable,
}

func writeError(w http.ResponseWriter, code string) (int, string) {
	e := apiErrors[code]
	e.Write(w)
	return e.Status, code
}

// writeJSON writes v as the reference does: UTF-8 as is, no HTML escaping
// of <, > and &, keys in a fixed (sorted) order.
func writeJSON(w http.ResponseWriter, status int, v any) (int, string) {
	apierr.WriteJSON(w, status, v)
	return status, ""
}

// writeHTML writes one of render's pages with the headers that keep it
// inert and uncached.
func writeHTML(w http.ResponseWriter, status int, body []byte) (int, string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", render.ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
	return status, ""
}
