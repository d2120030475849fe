package plane

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/redact"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The trail (package evidence) of every call bound to a namespace: each
// row of the authorization table that binds a namespace names how its
// calls are recorded (an evidencer), and bound records every call, allowed
// or refused, once its answer is known and before it is given. An
// accepted send is recorded by the ledger in the send's own savepoint
// (Offer.Event), so a send is never answered before its event is durable
// and a send not accepted leaves no accepted event. A call refused before
// any namespace is known (a credential that opens nothing: an unknown
// token, a wrong capability for a real namespace) has no trail to go in:
// it is counted (unboundRefusals), never written into the trail of the
// namespace it named, so that a stranger cannot use up a trial's budget.
//
// SMTP sessions the writer refuses before any message (over its
// connection cap) are reported by the writer itself (rpc.MethodReport, a
// row bound like send: to the trial that owns the listener's port); on the
// shared SMTP port no trial is known, and they are only counted in the
// writer's log. Requests the writer refuses as malformed are recorded from
// the credential check it makes first (rpc.MethodRefusal).

// evidencer makes the event of one call from its request and answer; nil
// means nothing to record here.
type evidencer[Req, Resp any] func(t target, req *Req, resp Resp, err error) *evidence.Event

// Evidence settings of the plane.
const (
	// DefaultRetention is how long a closed trial's trail is kept.
	DefaultRetention = 24 * time.Hour
	// recordTimeout bounds appending one event, even for a call whose
	// caller went away: what it did must still be written down.
	recordTimeout = 10 * time.Second
)

// SetEvidence sets each trail's event budget (0: unlimited) and how long a
// closed trial's trail is kept.
func (b *Broker) SetEvidence(budget int64, retention time.Duration) {
	b.ledger.SetEventBudget(budget)
	b.retention = retention
}

// SetSigner sets the key that signs an export's head.
func (b *Broker) SetSigner(key ed25519.PrivateKey) { b.signer = key }

// PublicKey is the public half of the signing key, as bundles carry it
// (empty without one).
func (b *Broker) PublicKey() string {
	if b.signer == nil {
		return ""
	}
	return evidence.PublicKeyString(b.signer.Public().(ed25519.PublicKey))
}

// unboundRefusals counts calls refused before any trail was known, and
// the reaper logs how many came since it last did: enough for an
// operator to see probing, at no cost to any trial.
type unboundRefusals struct {
	n      atomic.Int64
	logged int64 // the reaper's only
}

func (u *unboundRefusals) add() { u.n.Add(1) }

func (b *Broker) logUnbound() {
	n := b.unbound.n.Load()
	if n == b.unbound.logged {
		return
	}
	b.log.Warn().Int64("refused", n-b.unbound.logged).Int64("since_start", n).
		Msg("calls refused whose credential opens no trial (counted here, in no trail)")
	b.unbound.logged = n
}

// record appends e to t's trail and wakes the trail's readers. A failure
// to record is logged: the call's own answer stands (an outage of the
// ledger fails the call anyway).
func (b *Broker) record(ctx context.Context, t target, e *evidence.Event) {
	if e == nil || t.ns.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := b.ledger.AppendEvent(ctx, t.ns.Name, *e); err != nil {
		b.log.Warn().Err(err).Str("namespace", t.ns.Name).Str("action", e.Action).Msg("event not recorded yet: kept until the ledger takes writes")
		b.unrecorded.add(t.ns.Name, e)
		return
	}
	b.trails.notify(t.ns.Name)
}

// unrecorded holds, in memory, events the ledger could not take (it was
// down: the very outage a failed event records), counted by namespace and
// kind, and the reaper appends them, each kind as one event with its
// count, once the ledger takes writes again. It is bounded; what a plane
// killed during the outage held is lost with it (its log says so).
type unrecorded struct {
	mu sync.Mutex
	m  map[unrecordedKey]int64
}

type unrecordedKey struct{ ns, door, action, outcome, code, credential string }

// maxUnrecorded bounds the kinds held; more are only logged.
const maxUnrecorded = 4096

func (u *unrecorded) add(ns string, e *evidence.Event) {
	k := unrecordedKey{ns, e.Door, e.Action, e.Outcome, e.Code, e.Credential}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[unrecordedKey]int64{}
	}
	if _, ok := u.m[k]; ok || len(u.m) < maxUnrecorded {
		u.m[k] += max(e.Count, 1)
	}
}

