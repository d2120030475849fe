package itest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Bound is how long a test waits for something that takes milliseconds
// on an idle machine: generous, so that two busy cores and the race
// detector do not fail a test by timing. A wait that has to tell "soon"
// from "never" uses it; none asserts how soon.
const Bound = 20 * time.Second

// Eventually checks cond every 10 ms until it holds, and fails the test
// if it still does not after bound.
func Eventually(t testing.TB, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Metric reads one series of the plane's metrics as the text format
// writes it (`name` or `name{label="value"}`), through the console's
// grant and the admin's, as the operator's console does.
func (p *Plane) Metric(t testing.TB, series string) float64 {
	t.Helper()
	if p.console == nil {
		p.console = p.Client(t, p.Grant(t, rpc.RoleConsole))
	}
	return metric(t, p.console, p.Grant(t, rpc.RoleAdmin), series)
}

// WaitParked waits until n long polls are asleep at the plane: on "mail",
// reads waiting for mail; on "trail", events reads (and console pages)
// waiting for the next event. A commit from then on is what wakes them.
func (p *Plane) WaitParked(t testing.TB, on string, n int) {
	t.Helper()
	waitParked(t, on, n, p.Metric)
}

// Metric is Plane.Metric for the stack's plane, through a console grant
// minted on first use.
func (s *Stack) Metric(t testing.TB, series string) float64 {
	t.Helper()
	admin, err := rpc.ReadSecretFile(s.Bundle.AdminGrantFile)
	if err != nil {
		t.Fatal(err)
	}
	if s.console == nil {
		ctx, cancel := context.WithTimeout(context.Background(), Bound)
		defer cancel()
		g, err := s.Admin(t).GrantCreate(ctx, rpc.RoleConsole)
		if err != nil {
			t.Fatalf("console grant: %v", err)
		}
		s.console = rpc.NewClient(s.Bundle.PlaneSocket, g)
		t.Cleanup(s.console.Close)
	}
	return metric(t, s.console, admin, series)
}

// WaitParked is Plane.WaitParked for the stack's plane.
func (s *Stack) WaitParked(t testing.TB, on string, n int) {
	t.Helper()
	waitParked(t, on, n, s.Metric)
}

func waitParked(t testing.TB, on string, n int, metric func(testing.TB, string) float64) {
	t.Helper()
	series := `mailplane_waits_parked{on="` + on + `"}`
	Eventually(t, strconv.Itoa(n)+" waits parked on "+on, Bound, func() bool { return metric(t, series) == float64(n) })
}

func metric(t testing.TB, console *rpc.Client, admin, series string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Bound)
	defer cancel()
	var m rpc.MetricsResponse
	if err := console.Call(ctx, rpc.MethodMetrics, &rpc.MetricsRequest{Operator: rpc.Operator{AdminGrant: admin}}, &m); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	for line := range strings.Lines(m.Text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", series, line)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in:\n%s", series, m.Text)
	return 0
}

// WaitStopped waits until every thread of process pid is stopped (after
// SIGSTOP, which the kernel delivers in its own time: a process on a
// loaded machine may answer one more request first).
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	Eventually(t, "process "+strconv.Itoa(pid)+" stopped", Bound, func() bool {
		tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
		if err != nil || len(tasks) == 0 {
			return false
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				return false
			}
			// The state follows the command's name, which is in parentheses.
			i := strings.LastIndexByte(string(b), ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				return false
			}
		}
		return true
	})
}
