package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// pkg/mailclient against a running gateway: the evaluator starts waiting,
// the site sends, the evaluator gets the code and the links.
func TestMailclient(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	c := mailclient.New(gw.URL+"/", id.Namespace, id.ReadCapability)
	if strings.Contains(c.String(), id.ReadCapability) {
		t.Fatalf("String() shows the capability")
	}

	type result struct {
		code  string
		links []string
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*itest.Bound)
		defer cancel()
		code, links, err := c.WaitCode(ctx, "user@example.com", 0)
		ch <- result{code, links, err}
	}()
	plane.WaitParked(t, "mail", 1)
	s.send(t, []string{"other@example.com"}, "Not this one", "code 1111")
	s.send(t, []string{"User@Example.com"}, "Sign in", "Your code is 482913.\r\nOr open https://site.example/magic?t=1 now.\r\n")
	select {
	case r := <-ch:
		if r.err != nil || r.code != "482913" || len(r.links) != 1 || r.links[0] != "https://site.example/magic?t=1" {
			t.Fatalf("WaitCode = %q, %q, %v", r.code, r.links, r.err)
		}
	case <-time.After(itest.Bound):
		t.Fatal("WaitCode did not return")
	}

	ctx := context.Background()
	all, err := c.List(ctx, mailclient.Query{})
	if err != nil || len(all) != 2 || all[0].ID != 1 || all[1].ID != 2 {
		t.Fatalf("List = %d messages, %v", len(all), err)
	}
	mine, err := c.List(ctx, mailclient.Query{Recipient: "user@example.com"})
	if err != nil || len(mine) != 1 || mine[0].Subject != "Sign in" || mine[0].OTP == nil || *mine[0].OTP != "482913" {
		t.Fatalf("List(recipient) = %+v, %v", mine, err)
	}
	if m, err := c.Latest(ctx, mailclient.Query{}); err != nil || m.ID != 2 || m.EnvelopeFrom != rpc.CandidateSender {
		t.Fatalf("Latest = %+v, %v", m, err)
	}
	if m, err := c.Get(ctx, 1); err != nil || m.Subject != "Not this one" || m.Recipients[0] != "other@example.com" {
		t.Fatalf("Get(1) = %+v, %v", m, err)
	}
	if _, err := c.Get(ctx, 99); !mailclient.IsNotFound(err) {
		t.Fatalf("Get(99) error %v, want not found", err)
	}
	if _, err := c.Latest(ctx, mailclient.Query{After: 2, Wait: 200 * time.Millisecond}); !mailclient.IsNotFound(err) {
		t.Fatalf("Latest after the last, waiting: %v, want not found", err)
	}

	// A Wait whose context ends returns, with an error that says so.
	wctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Wait(wctx, "user@example.com", 2)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !mailclient.IsNotFound(err) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	if took := time.Since(start); took < 350*time.Millisecond || took > itest.Bound {
		t.Fatalf("Wait returned after %v, want at its deadline", took)
	}

	// A message with no code.
	s.send(t, []string{"user@example.com"}, "Hello", "no digits here")
	if _, _, err := c.WaitCode(ctx, "user@example.com", 2); !errors.Is(err, mailclient.ErrNoCode) {
		t.Fatalf("WaitCode on a message without code: %v", err)
	}

	if _, err := c.WaitLink(ctx, "user@example.com", 2); !errors.Is(err, mailclient.ErrNoLink) {
		t.Fatalf("WaitLink on a message without an action link: %v", err)
	}
	// The action link, as written: a magic link in a sign-in mail.
	s.send(t, []string{"user@example.com"}, "Sign in to Acme", "Sign in to Acme with this link:\r\nhttps://site.example/m?t=2&u=3\r\n\r\nUnsubscribe: https://site.example/u\r\n")
	if link, err := c.WaitLink(ctx, "user@example.com", 3); err != nil || link != "https://site.example/m?t=2&u=3" {
		t.Fatalf("WaitLink = %q, %v", link, err)
	}

	// Errors carry the gateway's code and status.
	var e *mailclient.Error
	_, err = mailclient.New(gw.URL, id.Namespace, strings.Repeat("0", 64)).List(ctx, mailclient.Query{})
	if !errors.As(err, &e) || e.Code != mailclient.CodeForbidden || e.StatusCode != 403 || e.Name != "invalid_api_key" {
		t.Fatalf("wrong capability: %v", err)
	}
	_, err = mailclient.New(gw.URL, "bad ns", id.ReadCapability).Latest(ctx, mailclient.Query{})
	if !errors.As(err, &e) || e.Code != mailclient.CodeInvalidNamespace || e.StatusCode != 400 {
		t.Fatalf("invalid namespace: %v", err)
	}
	_, err = c.List(ctx, mailclient.Query{Recipient: "never@example.com"})
	if !errors.As(err, &e) || e.Code != mailclient.CodeRecipientForbidden {
		t.Fatalf("recipient never delivered to: %v", err)
	}
}

