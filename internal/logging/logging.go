// Package logging builds the zerolog logger every binary uses. All output
// passes through redact.Writer: that is the one redaction point, so a
// secret that slips into a message or field is still never written.
package logging

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/redact"
)

// Flags are the logging flags every binary takes.
var Flags = []cli.Flag{
	&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: []string{"MAILPLANE_LOG_LEVEL"}},
	&cli.StringFlag{Name: "log-format", Value: "json", Usage: "json (one object per line) or console (for people)", EnvVars: []string{"MAILPLANE_LOG_FORMAT"}},
}

// FromFlags builds the logger the flags ask for, writing to stderr.
func FromFlags(c *cli.Context, component string) (zerolog.Logger, error) {
	return New(os.Stderr, c.String("log-level"), c.String("log-format"), component)
}

// New builds a logger writing to w.
func New(w io.Writer, level, format, component string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	out := redact.Writer{W: w}
	var sink io.Writer
	switch format {
	case "json":
		sink = out
	case "console":
		sink = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly, NoColor: true}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want json or console", format)
	}
	return zerolog.New(sink).Level(lvl).With().Timestamp().Str("component", component).Logger(), nil
}
