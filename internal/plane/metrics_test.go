package plane

import (
	"context"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// A read that waits is counted but not timed (its time is its caller's);
// one that does not is both. The read says which; its request is decoded
// once.
func TestMeteredReadTimesOnlyReadsThatDoNotWait(t *testing.T) {
	ctx := context.Background()
	_, b, _, id, gateway := servedTrial(t)
	timed := func() uint64 {
		t.Helper()
		families, err := b.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "mailplane_call_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "op" && lp.GetValue() == "read" {
						return m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		return 0
	}
	read := &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}
	if _, err := gateway.List(ctx, read); err != nil {
		t.Fatal(err)
	}
	if n := timed(); n != 1 {
		t.Fatalf("after a read that did not wait: %d timed", n)
	}
	read.WaitMillis = 20
	if _, err := gateway.Latest(ctx, read); rpc.CodeOf(err) != rpc.CodeNotFound {
		t.Fatalf("a wait on an empty namespace: %v", err)
	}
	if n := timed(); n != 1 {
		t.Fatalf("after a read that waited: %d timed, want still 1", n)
	}
}
