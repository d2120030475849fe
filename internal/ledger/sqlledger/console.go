package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"time"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// What the operator's console reads (package console, through the
// plane): every open trial and every kept trail, without a secret.

// consoleWhere is f's condition on an open trial t and on a kept trail tr.
func consoleWhere(f ConsoleFilter) (open, closed string, openArgs, closedArgs []any) {
	if f.Namespace != "" {
		p := "%" + likeEscaper.Replace(strings.ToLower(f.Namespace)) + "%"
		open += ` AND lower(t.namespace) LIKE ? ESCAPE '\'`
		closed += ` AND lower(tr.namespace) LIKE ? ESCAPE '\'`
		openArgs, closedArgs = append(openArgs, p), append(closedArgs, p)
	}
	if f.Recipient != "" {
		addr := strings.ToLower(f.Recipient)
		open += ` AND t.id IN (SELECT n2.trial_id FROM namespaces n2 JOIN recipients r ON r.namespace = n2.name WHERE lower(r.address) = ?)`
		closed += ` AND EXISTS (SELECT 1 FROM events e WHERE e.namespace = tr.namespace AND lower(e.line) LIKE ? ESCAPE '\')`
		openArgs, closedArgs = append(openArgs, addr), append(closedArgs, `%"`+likeEscaper.Replace(addr)+`"%`)
	}
	return open, closed, openArgs, closedArgs
}

// ConsoleCount counts the open trials and kept trails f selects.
func (l *DB) ConsoleCount(ctx context.Context, f ConsoleFilter) (open, closed int, err error) {
	ow, cw, oa, ca := consoleWhere(f)
	err = l.read.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM trials t WHERE t.destroyed = 0`+ow+`),
	(SELECT COUNT(*) FROM trails tr WHERE 1 = 1`+cw+`)`, append(oa, ca...)...).Scan(&open, &closed)
	return open, closed, err
}

// ConsolePage returns the rows f selects from offset, at most limit (0:
// all): open trials newest first, then kept trails most recently closed
// first. Sorting and paging are the database's: a page of 10,000 trials
// costs a page, not the 10,000.
func (l *DB) ConsolePage(ctx context.Context, f ConsoleFilter, offset, limit int) ([]ConsoleRow, error) {
	if limit <= 0 {
		limit = -1 // SQLite and PostgreSQL: no limit
	}
	ow, cw, oa, ca := consoleWhere(f)
	open, closed, err := l.ConsoleCount(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []ConsoleRow
	if offset < open {
		rows, err := l.read.QueryContext(ctx, `SELECT t.namespace, t.profile, n.state, t.created_at, t.expires_at,
	(SELECT COALESCE(SUM(m.message_count), 0) FROM namespaces m WHERE m.trial_id = t.id)
FROM (SELECT t.id, t.namespace, t.profile, t.created_at, t.expires_at FROM trials t WHERE t.destroyed = 0`+ow+`
	ORDER BY t.created_at DESC, t.id DESC LIMIT ? OFFSET ?) t
JOIN namespaces n ON n.name = t.namespace ORDER BY t.created_at DESC, t.id DESC`, append(oa, limitArg(limit), offset)...)
		if out, err = scanAll(rows, err, scanOpenRow); err != nil {
			return nil, err
		}
	}
	if limit > 0 && len(out) >= limit || offset+len(out) >= open+closed {
		return out, nil
	}
	rest := -1
	if limit > 0 {
		rest = limit - len(out)
	}
	rows, err := l.read.QueryContext(ctx, `SELECT tr.namespace, tr.closed_at FROM trails tr WHERE 1 = 1`+cw+`
