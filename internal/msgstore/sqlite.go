package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
)

// SQLite keeps bodies in the ledger's database, in table bodies.
type SQLite struct {
	read     *sql.DB
	put, get *sql.Stmt // prepared on the write and the read handle
}

const sqliteSchema = `CREATE TABLE IF NOT EXISTS bodies (
	namespace TEXT NOT NULL,
	seq INTEGER NOT NULL,
	raw BLOB NOT NULL,
	PRIMARY KEY (namespace, seq)
) WITHOUT ROWID`

// NewSQLite creates the bodies table through write and reads through read.
func NewSQLite(ctx context.Context, write, read *sql.DB) (*SQLite, error) {
	if _, err := write.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, err
	}
	// Prepared now, while no transaction holds the write handle's one
	// connection (see the ledger's stmts).
	put, err := write.PrepareContext(ctx, `INSERT OR REPLACE INTO bodies (namespace, seq, raw) VALUES (?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	get, err := read.PrepareContext(ctx, `SELECT raw FROM bodies WHERE namespace = ? AND seq = ?`)
	if err != nil {
		put.Close()
		return nil, err
	}
	return &SQLite{read: read, put: put, get: get}, nil
}

func (s *SQLite) Put(ctx context.Context, tx *sql.Tx, ns Namespace, seq int64, _ Envelope, raw []byte) (string, error) {
	if tx == nil {
		return "", errors.New("msgstore: the SQLite store writes only inside a ledger transaction")
	}
	if _, err := tx.StmtContext(ctx, s.put).ExecContext(ctx, ns.Name, seq, raw); err != nil {
		return "", err
	}
	return strconv.FormatInt(seq, 10), nil
}

func (s *SQLite) Get(ctx context.Context, ns Namespace, ref string, _ Envelope) ([]byte, error) {
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

func (s *SQLite) Purge(ctx context.Context, tx *sql.Tx, ns Namespace) error {
	if tx == nil {
		return errors.New("msgstore: the SQLite store deletes only inside a ledger transaction")
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM bodies WHERE namespace = ?`, ns.Name)
	return err
}

// Transactional: bodies commit with their index entry.
func (s *SQLite) Transactional() bool { return true }

func (s *SQLite) Ping(ctx context.Context) error {
	return s.read.PingContext(ctx)
}

func (s *SQLite) Close() error { return errors.Join(s.put.Close(), s.get.Close()) }
