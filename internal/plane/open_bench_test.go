package plane

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// BenchmarkOpenTrial is trial.open in the broker, without its socket, on
// an embedded ledger, one open after the other (each kept open).
func BenchmarkOpenTrial(b *testing.B) {
	ctx := context.Background()
	l := openLedger(b)
	br := advertisedBroker(l)
	for b.Loop() {
		if _, err := br.OpenTrial(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate}); err != nil {
			b.Fatal(err)
		}
	}
}

// advertisedBroker is a broker on l that can open trials: it has doors to
// advertise in their bundles.
func advertisedBroker(l ledger.Ledger) *Broker {
	br := NewBroker(l, nil, Quotas{}, zerolog.Nop())
	br.SetAdvertise(Advertise{WriterURL: "http://127.0.0.1:1", InboxURL: "http://127.0.0.1:2", GatewayURL: "http://127.0.0.1:3", SMTPHost: "127.0.0.1", SMTPPort: 25})
	return br
}