ORDER BY tr.closed_at DESC, tr.namespace LIMIT ? OFFSET ?`, append(ca, limitArg(rest), max(0, offset-open))...)
	kept, err := scanAll(rows, err, func(r *sql.Rows, c *ConsoleRow) error {
		var at int64
		if err := r.Scan(&c.Namespace, &at); err != nil {
			return err
		}
		c.State, c.Closed = StateClosed, fromMillis(at)
		return nil
	})
	return append(out, kept...), err
}

// limitArg is LIMIT's argument: for none, more rows than any table
// holds (the engines spell "no limit" differently).
func limitArg(n int) int {
	if n < 0 {
		return math.MaxInt32
	}
	return n
}

func scanOpenRow(r *sql.Rows, c *ConsoleRow) error {
	var created int64
	var expires sql.NullInt64
	if err := r.Scan(&c.Namespace, &c.Profile, &c.State, &created, &expires, &c.Messages); err != nil {
		return err
	}
	c.Created = fromMillis(created)
	if expires.Valid {
		c.Expires = fromMillis(expires.Int64)
	}
	return nil
}

// likeEscaper escapes LIKE's wildcards (and its escape character); a
// quote inside an event's JSON string is escaped there as \", which the
// pattern, quoted on both sides, never matches inside one.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// ConsoleTrails returns the trails' counts of namespaces nss, in two
// queries whatever their number. Events are canonical JSON (package
// evidence), so a member is matched by its exact text.
func (l *DB) ConsoleTrails(ctx context.Context, nss []string) (map[string]TrailStats, error) {
	out := make(map[string]TrailStats, len(nss))
	if len(nss) == 0 {
		return out, nil
	}
	in := strings.Repeat("?, ", len(nss)-1) + "?"
	args := make([]any, len(nss))
	for i, ns := range nss {
		args[i] = ns
	}
	type agg struct {
		ns     string
		s      TrailStats
		lo, hi int64
	}
	rows, err := l.read.QueryContext(ctx, `SELECT namespace, COUNT(*),
	SUM(CASE WHEN line LIKE '%"outcome":"refused"%' THEN 1 ELSE 0 END),
	SUM(CASE WHEN line LIKE '%"fault":%' OR line LIKE '%"action":"fault"%' THEN 1 ELSE 0 END),
	MIN(seq), MAX(seq)
FROM events WHERE namespace IN (`+in+`) GROUP BY namespace`, args...)
	aggs, err := scanAll(rows, err, func(r *sql.Rows, a *agg) error {
		return r.Scan(&a.ns, &a.s.Events, &a.s.Refused, &a.s.Faults, &a.lo, &a.hi)
	})
	if err != nil || len(aggs) == 0 {
		return out, err
	}
	var ends []string
	var endArgs []any
	for _, a := range aggs {
		out[a.ns] = a.s
		ends = append(ends, "(namespace = ? AND seq IN (?, ?))")
		endArgs = append(endArgs, a.ns, a.lo, a.hi)
	}
	type end struct {
		ns   string
		seq  int64
		line string
	}
	rows, err = l.read.QueryContext(ctx, `SELECT namespace, seq, line FROM events WHERE `+strings.Join(ends, " OR "), endArgs...)
	lines, err := scanAll(rows, err, func(r *sql.Rows, e *end) error { return r.Scan(&e.ns, &e.seq, &e.line) })
	for _, a := range aggs {
		s := out[a.ns]
		for _, e := range lines {
			if e.ns != a.ns {
				continue
			}
			if e.seq == a.lo {
				s.First = e.line
			}
			if e.seq == a.hi {
				s.Last = e.line
			}
		}
		out[a.ns] = s
	}
	return out, err
}

// LastEvents returns up to limit of ns's newest events, oldest first.
func (l *DB) LastEvents(ctx context.Context, ns string, limit int) ([]string, error) {
	rows, err := l.read.QueryContext(ctx, `SELECT line FROM events WHERE namespace = ? ORDER BY seq DESC LIMIT ?`, ns, limit)
	lines, err := scanAll(rows, err, func(r *sql.Rows, line *string) error { return r.Scan(line) })
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return lines, err
}

// OpenTrials counts the open trials (of every plane on the database).
func (l *DB) OpenTrials(ctx context.Context) (int64, error) {
	var n int64
	err := l.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM trials WHERE destroyed = 0`).Scan(&n)
	return n, err
}

// ClosedAt is when ns's trial was closed, if ns is a kept trail's.
func (l *DB) ClosedAt(ctx context.Context, ns string) (time.Time, bool, error) {
	var at int64
	err := l.read.QueryRowContext(ctx, `SELECT closed_at FROM trails WHERE namespace = ?`, ns).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return fromMillis(at), err == nil, err
}
