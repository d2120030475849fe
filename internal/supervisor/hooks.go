package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/hooksproc"
	"github.com/websitebench/mailplane/internal/httpserve"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// HooksConfig is mail-plane hooks' configuration: a surface's (the plane
// socket and the hooks grant), the loopback port of its /healthz, and the
// descriptor of its end of the supervisor's dials into trials' network
// namespaces (hookdial.go; 0: none, netns trials' webhooks fail).
type HooksConfig struct {
	cliapp.Listener
	DialControl int
}

// Args are HooksCommand's flags for cfg.
func (cfg HooksConfig) Args() []string {
	a := cliapp.Args(cfg.Listener.Args())
	if cfg.DialControl > 0 {
		a.Str("dial-control", strconv.Itoa(cfg.DialControl))
	}
	return a
}

// hooksFlags are mail-plane hooks' flags.
func hooksFlags() []cli.Flag {
	return append(cliapp.ListenerFlags("127.0.0.1:0", "MAILPLANE_HOOKS_LISTEN"),
		&cli.IntFlag{Name: "dial-control", Usage: "the descriptor of the supervisor's netns dials (mail-plane up passes it)"})
}

// hooksFromContext reads hooksFlags.
func hooksFromContext(c *cli.Context) HooksConfig {
	return HooksConfig{Listener: cliapp.ListenerFromContext(c), DialControl: c.Int("dial-control")}
}

// HooksCommand is mail-plane hooks, the stack's child that delivers
// provider webhooks (package hooksproc); not for people.
func HooksCommand() *cli.Command {
	return &cli.Command{
		Name:   "hooks",
		Usage:  "delivers the trials' provider webhooks (run by mail-plane up)",
		Hidden: true,
		Flags:  hooksFlags(),
		Action: func(c *cli.Context) error {
			if err := cliapp.NoArgs(c); err != nil {
				return err
			}
			cfg := hooksFromContext(c)
			var dial hooksproc.DoorDialer
			if cfg.DialControl > 0 {
				conn, err := fdpass.Conn(cfg.DialControl)
				if err != nil {
					return cliapp.Usagef("--dial-control: %v", err)
				}
				dial = doorDialer(conn)
			}
			return cliapp.RunSurface(cfg.Surface, cfg.Listen, "mail-plane hooks", func(ctx context.Context, ln net.Listener, plane *rpc.Client, log zerolog.Logger, _ httpserve.Hosts) error {
				return serveHooks(ctx, ln, plane, dial, log)
			})
		},
	}
}

// serveHooks delivers until ctx ends, answering /healthz on ln.
func serveHooks(ctx context.Context, ln net.Listener, plane *rpc.Client, dial hooksproc.DoorDialer, log zerolog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: limits.HeaderTimeout}
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info().Str("listen", ln.Addr().String()).Msg("hooks delivering")
	d := hooksproc.New(plane, log)
	d.DialDoor = dial
	err := d.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// hooksCommand is mail-plane hooks' command line: its logging is its
// surface's.
type hooksCommand struct {
	hooks HooksConfig
}

func (h hooksCommand) Args() []string {
	return append([]string{"hooks"}, h.hooks.Args()...)
}

// doorDialer asks the supervisor, over conn, for connections inside a
// door's network namespace: every dial is sent at once and answered as
// it finishes (one reader hands each answer to its caller by ID), so one
// trial's slow connect never waits in front of another's.
func doorDialer(conn *net.UnixConn) hooksproc.DoorDialer {
	type answer struct {
		text string
		fd   int // -1: none
	}
	var (
		mu      sync.Mutex
		next    uint64
		waiting = map[uint64]chan answer{}
		broken  error
	)
	go func() {
		buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
		for {
			n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				mu.Lock()
				broken = err
				for id, ch := range waiting {
					close(ch)
					delete(waiting, id)
				}
				mu.Unlock()
				return
			}
			a := answer{fd: -1}
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
				if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
					a.fd = fds[0]
				}
			}
			verdict, rest, _ := strings.Cut(string(buf[:n]), " ")
			idText, detail, _ := strings.Cut(rest, ": ")
			id, _ := strconv.ParseUint(idText, 10, 64)
			a.text = verdict
			if verdict == "error" {
				a.text = "error: " + detail
			}
			// Handed over under mu: a caller that gave up (and so left
			// waiting under mu) finds its answer in ch or never gets one.
			mu.Lock()
			ch, ok := waiting[id]
			delete(waiting, id)
			if ok {
				ch <- a
			}
			mu.Unlock()
			if !ok && a.fd >= 0 {
				unix.Close(a.fd) // its caller gave up
			}
		}
	}()
	return func(ctx context.Context, door, addr string) (net.Conn, error) {
		ch := make(chan answer, 1)
		mu.Lock()
		if broken != nil {
			mu.Unlock()
			return nil, broken
		}
		next++
		id := next
		waiting[id] = ch
		mu.Unlock()
		req, _ := json.Marshal(dialRequest{ID: id, Door: door, Addr: addr})
		if _, err := conn.Write(req); err != nil {
			mu.Lock()
			delete(waiting, id)
			mu.Unlock()
			return nil, err
		}
		var a answer
		select {
		case <-ctx.Done():
			mu.Lock()
			delete(waiting, id)
			mu.Unlock()
			select { // answered meanwhile
			case a, ok := <-ch:
				if ok && a.fd >= 0 {
					unix.Close(a.fd)
				}
			default:
			}
			return nil, ctx.Err()
		case got, ok := <-ch:
			if !ok {
				return nil, errors.New("netns dial: the supervisor's socket closed")
			}
			a = got
		}
		if a.text != "ok" {
			if a.fd >= 0 {
				unix.Close(a.fd)
			}
			return nil, errors.New("netns dial: " + a.text)
		}
		if a.fd < 0 {
			return nil, errors.New("netns dial: no socket came")
		}
		f := os.NewFile(uintptr(a.fd), "netns-dial")
		defer f.Close()
		return net.FileConn(f)
	}
}
