package sqlledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/limits"
)

// SetWebhooks replaces trial id's webhooks (stored is package webhooks'
// JSON, "" to clear them), which ns's trail records (their count, never
// their URLs). ErrNotFound: the trial is closed.
func (l *DB) SetWebhooks(ctx context.Context, trialID int64, ns, stored string) error {
	return l.policyTx(ctx, func(tx *sql.Tx) error {
		if err := l.setWebhooks(ctx, tx, trialID, ns, stored); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, ns)
	})
}

func (l *DB) setWebhooks(ctx context.Context, tx *sql.Tx, trialID int64, ns, stored string) error {
	var text any
	var n []json.RawMessage
	if stored != "" {
		text = stored
		if err := json.Unmarshal([]byte(stored), &n); err != nil {
			return err
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE trials SET webhooks = ? WHERE id = ? AND destroyed = 0`, text, trialID)
	if err != nil {
		return err
	}
	if c, _ := res.RowsAffected(); c == 0 {
		return ErrNotFound
	}
	e := &evidence.Event{Namespace: ns, Door: evidence.DoorPlane, Action: evidence.ActionWebhooks, Outcome: evidence.Accepted, Count: int64(len(n))}
	if err := l.appendEvent(ctx, txq{tx: tx, s: l.ws}, e, true); err != nil {
		return err
	}
	// Webhooks report what happens from now on: each of the trial's
	// trails is derived from its present end.
	_, err = tx.ExecContext(ctx, l.d.text(`INSERT INTO webhook_cursors (namespace, trail_seq)
SELECT n.name, COALESCE((SELECT MAX(seq) FROM events e WHERE e.namespace = n.name), 0) FROM namespaces n WHERE n.trial_id = ?
ON CONFLICT (namespace) DO UPDATE SET trail_seq = excluded.trail_seq`), trialID)
	return err
}

// bounce accepts o, whose recipients are all a provider's bounce
// simulator, and stores nothing: its event alone says it bounced.
func (l *DB) bounce(ctx context.Context, tx txq, o *Offer) (Entry, bool, error) {
	ev := evidence.Event{Door: evidence.DoorPlane, Action: "send", Outcome: evidence.Accepted}
	if o.Event != nil {
		ev = *o.Event
	}
	ev.Namespace, ev.EmailID, ev.Size, ev.Code = o.Namespace, o.UUID, o.Size, evidence.CodeSimulatedBounce
	return Entry{Namespace: o.Namespace, UUID: o.UUID}, false, l.appendEvent(ctx, tx, &ev, true)
}

// The outbox. A plane derives a trial's webhook events from its trails
// (package plane's webhooks.go) and adds them here with the trail seq it
// read to (webhook_cursors, per namespace), in one transaction that only
// commits if the cursor is still where it read from: planes sharing a
// database derive each event once. The events of one send to one webhook
// are handed out in order, one at a time: the next waits until the one
// before is delivered, failed or dropped. Different sends' go at once.

// WebhookNamespaces returns the namespaces of the open trials with
// webhooks, in one query: the pump's full pass reads the trails of only
// those whose Head is past what it has read.
func (l *DB) WebhookNamespaces(ctx context.Context) ([]WebhookNamespace, error) {
	rows, err := l.read.QueryContext(ctx, l.d.text(`SELECT n.name, n.trial_id,
COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.namespace = n.name), 0),
COALESCE((SELECT c.trail_seq FROM webhook_cursors c WHERE c.namespace = n.name), 0)
FROM namespaces n JOIN trials t ON t.id = n.trial_id
WHERE t.destroyed = 0 AND t.webhooks IS NOT NULL ORDER BY n.trial_id, n.name`))
	return scanAll(rows, err, func(r *sql.Rows, ns *WebhookNamespace) error {
		return r.Scan(&ns.Name, &ns.TrialID, &ns.Head, &ns.Cursor)
	})
}

// WebhookCursor returns the trail seq ns's events were derived to (0:
// none yet).
func (l *DB) WebhookCursor(ctx context.Context, ns string) (int64, error) {
	var seq int64
	err := l.read.QueryRowContext(ctx, l.d.text(`SELECT trail_seq FROM webhook_cursors WHERE namespace = ?`), ns).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// AddWebhookEvents adds evs to trial id's outbox, numbered after its last,
// and moves ns's cursor from from to to. ErrExists: the cursor moved
// (another plane derived them); nothing is added.
func (l *DB) AddWebhookEvents(ctx context.Context, trialID int64, ns string, from, to int64, evs []WebhookEvent) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		var at int64
		err := tx.QueryRowContext(ctx, l.d.text(`SELECT trail_seq FROM webhook_cursors WHERE namespace = ?`), ns).Scan(&at)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if at != from {
			return ErrExists
		}
		if _, err := tx.ExecContext(ctx, l.d.text(`INSERT INTO webhook_cursors (namespace, trail_seq) VALUES (?, ?)
ON CONFLICT (namespace) DO UPDATE SET trail_seq = excluded.trail_seq`), ns, to); err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		var last int64
		if err := tx.QueryRowContext(ctx, l.d.text(`SELECT COALESCE(MAX(seq), 0) FROM webhook_events WHERE trial_id = ?`), trialID).Scan(&last); err != nil {
			return err
		}
		for i, e := range evs {
			state := e.State
			if state == "" {
				state = WebhookPending
			}
			if _, err := tx.ExecContext(ctx, l.d.text(`INSERT INTO webhook_events (trial_id, seq, id, hook, email, namespace, kind, data, state, due_at, log)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]')`), trialID, last+int64(i)+1, e.ID, e.Hook, e.EmailID, ns, e.Kind, e.Data, state, e.Due.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
}

