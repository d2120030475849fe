package plane_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// BenchmarkRPC measures calls straight into a running plane over its
// socket. Health is the baseline: the same socket, grant check and JSON,
// answering without storing. Send stores durably (WAL, flushed before the answer: sqlledger/walsync.go).
func BenchmarkRPC(b *testing.B) {
	b.Setenv("MAILPLANE_LOG_LEVEL", "warn")
	p := itest.StartPlane(b, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(b, rpc.ProfileCandidate)
	writer := p.Client(b, id.WriterGrant)
	body := make([]byte, 512)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	raw := append([]byte("Subject: bench\r\n\r\n"), body...)
	ops := map[string]func() error{
		"health": func() error { _, err := writer.Health(ctx(b)); return err },
		"send": func() error {
			_, err := writer.Send(ctx(b), &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"bench@example.com"}, Raw: raw})
			return err
		},
	}
	for _, name := range []string{"health", "send"} {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/c%d", name, conc), func(b *testing.B) {
				lat := itest.NewLatencies()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for w := 0; w < conc; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if err := lat.Time(ops[name]); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				lat.Report(b)
			})
		}
	}
}
