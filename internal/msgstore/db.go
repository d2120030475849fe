package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
)

// DB keeps bodies in the ledger's own database, SQLite or PostgreSQL, in
// table bodies, written through the ledger's transactions. Its queries are
// the ledger's portable text (? placeholders, which the ledger's
// PostgreSQL connections rebind).
type DB struct {
	read     *sql.DB
	put, get *sql.Stmt // prepared on the write and the read handle
}

// newDB prepares the store's statements, while no transaction holds the
// write handle's connection (see the ledger's stmts).
func newDB(ctx context.Context, write, read *sql.DB) (*DB, error) {
	put, err := write.PrepareContext(ctx, `INSERT INTO bodies (namespace, seq, raw) VALUES (?, ?, ?) ON CONFLICT (namespace, seq) DO UPDATE SET raw = excluded.raw`)
	if err != nil {
		return nil, err
	}
	get, err := read.PrepareContext(ctx, `SELECT raw FROM bodies WHERE namespace = ? AND seq = ?`)
	if err != nil {
		put.Close()
		return nil, err
	}
	return &DB{read: read, put: put, get: get}, nil
}

// NewSQLite creates the bodies table through write and reads through read.
func NewSQLite(ctx context.Context, write, read *sql.DB) (*DB, error) {
	if _, err := write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bodies (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	raw BLOB NOT NULL,
	PRIMARY KEY (namespace, seq)
) WITHOUT ROWID`); err != nil {
		return nil, err
	}
	return newDB(ctx, write, read)
}

// NewPostgres creates the bodies table (bytea) through write, under the
// lock key of the ledger's migrations (so that planes starting at once
// create it once), and reads through read.
func NewPostgres(ctx context.Context, write, read *sql.DB, lock int64) (*DB, error) {
	tx, err := write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, lock); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bodies (
	namespace TEXT NOT NULL,
	seq BIGINT NOT NULL,
	raw BYTEA NOT NULL,
	PRIMARY KEY (namespace, seq)
)`); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return newDB(ctx, write, read)
}

func (s *DB) Put(ctx context.Context, tx *sql.Tx, ns Namespace, seq int64, _ Envelope, raw []byte) (string, error) {
	if tx == nil {
		return "", errors.New("msgstore: the database store writes only inside a ledger transaction")
	}
	if _, err := tx.StmtContext(ctx, s.put).ExecContext(ctx, ns.Name, seq, raw); err != nil {
		return "", err
	}
	return strconv.FormatInt(seq, 10), nil
}

func (s *DB) Get(ctx context.Context, ns Namespace, ref string, _ Envelope) ([]byte, error) {
	seq, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		return nil, ErrNotFound
	}
	var raw []byte
	err = s.get.QueryRowContext(ctx, ns.Name, seq).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return raw, err
}

func (s *DB) Purge(ctx context.Context, tx *sql.Tx, ns Namespace) error {
	if tx == nil {
		return errors.New("msgstore: the database store deletes only inside a ledger transaction")
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM bodies WHERE namespace = ?`, ns.Name)
	return err
}

// Transactional: bodies commit with their index entry.
func (s *DB) Transactional() bool { return true }

func (s *DB) Ping(ctx context.Context) error {
	return s.read.PingContext(ctx)
}

func (s *DB) Close() error { return errors.Join(s.put.Close(), s.get.Close()) }
