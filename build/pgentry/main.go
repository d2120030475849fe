// Command pg-entry is the entrypoint of build/images/postgres.Dockerfile,
// the PostgreSQL zone's image: Debian's postgres server with its libraries
// and nothing else (no shell, no initdb, no client).
//
// It talks to nothing on the network. It holds one secret, the password of
// the role "mailplane", read from a file (a Docker secret), and it hands
// PostgreSQL only its SCRAM-SHA-256 verifier, on stdin: the password is
// never in an argument, the environment, the data directory or a log.
//
//	pg-entry [--password-file PATH]   start the server (the default)
//	pg-entry health                   the container's health check
//
// On the first start it copies the cluster that initdb made when the image
// was built (/initdb) into the data directory and creates the role and its
// database there. On every start it writes pg_hba.conf (the role
// "mailplane", to its database "mailplane", by password over TCP; nothing
// else, from anywhere) and sets the role's password from the file, so
// changing the secret and restarting rotates it. Then it becomes postgres,
// listening on every address of its container: Docker's networks decide
// who can reach it. Exit status 2: a configuration error (a bad password
// file), which a restart cannot mend.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

const (
	template = "/initdb"                  // the cluster initdb made at build time
	dataDir  = "/var/lib/postgresql/data" // in the volume mounted on /var/lib/postgresql
	binGlob  = "/usr/lib/postgresql/*/bin/postgres"
	role     = "mailplane" // the only role that may log in, to its own database
	database = "mailplane"

	// Written on every start: the only way in is the role "mailplane" to
	// its database, by SCRAM over TCP. The bootstrap superuser cannot log
	// in at all (there is no Unix socket, and no line for it); the
	// entrypoint reaches it through single-user mode only.
	hba = `# Written by pg-entry on every start; edits are lost.
# TYPE  DATABASE   USER       ADDRESS    METHOD
host    mailplane  mailplane  0.0.0.0/0  scram-sha-256
host    mailplane  mailplane  ::/0       scram-sha-256
`
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "health" {
		if err := health("127.0.0.1:5432"); err != nil {
			fmt.Fprintln(os.Stderr, "pg-entry health:", err)
			os.Exit(1)
		}
		return
	}
	fs := flag.NewFlagSet("pg-entry", flag.ContinueOnError)
	passwordFile := fs.String("password-file", "/run/secrets/postgres-password", "file holding the password of the role "+role)
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: pg-entry [--password-file PATH] | pg-entry health")
		os.Exit(2)
	}
	password, err := readPassword(*passwordFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pg-entry:", err)
		os.Exit(2)
	}
	if err := start(password); err != nil {
		fmt.Fprintln(os.Stderr, "pg-entry:", err)
		os.Exit(1)
	}
}

// start prepares the data directory and replaces this process with
// postgres, which then gets the container's signals itself.
func start(password string) error {
	bins, _ := filepath.Glob(binGlob)
	if len(bins) != 1 {
		return fmt.Errorf("want one postgres server at %s, found %d", binGlob, len(bins))
	}
	postgres := bins[0]
	verifier, err := scramVerifier(password)
	if err != nil {
		return err
	}
	// ALTER on every start: the secret file is the truth, so rotating it is
	// a restart.
	sql := fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'\n", role, verifier)
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		// First start: build the cluster beside, then move it into place,
		// so that a start interrupted half-way starts over.
		fresh := dataDir + ".new"
		if err := os.RemoveAll(fresh); err != nil {
			return err
		}
		if err := copyTree(template, fresh); err != nil {
			return fmt.Errorf("copying the initial cluster: %w", err)
		}
		if err := os.WriteFile(filepath.Join(fresh, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
			return err
		}
		create := fmt.Sprintf("CREATE ROLE %s LOGIN\nCREATE DATABASE %s OWNER %s\n", role, database, role)
		if err := single(postgres, fresh, create+sql); err != nil {
			return err
		}
		if err := os.Rename(fresh, dataDir); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(dataDir)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "pg-entry: initialised %s with the role %q and its database\n", dataDir, role)
	} else {
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
			return err
		}
		if err := single(postgres, dataDir, sql); err != nil {
			return err
		}
	}
	return syscall.Exec(postgres, []string{postgres, "-D", dataDir,
		"-c", "listen_addresses=*",
		"-c", "unix_socket_directories=",
		"-c", "password_encryption=scram-sha-256",
	}, os.Environ())
}

// single runs statements (one a line) through postgres's single-user mode,
// which needs no login and no socket. Its output is shown only when it
// fails, and then without any line that carries the verifier.
func single(postgres, dir, statements string) error {
	cmd := exec.Command(postgres, "--single", "-D", dir, "-c", "exit_on_error=on", "postgres")
	cmd.Stdin = strings.NewReader(statements)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var shown []string
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.Contains(line, "SCRAM-SHA-256$") {
				shown = append(shown, line)
			}
		}
		return fmt.Errorf("single-user mode: %v\n%s", err, strings.Join(shown, "\n"))
	}
	return nil
}

// copyTree copies the template cluster, owned by the running user, with
// the modes PostgreSQL wants (0700 directories, 0600 files), each file
// synced.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.Mkdir(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		// On disk before the cluster is moved into place: postgres syncs
		// only what it wrote itself.
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
