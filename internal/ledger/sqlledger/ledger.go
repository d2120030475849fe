// Package sqlledger is the ledger (package ledger's contract) in a
// database: trials, namespaces, hashed grants and capabilities, learned
// recipients, quota counters, idempotency keys, the index of accepted
// messages and the bodies no external store keeps. It is an embedded SQLite
// database (pure Go driver, WAL, flushed by the ledger before it answers:
// walsync.go; dialect_sqlite.go) or
// a PostgreSQL database that several planes share (dialect_postgres.go),
// written through one connection of each plane so that every decision
// that reads and then writes is a single serialized transaction, which
// locks the rows it decides on against the other planes.
//
// Only the plane's edge (package serve) links this package; the broker
// reaches it through the ledger.Ledger interface, so it holds no database
// handle. The SQL is one set of portable
// queries with ? placeholders; what differs between the engines is in
// their dialect files.
package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/ledger"
)

// DB is the broker's ledger.Ledger.
var _ ledger.Ledger = (*DB)(nil)

// DB is the ledger in its database.
type DB struct {
	d     *dialect
	write *sql.DB // one connection: transactions are serialized
	read  *sql.DB // WAL readers, never blocked by the writer

	rs, ws *stmts // prepared statements of read and write
	dir    string // the data directory, for its free space ("": not ours to watch)

	listen  *pgx.ConnConfig // PostgreSQL: where Watch listens
	offers  chan *pending   // sends and events waiting for the committer
	policy  atomic.Uint64   // PolicyGen
	hints   hints           // Precheck's (hints.go)
	budget  int64           // events a trail records besides essential ones (events.go)
	closed  chan struct{}
	stopped chan struct{}

	// plane is this plane's identity (SetPlane), stored with the SMTP port
	// of each trial it opens; listening is whether Watch holds its LISTEN
	// connection (PostgreSQL), without which no policy cache serves.
	plane     string
	listening atomic.Bool

	// unsynced commits the events that need no fsync (events.go).
	unsynced unsyncedCommitter
	// wal flushes SQLite's write-ahead log (walsync.go), and ckpt copies
	// it into the database (checkpoint.go); both nil on PostgreSQL.
	wal  *walSync
	ckpt *checkpointer
}

