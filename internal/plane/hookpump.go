package plane

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/faults"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/webhooks"
)

// The webhook pump: a trial's webhook events are derived from its trails,
// which already hold, durably and in order, every accepted send (with its
// fault), every delayed message shown, and the agent's opens and clicks.
// The pump reads each trail of a trial with webhooks from its cursor,
// makes each event's facts (webhooks.Facts) into one outbox row per
// webhook, applies the trial's webhook fault rules, and commits the rows
// with the moved cursor (ledger.AddWebhookEvents). What caused an event is
// on the record before the event exists, and a plane that stops between
// the two derives the same events (the same ids) again.

// pumpEvery is how often the pump also passes over every trial with
// webhooks, whatever it was told: a change it was not told of (a
// notification past maxDirty) waits at most that long.
const pumpEvery = 5 * time.Second

// pumpPage is how many trail lines one pass reads of one namespace.
const pumpPage = 256

// runWebhooks pumps until ctx ends: the namespaces whose trails were
// notified, as they are (another plane's commits on a shared database are
// notified too, changes.go), and every trial with webhooks each
// pumpEvery.
func (b *Broker) runWebhooks(ctx context.Context) {
	full := time.NewTicker(pumpEvery)
	defer full.Stop()
	b.pumpWebhooks(ctx) // what was committed while no plane pumped
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-b.hooks.pump:
			for _, ns := range b.hooks.touched() {
				if b.pumpNamespace(ctx, ns) {
					b.hooks.touch(ns) // more than a page: again
				}
			}
		case <-full.C:
			b.pumpWebhooks(ctx)
		case <-b.hooks.rescan:
			b.pumpWebhooks(ctx)
		}
	}
}

// pumpNamespace pumps one namespace if its trial has webhooks; more
// reports that its trail had more than a page.
func (b *Broker) pumpNamespace(ctx context.Context, name string) (more bool) {
	ns, err := b.ledger.Namespace(ctx, name)
	if err != nil {
		return false // gone (closed), or unreadable: the full pass retries
	}
	t, err := b.ledger.Trial(ctx, ns.TrialID)
	if err != nil || t.Webhooks == "" {
		return false
	}
	hooks, err := webhooks.Load(t.Webhooks)
	if err != nil || len(hooks) == 0 {
		return false
	}
	n, err := b.pumpTrail(ctx, t, hooks, ns)
	if err != nil && ctx.Err() == nil {
		b.log.Warn().Err(err).Str("namespace", name).Msg("webhook events not derived; will retry")
	}
	return n == pumpPage
}

// pumpWebhooks makes one pass over every trial with webhooks: it notes
// their namespaces first (hookQueue.hooked: from then on each of their
// notifications wakes the pump), then reads each trail that has lines
// past what was read of it to its end. An idle pass is one query.
func (b *Broker) pumpWebhooks(ctx context.Context) {
	nss, err := b.ledger.WebhookNamespaces(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn().Err(err).Msg("webhook trials unreadable; will retry")
		}
		return
	}
	hooked := make(map[string]bool, len(nss))
	for _, ns := range nss {
		hooked[ns.Name] = true
	}
	b.hooks.setHooked(hooked)
	for name := range b.hooks.read {
		if !hooked[name] {
			delete(b.hooks.read, name) // closed, or its webhooks removed
		}
	}
	var t ledger.Trial
	var hooks []webhooks.Hook
	for _, ns := range nss {
		if ns.Head <= max(ns.Cursor, b.hooks.read[ns.Name]) {
			continue
		}
		if t.ID != ns.TrialID { // nss is in trial order
			t, err = b.ledger.Trial(ctx, ns.TrialID)
			if err != nil {
				t = ledger.Trial{}
				continue // closed since: its trails are not pumped
			}
			hooks, _ = webhooks.Load(t.Webhooks)
		}
		if len(hooks) == 0 {
			continue
		}
		full, err := b.ledger.Namespace(ctx, ns.Name)
		if err != nil {
			continue // gone (closed), or unreadable: the next pass retries
		}
		for ctx.Err() == nil {
			n, err := b.pumpTrail(ctx, t, hooks, full)
			if err != nil && ctx.Err() == nil {
				b.log.Warn().Err(err).Str("namespace", ns.Name).Msg("webhook events not derived; will retry")
			}
			if err != nil || n < pumpPage {
				break
			}
		}
	}
}

