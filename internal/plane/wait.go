package plane

import (
	"context"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// The plane's long polls (a list or latest that waits for mail, a trail
// read that waits for an event) wait here, in one way: bounded by
// rpc.MaxWait, woken by a commit in the namespace (notifier, and across
// planes the ledger's announcements), ended by the call's deadline.

// boundedWait is a request's wait_ms as a wait, at most rpc.MaxWait.
func boundedWait(millis int64) time.Duration {
	return min(time.Duration(millis)*time.Millisecond, rpc.MaxWait)
}

// waitFor calls ready until it reports done or fails, or wait has passed
// since the first call; between calls it sleeps until changes wakes ns.
// It watches before each call, so a commit between ready's read and the
// sleep still wakes it. The call's deadline passing while it sleeps is
// CodeDeadlineExceeded; ready decides what an answer with nothing in it
// means. A waiter a commit woke, and that is then done, reports how long
// its answer took after the commit (notifier.woke: the wake-up metric).
func waitFor(ctx context.Context, changes *notifier, ns string, wait time.Duration, ready func() (done bool, err error)) error {
	deadline := time.Now().Add(wait)
	wokeBy := int64(0) // the commit that woke the last sleep
	for {
		woken := changes.watch(ns)
		done, err := ready()
		if done && err == nil && wokeBy != 0 && changes.woke != nil {
			changes.woke(time.Since(time.Unix(0, wokeBy)))
		}
		if err != nil || done || time.Until(deadline) <= 0 {
			return err
		}
		timer := time.NewTimer(time.Until(deadline))
		changes.asleep.Add(1)
		select {
		case <-woken:
			wokeBy = changes.last.Load()
		case <-timer.C:
		case <-ctx.Done():
		}
		changes.asleep.Add(-1)
		timer.Stop()
		if ctx.Err() != nil {
			return rpc.Errorf(rpc.CodeDeadlineExceeded, "the call's deadline passed while waiting")
		}
	}
}
