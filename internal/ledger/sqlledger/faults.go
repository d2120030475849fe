package sqlledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/faults"
	"github.com/websitebench/mailplane/internal/ident"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// Fault schedules (package faults). A trial's schedule is stored twice in
// one transaction: in its trials row, which every lookup of the trial
// reads (so a send of a trial without one costs nothing more), and in
// trial_faults with the trial's send counters, which a send of a trial
// with one updates and reads in its own savepoint, so that sends are
// counted and judged in the order the plane decides them, on every plane
// of a shared database. A send only locks trial_faults after its
// namespace, and nothing locks them the other way round.
//
// A delayed message is accepted at once: its body is stored, its quota
// used, and its event written, but it is indexed in delayed, not
// messages, until its time. Then DeliverDue gives it the namespace's next
// id, as if it had just arrived, so that ids stay in the order messages
// become visible and a reader paging with after misses nothing. Its body
// is stored under a negative seq that no message ever has: -(the
// namespace's message count when it was accepted + 1), unique because
// that count only grows.

const (
	qCountSend = `UPDATE trial_faults SET http_sends = http_sends + ?, smtp_sends = smtp_sends + ? WHERE trial_id = ? RETURNING schedule, http_sends, smtp_sends`
	qInjected  = `UPDATE trial_faults SET injected = injected + 1 WHERE trial_id = ?`
)

// SetFaults replaces trial id's schedule (stored is faults' JSON, "" to
// clear it) and counts its sends again from 1, in one transaction, which
// ns's trail records. ErrNotFound: the trial is closed.
func (l *DB) SetFaults(ctx context.Context, trialID int64, ns, stored string) error {
	return l.policyTx(ctx, func(tx *sql.Tx) error {
		if err := l.setFaults(ctx, tx, trialID, ns, stored); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, ns)
	})
}

