package sqlledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// Accept decides on o and, if it is accepted, records it durably before
// returning. Nothing of o is written unless all of it is.
//
// Sends are group-committed: the committer takes every offer waiting at the
// moment into one transaction, each under its own savepoint (so one refusal
// or failure undoes only its own writes), and one fsync makes the whole
// batch durable. Concurrent senders thus share the cost of the disk flush,
// while the decisions stay serialized exactly as if each were alone.
func (l *DB) Accept(ctx context.Context, o *Offer) (Entry, bool, error) {
	p := &pending{ctx: ctx, offer: o, done: make(chan struct{})}
	select {
	case l.offers <- p:
	case <-ctx.Done():
		return Entry{}, false, ctx.Err()
	case <-l.closed:
		return Entry{}, false, errClosed
	}
	<-p.done
	return p.entry, p.replayed, p.err
}

// maxBatch bounds one group commit.
const maxBatch = 64

type pending struct {
	ctx      context.Context
	offer    *Offer
	event    *evidence.Event // instead of an offer: an event to append (AppendEvent)
	entry    Entry
	replayed bool
	err      error
	seen     *hint // what decide saw, with the offer applied if accepted
	done     chan struct{}
}

var errClosed = errors.New("ledger: closed")

// commit runs until Close, committing offers in batches. On SQLite a
// committed batch goes to syncBatches, which answers it once the log is on
// the disk (walsync.go). Meanwhile this goroutine gathers the offers that
// arrive into the next batch and commits it once that flush is done, not
// before: committed earlier, they could not be answered before the next
// flush anyway, and each commit writes its pages (its trees' last leaves,
// the namespace's row, the database's header) and runs its statements
// whatever its size. So one commit a flush, of all that came during it.
func (l *DB) commit() {
	defer close(l.stopped)
	var toSync chan []*pending
	var unsynced atomic.Int64         // batches committed and not yet answered
	flushed := make(chan struct{}, 1) // a flush answered the last of them
	if l.wal != nil {
		toSync = make(chan []*pending, syncQueue)
		synced := make(chan struct{})
		go l.syncBatches(toSync, synced, &unsynced, flushed)
		defer func() { <-synced }()
		defer close(toSync)
	}
	for {
		batch, ok := l.nextBatch(l.offers)
		if !ok {
			return
		}
		for unsynced.Load() > 0 && len(batch) < maxBatch {
			select {
			case p := <-l.offers:
				batch = append(batch, p)
			case <-flushed:
			}
		}
		err := l.commitBatch(batch)
		if err == nil && toSync != nil {
			unsynced.Add(1)
			toSync <- batch
			continue
		}
		answer(batch, err)
	}
}

// syncQueue bounds the committed batches waiting for their fdatasync: the
// committer waits for the disk beyond that.
const syncQueue = 8

// syncBatches answers the batches from in, each after an fdatasync of the
// log that began after its commit; one covers all that are waiting. Once
// it has answered every batch committed (unsynced), it tells flushed.
func (l *DB) syncBatches(in <-chan []*pending, done chan<- struct{}, unsynced *atomic.Int64, flushed chan<- struct{}) {
	defer close(done)
	for batch := range in {
		batches := [][]*pending{batch}
		for len(in) > 0 {
			batches = append(batches, <-in)
		}
		err := l.wal.sync()
		for _, b := range batches {
			answer(b, err)
		}
		if unsynced.Add(-int64(len(batches))) == 0 {
			select {
			case flushed <- struct{}{}:
			default: // a signal is waiting already
			}
		}
	}
}

// answer answers batch's senders; err, if not nil, is the batch's failure,
// which replaces every answer not already an error.
func answer(batch []*pending, err error) {
	for _, p := range batch {
		if err != nil && p.err == nil {
			p.entry, p.replayed, p.err = Entry{}, false, err
		}
		close(p.done)
	}
}

// nextBatch waits for an offer on offers, then takes those already
// waiting behind it, up to maxBatch; ok is false once the ledger closes.
// Both committers (this one and the unsynced one, events.go) batch so.
func (l *DB) nextBatch(offers <-chan *pending) (batch []*pending, ok bool) {
	select {
	case p := <-offers:
		batch = append(batch, p)
	case <-l.closed:
		return nil, false
	}
	for len(batch) < maxBatch {
		select {
		case p := <-offers:
			batch = append(batch, p)
		default:
			return batch, true
		}
	}
	return batch, true
}