// PendingWebhookEvents counts trial id's events still to be delivered.
func (l *DB) PendingWebhookEvents(ctx context.Context, trialID int64) (int, error) {
	var n int
	err := l.read.QueryRowContext(ctx, l.d.text(`SELECT COUNT(*) FROM webhook_events WHERE trial_id = ? AND state = 'pending'`), trialID).Scan(&n)
	return n, err
}

const webhookColumns = `trial_id, seq, id, hook, email, namespace, kind, data, state, attempts, due_at, log`

func scanWebhookEvents(rows *sql.Rows, err error) ([]WebhookEvent, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []WebhookEvent
	for rows.Next() {
		var e WebhookEvent
		var due int64
		if err := rows.Scan(&e.TrialID, &e.Seq, &e.ID, &e.Hook, &e.EmailID, &e.Namespace, &e.Kind, &e.Data, &e.State, &e.Attempts, &due, &e.Log); err != nil {
			return nil, err
		}
		e.Due = fromMillis(due)
		out = append(out, e)
	}
	return out, rows.Err()
}

// DueWebhookEvents leases up to limit events due at now, each the first
// pending event of its send to its webhook and not leased, for lease:
// until it ends (an attempt's outcome is reported first, or the deliverer
// died) no other call is handed it. A trial has at most
// limits.TrialWebhookDeliveries events leased at once: one whose
// endpoint holds its attempts, with many events due, never fills a take
// ahead of the other trials' events.
//
// The choice reads every due event (a trial's outbox holds up to
// limits.TrialWebhookPending, all of them due when its endpoint is
// down), so it is made on the read handle, beside the writer, and each
// trial's leased events are counted once, not once per event. Only the
// leases are written, under a lock on each chosen trial's row (so that
// planes sharing a PostgreSQL database count each other's leases): each
// one only if its event is still due and not leased and its trial's
// share still has room. A choice that another taker's leases made stale
// is made again.
func (l *DB) DueWebhookEvents(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]WebhookEvent, error) {
	for range maxTakeRounds {
		due, err := l.dueWebhookEvents(ctx, now, limit)
		if err != nil || len(due) == 0 {
			return nil, err
		}
		out, err := l.leaseWebhookEvents(ctx, due, now, lease)
		if err != nil || len(out) > 0 {
			return out, err
		}
	}
	return nil, nil
}

// maxTakeRounds bounds a take's choices: each one after the first follows
// another taker's leases, which changed what is free.
const maxTakeRounds = 8

// dueWebhookEvents chooses up to limit events to lease at now.
func (l *DB) dueWebhookEvents(ctx context.Context, now time.Time, limit int) ([]WebhookEvent, error) {
	at := now.UnixMilli()
	return scanWebhookEvents(l.read.QueryContext(ctx, l.d.text(`SELECT `+webhookColumns+` FROM (
SELECT w.*, ROW_NUMBER() OVER (PARTITION BY w.trial_id ORDER BY w.due_at, w.seq) AS nth, COALESCE(y.n, 0) AS leased
FROM webhook_events w LEFT JOIN (
SELECT trial_id, COUNT(*) AS n FROM webhook_events WHERE state = 'pending' AND leased_until > ? GROUP BY trial_id
) y ON y.trial_id = w.trial_id
WHERE w.state = 'pending' AND w.due_at <= ? AND w.leased_until <= ?
AND seq = (SELECT MIN(seq) FROM webhook_events x WHERE x.state = 'pending' AND x.trial_id = w.trial_id AND x.hook = w.hook AND x.email = w.email)
) d WHERE nth + leased <= ?
ORDER BY due_at, trial_id, seq LIMIT ?`), at, at, at, limits.TrialWebhookDeliveries, limit))
}

