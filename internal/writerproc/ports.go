package writerproc

import (
	"errors"
	"fmt"
	"net"

	"github.com/rs/zerolog"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/smtpd"
)

// servePorts serves the per-trial SMTP listeners the supervisor hands
// over ctl, each by its own server (so that closing one forgets it), and
// closes those it takes back, until ctl closes (the supervisor is
// stopping), when it closes them all.
func servePorts(ctl *net.UnixConn, newServer func(fdpass.Message) *smtpd.Server, limits connlimit.Limits, sheds *shedReports, doors *doorServers, log zerolog.Logger) error {
	defer ctl.Close()
	defer doors.closeAll()
	servers := map[int]*smtpd.Server{}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	for {
		m, err := fdpass.Receive(ctl)
		if errors.Is(err, fdpass.ErrMalformed) {
			log.Error().Msg("port control: malformed message ignored")
			continue
		}
		if err != nil {
			return fmt.Errorf("port control: %w", err)
		}
		if m.Door != "" { // a trial's door inside its network namespace
			doors.handle(m)
			continue
		}
		if old, ok := servers[m.Port]; ok {
			old.Close()
			delete(servers, m.Port)
			log.Debug().Int("port", m.Port).Msg("per-trial SMTP port closed")
		}
		if m.Op == fdpass.OpRemove {
			continue
		}
		ln, err := net.FileListener(m.File)
		m.File.Close()
		if err != nil {
			log.Error().Err(err).Int("port", m.Port).Msg("port control: not a listener")
			continue
		}
		s := newServer(m)
		servers[m.Port] = s
		lim := limits
		lim.OnShed = sheds.on(m.Port)
		go s.Serve(connlimit.Listen(ln, lim))
		log.Debug().Int("port", m.Port).Msg("per-trial SMTP port serving")
	}
}

// trialServers returns what builds the server of one trial's own SMTP
// listener, as handed over: the client authenticates with that trial's
// token before MAIL (530 otherwise, as on every port that requires AUTH,
// so a port tells nothing of its trial), unless the writer runs with
// --smtp-plain-ports or the supervisor marked the listener plain
// (fdpass.Message.Plain).
func trialServers(cfg smtpd.Config, plainPorts bool, plane smtpd.Sender, log zerolog.Logger) func(fdpass.Message) *smtpd.Server {
	if plainPorts {
		log.Warn().Msg("--smtp-plain-ports: per-trial SMTP ports take mail without AUTH; any local process can write into any trial")
	}
	cfg.TrialPort = true
	return func(m fdpass.Message) *smtpd.Server {
		c := cfg
		c.RequireAuth = !plainPorts && !m.Plain
		return smtpd.New(c, plane, log)
	}
}
