// Package ledger is the plane's durable policy: trials, namespaces, hashed
// grants and capabilities, learned recipients, quota counters, idempotency
// keys, and the index of accepted messages. It is an embedded SQLite
// database (pure Go driver, WAL, synchronous=FULL), written through one
// connection so that every decision that reads and then writes is a single
// serialized transaction.
//
// Only the plane links this package. The SQL is kept portable (no SQLite
// extensions beyond the pragmas in Open) so that a PostgreSQL-compatible
// engine can take its place later.
package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Ledger is the policy database.
type Ledger struct {
	write *sql.DB // one connection: transactions are serialized
	read  *sql.DB // WAL readers, never blocked by the writer

	rs, ws *stmts // prepared statements of read and write
	dir    string // the data directory, for its free space

	offers  chan *pending // sends and events waiting for the committer
	policy  atomic.Uint64 // PolicyGen
	hints   hints         // Precheck's (hints.go)
	budget  int64         // events a trail records besides essential ones (events.go)
	closed  chan struct{}
	stopped chan struct{}
}

// ErrNotFound means no row matched.
var ErrNotFound = errors.New("ledger: not found")

// ErrExists means a namespace of that name already exists.
var ErrExists = errors.New("ledger: already exists")

// schemaVersion 2 added trial expiry, per-trial SMTP ports, the indexes
// that find a trial by a credential's digest, and the purge queue; 3 added
// the trails (events.go). Open migrates an older database in place.
const schemaVersion = "3"

const schema = `
CREATE TABLE IF NOT EXISTS meta (
	key TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
	id INTEGER PRIMARY KEY,
	profile TEXT NOT NULL,
	namespace TEXT NOT NULL,
	mail_api_token BLOB NOT NULL,
	bootstrap_token BLOB NOT NULL,
	inbox_token BLOB NOT NULL,
	destroyed INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	smtp_port INTEGER
);
CREATE TABLE IF NOT EXISTS namespaces (
	name TEXT PRIMARY KEY,
	trial_id INTEGER NOT NULL REFERENCES trials(id),
	state TEXT NOT NULL,
	read_capability BLOB,
	write_capability BLOB,
	bootstrap_capability TEXT,
	allowed_senders TEXT NOT NULL,
	tag TEXT NOT NULL,
	next_seq INTEGER NOT NULL DEFAULT 1,
	message_count INTEGER NOT NULL DEFAULT 0,
	byte_count INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	trail_seq INTEGER NOT NULL DEFAULT 0,
	trail_hash TEXT,
	trail_suppressed TEXT
);
CREATE TABLE IF NOT EXISTS grants (
	digest BLOB PRIMARY KEY,
	role TEXT NOT NULL,
	trial_id INTEGER REFERENCES trials(id),
	revoked INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS recipients (
	namespace TEXT NOT NULL,
	address TEXT NOT NULL,
	PRIMARY KEY (namespace, address)
);
CREATE TABLE IF NOT EXISTS messages (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	uuid TEXT NOT NULL,
	envelope_from TEXT NOT NULL,
	recipients TEXT NOT NULL,
	size INTEGER NOT NULL,
	ref TEXT NOT NULL,
	received_at INTEGER NOT NULL,
	PRIMARY KEY (namespace, seq)
);
CREATE TABLE IF NOT EXISTS idempotency (
	namespace TEXT NOT NULL,
	key TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	seq INTEGER NOT NULL,
	PRIMARY KEY (namespace, key)
);
CREATE TABLE IF NOT EXISTS purges (
	tag TEXT PRIMARY KEY,
	namespace TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trails (
	namespace TEXT PRIMARY KEY,
	closed_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	line TEXT NOT NULL,
	PRIMARY KEY (namespace, seq)
);
`

// indexes find a trial by the digest of any credential a shared surface
// is presented, and by its SMTP port. Looking a digest up through an index
// is not a constant-time comparison, and need not be: what varies is the
// time to find a SHA-256 of a 256-bit secret, which tells nothing about
// the secret.
const indexes = `
CREATE INDEX IF NOT EXISTS trials_mail_api_token ON trials (mail_api_token);
CREATE INDEX IF NOT EXISTS trials_bootstrap_token ON trials (bootstrap_token);
CREATE INDEX IF NOT EXISTS trials_inbox_token ON trials (inbox_token);
CREATE INDEX IF NOT EXISTS trials_smtp_port ON trials (smtp_port);
CREATE INDEX IF NOT EXISTS trials_expires_at ON trials (expires_at);
CREATE INDEX IF NOT EXISTS namespaces_write_capability ON namespaces (write_capability);
CREATE INDEX IF NOT EXISTS namespaces_trial ON namespaces (trial_id);
CREATE INDEX IF NOT EXISTS grants_trial ON grants (trial_id);
CREATE INDEX IF NOT EXISTS trails_closed_at ON trails (closed_at);
`

// migrations bring a database of the version named up by one version.
var migrations = map[string]string{
	"1": `ALTER TABLE trials ADD COLUMN expires_at INTEGER;
ALTER TABLE trials ADD COLUMN smtp_port INTEGER;`,
	// The schema's CREATE TABLE IF NOT EXISTS made events and trails, and
	// trailColumns the namespaces' trail heads; a namespace's trail starts
	// at its next event.
	"2": `SELECT 1;`,
}

