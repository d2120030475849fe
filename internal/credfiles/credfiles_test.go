package credfiles

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestWriteDir: files are 0600 (0640 group-readable) and a created
// directory 0700 (0750) whatever the umask; a file is never overwritten;
// what WriteIdentity writes, ReadIdentity reads back.
func TestWriteDir(t *testing.T) {
	old := syscall.Umask(0o077) // as mail-plane runs
	defer syscall.Umask(old)
	for _, c := range []struct {
		group          bool
		dirMode, fMode os.FileMode
	}{{false, 0o700, 0o600}, {true, 0o750, 0o640}} {
		dir := filepath.Join(t.TempDir(), "secrets")
		if err := WriteDir(dir, map[string]string{"a": "secret a"}, c.group); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != c.dirMode {
			t.Errorf("group %v: dir %v, want %v", c.group, fi.Mode().Perm(), c.dirMode)
		}
		if fi, _ := os.Stat(filepath.Join(dir, "a")); fi.Mode().Perm() != c.fMode {
			t.Errorf("group %v: file %v, want %v", c.group, fi.Mode().Perm(), c.fMode)
		}
		if err := WriteDir(dir, map[string]string{"a": "other"}, c.group); err == nil {
			t.Errorf("an existing file was overwritten")
		}
	}
	dir := t.TempDir()
	id := rpc.Identity{Namespace: "trial-x", ReadCapability: "cap", MailAPIToken: "api", BootstrapToken: "boot", WriterGrant: "wg", InboxGrant: "ig", InboxToken: "it"}
	if err := WriteIdentity(dir, id); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIdentity(dir)
	if err != nil || got.Namespace != id.Namespace || got.ReadCapability != id.ReadCapability || got.MailAPIToken != id.MailAPIToken || got.BootstrapToken != id.BootstrapToken {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if n := len(All(id)); n != 7 {
		t.Fatalf("%d files for 7 secrets", n)
	}
}
