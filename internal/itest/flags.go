package itest

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// ParseFlags reads argv with flags as a process would, without the
// environment those flags fall back on, and returns what read makes of it.
func ParseFlags[C any](t *testing.T, flags []cli.Flag, read func(*cli.Context) C, argv []string) C {
	t.Helper()
	for _, f := range flags {
		if ef, ok := f.(cli.DocGenerationFlag); ok {
			for _, env := range ef.GetEnvVars() {
				t.Setenv(env, "") // restored after the test
				os.Unsetenv(env)
			}
		}
	}
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	var got C
	app := &cli.App{Name: "parse", Flags: flags, DisableSliceFlagSeparator: true,
		Action: func(c *cli.Context) error { got = read(c); return nil }}
	if err := app.Run(append([]string{"parse"}, argv...)); err != nil {
		t.Fatalf("flags %q: %v", argv, err)
	}
	return got
}

// FlagRoundTrip checks a process's typed configuration against its flags:
// flags alone (no environment) read as defaults; the command line args
// builds for defaults and for all is read back as the same configuration;
// and args(all) writes every one of flags, so a new flag cannot be left
// out of the configuration. all should set every field to a value other
// than its default.
func FlagRoundTrip[C any](t *testing.T, flags []cli.Flag, read func(*cli.Context) C, args func(C) []string, defaults, all C) {
	t.Helper()
	parse := func(argv []string) C {
		t.Helper()
		return ParseFlags(t, flags, read, argv)
	}
	if got := parse(nil); !reflect.DeepEqual(got, defaults) {
		t.Fatalf("no flags read as\n%+v\nthe defaults are\n%+v", got, defaults)
	}
	if reflect.DeepEqual(defaults, all) {
		t.Fatal("all is the defaults: it tests nothing beyond them")
	}
	for _, cfg := range []C{defaults, all} {
		if got := parse(args(cfg)); !reflect.DeepEqual(got, cfg) {
			t.Errorf("Args %q read back as\n%+v\nwant\n%+v", args(cfg), got, cfg)
		}
	}
	written := map[string]bool{}
	for _, a := range args(all) {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			written[name] = true
		}
	}
	for _, f := range flags {
		if name := f.Names()[0]; !written[name] {
			t.Errorf("--%s is a flag that Args never writes", name)
		}
	}
}