// flushUnrecorded appends what the ledger could not take before.
func (b *Broker) flushUnrecorded(ctx context.Context) {
	b.unrecorded.mu.Lock()
	m := b.unrecorded.m
	b.unrecorded.m = nil
	b.unrecorded.mu.Unlock()
	for k, n := range m {
		e := evidence.Event{Door: k.door, Action: k.action, Outcome: k.outcome, Code: k.code, Credential: k.credential, Count: n}
		if err := b.ledger.AppendEvent(ctx, k.ns, e); err != nil {
			b.unrecorded.add(k.ns, &e)
			continue
		}
		b.trails.notify(k.ns)
	}
}

// outcome fills e's outcome and code from a call's error.
func outcome(e *evidence.Event, err error) *evidence.Event {
	code := rpc.CodeOf(err)
	switch {
	case err == nil:
		e.Outcome = evidence.Accepted
	case rpc.ClassOf(err) != rpc.Refused:
		// An outage or a bug: the call failed, the caller was not refused.
		e.Outcome, e.Code = evidence.Failed, code
	default:
		e.Outcome, e.Code = evidence.Refused, code
	}
	return e
}

// credentialEvent records a credential check that failed, as the send
// it stands for; one that opened the trial is not the send's answer yet.
func credentialEvent(t target, req *rpc.CredentialRequest, _ rpc.Empty, err error) *evidence.Event {
	if err == nil {
		return nil
	}
	return outcome(&evidence.Event{Door: sendDoor(req.Via), Action: rpc.MethodSend, Credential: t.credential, API: req.API}, err)
}

// refusalEvent records the writer's refusal of a malformed request, as a
// refused send with the writer's code (if it is one), once its credential
// opened the trial; else as credentialEvent.
func refusalEvent(t target, req *rpc.RefusalRequest, resp rpc.Empty, err error) *evidence.Event {
	if err != nil {
		return credentialEvent(t, &req.CredentialRequest, resp, err)
	}
	if !stableCode(req.Code) {
		return nil
	}
	return &evidence.Event{Door: sendDoor(req.Via), Action: rpc.MethodSend, Credential: t.credential, API: req.API,
		Outcome: evidence.Refused, Code: req.Code}
}

// sendEvent records a send that the ledger did not: refused, failed or
// replayed.
func sendEvent(t target, req *rpc.SendRequest, resp rpc.SendResponse, err error) *evidence.Event {
	e := &evidence.Event{Door: sendDoor(req.Via), Action: rpc.MethodSend, Credential: t.credential, API: req.API}
	if err == nil && !resp.Replayed {
		return nil // the ledger recorded it with the message
	}
	if err == nil {
		e.From, e.To = address(req.From), addresses(req.To)
		e.Replayed, e.MessageIDs, e.EmailID = true, []int64{resp.Seq}, resp.ID
	}
	// A refused send's addresses are untrusted input that was turned
	// down: the trail keeps its code, not what the sender wrote.
	return outcome(e, err)
}

func bootstrapEvent(t target, _ *rpc.BootstrapRequest, _ rpc.BootstrapResponse, err error) *evidence.Event {
	return outcome(&evidence.Event{Door: evidence.DoorWriterHTTP, Action: rpc.MethodBootstrap, Credential: t.credential}, err)
}

// readEvent records a list, latest or get, with the ids it answered. A
// read that found nothing was allowed: it is accepted, with code
// not_found.
func readEvent(action string) func(target, *rpc.ReadRequest, []int64, error) *evidence.Event {
	return func(t target, req *rpc.ReadRequest, ids []int64, err error) *evidence.Event {
		e := &evidence.Event{Door: t.view.door, Action: action, Credential: t.credential,
			Recipient: address(req.Recipient), MessageIDs: ids}
		if t.view.agent {
			e.Door = agentDoor(req)
			if action == rpc.MethodGet && req.Door != rpc.DoorInboxFrame {
				e.Action = evidence.ActionOpen // the agent opened a message (its frame is a get)
			}
		}
		if req.WaitMillis > 0 {
			e.Action = evidence.ActionWait
		}
		if rpc.CodeOf(err) == rpc.CodeNotFound {
			e.Outcome, e.Code = evidence.Accepted, rpc.CodeNotFound
			return e
		}
		return outcome(e, err)
	}
}

