package sqlledger

import (
	"context"
	"database/sql"
)

// The queries on the send and read paths, prepared once when the ledger
// opens (see stmts).
const (
	qSchema            = `SELECT value FROM meta WHERE key = 'schema'`
	qNamespaceCounters = `SELECT state, next_seq, message_count, byte_count, trail_seq, trail_hash, trail_suppressed FROM namespaces WHERE name = ?`
	qLockNamespace     = qNamespaceCounters + forUpdate
	qIdempotency       = `SELECT fingerprint, seq FROM idempotency WHERE namespace = ? AND key = ?`
	qInsertMessage     = `INSERT INTO messages (namespace, seq, uuid, envelope_from, recipients, size, ref, received_at, fault, body, idx) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qCount             = `UPDATE namespaces SET next_seq = next_seq + 1, message_count = message_count + 1, byte_count = byte_count + ? WHERE name = ?`
	qCountTrail        = `UPDATE namespaces SET next_seq = next_seq + 1, message_count = message_count + 1, byte_count = byte_count + ?, trail_seq = ?, trail_hash = ? WHERE name = ?`
	// An exempt message (Offer.Exempt) takes a seq and counts toward nothing.
	qSeq                    = `UPDATE namespaces SET next_seq = next_seq + 1 WHERE name = ?`
	qSeqTrail               = `UPDATE namespaces SET next_seq = next_seq + 1, trail_seq = ?, trail_hash = ? WHERE name = ?`
	qLearn                  = `INSERT INTO recipients (namespace, address) VALUES (?, ?) ON CONFLICT DO NOTHING`
	qInsertIdempotency      = `INSERT INTO idempotency (namespace, key, fingerprint, seq) VALUES (?, ?, ?, ?)`
	qEntry                  = entrySelect + ` WHERE namespace = ? AND seq = ?`
	qEntries                = entrySelect + ` WHERE namespace = ? AND seq > ? ORDER BY seq`
	qLearned                = `SELECT EXISTS (SELECT 1 FROM recipients WHERE namespace = ?), EXISTS (SELECT 1 FROM recipients WHERE namespace = ? AND address = ?)`
	qGrant                  = `SELECT role, trial_id, revoked FROM grants WHERE digest = ?`
	qTrial                  = trialSelect + ` AND id = ?`
	qTrialByMailAPIToken    = trialSelect + ` AND mail_api_token = ?`
	qTrialByBootstrapToken  = trialSelect + ` AND bootstrap_token = ?`
	qTrialByInboxToken      = trialSelect + ` AND inbox_token = ?`
	qTrialByWriteCapability = trialSelect + ` AND id = (SELECT trial_id FROM namespaces WHERE write_capability = ?)`
	qTrialByPort            = trialSelect + ` AND plane = ? AND smtp_port = ?`
	qTrialByDoor            = trialSelect + ` AND plane = ? AND id = (SELECT trial_id FROM netns_doors WHERE door = ?)`
	qNamespace              = nsSelect + ` WHERE name = ?`
	qTrail                  = `SELECT trail_seq, trail_hash, trail_suppressed FROM namespaces WHERE name = ?`
	qLockTrail              = qTrail + forUpdate
	qUpdateTrail            = `UPDATE namespaces SET trail_seq = ?, trail_hash = ?, trail_suppressed = ? WHERE name = ?`
	qInsertEvent            = `INSERT INTO events (namespace, seq, line) VALUES (?, ?, ?)`
	qEvents                 = `SELECT line FROM events WHERE namespace = ? AND seq > ? ORDER BY seq LIMIT ?`
	qOpen                   = `INSERT INTO opened (namespace, seq) VALUES (?, ?) ON CONFLICT DO NOTHING`
	qOpened                 = `SELECT seq FROM opened WHERE namespace = ?`
	qFlags                  = `SELECT seq, flag FROM flags WHERE namespace = ?`
	// trial.open's (CreateTrial): compiling them was a seventh of the
	// plane's CPU an open.
	qNsExists        = `SELECT 1 FROM namespaces WHERE name = ?`
	qPortTaken       = `SELECT 1 FROM trials WHERE plane = ? AND smtp_port = ?`
	qInsertTrial     = `INSERT INTO trials (profile, namespace, mail_api_token, bootstrap_token, inbox_token, created_at, expires_at, smtp_port, plane) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`
	qInsertNamespace = `INSERT INTO namespaces (name, trial_id, state, read_capability, write_capability, bootstrap_capability, allowed_senders, tag, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qDeleteEvents    = `DELETE FROM events WHERE namespace = ?`
	qDeleteTrails    = `DELETE FROM trails WHERE namespace = ?`
	qInsertGrant     = `INSERT INTO grants (digest, role, trial_id, created_at) VALUES (?, ?, ?, ?)`
	qSavepoint       = `SAVEPOINT offer`
	qRelease         = `RELEASE offer`
	qRollbackTo      = `ROLLBACK TO offer`
)

// readQueries run on the read handle, writeQueries inside the committer's
// transactions; Precheck runs the decision's reads on the read handle too.
var (
	readQueries = []string{qSchema, qEntry, qEntries, qLearned, qGrant, qTrial, qNamespace, qNamespaceCounters, qIdempotency,
		qTrialByMailAPIToken, qTrialByBootstrapToken, qTrialByInboxToken, qTrialByWriteCapability, qTrialByPort, qEvents,
		qTrialByDoor, qOpened, qFlags, qBody, qIndex, qRowBody, qRowIndex}
	writeQueries = append([]string{qLockNamespace, qIdempotency, qInsertMessage, qCount, qCountTrail, qSeq, qSeqTrail, qLearn, qInsertIdempotency, qEntry,
		qLockTrail, qUpdateTrail, qInsertEvent, qOpen, qSavepoint, qRelease, qRollbackTo, qCountSend, qPutBody, qPutIndex,
		qNsExists, qPortTaken, qInsertTrial, qInsertNamespace, qDeleteEvents, qDeleteTrails, qInsertGrant}, multiRowQueries()...)
)

// stmts holds a database handle's prepared statements: compiling SQL was
// a fifth of the plane's CPU on the send path. They are prepared when the
// ledger opens, never later: the write handle has one connection, which an
// open transaction holds, so a lazy Prepare there would wait forever. Any
// other query runs unprepared.
type stmts struct {
	db *sql.DB
	m  map[string]*sql.Stmt
}

func newStmts(db *sql.DB, d *dialect, queries []string) (*stmts, error) {
	s := &stmts{db: db, m: map[string]*sql.Stmt{}}
	for _, q := range queries {
		st, err := db.Prepare(d.text(q))
		if err != nil {
			s.close()
			return nil, err
		}
		s.m[q] = st
	}
	return s, nil
}

func (s *stmts) stmt(query string) *sql.Stmt { return s.m[query] }

func (s *stmts) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := s.stmt(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.db.QueryRowContext(ctx, query, args...)
}

func (s *stmts) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := s.stmt(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.db.QueryContext(ctx, query, args...)
}

func (s *stmts) close() {
	for _, st := range s.m {
		st.Close()
	}
}

// txq runs prepared statements inside one transaction of s's database.
// With d, the inserts d takes are held there until the batch flushes them
// (deferred.go).
type txq struct {
	tx *sql.Tx
	s  *stmts
	d  *deferred
}

func (q txq) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if q.d != nil && q.d.takes(query) {
		q.d.add(query, args)
		return deferredResult{}, nil
	}
	if st := q.s.stmt(query); st != nil {
		return q.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

func (q txq) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.s.stmt(query); st != nil {
		return q.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}

func (q txq) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.s.stmt(query); st != nil {
		return q.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}
