package plane

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/limits"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/internal/webhooks"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Provider webhooks (package webhooks, docs/webhooks.md): a trial's
// endpoints are part of its policy in the ledger, set only by the admin.

// parseWebhooks reads a trial's webhooks from an admin call: "" for none,
// or a CodeInvalidWebhooks refusal naming the bad entry (never its URL).
func parseWebhooks(in []rpc.Webhook) (string, error) {
	stored, err := webhooks.Parse(in)
	if err != nil {
		return "", rpc.Errorf(rpc.CodeInvalidWebhooks, "%v", err)
	}
	return stored, nil
}

// SetWebhooks replaces the webhooks of the open trial a namespace belongs
// to; an empty list clears them.
func (b *Broker) SetWebhooks(ctx context.Context, req *rpc.TrialWebhooksRequest) (rpc.Empty, error) {
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	if req.Webhooks == nil {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeInvalidWebhooks, "webhooks: give a list ([] clears them)")
	}
	stored, err := parseWebhooks(req.Webhooks)
	if err != nil {
		return rpc.Empty{}, err
	}
	t, _, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.Empty{}, err
	}
	err = b.ledger.SetWebhooks(ctx, t.ID, t.Namespace, stored)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeNotFound, "the trial of %s is closed", req.Namespace)
	}
	if err != nil {
		return rpc.Empty{}, b.storeErr("webhooks", err)
	}
	b.lifecycleDone(t.Namespace)
	b.hooks.again()
	b.log.Info().Str("namespace", t.Namespace).Int("webhooks", len(req.Webhooks)).Msg("trial webhooks set")
	return rpc.Empty{}, nil
}

// webhookKeys is trial material made again from the digest of the token
// its bundle's providers hand out (writeDigest).
func (b *Broker) webhookKeys(tr ledger.Trial) webhooks.Keys {
	return webhooks.Derive(b.sesKey, writeDigest(tr))
}

// withWebhookKeys adds a trial's webhook material, from its providers'
// part of the bundle (made once: deriving the keys is most of a bundle's
// cost), to its candidate environment.
func withWebhookKeys(env map[string]string, p *rpc.Providers) map[string]string {
	return wbenv.WithWebhookKeys(env, p.Resend.WebhookSecret, p.SendGrid.WebhookPublicKey, p.Mailgun.WebhookSigningKey)
}

// hookQueue wakes the hooks process's waiting take when the pump adds
// events (kick), and the pump when a trail changes (dirty, pump).
// hooked is the namespaces of trials with webhooks as of the last full
// pass (rescan asks for one): a notification of any other costs a map
// lookup.
type hookQueue struct {
	kick   chan struct{}
	pump   chan struct{}
	rescan chan struct{}
	mu     *sync.Mutex
	dirty  map[string]bool
	hooked map[string]bool
	// read is, for a namespace whose trail has lines past its cursor
	// that tell no fact (reads, attempts), the seq the pump has read
	// them to, so that it reads each such line once, not on every pass
	// until a page of them moves the cursor. Only the pump touches it.
	read map[string]int64
}

func newHookQueue() hookQueue {
	return hookQueue{kick: make(chan struct{}, 1), pump: make(chan struct{}, 1), rescan: make(chan struct{}, 1),
		mu: &sync.Mutex{}, dirty: map[string]bool{}, hooked: map[string]bool{}, read: map[string]int64{}}
}

// again asks the pump for a full pass: a trial's webhooks or namespaces
// changed.
func (q hookQueue) again() { signal(q.rescan) }

// setHooked replaces the namespaces of trials with webhooks.
func (q hookQueue) setHooked(nss map[string]bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	clear(q.hooked)
	for ns := range nss {
		q.hooked[ns] = true
	}
}

func (q hookQueue) wake() { signal(q.kick) }

// touch marks ns's trail changed and wakes the pump.
func (q hookQueue) touch(ns string) {
	q.mu.Lock()
	if !q.hooked[ns] {
		q.mu.Unlock()
		return
	}
	if len(q.dirty) < maxDirty { // past it, the pump's full pass finds the rest
		q.dirty[ns] = true
	}
	q.mu.Unlock()
	signal(q.pump)
}

// maxDirty bounds the namespaces remembered between two passes.
const maxDirty = 4096

// touched takes the namespaces marked since the last call.
func (q hookQueue) touched() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.dirty))
	for ns := range q.dirty {
		out = append(out, ns)
	}
	clear(q.dirty)
	return out
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// hookLease is how long a taken event is the taker's: an attempt's whole
// bound and room to report it. A hooks process that dies holding events
// has them handed out again after it.
const hookLease = 2*limits.WebhookTimeout + 5*time.Second