// pumpTrail derives the events of one page of ns's trail; n is the lines
// read.
func (b *Broker) pumpTrail(ctx context.Context, t ledger.Trial, hooks []webhooks.Hook, ns ledger.Namespace) (int, error) {
	from, err := b.ledger.WebhookCursor(ctx, ns.Name)
	if err != nil {
		return 0, err
	}
	lines, err := b.ledger.Events(ctx, ns.Name, max(from, b.hooks.read[ns.Name]), pumpPage)
	if err != nil || len(lines) == 0 {
		return 0, err
	}
	rules, counted, err := b.webhookRules(ctx, t)
	if err != nil {
		return 0, err
	}
	pending, err := b.ledger.PendingWebhookEvents(ctx, t.ID)
	if err != nil {
		return 0, err
	}
	var out []ledger.WebhookEvent
	shed := 0
	factless := true // no line of the page tells a fact, under any hooks
	to := from
	now := time.Now()
	for _, line := range lines {
		var e evidence.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return 0, err
		}
		to = e.Seq
		facts := webhooks.Facts(e)
		factless = factless && len(facts) == 0
		for k := 0; k < len(facts); k++ {
			f := facts[k]
			if err := b.fillFact(ctx, ns, &f); err != nil {
				return 0, err
			}
			if e.Action == evidence.ActionDeliver && f.Kind == webhooks.Delivered {
				facts = append(facts, webhooks.AfterDelivery(f)...) // a delayed send's simulators
			}
			for i, h := range hooks {
				if h.Provider == webhooks.Postmark && f.Kind == webhooks.Sent {
					continue // Postmark reports no "sent"
				}
				for _, p := range webhooks.PerPost(h, f) {
					data, err := json.Marshal(p)
					if err != nil {
						return 0, err
					}
					ev := ledger.WebhookEvent{ID: webhooks.EventID(p, i), Hook: i, EmailID: p.EmailID, Kind: p.Kind, Data: string(data), Due: now}
					counted++
					for _, ev := range applyWebhookFault(rules, counted, ev) {
						if ev.State == "" {
							if pending >= limits.TrialWebhookPending {
								ev.State = ledger.WebhookFailed // the outbox is full: no attempt
								shed++
							} else {
								pending++
							}
						}
						out = append(out, ev)
					}
				}
			}
		}
	}
	if shed > 0 {
		b.log.Warn().Str("namespace", ns.Name).Int("events", shed).Msg("the trial's webhook outbox is full; events failed without an attempt")
	}
	if len(out) == 0 && len(lines) < pumpPage {
		// Nothing to report (a read, a webhook attempt): the cursor stays,
		// sparing a write, and the next lines with an event move it past
		// these too. Lines that tell no fact derive nothing whatever the
		// trial's hooks or rules: the pump notes that it has read them.
		if factless {
			b.hooks.read[ns.Name] = to
		}
		return len(lines), nil
	}
	delete(b.hooks.read, ns.Name)
	err = b.ledger.AddWebhookEvents(ctx, t.ID, ns.Name, from, to, out)
	if errors.Is(err, ledger.ErrExists) {
		return len(lines), nil // another plane derived them
	}
	if err != nil {
		return 0, err
	}
	if len(out) > 0 {
		b.hooks.wake()
	}
	return len(lines), nil
}

// webhookRules are trial t's webhook fault rules, and how many webhook
// events it has had (what a rule counts); none without a rule.
func (b *Broker) webhookRules(ctx context.Context, t ledger.Trial) (faults.Schedule, int64, error) {
	if t.Faults == "" {
		return nil, 0, nil
	}
	s, err := faults.Parse([]byte(t.Faults))
	if err != nil {
		return nil, 0, err
	}
	if !hasWebhookRule(s) {
		return nil, 0, nil
	}
	evs, err := b.ledger.WebhookEvents(ctx, t.ID)
	if err != nil {
		return nil, 0, err
	}
	seen := map[string]bool{}
	for _, e := range evs {
		seen[e.ID] = true
	}
	return s, int64(len(seen)), nil
}

func hasWebhookRule(s faults.Schedule) bool {
	for _, r := range s {
		if r.Door == faults.Webhook {
			return true
		}
	}
	return false
}

// applyWebhookFault is ev as the n-th webhook event of a trial with
// rules: delayed, copied (the same id: a candidate must take a repeated
// event once) or dropped (kept, for the record, as dropped).
func applyWebhookFault(rules faults.Schedule, n int64, ev ledger.WebhookEvent) []ledger.WebhookEvent {
	if rules == nil {
		return []ledger.WebhookEvent{ev}
	}
	i, r := rules.Match(faults.Webhook, faults.Counts{Webhook: n})
	if i < 0 {
		return []ledger.WebhookEvent{ev}
	}
	switch r.Do {
	case faults.Delay:
		ev.Due = ev.Due.Add(time.Duration(r.Seconds) * time.Second)
	case faults.Drop:
		ev.State = ledger.WebhookDropped
	case faults.Duplicate:
		out := make([]ledger.WebhookEvent, r.Copies)
		for k := range out {
			out[k] = ev
		}
		return out
	}
	return []ledger.WebhookEvent{ev}
}

// fillFact completes a fact from the stored message: an open's, a
// click's or a delayed delivery's id, sender and recipients (a send's are
// the trail's: a recipient that bounced is not the stored message's),
// every fact's subject and tags, and a click's URL. They are read from
// the message's index here, so the trail keeps no content. A message gone
// since (its trial rotated and closed, a purge) keeps what the trail said.
func (b *Broker) fillFact(ctx context.Context, ns ledger.Namespace, f *webhooks.Fact) error {
	if f.MessageSeq == 0 {
		return nil
	}
	e, err := b.ledger.Entry(ctx, ns.Name, f.MessageSeq)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.EmailID == "" || len(f.To) == 0 {
		f.EmailID, f.From, f.To = e.UUID, e.From, e.To
	}
	x, err := b.index(ctx, ns, e)
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return err
	}
	f.Subject, f.Tags = x.Subject, nil
	for _, h := range x.Headers {
		if webhooks.TagHeader(h.Name) {
			f.Tags = append(f.Tags, webhooks.Tag{Name: h.Name, Value: h.Value})
		}
	}
	if f.Kind == webhooks.Clicked && f.Link >= 0 && f.Link < len(x.LinkURLs) {
		f.URL = x.LinkURLs[f.Link]
	}
	return nil
}
