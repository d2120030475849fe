package operator

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/redact"
)

// RedactCommand is mail-plane redact.
func RedactCommand() *cli.Command {
	return &cli.Command{
		Name:      "redact",
		Usage:     "remove secrets from log files or evidence",
		ArgsUsage: "[FILE...]",
		Description: "With FILE arguments, rewrites each regular file in place (others are left alone); without, filters\n" +
			"standard input to standard output. Text: the reference's patterns (Bearer tokens, token=, password:,\n" +
			"otp=, verification codes, card numbers...) and every secret format mailplane mints. --json reads one\n" +
			"JSON value from standard input and replaces the whole value of every key that names a secret.",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "redact a JSON document by key (evidence)"}},
		Action: func(c *cli.Context) error {
			if c.Bool("json") {
				if c.NArg() > 0 {
					return cliapp.Usagef("--json reads standard input; it takes no FILE")
				}
				var v any
				dec := json.NewDecoder(os.Stdin)
				dec.UseNumber()
				if err := dec.Decode(&v); err != nil {
					return cliapp.Usagef("standard input is not JSON: %v", err)
				}
				enc := json.NewEncoder(os.Stdout)
				enc.SetEscapeHTML(false)
				return enc.Encode(redact.Evidence(v))
			}
			if c.NArg() == 0 {
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return err
				}
				_, err = io.WriteString(os.Stdout, redactText(b))
				return err
			}
			for _, path := range c.Args().Slice() {
				if err := redactFile(path); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			return nil
		},
	}
}

// redactText is the reference's redact_log_file reading: UTF-8 with
// undecodable bytes replaced.
func redactText(b []byte) string {
	return redact.Text(strings.ToValidUTF8(string(b), "\uFFFD"))
}

// redactFile rewrites a regular file in place, atomically (a reader sees
// the old or the new content, never a mix), keeping its mode. Anything
// that is not a regular file is left alone.
func redactFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out := redactText(b)
	if out == string(b) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".redact-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
