package plane

import (
	"context"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// BenchmarkPumpWebhooks is the webhook pump's full pass (pumpEvery) over
// 1,000 open trials with webhooks and nothing new in their trails: what
// an idle plane spends each pass.
func BenchmarkPumpWebhooks(b *testing.B) {
	ctx := context.Background()
	l := openLedger(b)
	br := advertisedBroker(l)
	hooks := []rpc.Webhook{{Provider: "resend", URL: "http://127.0.0.1:9/"}}
	for range 1000 {
		if _, err := br.OpenTrial(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate, Webhooks: hooks}); err != nil {
			b.Fatal(err)
		}
	}
	br.pumpWebhooks(ctx)
	for b.Loop() {
		br.pumpWebhooks(ctx)
	}
}
