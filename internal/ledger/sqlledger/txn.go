package sqlledger

import (
	"context"
	"database/sql"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// The ledger's transactional strategy, in one place for both engines.
//
// Writes are serialised per plane: every write transaction begins here, on
// l.write, a pool of one connection, so a plane runs one at a time and
// nothing in the ledger retries. Across processes, on SQLite the write
// connection begins immediate transactions (_txlock=immediate,
// dialect_sqlite.go): BEGIN takes the database's write lock, waiting up to
// busy_timeout for another process's; on PostgreSQL a transaction runs at
// READ COMMITTED and locks the rows it decides on (forUpdate), and a
// unique violation between another plane's check and insert is ErrExists
// (tx). Migrations run before the ledger exists, under their own locks.
//
// Reads that must see one snapshot begin on l.read, read only (readTx).
//
// On SQLite a commit is durable once durable returns (walsync.go); the
// group committer waits for that in another goroutine.

// beginWrite begins a write transaction: tx's, and the group commit's
// (messages.go), which adds a savepoint per offer. After a failed flush of
// SQLite's log it refuses.
func (l *DB) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if err := l.syncFailed(); err != nil {
		return nil, err
	}
	return l.write.BeginTx(ctx, nil)
}

// syncFailed is errSync (wrapped) once a flush of SQLite's log failed.
func (l *DB) syncFailed() error {
	if l.wal == nil {
		return nil
	}
	return l.wal.failed()
}

// Broken is closed once a flush of SQLite's log has failed: the ledger
// takes no more writes, and what it committed since its last good flush
// may not be on the disk although readers see it. The plane exits then,
// so that a restart recovers the database from what the disk holds.
// Never closed on PostgreSQL (nil).
func (l *DB) Broken() <-chan struct{} {
	if l.wal == nil {
		return nil
	}
	return l.wal.broken
}

// execDurable runs one write statement outside a transaction and makes it
// durable; after a failed flush of SQLite's log it refuses, as beginWrite.
func (l *DB) execDurable(ctx context.Context, query string, args ...any) error {
	if err := l.syncFailed(); err != nil {
		return err
	}
	if _, err := l.write.ExecContext(ctx, query, args...); err != nil {
		return err
	}
	return l.durable()
}

// durable makes what the write connection has committed durable: on
// SQLite, which commits without an fsync, by flushing its log; on
// PostgreSQL the commit was.
func (l *DB) durable() error {
	if l.wal == nil {
		return nil
	}
	return l.wal.sync()
}

// readTx begins a read-only transaction on the read pool.
func (l *DB) readTx(ctx context.Context) (*sql.Tx, error) {
	return l.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
}

// tx runs fn in a write transaction, committing when it returns nil. A
// unique violation there means another plane stored the same name or
// digest first: ErrExists, as if this transaction's own check had seen it.
func (l *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := l.beginWrite(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		if l.d.unique != nil && l.d.unique(err) {
			return ErrExists
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return l.durable()
}

// policyTx runs fn as tx does, for a change to existing policy: the
// generation moves on after the transaction ends, whatever its outcome,
// so a row cached before the change is never served after its commit has
// been answered.
func (l *DB) policyTx(ctx context.Context, fn func(*sql.Tx) error) error {
	defer l.ForgetPolicy()
	return l.tx(ctx, fn)
}
