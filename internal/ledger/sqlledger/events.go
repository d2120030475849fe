package sqlledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
)

// A namespace's trail (package evidence) lives beside its mail: the events
// table holds its canonical lines; the namespace's row holds the chain's
// head (its seq and hash) and the events left out since the budget filled,
// so that an accepted send's event touches no page besides the events
// table's that the send did not already write; the trails table lists the
// trails of closed trials, kept after their namespaces are gone.
//
// An accepted send's event is written by Accept in the send's own
// savepoint, so the message and its event commit together or not at all;
// lifecycle events are written in the transaction of the change they
// record. Every other event goes through the group committer too
// (AppendEvent), batched with sends.
//
// Budget: every event counts against a trail's budget. Once the trail
// holds Budget−1 events, the next event that is not essential (a refusal,
// a failure, a read) takes the last slot as a budget event saying the
// trail is full; from then on such events are only counted by
// "action/outcome" in the trail's row, and the counts are written as one
// summary event before the next essential event (an accepted send, a
// lifecycle step) and when the trail is exported. Essential events are
// never left out: the message quota and the trial's life bound them. The
// agent's opens and clicks have a budget of their own (budgetFor).
//
// Retention: closing a trial deletes its mail but keeps its trail, marked
// closed, for a retention period (DeleteTrails), so that it can still be
// exported.

// DefaultEventBudget is a trail's budget when the plane sets none.
const DefaultEventBudget = 10000

// SetEventBudget sets every trail's budget (0: unlimited). Call it before
// the ledger is used.
func (l *DB) SetEventBudget(n int64) { l.budget = n }

// AppendEvent appends e (its seq, time, prev and hash are set here) to
// ns's trail, unless the budget leaves it out (then it is counted), and
// returns once that is committed: durable, except for an event that
// unsynced names, which is only written (see there).
func (l *DB) AppendEvent(ctx context.Context, ns string, e evidence.Event) error {
	e.Namespace = ns
	p := &pending{ctx: ctx, event: &e, done: make(chan struct{})}
	offers := l.offers
	if l.d == sqliteDialect && unsynced(&e) {
		offers = l.unsynced.offers
	}
	select {
	case offers <- p:
	case <-ctx.Done():
		return ctx.Err()
	case <-l.closed:
		return errClosed
	}
	<-p.done
	return p.err
}

// trail is a trail's head as its namespace's row holds it. Every event
// written counts against the budget, so the seq is also its use.
type trail struct {
	nextSeq    int64
	lastHash   string
	recorded   int64
	suppressed map[string]int64
	closed     bool // the namespace is gone: its trial closed
}

func (l *DB) loadTrail(ctx context.Context, tx txq, ns string) (trail, error) {
	var seq int64
	var hash, supp sql.NullString
	err := tx.queryRow(ctx, qLockTrail, ns).Scan(&seq, &hash, &supp)
	if errors.Is(err, sql.ErrNoRows) {
		return trail{closed: true}, nil
	}
	if err != nil {
		return trail{}, err
	}
	return headOf(seq, hash, supp)
}

// headOf is a trail's head from its namespace's columns. A namespace made
// before trails existed starts its trail now.
func headOf(seq int64, hash, supp sql.NullString) (trail, error) {
	t := trail{recorded: seq, nextSeq: seq + 1, lastHash: cmp.Or(hash.String, evidence.Genesis)}
	if supp.Valid && supp.String != "" {
		if err := json.Unmarshal([]byte(supp.String), &t.suppressed); err != nil {
			return t, err
		}
	}
	return t, nil
}

