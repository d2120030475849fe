package supervisor_test

import (
	"context"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// BenchmarkTrialOpen is the admin's trial.open over the plane's socket on
// one `mail-plane up --trials 0`, one open after the other, as the bench's
// density section times them (bench/density.go): "open" keeps every trial
// open, "open-close" closes each again (untimed), so that the stack stays
// at 0 live trials.
func BenchmarkTrialOpen(b *testing.B) {
	b.Setenv("MAILPLANE_LOG_LEVEL", "warn")
	for _, keep := range []bool{true, false} {
		name := "open-close"
		if keep {
			name = "open"
		}
		b.Run(name, func(b *testing.B) {
			s := itest.StartUp(b, "--trials", "0")
			admin := s.Admin(b)
			ctx := context.Background()
			lat := itest.NewLatencies()
			for b.Loop() {
				var bu rpc.Bundle
				err := lat.Time(func() (err error) {
					bu, err = admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				if !keep {
					if err := admin.TrialClose(ctx, bu.Namespace); err != nil {
						b.Fatal(err)
					}
				}
			}
			lat.Report(b)
		})
	}
}