// commitBatch decides on batch's offers and events and commits them, each
// pending's own outcome in its err; it answers none of them. Its error is
// the batch's, for all of them: nothing of it was committed.
func (l *DB) commitBatch(batch []*pending) error {
	ctx := context.Background() // the batch outlives any one caller's deadline
	gen := l.PolicyGen()
	// Namespaces are locked in one order on every plane, so that two
	// batches never wait for each other (the sort keeps each namespace's
	// offers in their order).
	slices.SortStableFunc(batch, func(a, b *pending) int { return strings.Compare(a.namespace(), b.namespace()) })
	tx, err := l.beginWrite(ctx)
	if err != nil {
		return err
	}
	d := newDeferred()
	q, qd := txq{tx: tx, s: l.ws}, txq{tx: tx, s: l.ws, d: d}
	fail := func(err error) error {
		tx.Rollback()
		return err
	}
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			continue
		}
		if p.offer != nil && plain(p.offer) {
			// A plain send writes nothing before its decision, and what
			// it writes after it the batch holds (deferred.go): once
			// decided, only the storage can fail it, and that fails the
			// batch. So it needs no savepoint, and runs to its end
			// whatever its caller does meanwhile (ctx, the batch's).
			m := d.mark()
			p.entry, p.replayed, p.err = l.accept(ctx, qd, p.offer, &p.seen)
			if p.err != nil {
				if !refusal(p.err) {
					return fail(p.err)
				}
				d.drop(m)
			}
			continue
		}
		// Faults and idempotency keys read back messages this batch may
		// hold, and every event reads its namespace's trail head: write
		// what the batch holds first.
		if err := d.flush(ctx, q); err != nil {
			return fail(err)
		}
		tq := qd
		if p.offer != nil {
			tq = q
		}
		if _, err := q.exec(ctx, qSavepoint); err != nil {
			return fail(err)
		}
		m := d.mark()
		if p.offer != nil {
			p.entry, p.replayed, p.err = l.accept(p.ctx, tq, p.offer, &p.seen)
		} else {
			p.err = l.appendEvent(p.ctx, tq, p.event, false)
		}
		undo := []string{qRelease}
		if p.err != nil {
			undo = []string{qRollbackTo, qRelease}
			d.drop(m)
		}
		for _, u := range undo {
			if _, err := q.exec(ctx, u); err != nil {
				return fail(err)
			}
		}
	}
	if err := d.flush(ctx, q); err != nil {
		return fail(err)
	}
	last := ""
	for _, p := range batch {
		if p.err == nil && p.namespace() != last {
			last = p.namespace()
			if err := l.announce(ctx, tx, changeMail, last); err != nil {
				return fail(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, p := range batch {
		if p.seen != nil {
			p.seen.gen = gen
			l.hints.put(p.offer.Namespace, *p.seen)
		}
	}
	return nil
}

// plain reports whether o is a send without a fault schedule or an
// idempotency key, and not to a bounce simulator: one whose decision
// reads only its namespace's row, and whose event the batch may hold. A
// bounce writes its event alone (bounce), which reads the trail's head:
// the batch's held rows must be written before it.
func plain(o *Offer) bool { return o.Faults == nil && o.IdempotencyKey == "" && !o.Bounce }

// refusal reports whether err is accept's refusal of an offer, which it
// answers before writing anything.
func refusal(err error) bool {
	return errors.Is(err, ErrNotActive) || errors.Is(err, ErrCapacity) || errors.Is(err, ErrNotFound)
}

func (p *pending) namespace() string {
	if p.offer != nil {
		return p.offer.Namespace
	}
	return p.event.Namespace
}

// acceptedEvent records the event of an accepted entry.
func (l *DB) acceptedEvent(ctx context.Context, tx txq, e *evidence.Event, en Entry) error {
	e.Namespace, e.MessageIDs, e.EmailID, e.Size = en.Namespace, []int64{en.Seq}, en.UUID, en.Size
	return l.appendEvent(ctx, tx, e, true)
}

// Precheck answers, without writing, what Accept would answer now for o
// if it were not accepted: a replay of its idempotency key (replayed), or
// a refusal (ErrNotActive, ErrCapacity, ErrIdempotencyConflict). A nil
// error and replayed false mean Accept would store it, unless another
// send commits first.
//
// Without an idempotency key it answers from the namespace's hint where
// there is one (hints.go).
func (l *DB) Precheck(ctx context.Context, o *Offer) (e Entry, replayed bool, err error) {
	gen := l.PolicyGen()
	if o.IdempotencyKey == "" {
		if h, ok := l.hints.get(gen, o.Namespace); ok {
			return Entry{}, false, h.refuses(o)
		}
	}
	tx, err := l.readTx(ctx)
	if err != nil {
		return Entry{}, false, err
	}
	defer tx.Rollback()
	var seen *hint
	_, e, replayed, err = decide(ctx, txq{tx: tx, s: l.rs}, o, nil, &seen)
	if seen != nil {
		seen.gen = gen
		l.hints.put(o.Namespace, *seen)
	}
	if replayed || errors.Is(err, ErrIdempotencyConflict) {
		// An answer from the first send's rows, which readers see from
		// their commit, a flush before that send is answered (walsync.go):
		// answer only once they are durable.
		if err := l.durable(); err != nil {
			return Entry{}, false, err
		}
	}
	return e, replayed, err
}

// decide applies o's checks inside tx, in order: the namespace takes mail;
// a repeated idempotency key returns the first entry (replayed) even when
// the quota is exhausted, or ErrIdempotencyConflict for another payload;
// the quota has room. It returns the seq o would get.
//
// head, if not nil, is set to the namespace's trail head, read in the same
// query, and the namespace's row is locked for the rest of tx; seen to the
// namespace's state and counters.
func decide(ctx context.Context, tx txq, o *Offer, head *trail, seen **hint) (seq int64, e Entry, replayed bool, err error) {
	var state string
	var count, bytes, trailSeq int64
	var hash, supp sql.NullString
	q := qNamespaceCounters
	if head != nil {
		q = qLockNamespace // deciding to write: no other plane decides on ns until this commits
	}
	if r := tx.d.row(o.Namespace); r != nil && head != nil {
		// This batch holds the row, with its earlier sends applied.
		state, seq, count, bytes, *head = r.state, r.seq, r.count, r.bytes, r.head
	} else {
		err = tx.queryRow(ctx, q, o.Namespace).Scan(&state, &seq, &count, &bytes, &trailSeq, &hash, &supp)
		if err != nil {
			return 0, Entry{}, false, notFound(err)
		}
		if head != nil {
			if *head, err = headOf(trailSeq, hash, supp); err != nil {
				return 0, Entry{}, false, err
			}
			tx.d.hold(o.Namespace, state, seq, count, bytes, *head)
		}
	}
	*seen = &hint{active: state == StateActive, count: count, bytes: bytes}
	if state != StateActive {
		return 0, Entry{}, false, ErrNotActive
	}
	if o.IdempotencyKey != "" {
		var fp string
		var first int64
		err := tx.queryRow(ctx, qIdempotency, o.Namespace, o.IdempotencyKey).Scan(&fp, &first)
		switch {
		case err == nil:
			if fp != o.Fingerprint {
				return 0, Entry{}, false, ErrIdempotencyConflict
			}
			e, err = replayOf(ctx, tx, o.Namespace, first)
			return 0, e, err == nil, err
		case !errors.Is(err, sql.ErrNoRows):
			return 0, Entry{}, false, err
		}
	}
	if (o.MaxMessages > 0 && count >= o.MaxMessages) || (o.MaxBytes > 0 && bytes+int64(o.Size) > o.MaxBytes) {
		return 0, Entry{}, false, ErrCapacity
	}
	return seq, Entry{}, false, nil
}

// accept decides on o inside tx and, if it is to be stored, stores the
// body, indexes the entry, and updates the counters and learned
// recipients.
//
// seen is set to what decide saw of the namespace, with o counted in if it
// is stored.
func (l *DB) accept(ctx context.Context, tx txq, o *Offer, seen **hint) (Entry, bool, error) {
	var head trail
	next, e, replayed, err := decide(ctx, tx, o, &head, seen)
	if err != nil || replayed {
		return e, replayed, err
	}
	if o.Faults != nil {
		if e, done, err := l.injectFault(ctx, tx, o, next, *seen); done || err != nil {
			return e, false, err
		}
	}
	if o.Bounce {
		return l.bounce(ctx, tx, o)
	}
	ref, body, idx, err := inline(ctx, tx, o, next)
	if err != nil {
		return Entry{}, false, err
	}
	to, _ := json.Marshal(o.To)
	e = Entry{Namespace: o.Namespace, Seq: next, UUID: o.UUID, From: o.From, To: o.To, Size: o.Size, Ref: ref, Received: time.Now().UTC()}
	if _, err := tx.exec(ctx, qInsertMessage,
		e.Namespace, e.Seq, e.UUID, e.From, string(to), e.Size, e.Ref, e.Received.UnixMilli(), nil, body, idx); err != nil {
		return Entry{}, false, err
	}
	if o.Event != nil && len(head.suppressed) == 0 {
		// The event's line, and the trail's head with the counters: one
		// more row, no more statements on the namespace.
		ev := o.Event
		ev.Namespace, ev.MessageIDs, ev.EmailID, ev.Size = e.Namespace, []int64{e.Seq}, e.UUID, e.Size
		if err := l.writeEvent(ctx, tx, &head, ev, e.Received); err != nil {
			return Entry{}, false, err
		}
		if err := countOffer(ctx, tx, o, &head); err != nil {
			return Entry{}, false, err
		}
	} else {
		if err := countOffer(ctx, tx, o, nil); err != nil {
			return Entry{}, false, err
		}
		if o.Event != nil {
			// Events the budget left out are summed up first.
			if err := l.acceptedEvent(ctx, tx, o.Event, e); err != nil {
				return Entry{}, false, err
			}
		}
	}
	for _, r := range o.To {
		if _, err := tx.exec(ctx, qLearn, o.Namespace, strings.ToLower(r)); err != nil {
			return Entry{}, false, err
		}
	}
	if o.IdempotencyKey != "" {
		if _, err := tx.exec(ctx, qInsertIdempotency, o.Namespace, o.IdempotencyKey, o.Fingerprint, e.Seq); err != nil {
			return Entry{}, false, err
		}
	}
	if !o.Exempt {
		(*seen).count++
		(*seen).bytes += int64(o.Size)
	}
	return e, false, nil
}

// countOffer takes o's seq and counts o toward its namespace's quota unless it
// is exempt; with head, it also moves the trail's head there.
func countOffer(ctx context.Context, tx txq, o *Offer, head *trail) error {
	if r := tx.d.row(o.Namespace); r != nil {
		r.count1(o, head)
		return nil
	}
	var err error
	switch {
	case o.Exempt && head != nil:
		_, err = tx.exec(ctx, qSeqTrail, head.recorded, head.lastHash, o.Namespace)
	case o.Exempt:
		_, err = tx.exec(ctx, qSeq, o.Namespace)
	case head != nil:
		_, err = tx.exec(ctx, qCountTrail, o.Size, head.recorded, head.lastHash, o.Namespace)
	default:
		_, err = tx.exec(ctx, qCount, o.Size, o.Namespace)
	}
	return err
}

func entry(ctx context.Context, q interface {
	query(context.Context, string, ...any) (*sql.Rows, error)
}, ns string, seq int64) (Entry, error) {
	rows, err := q.query(ctx, qEntry, ns, seq)
	if err != nil {
		return Entry{}, err
	}
	es, err := scanEntries(rows)
	if err != nil {
		return Entry{}, err
	}
	if len(es) == 0 {
		return Entry{}, ErrNotFound
	}
	return es[0], nil
}

// Entry returns message seq of ns.
func (l *DB) Entry(ctx context.Context, ns string, seq int64) (Entry, error) {
	return entry(ctx, l.rs, ns, seq)
}

// Entries returns the messages of ns with a seq greater than after, oldest
// first.
func (l *DB) Entries(ctx context.Context, ns string, after int64) ([]Entry, error) {
	rows, err := l.rs.query(ctx, qEntries, ns, after)
	if err != nil {
		return nil, err
	}
	return scanEntries(rows)
}

const entrySelect = `SELECT namespace, seq, uuid, envelope_from, recipients, size, ref, received_at, fault FROM messages`

func scanEntries(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var to string
		var received int64
		var fault sql.NullString
		if err := rows.Scan(&e.Namespace, &e.Seq, &e.UUID, &e.From, &to, &e.Size, &e.Ref, &received, &fault); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(to), &e.To); err != nil {
			return nil, err
		}
		e.Received = fromMillis(received)
		e.Fault = fault.String
		out = append(out, e)
	}
	return out, rows.Err()
}

// Learned reports whether anything was ever delivered to ns, and whether
// addr (compared without case) was among the recipients.
func (l *DB) Learned(ctx context.Context, ns, addr string) (some, known bool, err error) {
	err = l.rs.queryRow(ctx, qLearned,
		ns, ns, strings.ToLower(addr)).Scan(&some, &known)
	return some, known, err
}