// appendEvent writes e into tx. essential events (accepted sends,
// lifecycle) are never left out; any other is, once the budget is used.
func (l *DB) appendEvent(ctx context.Context, tx txq, e *evidence.Event, essential bool) error {
	t, err := l.loadTrail(ctx, tx, e.Namespace)
	if err != nil {
		return err
	}
	if t.closed {
		return nil // a call that raced the close: the trail ended with it
	}
	first, err := markOpened(ctx, tx, e)
	if err != nil {
		return err
	}
	// The agent's first open of a message is never left out: no decoy
	// the agent opens again and again, and no flood of the candidate's
	// sends, can hide that it read that message. Their number is bounded
	// by the trial's mail.
	now := time.Now()
	if essential {
		if err := l.flushSummary(ctx, tx, &t, e.Namespace, now); err != nil {
			return err
		}
	} else if limit := l.budgetFor(e); !first && limit > 0 && t.recorded >= limit-1 {
		if t.recorded == limit-1 {
			full := &evidence.Event{Namespace: e.Namespace, Door: evidence.DoorPlane, Action: evidence.ActionBudget,
				Outcome: evidence.Refused, Code: evidence.CodeBudgetFull}
			if err := l.writeEvent(ctx, tx, &t, full, now); err != nil {
				return err
			}
		}
		if t.suppressed == nil {
			t.suppressed = map[string]int64{}
		}
		t.suppressed[e.Action+"/"+e.Outcome] += max(e.Count, 1)
		return l.saveTrail(ctx, tx, &t, e.Namespace)
	}
	if err := l.writeEvent(ctx, tx, &t, e, now); err != nil {
		return err
	}
	return l.saveTrail(ctx, tx, &t, e.Namespace)
}

// budgetFor is the number of events a trail may hold when e comes
// (0: unlimited). An agent's opens and clicks have a budget of their own,
// as large as every other event's: they are written until the trail holds
// twice the budget, so no refusal (the agent's own refused pings, or a
// stranger's) and no read can push what the agent did out of the trail.
func (l *DB) budgetFor(e *evidence.Event) int64 {
	if l.budget > 0 && agentAct(e) {
		return 2 * l.budget
	}
	return l.budget
}

// agentAct reports whether e is the agent opening a message or following
// one of its links.
func agentAct(e *evidence.Event) bool {
	return e.Outcome == evidence.Accepted && (e.Action == evidence.ActionClick || agentOpen(e))
}

// agentOpen reports whether e is the agent opening a message (door inbox,
// inbox-mcp or imap), accepted.
func agentOpen(e *evidence.Event) bool {
	return e.Action == evidence.ActionOpen && e.Outcome == evidence.Accepted && e.Code == "" &&
		(e.Door == evidence.DoorInbox || e.Door == evidence.DoorInboxMCP || e.Door == evidence.DoorIMAP)
}

// markOpened records the messages an agent's open read, even once the
// budget leaves the event out: its inbox shows the rest as unread
// (Opened). It reports whether the open read a message for the first time.
func markOpened(ctx context.Context, tx txq, e *evidence.Event) (first bool, err error) {
	if !agentOpen(e) {
		return false, nil
	}
	for _, seq := range e.MessageIDs {
		res, err := tx.exec(ctx, qOpen, e.Namespace, seq)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err == nil && n > 0 {
			first = true
		}
	}
	return first, nil
}

// Opened returns the seqs of ns's messages the agent has opened.
func (l *DB) Opened(ctx context.Context, ns string) (map[int64]bool, error) {
	rows, err := l.rs.query(ctx, qOpened, ns)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		out[seq] = true
	}
	return out, rows.Err()
}

