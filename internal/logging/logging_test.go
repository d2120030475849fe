package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/ident"
)

func TestNew(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		var buf bytes.Buffer
		log, err := New(&buf, "info", format, "test")
		if err != nil {
			t.Fatal(err)
		}
		g := ident.Grant()
		log.Info().Str("detail", "grant "+g).Msg("Authorization: Bearer " + ident.Capability())
		log.Debug().Msg("hidden at info")
		out := buf.String()
		if strings.Contains(out, g) || strings.Contains(out, "Bearer ") || strings.Contains(out, "hidden") || !strings.Contains(out, "[REDACTED]") {
			t.Fatalf("%s: %q", format, out)
		}
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["component"] != "test" {
				t.Fatalf("not one JSON object per line: %q", out)
			}
		}
	}
	for _, bad := range [][2]string{{"loud", "json"}, {"", "json"}, {"info", "xml"}} {
		if _, err := New(&bytes.Buffer{}, bad[0], bad[1], "x"); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