// Open opens (creating if needed) the ledger in dir, which it creates 0700.
func Open(ctx context.Context, dir string) (*Ledger, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: data directory: %w", err)
	}
	path := filepath.Join(dir, "mailplane.db")
	dsn := func(extra string) string {
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "foreign_keys(ON)")
		if extra != "" {
			q.Add("_pragma", extra)
		}
		q.Set("_txlock", "immediate")
		return "file:" + path + "?" + q.Encode()
	}
	write, err := sql.Open("sqlite", dsn(""))
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	if _, err := write.ExecContext(ctx, schema); err != nil {
		write.Close()
		return nil, fmt.Errorf("ledger: schema: %w", err)
	}
	if err := migrate(ctx, write, path); err != nil {
		write.Close()
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", dsn("query_only(ON)"))
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	rs, err := newStmts(read, readQueries)
	if err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	ws, err := newStmts(write, writeQueries)
	if err != nil {
		rs.close()
		read.Close()
		write.Close()
		return nil, err
	}
	l := &Ledger{write: write, read: read, rs: rs, ws: ws, dir: dir, offers: make(chan *pending), closed: make(chan struct{}), stopped: make(chan struct{}),
		budget: DefaultEventBudget}
	go l.commit()
	return l, nil
}

// migrate stamps a new database with schemaVersion, or brings an older
// one up to it, one version per transaction.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	if _, err := db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO NOTHING`, schemaVersion); err != nil {
		return fmt.Errorf("ledger: schema: %w", err)
	}
	for {
		var v string
		if err := db.QueryRowContext(ctx, qSchema).Scan(&v); err != nil {
			return fmt.Errorf("ledger: schema: %w", err)
		}
		if v == schemaVersion {
			break
		}
		step, ok := migrations[v]
		if !ok {
			return fmt.Errorf("ledger: %s has schema %q, this build reads %q", path, v, schemaVersion)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		next, _ := strconv.Atoi(v)
		if _, err := tx.ExecContext(ctx, step); err != nil {
			tx.Rollback()
			return fmt.Errorf("ledger: migrating schema %s: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'schema'`, strconv.Itoa(next+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	if err := addColumns(ctx, db, "namespaces", trailColumns); err != nil {
		return fmt.Errorf("ledger: migrating: %w", err)
	}
	if _, err := db.ExecContext(ctx, indexes); err != nil {
		return fmt.Errorf("ledger: indexes: %w", err)
	}
	return nil
}

// trailColumns are the namespaces' columns of schema 3 (events.go), added
// to a table an older schema made.
var trailColumns = [][2]string{
	{"trail_seq", "INTEGER NOT NULL DEFAULT 0"},
	{"trail_hash", "TEXT"},
	{"trail_suppressed", "TEXT"},
}

// addColumns adds to table the columns it lacks.
func addColumns(ctx context.Context, db *sql.DB, table string, cols [][2]string) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	for _, c := range cols {
		if !have[c[0]] {
			if _, err := db.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+c[0]+` `+c[1]); err != nil {
				return err
			}
		}
	}
	return rows.Err()
}

// Close stops the committer and closes the database.
func (l *Ledger) Close() error {
	close(l.closed)
	<-l.stopped
	l.rs.close()
	l.ws.close()
	return errors.Join(l.read.Close(), l.write.Close())
}

// Handles returns the write and read handles, for a message store that
// lives in the same database.
func (l *Ledger) Handles() (write, read *sql.DB) { return l.write, l.read }

// Ping checks that the database answers a read.
func (l *Ledger) Ping(ctx context.Context) error {
	var v string
	return l.rs.queryRow(ctx, qSchema).Scan(&v)
}

// PingWrite checks that the database takes a write and that its file
// system has minFree bytes left, so that a full disk shows (a one-row
// update alone still fits in the write-ahead log).
func (l *Ledger) PingWrite(ctx context.Context, minFree uint64) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(l.dir, &fs); err != nil {
		return err
	}
	if free := fs.Bavail * uint64(fs.Bsize); free < minFree {
		return fmt.Errorf("ledger: %d bytes free in %s, fewer than %d", free, l.dir, minFree)
	}
	_, err := l.write.ExecContext(ctx, `UPDATE meta SET value = value WHERE key = 'schema'`)
	return err
}

// PolicyGen is the policy's generation: it grows whenever a trial, a
// namespace or a grant that existed may have changed (rotate, seal, close,
// and ForgetPolicy). A cache of policy rows read at generation g is
// current while PolicyGen is still g. Creations do not count: nothing
// cached can describe what did not exist.
func (l *Ledger) PolicyGen() uint64 { return l.policy.Load() }

// ForgetPolicy ends the current generation, for a change this ledger did
// not make itself (another plane's, on a shared database).
func (l *Ledger) ForgetPolicy() { l.policy.Add(1) }

// policyTx runs fn as tx does, for a change to existing policy: the
// generation moves on after the transaction ends, whatever its outcome,
// so a row cached before the change is never served after its commit has
// been answered.
func (l *Ledger) policyTx(ctx context.Context, fn func(*sql.Tx) error) error {
	defer l.ForgetPolicy()
	return l.tx(ctx, fn)
}

func now() int64 { return time.Now().UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