var (
	listEvent = func(t target, req *rpc.ReadRequest, resp rpc.ListResponse, err error) *evidence.Event {
		ids := make([]int64, 0, len(resp.Messages))
		for _, m := range resp.Messages {
			ids = append(ids, m.ID)
		}
		return readEvent(rpc.MethodList)(t, req, ids, err)
	}
	latestEvent = func(t target, req *rpc.ReadRequest, m rpc.Message, err error) *evidence.Event {
		return readEvent(rpc.MethodLatest)(t, req, messageID(m), err)
	}
	getEvent = func(t target, req *rpc.ReadRequest, m rpc.Message, err error) *evidence.Event {
		if err != nil && req.ID > 0 {
			return readEvent(rpc.MethodGet)(t, req, []int64{req.ID}, err)
		}
		e := readEvent(rpc.MethodGet)(t, req, messageID(m), err)
		e.Label = cmp.Or(m.Label, m.Planted)
		return e
	}
)

func messageID(m rpc.Message) []int64 {
	if m.ID == 0 {
		return nil
	}
	return []int64{m.ID}
}

// address is an address as the trail shows it: only a valid address, and
// even then through the redaction point; anything else is "invalid".
func address(a string) string {
	if a == "" {
		return ""
	}
	if !mailmsg.ValidAddress(a) {
		return "invalid"
	}
	if mayHoldSecret(a) {
		return redact.Text(a)
	}
	return a
}

// mayHoldSecret reports whether redact.Text could change s: only text with
// white space, ':' or '=' (the reference's "key: value" and "Bearer x"
// shapes) or a run of token characters as long as the shortest secret we
// mint can. Redaction's regular expressions cost a send more than its
// event.
func mayHoldSecret(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':' || c == '=' || c <= ' ':
			return true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-':
			if run++; run >= redact.ShortestMinted {
				return true
			}
		default:
			run = 0
		}
	}
	return false
}

func addresses(as []string) []string {
	if len(as) > limits.Recipients {
		as = as[:limits.Recipients]
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, address(a))
	}
	return out
}

// stableCode reports whether s looks like a stable error code (lowercase
// words joined by _), the only thing a surface may put in the trail.
func stableCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// Events answers a page of a trail the caller's read capability opens,
// waiting for an event after req.After if asked to.
func (b *Broker) Events(ctx context.Context, t target, req *rpc.EventsRequest) (rpc.EventsResponse, error) {
	if req.WaitMillis < 0 || req.After < 0 || req.Limit < 0 {
		return rpc.EventsResponse{}, rpc.Errorf(rpc.CodeBadRequest, "wait_ms, after and limit must not be negative")
	}
	var page rpc.EventsResponse
	err := waitFor(ctx, &b.trails, t.ns.Name, boundedWait(req.WaitMillis), func() (bool, error) {
		var err error
		if page, err = b.eventPage(ctx, t.ns.Name, req.After, req.Limit); err != nil {
			return false, err
		}
		if err := b.stillOpen(ctx, t); err != nil {
			return false, err
		}
		return len(page.Events) > 0, nil
	})
	if err != nil {
		return rpc.EventsResponse{}, err
	}
	return page, nil
}

func (b *Broker) eventPage(ctx context.Context, ns string, after int64, limit int) (rpc.EventsResponse, error) {
	lines, err := b.ledger.Events(ctx, ns, after, pageLimit(limit))
	if err != nil {
		return rpc.EventsResponse{}, b.storeErr("events", err)
	}
	out := rpc.EventsResponse{Events: make([]json.RawMessage, 0, len(lines))}
	for _, l := range lines {
		out.Events = append(out.Events, json.RawMessage(l))
	}
	return out, nil
}

// pageLimit is the events a page holds for a request's limit.
func pageLimit(limit int) int {
	if limit <= 0 || limit > rpc.MaxEventPage {
		return rpc.MaxEventPage
	}
	return limit
}

