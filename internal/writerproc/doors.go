package writerproc

import (
	"net"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/internal/writer"
)

// doorServers serves trials' doors inside their network namespaces, which
// the supervisor binds there and hands over (fdpass, by door key): the
// mail API and bootstrap, SMTP and implicit-TLS SMTP of one trial each,
// reachable only from its namespace. Plain SMTP on them needs no AUTH:
// each message names its door, which the plane knows as its trial's.
type doorServers struct {
	smtpCfg smtpd.Config
	plane   smtpd.Sender
	api     http.Handler // the shared API, behind the Host check
	limits  connlimit.Limits
	sheds   *shedReports
	log     zerolog.Logger
	doors   map[string]*door
}

// door is one trial's listeners.
type door struct {
	closers  []func() error
	smtpHost string
	smtpPort int
}

func newDoorServers(smtpCfg smtpd.Config, plane smtpd.Sender, api http.Handler, limits connlimit.Limits, sheds *shedReports, log zerolog.Logger) *doorServers {
	return &doorServers{smtpCfg: smtpCfg, plane: plane, api: api, limits: limits, sheds: sheds, log: log, doors: map[string]*door{}}
}

// handle serves or closes one of a door's listeners. The supervisor hands
// a door's SMTP listener before its HTTP one, so that the bootstrap the
// HTTP one answers names the SMTP port.
func (s *doorServers) handle(m fdpass.Message) {
	if m.Op == fdpass.OpRemove {
		s.close(m.Door)
		return
	}
	ln, err := net.FileListener(m.File)
	m.File.Close()
	if err != nil {
		s.log.Error().Err(err).Msg("port control: a door's socket is not a listener")
		return
	}
	d := s.doors[m.Door]
	if d == nil {
		d = &door{}
		s.doors[m.Door] = d
	}
	switch m.Kind {
	case fdpass.KindSMTP, fdpass.KindSMTPTLS:
		cfg := s.smtpCfg
		cfg.Door = m.Door
		cfg.RequireAuth = false // only the namespace's processes reach it: plain SMTP is the trial's
		cfg.ImplicitTLS = m.Kind == fdpass.KindSMTPTLS
		if cfg.TLS == nil && cfg.ImplicitTLS {
			ln.Close()
			s.log.Error().Msg("port control: an implicit-TLS door for a writer without TLS")
			return
		}
		srv := smtpd.New(cfg, s.plane, s.log)
		if m.Kind == fdpass.KindSMTP {
			d.smtpHost, d.smtpPort = listenerHost(ln), m.Port
		}
		d.closers = append(d.closers, srv.Close)
		lim := s.limits
		lim.OnShed = s.sheds.onDoor(m.Door) // recorded in the trial's trail, as a host port's
		go srv.Serve(connlimit.Listen(ln, lim))
	case fdpass.KindHTTP:
		api := writer.AtDoor(s.api, "netns:"+m.Door, d.smtpHost, d.smtpPort)
		hs := writer.NewHTTPServer(api, s.limits.Idle, s.limits.Lifetime, s.log)
		d.closers = append(d.closers, hs.Close)
		go hs.Serve(connlimit.Listen(ln, connlimit.Limits{MaxConns: s.limits.MaxConns, Lifetime: s.limits.Lifetime}))
	}
	s.log.Debug().Int("port", m.Port).Str("kind", string(m.Kind)).Msg("netns door serving")
}

// close closes every listener of a door, and its open sessions.
func (s *doorServers) close(key string) {
	d := s.doors[key]
	if d == nil {
		return
	}
	delete(s.doors, key)
	for _, c := range d.closers {
		c()
	}
	s.log.Debug().Msg("netns door closed")
}

func (s *doorServers) closeAll() {
	for key := range s.doors {
		s.close(key)
	}
}

// listenerHost is the address ln is bound to, as a client dials it.
func listenerHost(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		return advertiseHost(a.IP)
	}
	return ""
}