// The trail through the gateway: Events pages with after, WaitEvent holds
// until the event commits (nobody polls), a wrong capability is refused
// as on messages, and a bad after or wait is refused before the plane is
// asked.
func TestMailclientEvents(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	c := mailclient.New(gw.URL, id.Namespace, id.ReadCapability)
	ctx := context.Background()
	es, err := c.Events(ctx, 0, 0)
	if err != nil || len(es) != 1 || es[0].Action != "open" || es[0].Seq != 1 || len(es[0].Line) == 0 {
		t.Fatalf("Events = %+v, %v", es, err)
	}
	type result struct {
		e   mailclient.Event
		err error
	}
	ch := make(chan result, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 3*itest.Bound)
		defer cancel()
		e, err := c.WaitEvent(wctx, 1, func(e mailclient.Event) bool { return e.Action == "send" })
		ch <- result{e, err}
	}()
	plane.WaitParked(t, "trail", 1)
	s.send(t, []string{"user@example.com"}, "Hello", "Your code is 482913.")
	var r result
	select {
	case r = <-ch:
	case <-time.After(itest.Bound):
		t.Fatal("WaitEvent did not return")
	}
	if r.err != nil || r.e.Outcome != "accepted" || len(r.e.MessageIDs) != 1 || r.e.MessageIDs[0] != 1 || r.e.Seq != 2 {
		t.Fatalf("WaitEvent = %+v, %v", r.e, r.err)
	}
	if strings.Contains(string(r.e.Line), "482913") {
		t.Fatal("the trail holds the code")
	}
	start := time.Now()
	if es, err := c.Events(ctx, 2, 300*time.Millisecond); err != nil || len(es) != 0 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("an empty wait: %+v %v after %v", es, err, time.Since(start))
	}
	wrong := mailclient.New(gw.URL, id.Namespace, strings.Repeat("0", 64))
	var e *mailclient.Error
	if _, err := wrong.Events(ctx, 0, 0); !errors.As(err, &e) || e.StatusCode != 403 || e.Code != "forbidden" {
		t.Fatalf("wrong capability: %v", err)
	}
	for _, q := range []string{"?after=x", "?wait=61s", "?after=-1"} {
		req, _ := http.NewRequest(http.MethodGet, gw.URL+"/api/namespaces/"+id.Namespace+"/events"+q, nil)
		req.Header.Set("Authorization", "Bearer "+id.ReadCapability)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// The events route as Server-Sent Events: the trail so far, then each
// event as it commits; Last-Event-ID resumes; a wrong capability is the
// JSON refusal.
func TestEventStream(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	open := func(capability, lastID string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, gw.URL+"/api/namespaces/"+id.Namespace+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+capability)
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := open(strings.Repeat("0", 64), ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("wrong capability: %d", resp.StatusCode)
	}
	resp := open(id.ReadCapability, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	next := func() (string, string) {
		t.Helper()
		var id, data string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				return id, data
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}
	if id1, data := next(); id1 != "1" || !strings.Contains(data, `"action":"open"`) {
		t.Fatalf("first event: %s %s", id1, data)
	}
	// The stream is parked at the plane when the send commits.
	plane.WaitParked(t, "trail", 1)
	s.send(t, []string{"user@example.com"}, "Hello", "hi")
	id2, data := next()
	if id2 != "2" || !strings.Contains(data, `"action":"send"`) {
		t.Fatalf("second event: %s %s", id2, data)
	}
	resumed := bufio.NewReader(open(id.ReadCapability, "1").Body)
	br = resumed
	if id2, _ := next(); id2 != "2" {
		t.Fatalf("Last-Event-ID 1 resumed at %s", id2)
	}
}

// pkg/mailclient decodes the sender's display name, the HTML part and the
// received time the gateway writes.
func TestMailclientMessageFields(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	before := time.Now().Truncate(time.Millisecond)
	const html = `<p>Your code is <b>770011</b></p>`
	newSender(t, plane, id).sendRaw(t, []string{"user@example.com"}, "From: Acme <"+rpc.CandidateSender+">\r\nSubject: Welcome\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nYour code is 770011.\r\n"+
		"--b\r\nContent-Type: text/html\r\n\r\n"+html+"\r\n--b--\r\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := mailclient.New(gw.URL, id.Namespace, id.ReadCapability).Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.FromName != "Acme" || m.EnvelopeFrom != rpc.CandidateSender || strings.TrimSpace(m.HTML) != html || strings.TrimSpace(m.Text) != "Your code is 770011." {
		t.Fatalf("from %q <%s>, html %q, text %q", m.FromName, m.EnvelopeFrom, m.HTML, m.Text)
	}
	if m.ReceivedAt.Location() != time.UTC || m.ReceivedAt.Before(before) || m.ReceivedAt.After(time.Now()) {
		t.Fatalf("received_at %v, want UTC between %v and now", m.ReceivedAt, before)
	}
}
