package sqlledger

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// dialect is what differs between the engines the ledger runs on; the
// queries are one set, written with ? placeholders.
type dialect struct {
	// text turns a query into the engine's text, where it is prepared.
	text func(q string) string
	// announce, when set, tells every plane on the database, inside tx,
	// that a commit changed ns (dialect_postgres.go).
	announce func(ctx context.Context, tx *sql.Tx, kind byte, ns string) error
	// unique, when set, reports a unique violation: another plane stored
	// the same key between this transaction's check and its insert.
	unique func(error) bool
}

// forUpdate ends a query that locks the rows it reads until the
// transaction ends, so that a read-decide-write holds across processes.
const forUpdate = " FOR UPDATE"

// sqliteDialect: one process writes, through one connection, with
// immediate transactions, so a transaction already excludes every other
// writer and no row lock is needed (nor parsed).
var sqliteDialect = &dialect{
	text: func(q string) string { return strings.TrimSuffix(q, forUpdate) },
}

// Open opens (creating if needed) the ledger in dir, which it creates 0700.
func Open(ctx context.Context, dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: data directory: %w", err)
	}
	path := filepath.Join(dir, "mailplane.db")
	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		// Commits write the log and return; the ledger flushes it
		// itself before it answers (walsync.go).
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "foreign_keys(ON)")
		// The group commit gives each offer a savepoint, whose undo
		// record (the sub-journal) spilled to a temporary file past 64
		// KiB: a file created, written and deleted per batch, a fifth of
		// the commit's system calls. In memory it costs a batch's pages
		// at most (maxBatch offers, each bounded by internal/limits).
		// Durability is the WAL's and its fsync, not this.
		q.Add("_pragma", "temp_store(MEMORY)")
		for _, p := range extra {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
		return "file:" + path + "?" + q.Encode()
	}
	// The checkpointer decides when to checkpoint (checkpoint.go).
	write, err := sql.Open("sqlite", dsn("wal_autocheckpoint(0)"))
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
	// The schema and migrations are durable from here.
	wal, err := openWALSync(path + "-wal")
	if err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", dsn("query_only(ON)"))
	if err != nil {
		wal.close()
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	l, err := newLedger(sqliteDialect, write, read, dir, wal)
	if err != nil {
		wal.close()
		return nil, err
	}
	if l.ckpt, err = startCheckpointer(path, dsn(), write, wal, l.closed); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// migrations bring a database of the version named up by one version.
var migrations = map[string]string{
	"1": `ALTER TABLE trials ADD COLUMN expires_at INTEGER;
ALTER TABLE trials ADD COLUMN smtp_port INTEGER;`,
	// The schema's CREATE TABLE IF NOT EXISTS made events and trails, and
	// trailColumns the namespaces' trail heads; a namespace's trail starts
	// at its next event.
	"2": `SELECT 1;`,
}

// migrate stamps a new database with schemaVersion, or brings an older
// one up to it, one version per transaction.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	if err := stamp(ctx, db); err != nil {
		return err
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
	if err := addColumns(ctx, db, "trials", [][2]string{{"plane", "TEXT"}, {"faults", "TEXT"}, {"sealed_reason", "TEXT"}, {"webhooks", "TEXT"}}); err != nil {
		return fmt.Errorf("ledger: migrating: %w", err)
	}
	if err := addColumns(ctx, db, "netns_doors", netnsIdentity); err != nil {
		return fmt.Errorf("ledger: migrating: %w", err)
	}
	if err := addColumns(ctx, db, "messages", [][2]string{{"fault", "TEXT"}, {"body", "BLOB"}, {"idx", "BLOB"}}); err != nil {
		return fmt.Errorf("ledger: migrating: %w", err)
	}
	if _, err := db.ExecContext(ctx, dedupePorts); err != nil {
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

// netnsIdentity are the doors' columns of a namespace file's identity
// (doors.go); a door stored before them has none, and is bound by path.
var netnsIdentity = [][2]string{
	{"netns_dev", "INTEGER NOT NULL DEFAULT 0"},
	{"netns_ino", "INTEGER NOT NULL DEFAULT 0"},
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
