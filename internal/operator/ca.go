package operator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/tlsca"
)

// The plane's local CA (docs/tls.md) lives in
// caDir of the plane's data directory: its key never leaves it. mail-plane
// up mints it on first start, issues the writer a leaf for its names at
// every start, and hands candidates only the CA certificate (ca_file).

// CACommand is mail-plane ca.
func CACommand() *cli.Command {
	dataFlag := &cli.StringFlag{Name: "data", Value: cliapp.DefaultData, Usage: "the plane's data directory (serve --data), or mail-plane up's --data", EnvVars: []string{"MAILPLANE_DATA"}}
	return &cli.Command{
		Name:  "ca",
		Usage: "the plane's local certificate authority, for the writer's STARTTLS, implicit TLS and HTTPS",
		Subcommands: []*cli.Command{
			{
				Name:   "export",
				Usage:  "print the CA certificate (PEM), for SSL_CERT_FILE, NODE_EXTRA_CA_CERTS or a trust store",
				Flags:  []cli.Flag{dataFlag},
				Action: caExport,
			},
			{
				Name: "issue",
				Usage: "issue a leaf certificate for mail-writer (--tls-cert/--tls-key), minting the CA if there is none;\n" +
					"always valid for localhost, 127.0.0.1 and ::1; a name outside the CA's name constraints mints a new CA\n" +
					"for the names given (the old one then no longer verifies anything)",
				Flags: []cli.Flag{dataFlag,
					&cli.StringSliceFlag{Name: "name", Usage: "a further DNS name or IP address of the writer (repeatable)"},
					&cli.StringFlag{Name: "cert", Required: true, Usage: "where to write the certificate chain (PEM, 0644)"},
					&cli.StringFlag{Name: "key", Required: true, Usage: "where to write its private key (PEM, 0600)"},
				},
				Action: caIssue,
			},
		},
	}
}

func caExport(c *cli.Context) error {
	dir, err := tlsca.Find(c.String("data"))
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	pem, err := tlsca.ReadCert(dir)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(pem)
	return err
}

func caIssue(c *cli.Context) error {
	dir, err := tlsca.Find(c.String("data"))
	if err != nil {
		dir = filepath.Join(c.String("data"), tlsca.DirName)
	}
	ca, err := tlsca.Ensure(dir, c.StringSlice("name"))
	if errors.Is(err, tlsca.ErrName) {
		return cliapp.Usagef("--name: %v", err)
	}
	if err != nil {
		return err
	}
	if ca.Renewed != "" {
		fmt.Fprintf(os.Stderr, "mail-plane ca issue: minted a new CA (%s): clients must trust the new certificate (mail-plane ca export)\n", ca.Renewed)
	}
	return ca.WriteLeaf(c.StringSlice("name"), c.String("cert"), c.String("key"))
}