// maxTake bounds one take's answer.
const maxTake = 64

// TakeWebhooks answers the events due for delivery, each with its
// request built and signed for this attempt, waiting up to the request's
// wait for one to come due.
func (b *Broker) TakeWebhooks(ctx context.Context, req *rpc.WebhooksTakeRequest) (rpc.WebhooksTakeResponse, error) {
	limit := req.Limit
	if limit <= 0 || limit > maxTake {
		limit = maxTake
	}
	wait := min(time.Duration(req.WaitMillis)*time.Millisecond, rpc.MaxWait)
	deadline := time.Now().Add(wait)
	for {
		now := time.Now()
		due, err := b.ledger.DueWebhookEvents(ctx, now, hookLease, limit)
		if err != nil {
			return rpc.WebhooksTakeResponse{}, b.storeErr("webhooks take", err)
		}
		if len(due) > 0 {
			return b.deliveries(ctx, due)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return rpc.WebhooksTakeResponse{Deliveries: []rpc.WebhookDelivery{}}, nil
		}
		if next, err := b.ledger.NextWebhookDue(ctx, now); err == nil && !next.IsZero() {
			left = min(left, max(time.Until(next), time.Millisecond))
		}
		timer := time.NewTimer(left)
		select {
		case <-ctx.Done():
			timer.Stop()
			return rpc.WebhooksTakeResponse{}, rpc.Errorf(rpc.CodeDeadlineExceeded, "the call ended before an event came due")
		case <-b.hooks.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// deliveries builds each due event's request with its trial's keys and
// its webhook as configured now. An event whose webhook is gone (the
// trial's webhooks were replaced) or that its provider cannot shape is
// recorded as failed, without an attempt.
func (b *Broker) deliveries(ctx context.Context, due []ledger.WebhookEvent) (rpc.WebhooksTakeResponse, error) {
	out := rpc.WebhooksTakeResponse{Deliveries: []rpc.WebhookDelivery{}}
	trials := map[int64]ledger.Trial{}
	now := time.Now()
	// A netns trial's deliveries are made inside its namespace (Door).
	doors := map[int64]string{}
	ds, err := b.ledger.NetnsDoors(ctx)
	if err != nil {
		return out, b.storeErr("netns doors", err)
	}
	for _, d := range ds {
		doors[d.TrialID] = d.Key
	}
	for _, e := range due {
		t, ok := trials[e.TrialID]
		if !ok {
			var err error
			t, err = b.ledger.Trial(ctx, e.TrialID)
			if errors.Is(err, ledger.ErrNotFound) {
				continue // closed: its events went with it
			}
			if err != nil {
				return out, b.storeErr("trial", err)
			}
			trials[e.TrialID] = t
		}
		hooks, _ := webhooks.Load(t.Webhooks)
		var f webhooks.Fact
		err := json.Unmarshal([]byte(e.Data), &f)
		var r webhooks.Request
		if err == nil && e.Hook < len(hooks) {
			r, err = webhooks.Build(hooks[e.Hook], b.webhookKeys(t), e.ID, f, now)
		}
		if err != nil || e.Hook >= len(hooks) {
			b.log.Warn().Str("namespace", e.Namespace).Str("event", e.ID).Msg("a webhook event has no endpoint any more; failed")
			if err := b.webhookAttempted(ctx, e, "", rpc.WebhookReport{Trial: e.TrialID, Seq: e.Seq, Error: "no_endpoint"}); err != nil {
				return out, err
			}
			continue
		}
		out.Deliveries = append(out.Deliveries, rpc.WebhookDelivery{Trial: e.TrialID, Seq: e.Seq, EventID: e.ID,
			Provider: hooks[e.Hook].Provider, URL: r.URL, Header: r.Header, Body: r.Body, Door: doors[e.TrialID]})
	}
	return out, nil
}

// ReportWebhook records one attempt: the event is delivered (a 2xx;
// Mailgun: 200 or 406), due again after its webhook's next wait, or
// failed once they are spent. The trail records the attempt.
func (b *Broker) ReportWebhook(ctx context.Context, req *rpc.WebhookReport) (rpc.Empty, error) {
	e, err := b.ledger.WebhookEvent(ctx, req.Trial, req.Seq)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeNotFound, "no such webhook event")
	}
	if err != nil {
		return rpc.Empty{}, b.storeErr("webhook event", err)
	}
	if e.State != ledger.WebhookPending {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeConflict, "the event is %s", e.State)
	}
	t, err := b.ledger.Trial(ctx, req.Trial)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeNotFound, "no such webhook event")
	}
	if err != nil {
		return rpc.Empty{}, b.storeErr("trial", err)
	}
	hooks, _ := webhooks.Load(t.Webhooks)
	provider := ""
	if e.Hook < len(hooks) {
		provider = hooks[e.Hook].Provider
	}
	return rpc.Empty{}, b.webhookAttempted(ctx, e, provider, *req)
}

