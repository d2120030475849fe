package supervisor

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/itest"
)

// ignoresTERM reports whether process pid has SIGTERM ignored (its trap
// is in place).
func ignoresTERM(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && m&(1<<(15-1)) != 0
		}
	}
	return false
}

// TestStopKillsAChildThatIgnoresSIGTERM: a stack's stop is bounded. A
// child that ignores SIGTERM is killed once the bound has passed and is
// named in the log with its pid; a child that stops on SIGTERM is not
// named.
func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	var log itest.SyncBuffer
	st := &stack{log: zerolog.New(&log), exited: make(chan *surface, 8), stopBound: 2 * time.Second}
	stubborn := &surface{name: "stubborn-surface", cfg: shell(`trap "" TERM; while :; do sleep 0.05; done`)}
	polite := &surface{name: "polite-surface", cfg: shell(`exec sleep 60`)}
	plane := &surface{name: "polite-plane", cfg: shell(`exec sleep 60`)}
	for _, s := range []*surface{plane, stubborn, polite} {
		if err := st.run(s, "/bin/sh"); err != nil {
			t.Fatal(err)
		}
	}
	st.plane = plane
	itest.Eventually(t, "the stubborn child's trap", itest.Bound, func() bool { return ignoresTERM(stubborn.cmd.Process.Pid) })
	start := time.Now()
	st.stopAll()
	took := time.Since(start)
	for _, s := range []*surface{plane, stubborn, polite} {
		select {
		case <-s.done:
		default:
			t.Errorf("%s still runs after stopAll", s.name)
		}
	}
	if took < st.stopBound {
		t.Errorf("stopAll took %v: the stubborn child was not given its %v", took, st.stopBound)
	}
	out := log.String()
	want := `"child":"stubborn-surface","pid":` + strconv.Itoa(stubborn.cmd.Process.Pid)
	if !strings.Contains(out, want) || !strings.Contains(out, "did not stop after SIGTERM") {
		t.Errorf("the log does not name the child that had to be killed (%s):\n%s", want, out)
	}
	if strings.Contains(out, "polite") {
		t.Errorf("the log names a child that stopped on SIGTERM:\n%s", out)
	}
	if plane.cmd.ProcessState.String() != "signal: terminated" || stubborn.cmd.ProcessState.String() != "signal: killed" {
		t.Errorf("plane %v, stubborn %v: want the plane ended by SIGTERM and the stubborn child by SIGKILL",
			plane.cmd.ProcessState, stubborn.cmd.ProcessState)
	}
}

// shell is the command line of /bin/sh running a script.
type shell string

func (s shell) Args() []string { return []string{"-c", string(s)} }