func (l *DB) setFaults(ctx context.Context, tx *sql.Tx, trialID int64, ns, stored string) error {
	var text any
	if stored != "" {
		text = stored
	}
	res, err := tx.ExecContext(ctx, `UPDATE trials SET faults = ? WHERE id = ? AND destroyed = 0`, text, trialID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO trial_faults (trial_id, schedule) VALUES (?, ?)
ON CONFLICT (trial_id) DO UPDATE SET schedule = excluded.schedule, http_sends = 0, smtp_sends = 0`, trialID, stored); err != nil {
		return err
	}
	rules := int64(0)
	if s, err := faults.Parse([]byte(stored)); err == nil {
		rules = int64(len(s))
	}
	e := &evidence.Event{Namespace: ns, Door: evidence.DoorPlane, Action: evidence.ActionFaults, Outcome: evidence.Accepted, Count: rules}
	return l.appendEvent(ctx, txq{tx: tx, s: l.ws}, e, true)
}

// FaultsInjected returns how many faults trial id's schedules have
// injected.
func (l *DB) FaultsInjected(ctx context.Context, trialID int64) (int64, error) {
	var n int64
	err := l.read.QueryRowContext(ctx, `SELECT injected FROM trial_faults WHERE trial_id = ?`, trialID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// injectFault counts o's send against its trial's schedule and, if a rule
// matches, applies it inside tx: done reports that it did, and e is the
// answer. next is the seq o would get; seen what decide saw of the
// namespace.
func (l *DB) injectFault(ctx context.Context, tx txq, o *Offer, next int64, seen *hint) (e Entry, done bool, err error) {
	var dh, ds int64 = 1, 0
	if o.Faults.Door == faults.SMTP {
		dh, ds = 0, 1
	}
	var stored string
	var c faults.Counts
	err = tx.queryRow(ctx, qCountSend, dh, ds, o.Faults.Trial).Scan(&stored, &c.HTTP, &c.SMTP)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && stored == "") {
		return Entry{}, false, nil // its schedule was cleared
	}
	if err != nil {
		return Entry{}, false, err
	}
	s, err := faults.Parse([]byte(stored))
	if err != nil {
		return Entry{}, false, err // stored only once valid: the database is not what this plane wrote
	}
	i, r := s.Match(o.Faults.Door, c)
	if i < 0 {
		return Entry{}, false, nil
	}
	if _, err := tx.exec(ctx, qInjected, o.Faults.Trial); err != nil {
		return Entry{}, false, err
	}
	send := c.HTTP + c.SMTP
	if r.Door == faults.HTTP {
		send = c.HTTP
	} else if r.Door == faults.SMTP {
		send = c.SMTP
	}
	ev := evidence.Event{Door: evidence.DoorPlane, Action: "send", Outcome: evidence.Accepted}
	if o.Event != nil {
		ev = *o.Event
	}
	ev.Namespace = o.Namespace
	ev.Fault = &evidence.Fault{Rule: i, Do: r.Do, Send: send, Status: r.Status, RetryAfter: r.RetryAfter, SMTPCode: r.SMTPCode, Seconds: r.Seconds}
	inj := &Injected{Index: i, Rule: r}
	e = Entry{Namespace: o.Namespace, Injected: inj}
	switch r.Do {
	case faults.Refuse, faults.Timeout:
		ev.Outcome, ev.Code = evidence.Refused, "fault_"+r.Do
	case faults.Drop, faults.Bounce:
		e.UUID, ev.EmailID, ev.Size = o.UUID, o.UUID, o.Size
	case faults.Complain:
		// Stored as any send, whose event says what the rule did.
		if o.Event != nil {
			o.Event.Fault = ev.Fault
		}
		return Entry{}, false, nil
	case faults.Delay:
		return l.delay(ctx, tx, o, &ev, e, seen)
	case faults.Duplicate:
		return l.duplicate(ctx, tx, o, next, &ev, e, seen)
	}
	return e, true, l.appendEvent(ctx, tx, &ev, true)
}

// delay stores o's body and its place in delayed, and uses its quota.
func (l *DB) delay(ctx context.Context, tx txq, o *Offer, ev *evidence.Event, e Entry, seen *hint) (Entry, bool, error) {
	hold := -(seen.count + 1)
	ref, err := putBody(ctx, tx, o, hold)
	if err != nil {
		return Entry{}, false, err
	}
	to, _ := json.Marshal(o.To)
	e.Injected.VisibleAt = time.Now().Add(time.Duration(e.Injected.Rule.Seconds) * time.Second).UTC()
	if _, err := tx.exec(ctx, `INSERT INTO delayed (namespace, hold, uuid, envelope_from, recipients, size, ref, visible_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		o.Namespace, hold, o.UUID, o.From, string(to), o.Size, ref, e.Injected.VisibleAt.UnixMilli()); err != nil {
		return Entry{}, false, err
	}
	if _, err := tx.exec(ctx, `UPDATE namespaces SET message_count = message_count + 1, byte_count = byte_count + ? WHERE name = ?`, o.Size, o.Namespace); err != nil {
		return Entry{}, false, err
	}
	if o.IdempotencyKey != "" {
		// Replayed from delayed until it shows (replayOf), then from its
		// message.
		if _, err := tx.exec(ctx, qInsertIdempotency, o.Namespace, o.IdempotencyKey, o.Fingerprint, hold); err != nil {
			return Entry{}, false, err
		}
	}
	seen.count++
	seen.bytes += int64(o.Size)
	e.UUID, e.Size = o.UUID, o.Size
	ev.EmailID, ev.Size, ev.Fault.VisibleAt = o.UUID, o.Size, evidence.Stamp(e.Injected.VisibleAt)
	return e, true, l.appendEvent(ctx, tx, ev, true)
}

// duplicate stores o as many times as its rule's copies (as many as the
// quota has room for), each with its own id, as a sender that retried.
func (l *DB) duplicate(ctx context.Context, tx txq, o *Offer, next int64, ev *evidence.Event, e Entry, seen *hint) (Entry, bool, error) {
	n := int64(e.Injected.Rule.Copies)
	if o.MaxMessages > 0 {
		n = min(n, o.MaxMessages-seen.count)
	}
	if o.MaxBytes > 0 && o.Size > 0 {
		n = min(n, (o.MaxBytes-seen.bytes)/int64(o.Size))
	}
	n = max(n, 1) // decide found room for one
	to, _ := json.Marshal(o.To)
	received := time.Now().UTC()
	for k := range n {
		id := o.UUID
		if k > 0 {
			id = ident.UUID()
		}
		ref, err := putBody(ctx, tx, o, next+k)
		if err != nil {
			return Entry{}, false, err
		}
		if _, err := tx.exec(ctx, qInsertMessage, o.Namespace, next+k, id, o.From, string(to), o.Size, ref, received.UnixMilli(), faults.Duplicate, nil, nil); err != nil {
			return Entry{}, false, err
		}
		ev.MessageIDs = append(ev.MessageIDs, next+k)
	}
	if _, err := tx.exec(ctx, `UPDATE namespaces SET next_seq = next_seq + ?, message_count = message_count + ?, byte_count = byte_count + ? WHERE name = ?`,
		n, n, n*int64(o.Size), o.Namespace); err != nil {
		return Entry{}, false, err
	}
	if err := learn(ctx, tx, o.Namespace, o.To); err != nil {
		return Entry{}, false, err
	}
	if o.IdempotencyKey != "" {
		if _, err := tx.exec(ctx, qInsertIdempotency, o.Namespace, o.IdempotencyKey, o.Fingerprint, next); err != nil {
			return Entry{}, false, err
		}
	}
	seen.count += n
	seen.bytes += n * int64(o.Size)
	e.Seq, e.UUID, e.From, e.To, e.Size, e.Received, e.Fault = next, o.UUID, o.From, o.To, o.Size, received, faults.Duplicate
	e.Injected.Copies = int(n)
	ev.EmailID, ev.Size, ev.Fault.Copies = o.UUID, o.Size, int(n)
	return e, true, l.appendEvent(ctx, tx, ev, true)
}

func learn(ctx context.Context, tx txq, ns string, to []string) error {
	for _, r := range to {
		if _, err := tx.exec(ctx, qLearn, ns, strings.ToLower(r)); err != nil {
			return err
		}
	}
	return nil
}

// replayOf is the entry an idempotency key recorded: a message, or a
// delayed one not yet visible (a negative seq), which answers its id.
func replayOf(ctx context.Context, tx txq, ns string, seq int64) (Entry, error) {
	if seq >= 0 {
		return entry(ctx, tx, ns, seq)
	}
	e := Entry{Namespace: ns}
	err := tx.queryRow(ctx, `SELECT uuid, size FROM delayed WHERE namespace = ? AND hold = ?`, ns, seq).Scan(&e.UUID, &e.Size)
	return e, notFound(err)
}

// NextDelayed returns when the next delayed message becomes visible; zero
// when none waits.
func (l *DB) NextDelayed(ctx context.Context) (time.Time, error) {
	var at sql.NullInt64
	if err := l.read.QueryRowContext(ctx, `SELECT MIN(visible_at) FROM delayed`).Scan(&at); err != nil || !at.Valid {
		return time.Time{}, err
	}
	return fromMillis(at.Int64), nil
}

// maxDeliver bounds the delayed messages one DeliverDue shows.
const maxDeliver = 256

type delayedRow struct {
	ns, uuid, from, to, ref string
	hold                    int64
	size                    int
}

// DeliverDue shows every delayed message whose time has come by now, each
// with its namespace's next id, and returns their namespaces. A message
// another plane showed first is skipped.
func (l *DB) DeliverDue(ctx context.Context, now time.Time) ([]string, error) {
	rows, err := l.read.QueryContext(ctx, `SELECT namespace, hold, uuid, envelope_from, recipients, size, ref FROM delayed WHERE visible_at <= ? ORDER BY visible_at LIMIT ?`,
		now.UnixMilli(), maxDeliver)
	due, err := scanAll(rows, err, func(r *sql.Rows, d *delayedRow) error {
		return r.Scan(&d.ns, &d.hold, &d.uuid, &d.from, &d.to, &d.size, &d.ref)
	})
	if err != nil || len(due) == 0 {
		return nil, err
	}
	// Namespaces are locked in one order on every plane (see commitBatch).
	slices.SortStableFunc(due, func(a, b delayedRow) int { return strings.Compare(a.ns, b.ns) })
	var shown []string
	err = l.tx(ctx, func(tx *sql.Tx) error {
		shown = shown[:0]
		for _, d := range due {
			ok, err := l.deliver(ctx, txq{tx: tx, s: l.ws}, d, now)
			if err != nil {
				return err
			}
			if ok && !slices.Contains(shown, d.ns) {
				shown = append(shown, d.ns)
				if err := l.announce(ctx, tx, changeMail, d.ns); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return shown, err
}

// deliver moves one delayed message into its namespace's messages.
func (l *DB) deliver(ctx context.Context, tx txq, d delayedRow, now time.Time) (bool, error) {
	var seq int64
	err := tx.queryRow(ctx, l.d.text(`SELECT next_seq FROM namespaces WHERE name = ?`+forUpdate), d.ns).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // closed: CloseTrial deleted it too
	}
	if err != nil {
		return false, err
	}
	res, err := tx.exec(ctx, `DELETE FROM delayed WHERE namespace = ? AND hold = ?`, d.ns, d.hold)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	var to []string
	if err := json.Unmarshal([]byte(d.to), &to); err != nil {
		return false, err
	}
	for _, q := range []struct {
		query string
		args  []any
	}{
		{qInsertMessage, []any{d.ns, seq, d.uuid, d.from, d.to, d.size, d.ref, now.UnixMilli(), faults.Delay, nil, nil}},
		{`UPDATE namespaces SET next_seq = next_seq + 1 WHERE name = ?`, []any{d.ns}},
		{`UPDATE idempotency SET seq = ? WHERE namespace = ? AND seq = ?`, []any{seq, d.ns, d.hold}},
	} {
		if _, err := tx.exec(ctx, q.query, q.args...); err != nil {
			return false, err
		}
	}
	if err := learn(ctx, tx, d.ns, to); err != nil {
		return false, err
	}
	ev := &evidence.Event{Namespace: d.ns, Door: evidence.DoorPlane, Action: evidence.ActionDeliver, Outcome: evidence.Accepted,
		MessageIDs: []int64{seq}, EmailID: d.uuid, Size: d.size}
	return true, l.appendEvent(ctx, tx, ev, true)
}
