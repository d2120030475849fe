package inboxmcp_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/inboxmcp"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// server serves /mcp/{token} as a shared inbox does, reading through a
// real plane with the plane's shared inbox grant.
func server(t *testing.T, plane *itest.Plane) *httptest.Server {
	h := inboxmcp.New(plane.Client(t, plane.Grant(t, rpc.RoleInbox)), zerolog.Nop())
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp/{token}", func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, rpc.ReadRequest{InboxToken: r.PathValue("token")})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func connect(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and decodes its structured output as JSON objects, so
// that every field the tool sent is seen.
func call(t *testing.T, s *mcp.ClientSession, name string, args any) (map[string]any, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, res
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	return out, res
}

func keys(m any) []string {
	return slices.Sorted(maps.Keys(m.(map[string]any)))
}

func send(t *testing.T, c *rpc.Client, raw string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"agent@example.com"}, Raw: []byte(raw)}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// The three tools over the SDK's own client against a real plane: each
// sees exactly its trial's mail, with exactly the tool's fields (no code,
// no HTML markup, no action link; the HTML's text, the received time and
// the unread mark the inbox page shows), and a wrong token gets an MCP error that says
// nothing more.
func TestTools(t *testing.T) {
	plane := itest.StartPlane(t)
	a, b := plane.Trial(t, rpc.ProfileCandidate), plane.Trial(t, rpc.ProfileCandidate)
	srv := server(t, plane)
	wa := plane.Client(t, a.WriterGrant)
	send(t, wa, "From: =?utf-8?q?=C3=89quipe_Acme?= <x@elsewhere.example>\r\nSubject: Your code\r\n"+
		"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n"+
		"Your verification code is 482913.\r\nConfirm: https://site.example/verify?t=abc&u=1\r\nHelp: https://help.example/\r\n"+
		"--b\r\nContent-Type: text/html\r\n\r\n<p>Your code is <b>482913</b></p>\r\n--b--\r\n")
	send(t, wa, "From: \"security@bank.example\" <x@y.example>\r\nSubject: Action required\r\n\r\nSign in at https://bank.example.phish/\r\n")
	send(t, plane.Client(t, b.WriterGrant), "Subject: B's mail\r\n\r\nB only\r\n")

	s := connect(t, srv.URL+"/mcp/"+a.InboxToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tl, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || len(tool.Description) > 300 {
			t.Errorf("%s: description of %d bytes", tool.Name, len(tool.Description))
		}
	}
	if slices.Sort(names); !slices.Equal(names, []string{"list_messages", "read_message", "wait_for_message"}) {
		t.Fatalf("tools %v", names)
	}

	list, _ := call(t, s, "list_messages", map[string]any{})
	if k := keys(list); !slices.Equal(k, []string{"messages"}) {
		t.Fatalf("list_messages fields %v", k)
	}
	msgs := list["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("trial A lists %d messages: %v", len(msgs), msgs)
	}
	for _, m := range msgs {
		if k := keys(m); !slices.Equal(k, []string{"from", "id", "received", "subject", "unread"}) {
			t.Fatalf("a listed message has fields %v", k)
		}
		if r, err := time.Parse(time.RFC3339, m.(map[string]any)["received"].(string)); err != nil || time.Since(r) > 10*time.Minute {
			t.Errorf("received %v %v", m.(map[string]any)["received"], err)
		}
		if m.(map[string]any)["unread"] != true {
			t.Errorf("message %v is read before any read", m.(map[string]any)["id"])
		}
	}
	if from := msgs[0].(map[string]any)["from"]; from != "Équipe Acme <"+rpc.CandidateSender+">" {
		t.Errorf("first sender %q", from)
	}
	if from := msgs[1].(map[string]any)["from"]; from != rpc.CandidateSender+` (name: "security@bank.example")` {
		t.Errorf("look-alike sender %q", from)
	}

	msg, res := call(t, s, "read_message", map[string]any{"id": 1})
	if k := keys(msg); !slices.Equal(k, []string{"date", "from", "html_text", "id", "links", "subject", "text", "to"}) {
		t.Fatalf("read_message fields %v", k)
	}
	if msg["html_text"] != "Your code is 482913" {
		t.Errorf("html_text %q", msg["html_text"])
	}
	if m2, _ := call(t, s, "read_message", map[string]any{"id": 2}); m2["html_text"] != nil {
		t.Errorf("a text-only message has html_text %q", m2["html_text"])
	}
	// Read now, as on the inbox's page.
	list, _ = call(t, s, "list_messages", map[string]any{})
	if u := list["messages"].([]any)[0].(map[string]any)["unread"]; u != false {
		t.Errorf("message 1 after read_message: unread %v", u)
	}
	if !strings.Contains(msg["text"].(string), "Your verification code is 482913.") || strings.Contains(msg["text"].(string), "<b>") {
		t.Errorf("text %q", msg["text"])
	}
	links, _ := json.Marshal(msg["links"])
	if want := `[{"text":"https://site.example/verify?t=abc\u0026u=1","url":"https://site.example/verify?t=abc\u0026u=1"},{"text":"https://help.example/","url":"https://help.example/"}]`; string(links) != want {
		t.Errorf("links %s, want %s", links, want)
	}
	// The text content a client shows a model is the same JSON.
	for _, c := range res.Content {
		txt, _ := json.Marshal(c)
		for _, banned := range []string{`otp`, `codes`, `action_link`, `html`, `namespace`, `uuid`} {
			if strings.Contains(string(txt), `\"`+banned+`\"`) {
				t.Errorf("read_message's content names %q: %s", banned, txt)
			}
		}
	}
	if _, res := call(t, s, "read_message", map[string]any{"id": 3}); !res.IsError {
		t.Errorf("trial A read B's message 3: %v", res.StructuredContent)
	}
	// Arguments of the wrong type, or fields a tool has not, are refused
	// as a tool error the model can read, and read nothing.
	for _, args := range []map[string]any{{"id": "1"}, {"id": 1.5}, {"id": 1, "html": true}} {
		if _, res := call(t, s, "read_message", args); !res.IsError || res.StructuredContent != nil {
			t.Errorf("read_message %v: error %v, content %v", args, res.IsError, res.StructuredContent)
		}
	}
	if _, res := call(t, s, "wait_for_message", map[string]any{"after_id": "x"}); !res.IsError {
		t.Errorf("wait_for_message took after_id \"x\"")
	}

	// Waiting: a wait that times out answers no messages; one that is
	// woken answers the new message only; a timeout over the limit is
	// refused.
	if got, _ := call(t, s, "wait_for_message", map[string]any{"after_id": 2, "timeout_seconds": 0.2}); len(got["messages"].([]any)) != 0 {
		t.Errorf("a wait that ran out answered %v", got)
	}
	if _, res := call(t, s, "wait_for_message", map[string]any{"timeout_seconds": 61}); !res.IsError {
		t.Errorf("a wait of 61 s was taken")
	}
	woken := make(chan map[string]any, 1)
	go func() {
		got, _ := call(t, s, "wait_for_message", map[string]any{"after_id": 2, "timeout_seconds": 30})
		woken <- got
	}()
	plane.WaitParked(t, "mail", 1) // the wait is held at the plane before the send
	send(t, wa, "Subject: Third\r\n\r\nnew\r\n")
	select {
	case got := <-woken:
		if ms := got["messages"].([]any); len(ms) != 1 || ms[0].(map[string]any)["id"] != float64(3) {
			t.Errorf("woken wait answered %v", got)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the wait was not woken")
	}

	// B's token sees B's mail only; a made-up token gets an MCP error.
	if got, _ := call(t, connect(t, srv.URL+"/mcp/"+b.InboxToken), "list_messages", map[string]any{}); len(got["messages"].([]any)) != 1 {
		t.Errorf("trial B lists %v", got)
	}
	wrong := connect(t, srv.URL+"/mcp/"+strings.Repeat("A", 43))
	_, err = wrong.CallTool(ctx, &mcp.CallToolParams{Name: "list_messages", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "no mailbox here") {
		t.Errorf("a made-up token: %v", err)
	}
}
