package sqlledger

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/itest"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// walRestarts is the log's checkpoint sequence number (its header's bytes
// 12 to 16, big-endian: https://sqlite.org/fileformat2.html#walformat),
// which grows each time the log is reused from its start.
func walRestarts(t *testing.T, dir string) uint32 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "mailplane.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var h [16]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(h[12:])
}

// openTrials creates n trials in l, named from prefix.
func openTrials(t *testing.T, l *DB, prefix string, n int) {
	t.Helper()
	for i := range n {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		tr := &Trial{Profile: "candidate", MailAPIToken: digest("api " + ns), BootstrapToken: digest("boot " + ns), InboxToken: digest("inbox " + ns)}
		n := &Namespace{Name: ns, ReadCapability: digest("read " + ns), WriteCapability: digest("write " + ns), Tag: "wb-" + ns}
		if err := l.CreateTrial(context.Background(), tr, n, []Grant{{Digest: digest("grant " + ns), Role: "writer"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointsLeaveCommits: no commit checkpoints on its own
// (wal_autocheckpoint 0), and yet the checkpointer keeps the log's size
// bounded: once it holds walFrames frames, it is copied into the database
// and reused from its start.
func TestCheckpointsLeaveCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openSQLite(t, dir)
	var auto int
	if err := l.write.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Fatalf("the write connection checkpoints every %d frames itself, want never (0)", auto)
	}
	fillUntilReused(t, l, dir, "fill")
	if frames := walFramesNow(t, l, dir); frames > 2*walFrames {
		t.Fatalf("the log holds %d frames, more than twice walFrames (%d)", frames, walFrames)
	}
}

// fillUntilReused opens trials in l, named from prefix, until its log
// holds walFrames frames (the checkpointer's cue), then one at a time,
// a poll apart, until the log has been reused from its start: from the
// cue on, the opener goes no faster than the checkpointer, however
// loaded the machine.
func fillUntilReused(t *testing.T, l *DB, dir, prefix string) {
	t.Helper()
	before := walRestarts(t, dir)
	for i := 0; walFramesNow(t, l, dir) < walFrames; i++ {
		openTrials(t, l, fmt.Sprintf("%s%d", prefix, i), 10) // a trial writes about 20 pages
	}
	round := 0
	itest.Eventually(t, "the log reused from its start", itest.Bound, func() bool {
		round++
		openTrials(t, l, fmt.Sprintf("%s-more%d", prefix, round), 1) // the reuse is a writer's
		return walRestarts(t, dir) > before
	})
}

// TestCheckpointSyncFailureIsFatal: once the checkpointer's flush of the
// database fails, the ledger takes no more writes, as after a failed
// flush of the log: a checkpoint may have recorded pages as copied that
// the disk does not hold, and a later one must not reuse the log over
// them.
func TestCheckpointSyncFailureIsFatal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openSQLite(t, dir)
	dbFd := int(l.ckpt.db.Fd())
	l.wal.setFdatasync(func(fd int) error {
		if fd == dbFd {
			return unix.EIO
		}
		return unix.Fdatasync(fd)
	})
	i := 0
	itest.Eventually(t, "the ledger broken", itest.Bound, func() bool {
		select {
		case <-l.Broken():
			return true
		default:
		}
		i++
		tr := &Trial{Profile: "candidate", MailAPIToken: digest(fmt.Sprint("api", i)), BootstrapToken: digest(fmt.Sprint("boot", i)), InboxToken: digest(fmt.Sprint("inbox", i))}
		err := l.CreateTrial(ctx, tr, &Namespace{Name: fmt.Sprint("t", i), Tag: "t"}, nil)
		if err != nil && !errors.Is(err, errSync) {
			t.Fatal(err)
		}
		return false
	})
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("x"), BootstrapToken: digest("y"), InboxToken: digest("z")}
	if err := l.CreateTrial(ctx, tr, &Namespace{Name: "after", Tag: "t"}, nil); !errors.Is(err, errSync) || !errors.Is(err, unix.EIO) {
		t.Fatalf("a trial opened after a failed flush of the database: %v, want %v with EIO", err, errSync)
	}
}

// TestWalIndex: the header is read only when SQLite's two copies agree
// (a writer updates them one after the other) and it is initialised.
func TestWalIndex(t *testing.T) {
	header := func(size, copied uint32) []byte {
		h := make([]byte, shmHeader)
		binary.NativeEndian.PutUint32(h[shmVersion:], walIndexVers)
		h[shmInit] = 1
		binary.NativeEndian.PutUint32(h[shmMaxFrame:], size)
		copy(h[shmCopy:], h[:shmCopy])
		binary.NativeEndian.PutUint32(h[shmBackfill:], copied)
		return h
	}
	if size, copied, ok := walIndex(header(4100, 3900)); !ok || size != 4100 || copied != 3900 {
		t.Fatalf("walIndex = %d, %d, %v; want 4100, 3900, true", size, copied, ok)
	}
	torn := header(4100, 3900)
	binary.NativeEndian.PutUint32(torn[shmCopy+shmMaxFrame:], 4120)
	uninit := header(4100, 3900)
	uninit[shmInit], uninit[shmCopy+shmInit] = 0, 0
	for name, h := range map[string][]byte{
		"torn": torn, "not initialised": uninit, "copied past the end": header(10, 20), "short": header(1, 0)[:shmHeader-1],
	} {
		if _, _, ok := walIndex(h); ok {
			t.Errorf("%s: read as a header", name)
		}
	}
}

// walFramesNow is how many frames the log's file can hold (its size; the
// file is reused from its start, never shortened).
func walFramesNow(t *testing.T, l *DB, dir string) int64 {
	t.Helper()
	var pageSize int64
	if err := l.read.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "mailplane.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	return (st.Size() - 32) / (pageSize + 24)
}

// TestCheckpointsOutliveAReplacedConnection: database/sql may replace the
// ledger's write connection when none of its readers is open; the
// checkpointer's own connection keeps the log and its index, so it still
// sees the log grow, and the log stays bounded.
func TestCheckpointsOutliveAReplacedConnection(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openSQLite(t, dir)
	l.read.SetMaxIdleConns(0)
	conn, err := l.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn.Raw(func(any) error { return driver.ErrBadConn }) // database/sql drops it
	conn.Close()
	openTrials(t, l, "first", 1) // the log, made again if it was removed
	fillUntilReused(t, l, dir, "after")
	if frames := walFramesNow(t, l, dir); frames > 2*walFrames {
		t.Fatalf("the log holds %d frames, more than twice walFrames (%d): no checkpoint since the connection was replaced", frames, walFrames)
	}
}

// TestCheckpointsWaitForReaders: while a reader holds a snapshot older
// than the log's start, checkpoints copy nothing past it, and the
// checkpointer does not flush the database for nothing after each flush
// of the log.
func TestCheckpointsWaitForReaders(t *testing.T) {
	ctx := context.Background()
	l := open(t)
	openTrials(t, l, "before", 50)
	tx, err := l.readTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRow(`SELECT COUNT(*) FROM trials`).Scan(&n); err != nil { // the snapshot
		t.Fatal(err)
	}
	openTrials(t, l, "past", walFrames/10) // the log past walFrames
	dbFd := int(l.ckpt.db.Fd())
	var dbSyncs atomic.Int32
	l.wal.setFdatasync(func(fd int) error {
		if fd == dbFd {
			dbSyncs.Add(1)
		}
		return unix.Fdatasync(fd)
	})
	openTrials(t, l, "held", 100)
	if got := dbSyncs.Load(); got > 1 {
		t.Fatalf("%d flushes of the database for 100 trials while a reader held the log, want at most 1", got)
	}
}
