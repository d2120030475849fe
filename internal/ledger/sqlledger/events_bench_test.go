package sqlledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// BenchmarkAccept is the ledger's side of a send, with and without its
// accepted event in the same savepoint: the trail's cost on the committer,
// the plane's one writer. The body is not stored here (the plane's SQLite
// store adds it, and its index, to both), so the ratio is the worst case;
// BenchmarkCommitSend is the send with both.
func BenchmarkAccept(b *testing.B) {
	for _, events := range []bool{false, true} {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("events=%v/c%d", events, conc), func(b *testing.B) {
				l := openSQLite(b, b.TempDir())
				tr := &Trial{Profile: "candidate", MailAPIToken: digest("a"), BootstrapToken: digest("b"), InboxToken: digest("c")}
				if err := l.CreateTrial(context.Background(), tr, &Namespace{Name: "ns", Tag: "t"}, nil); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				inParallel(b, conc, func() error {
					o := &Offer{Namespace: "ns", UUID: "u", From: "a@example.com", To: []string{"b@example.com"}, Size: 512,
						Ref: "ref"}
					if events {
						o.Event = &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted,
							Credential: "mail_api_token", From: o.From, To: o.To}
					}
					_, _, err := l.Accept(context.Background(), o)
					return err
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
			})
		}
	}
}

// inParallel calls send b.N times in all, from n goroutines at once, and
// stops each at its first error (which fails b).
func inParallel(b *testing.B, n int, send func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := send(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
