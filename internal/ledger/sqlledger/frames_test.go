package sqlledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// maxFramesPerBatch bounds the pages (write-ahead log frames) a group
// commit of 8 plain sends writes, each with a 623 B body, an 896 B index
// and its event (make profile's send): before a send's body and index
// were columns of its message's row, such a batch wrote 28.2, most of
// them the bodies and parsed tables' (bodies.go); since, 14.7. Every
// frame is a write and part of the fsync, the checkpoint and the
// committer's CPU.
const maxFramesPerBatch = 20

// TestFramesPerBatch: a batch of 8 sends writes at most maxFramesPerBatch
// pages to the write-ahead log, counted from the log's size (checkpoints
// off, the log emptied first).
func TestFramesPerBatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openSQLite(t, dir)
	profileTrial(t, l)
	body, index := profileSend(t)
	batch := func() {
		var b []*pending
		for range 8 {
			b = append(b, &pending{ctx: ctx, done: make(chan struct{}), offer: profileOffer(body, index)})
		}
		if err := l.commitBatch(b); err != nil {
			t.Fatal(err)
		}
		for _, p := range b {
			if p.err != nil {
				t.Fatal(p.err)
			}
		}
	}
	// Trees a few levels deep, as a trial's after some mail.
	for range 100 {
		batch()
	}
	var pageSize int64
	if err := l.write.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`PRAGMA wal_autocheckpoint = 0`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := l.write.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	const batches = 50
	for range batches {
		batch()
	}
	st, err := os.Stat(filepath.Join(dir, "mailplane.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	perBatch := float64((st.Size()-32)/(pageSize+24)) / batches // the log's header, then each frame's and its page
	t.Logf("%.1f frames of %d B per batch of 8 sends", perBatch, pageSize)
	if perBatch > maxFramesPerBatch {
		t.Fatalf("a batch of 8 sends wrote %.1f pages to the log, more than %d", perBatch, maxFramesPerBatch)
	}
}
