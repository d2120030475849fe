package operator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
)

func runRedact(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"redact"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("redact %v: %v", args, err)
	}
	return string(out)
}

// Every example row of docs/reference.md §10, through the command.
func TestRedactCommand(t *testing.T) {
	b, err := os.ReadFile("../redact/testdata/reference-rows.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct{ in, out string }
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if in, out, ok := strings.Cut(line, "\t"); ok && !strings.HasPrefix(line, "#") {
			rows = append(rows, struct{ in, out string }{in, out})
		}
	}
	if len(rows) != 15 {
		t.Fatalf("%d rows read, want §10's 15", len(rows))
	}
	var in, want strings.Builder
	for _, r := range rows {
		in.WriteString(r.in + "\n")
		want.WriteString(r.out + "\n")
	}
	if got := runRedact(t, in.String()); got != want.String() {
		t.Fatalf("stdin filter:\n%s\nwant\n%s", got, want.String())
	}

	dir := t.TempDir()
	log := filepath.Join(dir, "run.log")
	grant := ident.Grant()
	os.WriteFile(log, []byte(in.String()+`{"msg":"grant `+grant+`"}`+"\n\xff\n"), 0o640)
	runRedact(t, "", log, filepath.Join(dir, "missing.log"), dir)
	b, _ = os.ReadFile(log)
	if !strings.HasPrefix(string(b), want.String()) || strings.Contains(string(b), grant) || !strings.Contains(string(b), "\uFFFD") {
		t.Fatalf("file rewritten as:\n%s", b)
	}
	if fi, _ := os.Stat(log); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode changed to %v", fi.Mode())
	}

	got := runRedact(t, `{"zipcode":"12345","7":"seven","nested":{"Authorization":"Bearer x","list":[{"otp":"1"},2]},"note":"kept"}`, "--json")
	if got != `{"7":"seven","nested":{"Authorization":"[REDACTED]","list":[{"otp":"[REDACTED]"},2]},"note":"kept","zipcode":"[REDACTED]"}`+"\n" {
		t.Fatalf("evidence: %s", got)
	}
}