// webhookAttempted records attempt r of event e to a provider's
// endpoint, with its retry schedule from the trial's webhook.
func (b *Broker) webhookAttempted(ctx context.Context, e ledger.WebhookEvent, provider string, r rpc.WebhookReport) error {
	ok := r.Status >= 200 && r.Status < 300
	if provider == webhooks.Mailgun {
		ok = r.Status == 200 || r.Status == 406 // Mailgun: 406 means "stop retrying"
	}
	var retries []int
	if t, err := b.ledger.Trial(ctx, e.TrialID); err == nil {
		if hooks, _ := webhooks.Load(t.Webhooks); e.Hook < len(hooks) {
			retries = hooks[e.Hook].RetrySeconds
		}
	}
	attempt := e.Attempts + 1
	state, due := ledger.WebhookDelivered, time.Now()
	switch {
	case ok:
	case provider != "" && attempt <= len(retries):
		state, due = ledger.WebhookPending, due.Add(time.Duration(retries[attempt-1])*time.Second)
	default:
		state = ledger.WebhookFailed
	}
	var f webhooks.Fact
	json.Unmarshal([]byte(e.Data), &f)
	w := &evidence.Webhook{Provider: provider, EventID: e.ID, Kind: e.Kind, EmailID: f.EmailID, Attempt: attempt, Status: r.Status,
		LatencyMillis: r.LatencyMillis, Error: r.Error, State: state}
	entry, _ := json.Marshal(w)
	ev := evidence.Event{Namespace: e.Namespace, Door: evidence.DoorWebhook, Action: evidence.ActionWebhook, Outcome: evidence.Accepted, Webhook: w}
	if !ok {
		ev.Outcome, ev.Code = evidence.Failed, "webhook_"+cmp.Or(r.Error, "status")
	}
	err := b.ledger.WebhookAttempted(ctx, ledger.WebhookAttempt{TrialID: e.TrialID, Seq: e.Seq, State: state, Due: due, Entry: string(entry), Event: ev})
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Errorf(rpc.CodeNotFound, "no such webhook event")
	}
	if err != nil {
		return b.storeErr("webhook attempt", err)
	}
	b.trails.notify(e.Namespace)
	// Whatever the outcome, a waiting take looks again: the send's next
	// event may go (delivered, failed), this one is due again at its next
	// wait (pending, even at once), and the trial's share has room.
	b.hooks.wake()
	return nil
}

// ListWebhooks answers the webhook events of the trial t is bound to,
// with their attempts: what the evaluator grades "the site took the
// bounce" by. Reading it is not recorded (as reading a trail is not).
func (b *Broker) ListWebhooks(ctx context.Context, t target, _ *rpc.WebhooksListRequest) (rpc.WebhooksListResponse, error) {
	list, err := b.webhookList(ctx, t.trial)
	return rpc.WebhooksListResponse{Webhooks: list}, err
}

// webhookList is trial t's webhook events with their attempts, each
// webhook's URL without its credentials.
func (b *Broker) webhookList(ctx context.Context, t ledger.Trial) ([]rpc.WebhookEvent, error) {
	evs, err := b.ledger.WebhookEvents(ctx, t.ID)
	if err != nil {
		return nil, b.storeErr("webhook events", err)
	}
	hooks, _ := webhooks.Load(t.Webhooks)
	out := make([]rpc.WebhookEvent, 0, len(evs))
	for _, e := range evs {
		var f webhooks.Fact
		json.Unmarshal([]byte(e.Data), &f)
		w := rpc.WebhookEvent{EventID: e.ID, Kind: e.Kind, EmailID: f.EmailID, Namespace: e.Namespace, State: e.State, Attempts: []json.RawMessage{}}
		if e.Hook < len(hooks) {
			w.Provider, w.URL = hooks[e.Hook].Provider, webhooks.WithoutCredentials(hooks[e.Hook].URL)
		}
		if err := json.Unmarshal([]byte(e.Log), &w.Attempts); err != nil {
			return nil, b.storeErr("webhook log", err)
		}
		out = append(out, w)
	}
	return out, nil
}