// Export answers a page of any trail the plane keeps, its trial open or
// closed (for the retention period), for the operator. The first page of
// an open trail first writes down the events its budget left out.
func (b *Broker) Export(ctx context.Context, req *rpc.EventsRequest) (rpc.EventsResponse, error) {
	if req.After < 0 || req.Limit < 0 || req.WaitMillis != 0 {
		return rpc.EventsResponse{}, rpc.Errorf(rpc.CodeBadRequest, "after and limit must not be negative; export does not wait")
	}
	exists, closed, err := b.ledger.TrailOf(ctx, req.Namespace)
	if err != nil {
		return rpc.EventsResponse{}, b.storeErr("trail", err)
	}
	if !exists {
		return rpc.EventsResponse{}, rpc.Errorf(rpc.CodeNotFound, "no trail for namespace %s", req.Namespace)
	}
	if req.After == 0 && !closed {
		if err := b.ledger.FlushTrail(ctx, req.Namespace); err != nil {
			return rpc.EventsResponse{}, b.storeErr("flush trail", err)
		}
		b.trails.notify(req.Namespace)
	}
	page, err := b.eventPage(ctx, req.Namespace, req.After, req.Limit)
	if err != nil {
		return page, err
	}
	page.Closed = closed
	if len(page.Events) < pageLimit(req.Limit) {
		// The last page: closed was read before it, so a closed trail's
		// page holds its close.
		page.Head, err = b.signHead(ctx, req.Namespace, req.After, page.Events, closed)
	}
	return page, err
}

// signHead signs the head of a trail that ends with the last event of
// page or, for an empty last page, with the event at seq after. The plane
// signs only a line that verifies.
func (b *Broker) signHead(ctx context.Context, ns string, after int64, page []json.RawMessage, closed bool) (json.RawMessage, error) {
	if b.signer == nil {
		return nil, nil
	}
	if len(page) == 0 && after > 0 {
		p, err := b.eventPage(ctx, ns, after-1, 1)
		if err != nil {
			return nil, err
		}
		page = p.Events
	}
	if len(page) == 0 {
		return nil, nil
	}
	e, err := evidence.Parse(page[len(page)-1])
	if err != nil {
		return nil, b.storeErr("head", err)
	}
	line, err := evidence.SignHead(evidence.Head{Namespace: ns, Seq: e.Seq, Hash: e.Hash, Closed: closed,
		Time: evidence.Stamp(time.Now())}, b.signer)
	if err != nil {
		return nil, b.storeErr("head", err)
	}
	return line, nil
}

// Report records SMTP sessions the writer refused on the trial's listener.
func (b *Broker) Report(_ context.Context, _ target, req *rpc.ReportRequest) (rpc.Empty, error) {
	if !slices.Contains(rpc.ReportCodes, req.Code) || req.Count <= 0 {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeBadRequest, "code must be one of %v, count positive", rpc.ReportCodes)
	}
	return rpc.Empty{}, nil
}

func reportEvent(t target, req *rpc.ReportRequest, _ rpc.Empty, err error) *evidence.Event {
	if err != nil {
		return nil // a malformed report: the writer's fault, logged
	}
	return &evidence.Event{Door: evidence.DoorWriterSMTP, Action: evidence.ActionConnect, Outcome: evidence.Refused,
		Code: req.Code, Credential: t.credential, Count: req.Count}
}

// lifecycleDone wakes the readers of trails a lifecycle step wrote to.
func (b *Broker) lifecycleDone(nss ...string) {
	for _, ns := range nss {
		b.trails.notify(ns)
	}
}

// reapTrails deletes the trails of trials closed longer than the
// retention period ago.
func (b *Broker) reapTrails(ctx context.Context) {
	if b.retention <= 0 {
		return
	}
	n, err := b.ledger.DeleteTrails(ctx, time.Now().Add(-b.retention), 256)
	if err != nil && !errors.Is(err, context.Canceled) {
		b.log.Warn().Err(err).Msg("deleting old trails failed; will retry")
	}
	if n > 0 {
		b.log.Info().Int("trails", n).Dur("retention", b.retention).Msg("trails of closed trials deleted")
	}
}

// closeAction is the trail's action for a close, by why it closed.
func closeAction(how string) string {
	if how == "expired" {
		return evidence.ActionExpire
	}
	return evidence.ActionClose
}

// sendDoor is the door a send came in by.
func sendDoor(via rpc.Via) string {
	if via == rpc.ViaHTTP {
		return evidence.DoorWriterHTTP
	}
	return evidence.DoorWriterSMTP
}
