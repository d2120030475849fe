package sqlledger

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Checkpoints off the answer's path (SQLite).
//
// A checkpoint copies the pages of the write-ahead log into the database.
// Left to SQLite, one runs in the commit that takes the log past 1,000
// frames, and that commit's caller waits for it: the copy, then fsyncs
// of the log and of the database. With 10,000 trials open, every 50th
// trial.open copied about 430 pages scattered over the trials' indexes
// and took 4 ms instead of 0.5: the p99, growing with the trials open. A
// batch of sends waited the same way.
//
// The write connection does not checkpoint on its own
// (wal_autocheckpoint 0). After each flush of the log (and each commit of
// events that needs none), the checkpointer reads the log's size from the
// wal-index header (the -shm file), and once it holds walFrames frames:
//
//   - It copies them on a connection of its own, PASSIVE: no writer waits
//     for it, and commits go on while it copies. Then, if that copied
//     anything (a reader holding an older snapshot holds the copy back),
//     it fdatasyncs the database. A checkpoint that a commit overtakes
//     (one landed while it copied) records its frames as copied without
//     syncing the database; SQLite syncs it in the checkpoint that copies
//     the rest, before the log may be reused. The fdatasync is there to
//     see at once a page the disk failed to take: its failure, or an error
//     of either checkpoint, is fatal (Broken), as a failed flush of the
//     log is (walsync.go).
//   - Then it checkpoints on the write connection, between two
//     transactions: only the frames committed during the copy are left, so
//     the writer waits for a few pages and two fsyncs (of the log and the
//     database), once every walFrames frames. With nothing committed
//     during it, that checkpoint is complete, and the next commit reuses
//     the log from its start.
//
// So the log is reused only after a checkpoint that copied all of it and
// synced the database, as before: walsync.go's argument stands. One
// checkpoint for 4,000 frames instead of four for 1,000 each writes a page
// that several of them touched once: fewer writes, fewer fsyncs, and
// fewer commits slowed by the disk's flush of the database.

// walFrames is the log's size, in frames (about 16 MB of 4 KiB pages), at
// which the checkpointer copies it into the database.
const walFrames = 4000

// The wal-index header (https://sqlite.org/walformat.html, "The WAL-Index
// Format"): two copies of the header, 48 bytes each, then the checkpoint
// information, in the machine's byte order.
const (
	shmCopy      = 48
	shmVersion   = 0           // iVersion
	shmInit      = 12          // isInit
	shmMaxFrame  = 16          // mxFrame: the log's last valid frame
	shmBackfill  = 2 * shmCopy // nBackfill: the frames copied into the database
	shmHeader    = shmBackfill + 4
	walIndexVers = 3007000
)

// checkpointer copies the log into the database (see above).
type checkpointer struct {
	path  string   // the database's
	own   *sql.DB  // its connection
	write *sql.DB  // the ledger's write connection
	shm   *os.File // the wal-index
	db    *os.File // the database file, for its fdatasync
	wal   *walSync
	// stopped is closed when run returns.
	stopped chan struct{}
}

// startCheckpointer opens a connection with dsn, the database at path and
// its wal-index, and checkpoints as wal grows until closed is closed.
func startCheckpointer(path, dsn string, write *sql.DB, wal *walSync, closed <-chan struct{}) (*checkpointer, error) {
	shm, err := os.Open(path + "-shm")
	if err != nil {
		return nil, fmt.Errorf("ledger: the write-ahead log's index: %w", err)
	}
	db, err := os.Open(path)
	if err != nil {
		shm.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	own, err := sql.Open("sqlite", dsn)
	if err != nil {
		shm.Close()
		db.Close()
		return nil, err
	}
	own.SetMaxOpenConns(1)
	own.SetConnMaxIdleTime(0)
	// Its connection holds the database open from now on, so that the log
	// and its index outlive any replacement of the ledger's own.
	if err := own.Ping(); err != nil {
		shm.Close()
		db.Close()
		own.Close()
		return nil, fmt.Errorf("ledger: %w", err)
	}
	c := &checkpointer{path: path, own: own, write: write, shm: shm, db: db, wal: wal, stopped: make(chan struct{})}
	go c.run(closed)
	return c, nil
}

func (c *checkpointer) run(closed <-chan struct{}) {
	defer close(c.stopped)
	for {
		select {
		case <-closed:
			return
		case <-c.wal.grew:
		}
		size, copied, ok := c.index()
		if !ok || size < walFrames || copied == size {
			continue // or being written: read again as the log grows
		}
		if err := c.copy(copied); err != nil {
			return // fatal: the ledger takes no more writes
		}
	}
}

// index reads the wal-index header (walIndex), reopening the -shm file
// first if SQLite replaced it (it does when the last connection to the
// database closes).
func (c *checkpointer) index() (size, copied uint32, ok bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(c.shm.Fd()), &st); err == nil && st.Nlink == 0 {
		shm, err := os.Open(c.path + "-shm")
		if err != nil {
			return 0, 0, false // not made again yet: the next flush looks again
		}
		c.shm.Close()
		c.shm = shm
	}
	var h [shmHeader]byte
	if _, err := c.shm.ReadAt(h[:], 0); err != nil {
		return 0, 0, false
	}
	return walIndex(h[:])
}

// copy checkpoints on the checkpointer's connection and, if that copied
// any frame past copied (none, while a reader holds an older snapshot),
// makes what it wrote to the database durable and checkpoints on the write
// connection, between two transactions, to finish. An error of either
// checkpoint or of the fdatasync breaks the ledger, as a failed flush of
// the log does: the disk may have dropped what it was handed
// (walSync.breaks).
func (c *checkpointer) copy(copied uint32) error {
	if _, err := c.own.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return c.wal.breaks(fmt.Errorf("checkpoint: %w", err))
	}
	if _, now, ok := c.index(); ok && now == copied {
		return nil // held back by a reader: nothing new to sync
	}
	if err := c.wal.syncDatabase(c.db); err != nil {
		return err
	}
	if _, err := c.write.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return c.wal.breaks(fmt.Errorf("checkpoint: %w", err))
	}
	return nil
}

// walIndex reads a wal-index header: the log's frames (mxFrame) and how
// many of them are in the database (nBackfill; all of them: the next
// commit reuses the log), if both copies of the header agree and SQLite
// initialised it.
func walIndex(h []byte) (size, copied uint32, ok bool) {
	if len(h) < shmHeader || !bytes.Equal(h[:shmCopy], h[shmCopy:2*shmCopy]) ||
		binary.NativeEndian.Uint32(h[shmVersion:]) != walIndexVers || h[shmInit] != 1 {
		return 0, 0, false
	}
	size, copied = binary.NativeEndian.Uint32(h[shmMaxFrame:]), binary.NativeEndian.Uint32(h[shmBackfill:])
	return size, copied, copied <= size
}

// close stops the checkpointer (closed must be closed) and closes its
// connection and files.
func (c *checkpointer) close() error {
	<-c.stopped
	return errors.Join(c.own.Close(), c.shm.Close(), c.db.Close())
}