// SetFlag sets (on) or clears flag on messages seqs of ns: the agent's
// flags over IMAP (\Seen, \Flagged), kept until the trial closes.
func (l *DB) SetFlag(ctx context.Context, ns string, seqs []int64, flag string, on bool) error {
	q := `INSERT INTO flags (namespace, seq, flag) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	if !on {
		q = `DELETE FROM flags WHERE namespace = ? AND seq = ? AND flag = ?`
	}
	return l.tx(ctx, func(tx *sql.Tx) error {
		for _, seq := range seqs {
			if _, err := tx.ExecContext(ctx, q, ns, seq, flag); err != nil {
				return err
			}
		}
		return nil
	})
}

// Flags returns the flags set on ns's messages, by seq.
func (l *DB) Flags(ctx context.Context, ns string) (map[int64][]string, error) {
	rows, err := l.rs.query(ctx, qFlags, ns)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var seq int64
		var flag string
		if err := rows.Scan(&seq, &flag); err != nil {
			return nil, err
		}
		out[seq] = append(out[seq], flag)
	}
	return out, rows.Err()
}

// flushSummary writes the counts of left-out events as one summary event.
func (l *DB) flushSummary(ctx context.Context, tx txq, t *trail, ns string, now time.Time) error {
	if len(t.suppressed) == 0 {
		return nil
	}
	s := &evidence.Event{Namespace: ns, Door: evidence.DoorPlane, Action: evidence.ActionSummary,
		Outcome: evidence.Refused, Code: evidence.CodeBudgetFull, Counts: t.suppressed}
	for _, n := range t.suppressed {
		s.Count += n
	}
	t.suppressed = nil
	return l.writeEvent(ctx, tx, t, s, now)
}

func (l *DB) writeEvent(ctx context.Context, tx txq, t *trail, e *evidence.Event, now time.Time) error {
	e.Time = evidence.Stamp(now)
	line, err := evidence.Chain(e, t.nextSeq-1, t.lastHash)
	if err != nil {
		return err
	}
	if _, err := tx.exec(ctx, qInsertEvent, e.Namespace, e.Seq, string(line)); err != nil {
		return err
	}
	t.nextSeq, t.lastHash, t.recorded = e.Seq+1, e.Hash, t.recorded+1
	return nil
}

func (l *DB) saveTrail(ctx context.Context, tx txq, t *trail, ns string) error {
	var supp any
	if len(t.suppressed) > 0 {
		b, err := json.Marshal(t.suppressed)
		if err != nil {
			return err
		}
		supp = string(b)
	}
	_, err := tx.exec(ctx, qUpdateTrail, t.recorded, t.lastHash, supp, ns)
	return err
}

// lifecycle appends a lifecycle event to ns's trail inside tx and saves it.
func (l *DB) lifecycle(ctx context.Context, tx *sql.Tx, ns, action, detail string) error {
	e := &evidence.Event{Namespace: ns, Door: evidence.DoorPlane, Action: action, Outcome: evidence.Accepted, Detail: detail}
	return l.appendEvent(ctx, txq{tx: tx, s: l.ws}, e, true)
}

// Events returns up to limit canonical lines of ns's trail with a seq
// greater than after, in order, whether its trial is open or closed.
func (l *DB) Events(ctx context.Context, ns string, after int64, limit int) ([]string, error) {
	rows, err := l.rs.query(ctx, qEvents, ns, after, limit)
	return scanAll(rows, err, func(r *sql.Rows, line *string) error { return r.Scan(line) })
}

// TrailOf reports whether ns has a trail and whether its trial is closed.
func (l *DB) TrailOf(ctx context.Context, ns string) (exists, closed bool, err error) {
	var open bool
	err = l.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM namespaces WHERE name = ?), EXISTS (SELECT 1 FROM trails WHERE namespace = ?)`,
		ns, ns).Scan(&open, &closed)
	return open || closed, closed && !open, err
}

// FlushTrail writes the counts of events the budget left out of ns's open
// trail as a summary event, so that an export ends with them.
func (l *DB) FlushTrail(ctx context.Context, ns string) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		q := txq{tx: tx, s: l.ws}
		t, err := l.loadTrail(ctx, q, ns)
		if err != nil || t.closed || len(t.suppressed) == 0 {
			return err
		}
		if err := l.flushSummary(ctx, q, &t, ns, time.Now()); err != nil {
			return err
		}
		return l.saveTrail(ctx, q, &t, ns)
	})
}