// schemaVersion 2 added trial expiry, per-trial SMTP ports, the indexes
// that find a trial by a credential's digest, and the purge queue; 3 added
// the trails (events.go). Open migrates an older database in place. The
// bodies table (bodies.go) is the one the embedded message store made
// before the ledger owned it, unchanged: a data directory of either age
// reads its mail.
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
	smtp_port INTEGER,
	plane TEXT,
	faults TEXT,
	sealed_reason TEXT,
	webhooks TEXT
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
	fault TEXT,
	body BLOB,
	idx BLOB,
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
CREATE TABLE IF NOT EXISTS trial_faults (
	trial_id INTEGER PRIMARY KEY REFERENCES trials(id),
	schedule TEXT NOT NULL,
	http_sends INTEGER NOT NULL DEFAULT 0,
	smtp_sends INTEGER NOT NULL DEFAULT 0,
	injected INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS delayed (
	namespace TEXT NOT NULL,
	hold INTEGER NOT NULL,
	uuid TEXT NOT NULL,
	envelope_from TEXT NOT NULL,
	recipients TEXT NOT NULL,
	size INTEGER NOT NULL,
	ref TEXT NOT NULL,
	visible_at INTEGER NOT NULL,
	PRIMARY KEY (namespace, hold)
);
CREATE TABLE IF NOT EXISTS opened (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	PRIMARY KEY (namespace, seq)
);
CREATE TABLE IF NOT EXISTS flags (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	flag TEXT NOT NULL,
	PRIMARY KEY (namespace, seq, flag)
);
CREATE TABLE IF NOT EXISTS bodies (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	raw BLOB NOT NULL,
	PRIMARY KEY (namespace, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS parsed (
	namespace TEXT NOT NULL,
	ref TEXT NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (namespace, ref)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS webhook_events (
	trial_id INTEGER NOT NULL,
	seq INTEGER NOT NULL,
	id TEXT NOT NULL,
	hook INTEGER NOT NULL,
	email TEXT NOT NULL,
	namespace TEXT NOT NULL,
	kind TEXT NOT NULL,
	data TEXT NOT NULL,
	state TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	due_at INTEGER NOT NULL,
	leased_until INTEGER NOT NULL DEFAULT 0,
	log TEXT NOT NULL,
	PRIMARY KEY (trial_id, seq)
);
CREATE TABLE IF NOT EXISTS webhook_cursors (
	namespace TEXT PRIMARY KEY,
	trail_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS netns_doors (
	door TEXT PRIMARY KEY,
	trial_id INTEGER NOT NULL UNIQUE REFERENCES trials(id),
	netns TEXT NOT NULL,
	http_port INTEGER NOT NULL,
	smtp_port INTEGER NOT NULL,
	smtp_tls_port INTEGER NOT NULL,
	netns_dev INTEGER NOT NULL DEFAULT 0,
	netns_ino INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS agent_doors (
	trial_id INTEGER NOT NULL PRIMARY KEY REFERENCES trials(id),
	door TEXT NOT NULL,
	netns TEXT NOT NULL,
	imap_port INTEGER NOT NULL,
	http_port INTEGER NOT NULL,
	netns_dev INTEGER NOT NULL,
	netns_ino INTEGER NOT NULL
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
CREATE UNIQUE INDEX IF NOT EXISTS trials_plane_smtp_port ON trials (plane, smtp_port);
CREATE INDEX IF NOT EXISTS trials_expires_at ON trials (expires_at);
CREATE INDEX IF NOT EXISTS namespaces_write_capability ON namespaces (write_capability);
CREATE INDEX IF NOT EXISTS namespaces_trial ON namespaces (trial_id);
CREATE INDEX IF NOT EXISTS grants_trial ON grants (trial_id);
CREATE INDEX IF NOT EXISTS trails_closed_at ON trails (closed_at);
CREATE INDEX IF NOT EXISTS delayed_visible_at ON delayed (visible_at);
CREATE INDEX IF NOT EXISTS webhook_events_pending ON webhook_events (state, trial_id, hook, email, seq);
CREATE INDEX IF NOT EXISTS webhook_events_leased ON webhook_events (trial_id, leased_until);
`

// newLedger starts the ledger over its two handles once its schema is
// current: it prepares the hot queries in d's text and starts the
// committer. wal is SQLite's log, nil on PostgreSQL.
func newLedger(d *dialect, write, read *sql.DB, dir string, wal *walSync) (*DB, error) {
	rs, err := newStmts(read, d, readQueries)
	if err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	ws, err := newStmts(write, d, writeQueries)
	if err != nil {
		rs.close()
		read.Close()
		write.Close()
		return nil, err
	}
	l := &DB{d: d, write: write, read: read, rs: rs, ws: ws, dir: dir, offers: make(chan *pending), closed: make(chan struct{}), stopped: make(chan struct{}),
		budget: DefaultEventBudget, unsynced: newUnsyncedCommitter(), wal: wal}
	go l.commit()
	go l.commitUnsynced()
	return l, nil
}

// stamp records schemaVersion in a new database.
func stamp(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) error {
	if _, err := db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO NOTHING`, schemaVersion); err != nil {
		return fmt.Errorf("ledger: schema: %w", err)
	}
	return nil
}

// Close stops the committer and closes the database.
func (l *DB) Close() error {
	close(l.closed)
	<-l.stopped
	<-l.unsynced.stopped
	var err error
	if l.ckpt != nil {
		err = l.ckpt.close()
	}
	l.rs.close()
	l.ws.close()
	err = errors.Join(err, l.read.Close(), l.write.Close())
	if l.wal != nil {
		err = errors.Join(err, l.wal.close())
	}
	return err
}

// Ping checks that the database answers a read.
func (l *DB) Ping(ctx context.Context) error {
	var v string
	return l.rs.queryRow(ctx, qSchema).Scan(&v)
}

// PingWrite checks that the database takes a write and that its file
// system has minFree bytes left, so that a full disk shows (a one-row
// update alone still fits in the write-ahead log).
func (l *DB) PingWrite(ctx context.Context, minFree uint64) error {
	if l.dir != "" {
		var fs unix.Statfs_t
		if err := unix.Statfs(l.dir, &fs); err != nil {
			return err
		}
		if free := fs.Bavail * uint64(fs.Bsize); free < minFree {
			return fmt.Errorf("ledger: %d bytes free in %s, fewer than %d", free, l.dir, minFree)
		}
	}
	return l.execDurable(ctx, `UPDATE meta SET value = value WHERE key = 'schema'`)
}

// PolicyGen is the policy's generation: it grows whenever a trial, a
// namespace or a grant that existed may have changed (rotate, seal, close,
// and ForgetPolicy). A cache of policy rows read at generation g is
// current while PolicyGen is still g. Creations do not count: nothing
// cached can describe what did not exist.
//
// On PostgreSQL, other planes' changes are heard only through Watch's
// LISTEN connection: while it is down, every call gets a generation of
// its own, so that no cache serves anything (every lookup reads the
// database), and once it is back the generation moves on before caches
// are used again, so they start empty.
func (l *DB) PolicyGen() uint64 {
	if l.listen != nil && !l.listening.Load() {
		return l.policy.Add(1)
	}
	return l.policy.Load()
}

// ForgetPolicy ends the current generation, for a change this ledger did
// not make itself (another plane's, on a shared database).
func (l *DB) ForgetPolicy() { l.policy.Add(1) }

// announce tells the other planes, inside tx, that it changes ns.
func (l *DB) announce(ctx context.Context, tx *sql.Tx, kind byte, ns string) error {
	if l.d.announce == nil {
		return nil
	}
	return l.d.announce(ctx, tx, kind, ns)
}

func now() int64 { return time.Now().UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
