package plane

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzRPC feeds arbitrary frames to the plane's handler under every
// grant: it never panics, always answers JSON with a known code, and a
// refused call leaves the namespace as it was.
// fuzzCallBound bounds one call of FuzzRPC.
const fuzzCallBound = time.Second

func FuzzRPC(f *testing.F) {
	ctx := context.Background()
	l, err := sqlledger.Open(ctx, f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	b := NewBroker(l, nil, Quotas{}, zerolog.Nop())
	s := NewServer(b, peercred.Policy{}, 0, zerolog.Nop())
	id, err := b.CreateTrial(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		f.Fatal(err)
	}
	adminG, _ := b.CreateGrant(ctx, &rpc.GrantCreateRequest{Role: rpc.RoleAdmin})
	admin := adminG.Grant
	gatewayG, _ := b.CreateGrant(ctx, &rpc.GrantCreateRequest{Role: rpc.RoleGateway})
	gateway := gatewayG.Grant
	consoleG, _ := b.CreateGrant(ctx, &rpc.GrantCreateRequest{Role: rpc.RoleConsole})
	grants := []string{"", id.WriterGrant, id.InboxGrant, gateway, admin, "mpg_x", consoleG.Grant}

	f.Add("send", []byte(`{"via":"smtp","from":"no-reply@candidate.websitebench.local","to":["a@b.c"]}`+"\nSubject: x\r\n\r\ny"), uint8(1))
	f.Add("list", []byte(`{"namespace":"`+id.Namespace+`","capability":"`+id.ReadCapability+`"}`), uint8(3))
	f.Add("trial.create", []byte(`{"profile":"sidecar"}`), uint8(4))
	f.Add("get", []byte(`{"id":-1}`), uint8(2))
	f.Add("latest", []byte(`{"wait_ms":-5}`), uint8(3))
	f.Add("bootstrap", []byte(`{"token":"\u0000"}`), uint8(1))
	f.Add("../v1/send", []byte(`[]`), uint8(0))
	f.Add("health x\n", []byte(`{}`), uint8(1)) // a method that would break the request line: it is escaped into it
	op := `"admin_grant":"` + admin + `"`
	f.Add("console.trials", []byte(`{`+op+`,"namespace":"%_","recipient":"A@B.C","subject":"x","offset":3,"limit":2}`), uint8(6))
	f.Add("console.trial", []byte(`{`+op+`,"namespace":"`+id.Namespace+`","message_id":1}`), uint8(6))
	f.Add("console.wait", []byte(`{`+op+`,"namespace":"`+id.Namespace+`","version":7}`), uint8(6))
	f.Add("metrics", []byte(`{`+op+`}`), uint8(6))
	f.Add("console.trials", []byte(`{"admin_grant":"`+gateway+`"}`), uint8(6))
	known := map[int]bool{200: true, 400: true, 401: true, 403: true, 404: true, 405: true, 413: true, 422: true, 431: true, 503: true, 504: true}

	f.Fuzz(func(t *testing.T, method string, body []byte, grant uint8) {
		before, _ := l.Namespace(ctx, id.Namespace)
		// A wait the fuzzer asks for (list, latest, events, console.wait)
		// ends at the call's deadline: an input must not hold a worker for
		// the longest wait.
		status, answer := pipeCall(t, s, method, grants[int(grant)%len(grants)], body, time.Now().Add(fuzzCallBound))
		if !known[status] {
			t.Fatalf("status %d for %q", status, method)
		}
		if status != 200 {
			var e rpc.Error
			if err := json.Unmarshal(answer, &e); err != nil || e.Code == "" {
				t.Fatalf("refusal is not a coded JSON error: %q", answer)
			}
			after, _ := l.Namespace(ctx, id.Namespace)
			if after.MessageCount != before.MessageCount || after.State != before.State {
				t.Fatalf("refused %s changed the namespace: %+v → %+v", method, before, after)
			}
		}
	})
}
