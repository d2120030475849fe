package writerproc

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// reportEvery is how often the writer reports the SMTP sessions it closed
// over its connection cap: counted per listener port and sent as one
// report each, so a flood of connections costs the plane one call per
// port and interval.
const reportEvery = time.Second

// Reporter is the plane call that records refused sessions; *rpc.Client
// is one.
type Reporter interface {
	Report(ctx context.Context, req *rpc.ReportRequest) error
}

// shedReports counts sessions refused at connect, by listener port (or,
// for a trial's doors inside its network namespace, by door key).
type shedReports struct {
	plane Reporter
	log   zerolog.Logger
	mu    sync.Mutex
	n     map[shedKey]int64
}

type shedKey struct {
	port int
	door string
}

func newShedReports(plane Reporter, log zerolog.Logger) *shedReports {
	return &shedReports{plane: plane, log: log, n: map[shedKey]int64{}}
}

// on returns the connlimit.Limits.OnShed of the listener on port.
func (s *shedReports) on(port int) func() { return s.count(shedKey{port: port}) }

// onDoor returns the OnShed of a netns door's SMTP listener.
func (s *shedReports) onDoor(door string) func() { return s.count(shedKey{door: door}) }

func (s *shedReports) count(k shedKey) func() {
	return func() {
		s.mu.Lock()
		s.n[k]++
		s.mu.Unlock()
	}
}

// run reports the counts every reportEvery until ctx ends. On a shared
// writer, the shared port belongs to no trial: the plane refuses that
// report, and the count stays in this log only.
func (s *shedReports) run(ctx context.Context) {
	t := time.NewTicker(reportEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		counts := s.n
		s.n = map[shedKey]int64{}
		s.mu.Unlock()
		for k, n := range counts {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := s.plane.Report(rctx, &rpc.ReportRequest{Port: k.port, Door: k.door, Code: "connection_limit", Count: n})
			cancel()
			if err != nil {
				s.log.Info().Int("port", k.port).Int64("sessions", n).Str("code", rpc.CodeOf(err)).Msg("smtp: sessions over the connection cap not recorded in a trail")
			}
		}
	}
}
