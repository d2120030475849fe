package sqlledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// setFdatasync replaces w's fdatasync, as the syncer may be using it.
func (w *walSync) setFdatasync(f func(int) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fdatasync = f
}

// TestSyncFailureIsFatal: a send whose log flush fails is answered with
// the failure, never accepted, and the ledger takes no write after it,
// even once the disk would flush again (walsync.go).
func TestSyncFailureIsFatal(t *testing.T) {
	ctx := context.Background()
	l, body, index := openProfileLedger(t)
	if _, _, err := l.Accept(ctx, profileOffer(body, index)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Broken():
		t.Fatal("Broken is closed before any flush failed")
	default:
	}
	l.wal.setFdatasync(func(int) error { return unix.EIO })
	if _, _, err := l.Accept(ctx, profileOffer(body, index)); !errors.Is(err, errSync) || !errors.Is(err, unix.EIO) || !l.Unavailable(err) {
		t.Fatalf("a send whose flush failed: %v, want %v with EIO, an outage", err, errSync)
	}
	select {
	case <-l.Broken():
	default:
		t.Fatal("Broken is not closed after a failed flush")
	}
	l.wal.setFdatasync(unix.Fdatasync)
	if _, _, err := l.Accept(ctx, profileOffer(body, index)); !errors.Is(err, errSync) {
		t.Fatalf("a send after a failed flush: %v, want %v", err, errSync)
	}
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("x"), BootstrapToken: digest("y"), InboxToken: digest("z")}
	if err := l.CreateTrial(ctx, tr, &Namespace{Name: "after", Tag: "t"}, nil); !errors.Is(err, errSync) {
		t.Fatalf("a trial opened after a failed flush: %v, want %v", err, errSync)
	}
	if err := l.PingWrite(ctx, 0); !errors.Is(err, errSync) {
		t.Fatalf("PingWrite after a failed flush: %v, want %v", err, errSync)
	}
}

// TestSyncFollowsReplacedLog: once the log it holds has lost its name,
// sync flushes the file that has the name now, and finds nothing to do
// if none has.
func TestSyncFollowsReplacedLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db-wal")
	if err := os.WriteFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := openWALSync(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	var synced []uint64
	w.setFdatasync(func(fd int) error {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		synced = append(synced, st.Ino)
		return nil
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	second := st.Ino
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || synced[1] != second {
		t.Fatalf("flushed inodes %v, want the removed log's, then the new one's (%d)", synced, second)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatalf("sync with no log left: %v", err)
	}
	if len(synced) != 3 {
		t.Fatalf("flushed %d times, want 3", len(synced))
	}
}

// TestReplayWaitsForFlush: a send's idempotency key answered from its
// rows (Precheck: replayed, or a conflict) while its batch is committed
// but not yet flushed waits for the flush: the replay acknowledges the
// first send, which must be durable by then.
func TestReplayWaitsForFlush(t *testing.T) {
	ctx := context.Background()
	l, body, index := openProfileLedger(t)
	offer := func() *Offer {
		o := profileOffer(body, index)
		o.IdempotencyKey, o.Fingerprint = "key", "fingerprint"
		return o
	}
	flushing, free := holdFirstFlush(t, l)
	accepted := make(chan error, 1)
	go func() {
		_, _, err := l.Accept(ctx, offer())
		accepted <- err
	}()
	<-flushing // committed, visible to readers, not yet durable
	type answer struct {
		replayed bool
		err      error
	}
	pre := make(chan answer, 1)
	go func() {
		_, replayed, err := l.Precheck(ctx, offer())
		pre <- answer{replayed, err}
	}()
	// A replay answered in this window would acknowledge a send a crash
	// could still lose; how long it is only bounds how surely a
	// regression shows.
	select {
	case a := <-pre:
		t.Fatalf("Precheck answered %+v while the first send's flush was held", a)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	if a := <-pre; a.err != nil || !a.replayed {
		t.Fatalf("Precheck after the flush: %+v, want a replay", a)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// TestCommitGathersDuringFlush: while a committed batch waits for its
// flush, the committer commits nothing more: the offers that arrive meanwhile
// wait for that flush, then go in one batch (messages.go's commit), and
// each is answered once a flush after its commit is done.
func TestCommitGathersDuringFlush(t *testing.T) {
	ctx := context.Background()
	l, body, index := openProfileLedger(t)
	flushing, free := holdFirstFlush(t, l)
	first := &pending{ctx: ctx, done: make(chan struct{}), offer: profileOffer(body, index)}
	l.offers <- first
	<-flushing // committed, its flush held
	log := filepath.Join(l.dir, "mailplane.db-wal")
	size := func() int64 {
		st, err := os.Stat(log)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	before := size()
	var gathered []*pending
	for range 4 {
		p := &pending{ctx: ctx, done: make(chan struct{}), offer: profileOffer(body, index)}
		l.offers <- p // unbuffered: the committer holds it
		gathered = append(gathered, p)
	}
	if after := size(); after != before {
		t.Fatalf("the log grew from %d to %d B while a flush was held: offers committed before it ended", before, after)
	}
	select {
	case <-first.done:
		t.Fatal("a send was answered before its flush")
	default:
	}
	free()
	for i, p := range append([]*pending{first}, gathered...) {
		<-p.done
		if p.err != nil || p.entry.Seq != int64(i+1) {
			t.Fatalf("send %d: seq %d, %v; want seq %d", i, p.entry.Seq, p.err, i+1)
		}
	}
}

// holdFirstFlush holds l's next flush of its log until free is called
// (at the latest when the test ends, before the ledger's Close, which
// waits for it); flushing is closed once that flush has begun.
func holdFirstFlush(t *testing.T, l *DB) (flushing <-chan struct{}, free func()) {
	var held atomic.Bool
	begun, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	l.wal.setFdatasync(func(fd int) error {
		if held.CompareAndSwap(false, true) {
			close(begun)
			<-release
		}
		return unix.Fdatasync(fd)
	})
	return begun, free
}
