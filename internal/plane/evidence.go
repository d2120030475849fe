package plane

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
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
// any namespace is known (a credential that opens nothing) has no trail
// to go in and is only logged.
//
// SMTP sessions the writer refuses before any message (over its
// connection cap) are reported by the writer itself (rpc.MethodReport, a
// row bound like send: to the trial that owns the listener's port); on the
// shared SMTP port no trial is known, and they are only counted in the
// writer's log. Requests the writer refuses as malformed are recorded from
// the credential check it makes first (SendRequest.WriterRefusal).

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
	case rpc.IsOutage(err):
		e.Outcome, e.Code = evidence.Failed, code
	default:
		e.Outcome, e.Code = evidence.Refused, code
	}
	return e
}

// sendEvent records a send that the ledger did not: refused, failed,
// replayed, or refused by the writer for its form.
func sendEvent(t target, req *rpc.SendRequest, resp rpc.SendResponse, err error) *evidence.Event {
	e := &evidence.Event{Door: sendDoor(req.Via), Action: rpc.MethodSend, Credential: t.credential}
	if req.CredentialOnly {
		if err == nil {
			if !stableCode(req.WriterRefusal) {
				return nil
			}
			e.Outcome, e.Code = evidence.Refused, req.WriterRefusal
			return e
		}
		return outcome(e, err)
	}
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
		e := &evidence.Event{Door: evidence.DoorGateway, Action: action, Credential: t.credential,
			Recipient: address(req.Recipient), MessageIDs: ids}
		if t.role == rpc.RoleInbox {
			e.Door = evidence.DoorInbox
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
		return readEvent(rpc.MethodGet)(t, req, messageID(m), err)
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
// shapes) or a run of 43 or more token characters (every secret we mint)
// can. Redaction's regular expressions cost a send more than its event.
func mayHoldSecret(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':' || c == '=' || c <= ' ':
			return true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-':
			if run++; run >= 43 {
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
	wait := min(time.Duration(req.WaitMillis)*time.Millisecond, rpc.MaxWait)
	deadline := time.Now().Add(wait)
	for {
		woken := b.trails.watch(t.ns.Name)
		page, err := b.eventPage(ctx, t.ns.Name, req.After, req.Limit)
		if err != nil {
			return page, err
		}
		if err := b.stillOpen(ctx, t); err != nil {
			return rpc.EventsResponse{}, err
		}
		if len(page.Events) > 0 || time.Until(deadline) <= 0 {
			return page, nil
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			return rpc.EventsResponse{}, rpc.Errorf(rpc.CodeDeadlineExceeded, "the call's deadline passed while waiting")
		}
	}
}

func (b *Broker) eventPage(ctx context.Context, ns string, after int64, limit int) (rpc.EventsResponse, error) {
	if limit <= 0 || limit > rpc.MaxEventPage {
		limit = rpc.MaxEventPage
	}
	lines, err := b.ledger.Events(ctx, ns, after, limit)
	if err != nil {
		return rpc.EventsResponse{}, b.storeErr("events", err)
	}
	out := rpc.EventsResponse{Events: make([]json.RawMessage, 0, len(lines))}
	for _, l := range lines {
		out.Events = append(out.Events, json.RawMessage(l))
	}
	return out, nil
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
	page.Closed = closed
	return page, err
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
