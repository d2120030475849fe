package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Live updates: a page names its stream (/live, with ?trial=NS for one
// trial's page) and the version it shows; the stream sends an event each
// time the plane's view moves past it, and the page's script fetches the
// page again. A stream lasts streamFor, then the browser reconnects with
// the last version it was sent (Last-Event-ID).
const (
	streamFor = 50 * time.Second
	// pollWait is one plane wait; minGap spaces the events of a busy
	// plane, so that a page is fetched at most so often.
	pollWait = 20 * time.Second
	minGap   = 500 * time.Millisecond
)

func (c *Console) live(w http.ResponseWriter, r *http.Request, v visit) {
	// The plane judges the credential first, then the trial's name; a
	// version that does not parse is 0, which the first answer moves past.
	q := r.URL.Query()
	ns := q.Get("trial")
	version, _ := strconv.ParseUint(q.Get("v"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		version, _ = strconv.ParseUint(id, 10, 64)
	}
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "503 too many live pages", http.StatusServiceUnavailable)
		return
	}
	ctx := r.Context()
	end := time.Now().Add(streamFor)
	started := false
	for time.Until(end) > 0 && ctx.Err() == nil {
		var resp rpc.ConsoleWaitResponse
		// The first call does not wait: it judges the credential, and the
		// stream starts at once.
		wait := min(pollWait, time.Until(end))
		if !started {
			wait = 0
		}
		err := c.plane.Call(ctx, rpc.MethodConsoleWait, &rpc.ConsoleWaitRequest{Operator: v.op, Namespace: ns, Version: version,
			WaitMillis: wait.Milliseconds()}, &resp)
		if err != nil {
			if !started {
				c.fail(w, r, v, err)
			}
			return
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if resp.Version != version {
			version = resp.Version
			fmt.Fprintf(w, "id: %d\ndata: changed\n\n", version)
		} else {
			fmt.Fprint(w, ": still here\n\n")
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		select {
		case <-ctx.Done():
		case <-time.After(minGap):
		}
	}
}