// leaseWebhookEvents leases what of due is still free at now, and
// returns it.
func (l *DB) leaseWebhookEvents(ctx context.Context, due []WebhookEvent, now time.Time, lease time.Duration) ([]WebhookEvent, error) {
	at := now.UnixMilli()
	trials := make([]int64, 0, len(due))
	for _, e := range due {
		trials = append(trials, e.TrialID)
	}
	slices.Sort(trials) // one order for every taker: no deadlock
	trials = slices.Compact(trials)
	var out []WebhookEvent
	err := l.tx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		for _, id := range trials {
			if _, err := tx.ExecContext(ctx, l.d.text(`SELECT id FROM trials WHERE id = ?`+forUpdate), id); err != nil {
				return err
			}
		}
		for _, e := range due {
			r, err := tx.ExecContext(ctx, l.d.text(`UPDATE webhook_events SET leased_until = ?
WHERE trial_id = ? AND seq = ? AND state = 'pending' AND due_at <= ? AND leased_until <= ?
AND (SELECT COUNT(*) FROM webhook_events y WHERE y.trial_id = ? AND y.state = 'pending' AND y.leased_until > ?) < ?`),
				now.Add(lease).UnixMilli(), e.TrialID, e.Seq, at, at, e.TrialID, at, limits.TrialWebhookDeliveries)
			if err != nil {
				return err
			}
			if n, err := r.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// NextWebhookDue is the first time after after that a pending event
// comes due or its lease ends (zero: none). An event due already but not
// handed out waits behind its send's earlier event or its trial's share,
// which a report frees, and a report wakes the take: counting it here
// would have the take poll until then.
func (l *DB) NextWebhookDue(ctx context.Context, after time.Time) (time.Time, error) {
	var due sql.NullInt64
	err := l.read.QueryRowContext(ctx, l.d.text(`SELECT MIN(t) FROM (
SELECT CASE WHEN leased_until > due_at THEN leased_until ELSE due_at END AS t FROM webhook_events WHERE state = 'pending') d WHERE t > ?`),
		after.UnixMilli()).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}, err
	}
	return fromMillis(due.Int64), nil
}

// WebhookAttempted records an attempt: the event's state, when it is due
// again, its log, and the attempt's trail event, in one transaction.
// ErrNotFound: the event is gone (its trial closed).
func (l *DB) WebhookAttempted(ctx context.Context, a WebhookAttempt) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		var logText string
		err := tx.QueryRowContext(ctx, l.d.text(`SELECT log FROM webhook_events WHERE trial_id = ? AND seq = ?`+forUpdate), a.TrialID, a.Seq).Scan(&logText)
		if err != nil {
			return notFound(err)
		}
		var entries []json.RawMessage
		if err := json.Unmarshal([]byte(logText), &entries); err != nil {
			return err
		}
		entries = append(entries, json.RawMessage(a.Entry))
		b, err := json.Marshal(entries)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, l.d.text(`UPDATE webhook_events SET state = ?, attempts = attempts + 1, due_at = ?, leased_until = 0, log = ? WHERE trial_id = ? AND seq = ?`),
			a.State, a.Due.UnixMilli(), string(b), a.TrialID, a.Seq); err != nil {
			return err
		}
		ev := a.Event
		return l.appendEvent(ctx, txq{tx: tx, s: l.ws}, &ev, true)
	})
}

// WebhookEvents returns trial id's outbox, in order.
func (l *DB) WebhookEvents(ctx context.Context, trialID int64) ([]WebhookEvent, error) {
	return scanWebhookEvents(l.read.QueryContext(ctx, l.d.text(`SELECT `+webhookColumns+` FROM webhook_events WHERE trial_id = ? ORDER BY seq`), trialID))
}

// WebhookEvent returns event seq of trial id's outbox. ErrNotFound: none.
func (l *DB) WebhookEvent(ctx context.Context, trialID, seq int64) (WebhookEvent, error) {
	evs, err := scanWebhookEvents(l.read.QueryContext(ctx, l.d.text(`SELECT `+webhookColumns+` FROM webhook_events WHERE trial_id = ? AND seq = ?`), trialID, seq))
	if err != nil {
		return WebhookEvent{}, err
	}
	if len(evs) == 0 {
		return WebhookEvent{}, ErrNotFound
	}
	return evs[0], nil
}
