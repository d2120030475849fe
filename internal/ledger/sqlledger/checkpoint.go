package sqlledger

import (
	"database/sql"

	"modernc.org/sqlite"
)

// SQLite copies the write-ahead log back into the database (a checkpoint)
// in whichever commit finds the log past wal_autocheckpoint pages: that
// commit, and every sender waiting behind it, then waits for the copy and
// its two fsyncs (the log's, the database's). The ledger checkpoints on a
// connection of its own instead, in a goroutine the committer wakes once
// the write connection has written checkpointPages pages since it last
// did, and leaves SQLite's own checkpoint, at walBackstopPages, for a log
// that grows faster than that goroutine copies it. The checkpoint is
// PASSIVE: it copies what no reader still needs, waits for nobody, and
// the committer goes on writing meanwhile. Its connection syncs as
// SQLite's own checkpoint does (synchronous NORMAL: the log before the
// copy, the database after it), which walsync.go relies on.
//
// The log is reused from its start only by a write transaction that
// begins when all of it has been copied: under a steady load the
// committer has always written more by the time this goroutine is done,
// so the log grows to walBackstopPages (32 MiB) and SQLite's own
// checkpoint, which then has little left to copy, resets it. Measured by
// 24,000 sends at 8 at a time: the log ended at 8,013 pages, against
// 1,018 with SQLite's checkpoint alone at 1,000; commits that run a
// checkpoint, one in 8,000 pages instead of one in 1,000.
const (
	checkpointPages  = 1000 // SQLite's default wal_autocheckpoint
	walBackstopPages = 8000
)

// checkpointer checkpoints an SQLite ledger's log when kicked.
type checkpointer struct {
	db      *sql.DB // one connection
	kick    chan struct{}
	stopped chan struct{}
	// written is the write connection's count of pages written when it
	// last kicked; read and set only while that connection is held.
	written int
}

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	go c.run()
	return c
}

// run checkpoints once per kick until stop. A checkpoint that fails (the
// disk is full, say) is left to the next kick or to SQLite's own: the log
// keeps every commit meanwhile.
func (c *checkpointer) run() {
	defer close(c.stopped)
	for range c.kick {
		c.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	}
}

// wrote tells c how many pages conn, the write connection, has written in
// all, after a commit on it: past checkpointPages more since the last
// kick, it kicks (a kick while one is pending is the same kick).
func (c *checkpointer) wrote(conn *sql.Conn) {
	conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return nil
		}
		n, _, err := st.Status(sqlite.DBStatusCacheWrite, false)
		if err != nil {
			return nil
		}
		if n < c.written {
			c.written = 0 // a new connection, counting from 0
		}
		if n-c.written >= checkpointPages {
			c.written = n
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
		return nil
	})
}

// stop waits for a checkpoint under way and closes c's connection.
func (c *checkpointer) stop() error {
	close(c.kick)
	<-c.stopped
	return c.db.Close()
}
