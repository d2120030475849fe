package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// The rows a batch adds to tables that nothing in the batch reads back (a
// message's index entry, body, parsed index and event, and the recipients
// it learns) are written once per table per batch, as one multi-row
// INSERT, instead of one INSERT per send: in make profile each statement
// cost the committer about as much as the row it wrote. The same holds for
// the namespace's row its plain sends decide on (read once, written once).
// All of it is written before the batch commits, so a send is still
// durable, with its event, before it is answered; if writing fails, the
// whole batch fails and nothing of it is kept. Whatever reads these rows
// by SQL within the batch (commitBatch) has them written first.

// The counters and trail head of a namespace the batch holds, as its
// sends left them.
const (
	qSetCounters      = `UPDATE namespaces SET next_seq = ?, message_count = ?, byte_count = ? WHERE name = ?`
	qSetCountersTrail = `UPDATE namespaces SET next_seq = ?, message_count = ?, byte_count = ?, trail_seq = ?, trail_hash = ? WHERE name = ?`
)

// deferrable are the inserts a batch defers, in the order they are written.
var deferrable = []string{qInsertMessage, qPutBody, qPutIndex, qInsertEvent, qLearn}

// chunks are the row counts prepared for each deferrable insert; a batch's
// rows of a table go out in the largest chunks that fit. Every count up to
// 8 has its own: make profile's batches average 3 to 4 sends (its fsyncs
// per message), whose rows thus take one statement per table where a 3,
// 5, 6 or 7 took two or three; larger batches take at most
// log2(n)+1 (events may be more than maxBatch: an accepted send may also
// write the summary of the events its trail's budget left out).
var chunks = []int{64, 32, 16, 8, 7, 6, 5, 4, 3, 2, 1}

// multiRow is query, an INSERT … VALUES (…) with one row, with n rows.
func multiRow(query string, n int) string {
	i := strings.Index(query, "VALUES (")
	j := strings.Index(query[i:], ")")
	row := query[i+len("VALUES ") : i+j+1]
	return query[:i+len("VALUES ")] + strings.Repeat(row+", ", n-1) + row + query[i+j+1:]
}

// multiRowQueries are the prepared multi-row forms and the held rows'
// updates (writeQueries).
func multiRowQueries() []string {
	out := []string{qSetCounters, qSetCountersTrail}
	for _, q := range deferrable {
		for _, n := range chunks {
			if n > 1 {
				out = append(out, multiRow(q, n))
			}
		}
	}
	return out
}

// deferred holds a batch's deferred rows, per insert, and the namespace
// rows its plain sends decided on. A namespace's row is read once per
// batch (locking it, on PostgreSQL, for the rest of the transaction);
// the sends after the first decide on the row as the batch left it, and
// their counters and trail head are written once, when the batch flushes.
type deferred struct {
	rows map[string][][]any
	ns   map[string]*nsRow
	// learned are the recipients the batch learns, each once however many
	// of its sends name it.
	learned map[[2]any]bool
}

func newDeferred() *deferred {
	return &deferred{rows: map[string][][]any{}, ns: map[string]*nsRow{}, learned: map[[2]any]bool{}}
}

// nsRow is a namespace's row as the batch's sends left it.
type nsRow struct {
	state             string
	seq, count, bytes int64 // seq: the next one
	head              trail
	moved             bool // head moved: an event was written
	dirty             bool
}

// row is the namespace's row the batch holds, or nil.
func (d *deferred) row(ns string) *nsRow {
	if d == nil {
		return nil
	}
	return d.ns[ns]
}

// hold keeps a row as read. A trail with events left out of it is not
// held: its accepted sends write their summary first (appendEvent), which
// reads the row.
func (d *deferred) hold(ns, state string, seq, count, bytes int64, head trail) {
	if d == nil || len(head.suppressed) > 0 || head.closed {
		return
	}
	d.ns[ns] = &nsRow{state: state, seq: seq, count: count, bytes: bytes, head: head}
}

// count1 applies an accepted offer to the row, as countOffer's UPDATE
// would: its seq taken, its quota counted unless exempt, the trail's head
// moved to head when its event was written.
func (r *nsRow) count1(o *Offer, head *trail) {
	r.seq++
	if !o.Exempt {
		r.count++
		r.bytes += int64(o.Size)
	}
	if head != nil {
		r.head, r.moved = *head, true
	}
	r.dirty = true
}

func (d *deferred) takes(query string) bool {
	for _, q := range deferrable {
		if q == query {
			return true
		}
	}
	return false
}

func (d *deferred) add(query string, args []any) {
	if query == qLearn {
		k := [2]any{args[0], args[1]}
		if d.learned[k] {
			return
		}
		d.learned[k] = true
	}
	d.rows[query] = append(d.rows[query], args)
}

// mark is how many rows each insert holds, to undo an offer's with drop.
type mark map[string]int

func (d *deferred) mark() mark {
	m := mark{}
	for q, r := range d.rows {
		m[q] = len(r)
	}
	return m
}

// drop forgets the rows added since m.
func (d *deferred) drop(m mark) {
	for q, r := range d.rows {
		d.rows[q] = r[:m[q]]
	}
	clear(d.learned)
	for _, r := range d.rows[qLearn] {
		d.learned[[2]any{r[0], r[1]}] = true
	}
}

// flush writes every held row inside q's transaction and forgets them.
func (d *deferred) flush(ctx context.Context, q txq) error {
	imm := txq{tx: q.tx, s: q.s}
	for name, r := range d.ns {
		var err error
		switch {
		case !r.dirty:
		case r.moved:
			_, err = imm.exec(ctx, qSetCountersTrail, r.seq, r.count, r.bytes, r.head.recorded, r.head.lastHash, name)
		default:
			_, err = imm.exec(ctx, qSetCounters, r.seq, r.count, r.bytes, name)
		}
		if err != nil {
			return err
		}
		delete(d.ns, name)
	}
	for _, query := range deferrable {
		rows := d.rows[query]
		for len(rows) > 0 {
			n := 1
			for _, c := range chunks {
				if c <= len(rows) {
					n = c
					break
				}
			}
			text := query
			if n > 1 {
				text = multiRow(query, n)
			}
			var args []any
			for _, r := range rows[:n] {
				args = append(args, r...)
			}
			if _, err := imm.exec(ctx, text, args...); err != nil {
				return err
			}
			rows = rows[n:]
		}
		delete(d.rows, query)
	}
	clear(d.learned)
	return nil
}

// deferredResult is the result of an insert a batch deferred: nothing is
// known of it yet, and nothing asks.
type deferredResult struct{}

var errDeferred = errors.New("ledger: the insert is deferred to the batch's end")

func (deferredResult) LastInsertId() (int64, error) { return 0, errDeferred }
func (deferredResult) RowsAffected() (int64, error) { return 0, errDeferred }

var _ sql.Result = deferredResult{}
