package inbox_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	inboxpkg "github.com/websitebench/mailplane/internal/inbox"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestPlaneErrorAnswers: the inbox answers a plane's bug (500
// internal_error) with its own 500, an outage with 503 and a refusal with
// 404, never one for another. The real plane has no way to fail with a
// bug on demand (it answers internal_error only for one), so a socket
// that answers as the plane does with each code stands in for it.
func TestPlaneErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   int
	}{
		{http.StatusInternalServerError, rpc.CodeInternal, http.StatusInternalServerError},
		{http.StatusServiceUnavailable, rpc.CodeStoreUnavailable, http.StatusServiceUnavailable},
		{http.StatusUnprocessableEntity, rpc.CodeNotFound, http.StatusNotFound},
		{http.StatusUnauthorized, rpc.CodeUnauthenticated, http.StatusNotFound},
	} {
		socket := filepath.Join(t.TempDir(), "plane.sock")
		ln, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"code":%q,"message":"answered by the test"}`, c.code)
		})}
		go srv.Serve(ln)
		var logs bytes.Buffer
		cl := rpc.NewClient(socket, "mpg_test")
		in := inboxpkg.New(cl, "", false, zerolog.New(&logs))
		for _, path := range []string{"/inbox/" + strings.Repeat("t", 43), "/inbox/" + strings.Repeat("t", 43) + "/messages/1"} {
			rec := httptest.NewRecorder()
			in.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != c.want {
				t.Errorf("plane %d %s: %s answered %d, want %d", c.status, c.code, path, rec.Code, c.want)
			}
		}
		if c.code == rpc.CodeInternal && !strings.Contains(logs.String(), `"level":"error"`) {
			t.Errorf("a plane's bug is not logged as an error: %s", logs.String())
		}
		cl.Close()
		srv.Close()
	}
}
