package sqlledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The SQLite ledger's durability is its own, not SQLite's. Its write
// connection commits with synchronous NORMAL: a commit writes its frames
// into the write-ahead log and returns without an fsync. What the ledger
// acknowledges it makes durable itself, with fdatasync on the log (walSync)
// before the answer: the group committer hands each committed batch to a
// syncer goroutine and gathers the next while the disk flushes, to commit
// it once the flush ends (messages.go); every other write transaction
// syncs before it returns
// (txn.go). One fdatasync covers every frame written before it, so one
// flush may answer several batches.
//
// Why that is as durable as synchronous FULL, which fsyncs the log in each
// commit:
//   - A batch is answered only after an fdatasync of the log that began
//     after its commit returned, so its frames (and the log's size) are on
//     the disk. A crash before then loses at most batches not yet answered;
//     SQLite's recovery ignores frames whose checksums or salts do not match,
//     so it finds the log as of some commit, never half of one.
//   - Checkpoints, at NORMAL as at FULL, fsync the log before copying it into
//     the database and the database before the log is reused: the log is
//     restarted (its frames overwritten from the start, under new salts) only
//     after all of it is in the database and the database is on the disk.
//     A batch whose frames a restart overwrote before its own fdatasync is
//     therefore durable in the database already. (The checkpointer runs
//     them, not the commits: checkpoint.go, which also syncs the pages of
//     a checkpoint that copied only part of the log.)
//   - SQLite removes the log only when the last connection to the database
//     closes, after checkpointing all of it into the database and syncing
//     that. The ledger keeps its write connection open, but database/sql
//     replaces a connection a driver reports bad, and with no reader open
//     then, the log is removed and a new one made. sync notices that the
//     file it holds has no name left and syncs the one that has it now.
//   - A failed fdatasync is fatal, as PostgreSQL has treated it since 2018:
//     after one, the kernel may have dropped the dirty pages and cleared the
//     error, so a retry that succeeds proves nothing. The batch is answered
//     with the error and the ledger refuses every later write (errSync).
//
// What a reader sees: a batch is visible to readers from its commit, a
// moment (one fdatasync) before it is answered. A read in that moment that
// a machine crash then follows may have shown mail the sender was never told
// was accepted, and the ledger no longer has. SIGKILL of the plane loses
// nothing that was committed: the frames are in the kernel's page cache.

// errSync is the ledger's answer to every write after an fdatasync of the
// write-ahead log, or the checkpointer's of the database, failed.
var errSync = errors.New("ledger: flushing the write-ahead log or the database to the disk failed; the ledger takes no more writes")

// walSync flushes an SQLite database's write-ahead log to the disk.
type walSync struct {
	path string
	mu   sync.Mutex // held by a flush throughout, and by every change
	f    *os.File
	// err is sticky: errSync with the first failure, or errClosed. It is
	// set under mu but read without it (failed), so that a writer about
	// to begin never waits for a flush in progress.
	err atomic.Pointer[error]
	// broken is closed by the first failure (Broken).
	broken chan struct{}
	// fdatasync is unix.Fdatasync but in tests of its failure.
	fdatasync func(fd int) error
	// grew holds a token after the log grew (a flush, or a commit of
	// events that needs none), for the checkpointer (checkpoint.go).
	grew chan struct{}
}

// openWALSync opens the log at path, which SQLite has created, and syncs it
// and its directory entry.
func openWALSync(path string) (*walSync, error) {
	w := &walSync{path: path, fdatasync: unix.Fdatasync, broken: make(chan struct{}), grew: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reopen(); err != nil {
		return nil, err
	}
	return w, nil
}

// reopen opens the file at w.path in place of w.f and makes it and its
// name durable.
func (w *walSync) reopen() error {
	f, err := os.Open(w.path)
	if err != nil {
		return fmt.Errorf("ledger: the write-ahead log: %w", err)
	}
	if err := syncDir(filepath.Dir(w.path)); err != nil {
		f.Close()
		return w.fail(err)
	}
	if err := w.fdatasync(int(f.Fd())); err != nil {
		f.Close()
		return w.fail(err)
	}
	if w.f != nil {
		w.f.Close()
	}
	w.f = f
	return nil
}

// sync makes every frame written to the log so far durable, or reports why
// it could not (and from then on, that it cannot).
func (w *walSync) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.failed(); err != nil {
		return err
	}
	if err := w.fdatasync(int(w.f.Fd())); err != nil {
		return w.fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(w.f.Fd()), &st); err != nil {
		return w.fail(err)
	}
	if st.Nlink > 0 {
		w.tell()
		return nil
	}
	// The log was removed, so checkpointed into the database and that
	// synced: frames since are in the file that has its name now, if any.
	err := w.reopen()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// tell leaves a token on grew, unless one is there.
func (w *walSync) tell() {
	select {
	case w.grew <- struct{}{}:
	default:
	}
}

// failed is the sticky error, or nil.
func (w *walSync) failed() error {
	if err := w.err.Load(); err != nil {
		return *err
	}
	return nil
}

// syncDatabase flushes the database file db for the checkpointer
// (checkpoint.go), without holding up the log's flushes; its failure
// breaks the ledger as theirs does.
func (w *walSync) syncDatabase(db *os.File) error {
	w.mu.Lock()
	fdatasync := w.fdatasync
	w.mu.Unlock()
	if err := w.failed(); err != nil {
		return err
	}
	if err := fdatasync(int(db.Fd())); err != nil {
		return w.breaks(fmt.Errorf("the database: %w", err))
	}
	return nil
}

// breaks makes err, a failure to hand the disk what was committed, the
// sticky error, unless one is already.
func (w *walSync) breaks(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.failed(); err != nil {
		return err
	}
	return w.fail(err)
}

func (w *walSync) fail(err error) error {
	err = fmt.Errorf("%w: %w", errSync, err)
	w.err.Store(&err)
	select {
	case <-w.broken:
	default:
		close(w.broken)
	}
	return err
}

// close closes the log; a sync after it answers errClosed, not a failed
// flush (the database's own close checkpointed and synced what was
// committed).
func (w *walSync) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err.CompareAndSwap(nil, &errClosed)
	return w.f.Close()
}

// syncDir makes the names in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
