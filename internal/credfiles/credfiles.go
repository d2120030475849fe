// Package credfiles writes and reads secrets as files, one secret a file,
// so that each party (a surface, the evaluator, the candidate) can be
// handed only its own: the plane's grant files, and a trial's identity
// split by party (mail-plane trial create --dir / --party-dir, and the
// sidecar's own trial). Errors name files, never their content.
package credfiles

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// WriteSecret writes a secret to a new file only its owner can read, and
// syncs it: an existing file is an error, never overwritten.
func WriteSecret(path, secret string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteDir writes each secret of files (name → secret) to a new file in
// dir, created if missing. Files are 0600 and a created dir 0700;
// groupReadable makes them 0640 and 0750, whatever the umask, for a
// directory whose set-group-ID group is the one party that may read them
// (a container zone's own gid, where the writing operator is another user
// and cannot chown).
func WriteDir(dir string, files map[string]string, groupReadable bool) error {
	dirMode, fileMode := os.FileMode(0o700), os.FileMode(0o600)
	if groupReadable {
		dirMode, fileMode = 0o750, 0o640
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return err
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			return err
		}
	}
	for name, v := range files {
		path := filepath.Join(dir, name)
		if err := WriteSecret(path, v); err != nil {
			return err
		}
		if fileMode != 0o600 {
			if err := os.Chmod(path, fileMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// Parties are the parties a trial's identity is split among, in the order
// their files are written.
var Parties = []string{"writer", "inbox", "evaluator", "candidate"}

// Of splits a trial identity into what each party is handed. The file
// names are the same whether a party's files go to a directory of their
// own or together with everyone's.
func Of(id rpc.Identity) map[string]map[string]string {
	return map[string]map[string]string{
		"writer":    {"writer.grant": id.WriterGrant},
		"inbox":     {"inbox.grant": id.InboxGrant, "inbox.token": id.InboxToken},
		"evaluator": {"evaluator.capability": id.ReadCapability, "namespace": id.Namespace},
		"candidate": {"candidate.mail-api-token": id.MailAPIToken, "candidate.bootstrap-token": id.BootstrapToken},
	}
}

// All is every party's files in one set.
func All(id rpc.Identity) map[string]string {
	all := map[string]string{}
	for _, files := range Of(id) {
		maps.Copy(all, files)
	}
	return all
}

// WriteIdentity writes each party's part of a trial identity to its own
// file (0600) in dir (created 0700).
func WriteIdentity(dir string, id rpc.Identity) error {
	return WriteDir(dir, All(id), false)
}

// ReadIdentity reads back the namespace, read capability and candidate
// tokens WriteIdentity wrote into dir.
func ReadIdentity(dir string) (rpc.Identity, error) {
	var id rpc.Identity
	for name, dst := range map[string]*string{
		"namespace":                 &id.Namespace,
		"evaluator.capability":      &id.ReadCapability,
		"candidate.mail-api-token":  &id.MailAPIToken,
		"candidate.bootstrap-token": &id.BootstrapToken,
	} {
		v, err := rpc.ReadSecretFile(filepath.Join(dir, name))
		if err != nil {
			return id, fmt.Errorf("trial directory: %w", err)
		}
		*dst = v
	}
	return id, nil
}
