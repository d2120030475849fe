//go:build unix

package complexity

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system, all
// threads). It is what a parser costs, and unlike the wall clock it does
// not grow when other processes on a busy machine take the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
