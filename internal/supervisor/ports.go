package supervisor

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// portKeeper is up's side of per-trial SMTP ports: it binds them, hands
// each to the shared writer over ctl (the writer never binds), and tells
// the plane which are ready (ports.sync); it closes a closed trial's port
// when the plane says so, and on its first turn binds again the ports
// that trials opened before a restart still own, reporting those it
// cannot bind (Unbound) so that the plane seals their trials (or, with
// moveTaken, moves them).
type portKeeper struct {
	admin *rpc.Client
	ctl   *net.UnixConn
	// inboxCtl hands agents' IMAP doors to the shared inbox.
	inboxCtl *net.UnixConn
	host     string
	tls      bool // the writer has TLS: a netns door has implicit-TLS SMTP too
	// moveTaken is up --move-taken-ports: a trial whose port another
	// process took moves to a new port instead of being sealed.
	moveTaken bool
	// ports is where a new port is picked (portpick.go); its zero value
	// lets the kernel pick.
	ports portRange
	log   zerolog.Logger
	ready chan struct{} // closed once the plane holds the first spare ports
	// dialer is told the doors bound and closed: the hooks process's
	// dials go only into their namespaces (hookdial.go). nil: none.
	dialer *hookDialer
}

// syncWait is how long one ports.sync waits for work.
const syncWait = 30 * time.Second

func (k *portKeeper) run(ctx context.Context) {
	req := &rpc.PortsSyncRequest{Restore: true}
	ready := false
	for ctx.Err() == nil {
		if ready {
			req.WaitMillis = syncWait.Milliseconds()
		}
		resp, err := k.admin.PortsSync(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				k.log.Warn().Err(err).Msg("ports.sync failed; retrying")
				time.Sleep(200 * time.Millisecond)
			}
			continue // req, with its ports, is sent again
		}
		if !ready && !req.Restore && len(req.Add) > 0 {
			ready = true
			close(k.ready)
		}
		req = &rpc.PortsSyncRequest{}
		for _, port := range resp.Assigned {
			if _, err := k.pass(port); err != nil {
				// Another process may hold it, and a candidate configured
				// before the restart would hand it the trial's credentials:
				// the plane seals the trial (or moves it to one of the
				// ports bound below) in the next call, before up reports
				// ready.
				k.log.Warn().Err(err).Int("port", port).Bool("move", k.moveTaken).Msg("cannot bind a trial's SMTP port again")
				req.Unbound, req.MoveTaken = append(req.Unbound, port), k.moveTaken
			}
		}
		for _, port := range resp.Release {
			if err := fdpass.Remove(k.ctl, port); err != nil {
				k.log.Error().Err(err).Msg("port control: the writer is gone")
				return
			}
			req.Closed = append(req.Closed, port)
		}
		k.doors(resp, req)
		for range resp.Want {
			port, err := k.pass(0)
			if err != nil {
				k.log.Error().Err(err).Msg("cannot bind a per-trial SMTP port")
				break
			}
			req.Add = append(req.Add, port)
		}
	}
}

// pass binds port (0: any) and hands the listener to the writer.
func (k *portKeeper) pass(port int) (int, error) {
	var ln net.Listener
	var err error
	if port == 0 {
		ln, err = k.ports.listenAny(k.host)
	} else {
		ln, err = net.Listen("tcp", net.JoinHostPort(k.host, strconv.Itoa(port)))
	}
	if err != nil {
		return 0, err
	}
	defer ln.Close() // the writer holds its own copy
	tl := ln.(*net.TCPListener)
	port = tl.Addr().(*net.TCPAddr).Port
	return port, fdpass.Add(k.ctl, port, tl)
}