// closeTrail ends ns's trail inside tx with the close (or expire) event and
// marks it closed, keeping it for the retention period.
func (l *DB) closeTrail(ctx context.Context, tx *sql.Tx, ns, action string) error {
	if err := l.lifecycle(ctx, tx, ns, action, ""); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO trails (namespace, closed_at) VALUES (?, ?) ON CONFLICT (namespace) DO UPDATE SET closed_at = excluded.closed_at`, ns, now())
	return err
}

// DeleteTrails deletes up to limit trails of trials closed before cutoff
// and returns how many it deleted.
func (l *DB) DeleteTrails(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	n := 0
	err := l.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT namespace FROM trails WHERE closed_at < ? LIMIT ?`, cutoff.UnixMilli(), limit)
		if err != nil {
			return err
		}
		var nss []string
		for rows.Next() {
			var ns string
			if err := rows.Scan(&ns); err != nil {
				rows.Close()
				return err
			}
			nss = append(nss, ns)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, ns := range nss {
			for _, q := range []string{`DELETE FROM events WHERE namespace = ?`, `DELETE FROM trails WHERE namespace = ?`} {
				if _, err := tx.ExecContext(ctx, q, ns); err != nil {
					return err
				}
			}
		}
		n = len(nss)
		return nil
	})
	return n, err
}

// unsynced reports whether e may commit without waiting for its fsync:
// the evaluator's calls at the gateway (its reads, found or not, and their
// refusals). Its trail event is still committed before the call is
// answered, so an events read after the answer shows it, and it survives
// the plane's kill (SIGKILL): SQLite has written it into the WAL. It is
// flushed to the disk with the next durable commit (a send, an event of
// any other door, a lifecycle step; the WAL is one log, so a later fsync
// covers every earlier frame), or by the next checkpoint; a crash of the
// machine before then loses it, and the trail ends before it, its chain
// unbroken. The evaluator is the party that runs the benchmark and reads
// its own answers; what the candidate sent and the agent read is
// recorded durably, as before. Without the fsync a read of 32 messages
// through the gateway answers in half the time at the tail (p99), where
// the fsync was most of it (issue 37).
//
// PostgreSQL commits every event through the group committer, durably.
func unsynced(e *evidence.Event) bool { return e.Door == evidence.DoorGateway }

// unsyncedCommitter commits unsynced events, in batches as the group
// committer does, each batch in a transaction written to the WAL, not
// flushed.
type unsyncedCommitter struct {
	offers  chan *pending
	stopped chan struct{}
}

func newUnsyncedCommitter() unsyncedCommitter {
	return unsyncedCommitter{offers: make(chan *pending), stopped: make(chan struct{})}
}

// commitUnsynced runs until Close, committing unsynced events in batches.
func (l *DB) commitUnsynced() {
	defer close(l.unsynced.stopped)
	for {
		batch, ok := l.nextBatch(l.unsynced.offers)
		if !ok {
			return
		}
		err := l.unsyncedBatch(batch)
		if err == nil && l.wal != nil {
			l.wal.tell() // the log grew without a flush (checkpoint.go)
		}
		for _, p := range batch {
			if err != nil && p.err == nil {
				p.err = err
			}
			close(p.done)
		}
	}
}

// unsyncedBatch appends batch's events in one transaction, which the
// write connection commits without an fsync (walsync.go), and does not
// flush.
func (l *DB) unsyncedBatch(batch []*pending) error {
	ctx := context.Background() // the batch outlives any one caller's deadline
	tx, err := l.beginWrite(ctx)
	if err != nil {
		return err
	}
	q := txq{tx: tx, s: l.ws}
	for _, p := range batch {
		if p.err = p.ctx.Err(); p.err != nil {
			continue
		}
		if _, err := q.exec(ctx, qSavepoint); err != nil {
			tx.Rollback()
			return err
		}
		p.err = l.appendEvent(p.ctx, q, p.event, false)
		undo := []string{qRelease}
		if p.err != nil {
			undo = []string{qRollbackTo, qRelease}
		}
		for _, u := range undo {
			if _, err := q.exec(ctx, u); err != nil {
				tx.Rollback()
				return err
			}
		}
	}
	return tx.Commit()
}
