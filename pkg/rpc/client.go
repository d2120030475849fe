package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// DefaultTimeout bounds a call whose context has no deadline. A call of a
// waiting method gets its wait bound (WaitBound) on top.
const DefaultTimeout = 10 * time.Second

// waitBounds are the methods that may wait, each with the longest it
// waits: the plane's policy table's waits column (a plane test holds them
// equal; this module cannot import the plane).
var waitBounds = map[string]time.Duration{
	MethodList: MaxWait, MethodLatest: MaxWait, MethodEvents: MaxWait,
	MethodPortsSync: MaxWait, MethodConsoleWait: MaxWait, MethodWebhooksTake: MaxWait,
}

// WaitBound is the longest a call of method may wait; 0 if it does not.
func WaitBound(method string) time.Duration { return waitBounds[method] }

// Client calls the plane over its Unix socket. It is safe for concurrent use
// and keeps connections alive between calls (conn.go).
type Client struct {
	socket string
	grant  string
	conns  *pool
}

// NewClient returns a client for the plane at socket that presents grant.
func NewClient(socket, grant string) *Client { return NewClientConns(socket, grant, 0) }

// NewClientConns is NewClient holding at most maxConns connections to the
// plane at once (0: no bound); a call over it waits for one. A surface
// passes its own connection cap: it sized that cap by its descriptors,
// one per connection and one per plane connection.
func NewClientConns(socket, grant string, maxConns int) *Client {
	return &Client{socket: socket, grant: grant, conns: newPool(socket, maxConns)}
}

// ReadSecretFile reads a grant, token or capability from a file, trimming
// surrounding white space. The error names the path, never the content.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// Close releases idle connections.
func (c *Client) Close() { c.conns.closeIdle() }

// Call invokes method with req and decodes the answer into resp. Errors are
// *Error: the plane's own; CodePlaneUnavailable (an Outage) when it cannot
// be asked or its answer breaks off; CodeInternal (a Bug) when its answer
// does not decode, since that is drift between the two sides' types, not
// an outage that waiting mends.
func (c *Client) Call(ctx context.Context, method string, req, resp any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout+WaitBound(method))
		defer cancel()
	}
	body, ctype, err := encode(req)
	if err != nil {
		return Errorf(CodeBadRequest, "encode %s request: %v", method, err)
	}
	deadline, _ := ctx.Deadline()
	a, done, err := c.conns.exchange(ctx, method, c.grant, ctype, deadline, body)
	if err != nil {
		var ee *exchangeError
		switch {
		case errors.Is(err, errTooLarge):
			return Errorf(CodeFrameTooLarge, "%s: answer exceeds %d bytes", method, MaxResponseBytes)
		case errors.As(err, &ee) && ee.inBody:
			return Errorf(CodePlaneUnavailable, "%s: reading the answer: %v", method, unwrapNet(ee.err))
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return Errorf(CodeDeadlineExceeded, "%s: no answer from the plane in time", method)
		case errors.Is(err, errWait):
			err = ctx.Err()
		}
		return Errorf(CodePlaneUnavailable, "%s: plane at %s unreachable: %v", method, c.socket, unwrapNet(err))
	}
	defer done()
	if a.status != http.StatusOK {
		var e Error
		if json.Unmarshal(a.body, &e) != nil || e.Code == "" {
			return Errorf(CodeInternal, "%s: undecodable answer %d from the plane", method, a.status)
		}
		if e.Class == "" {
			e.Class = classOfCode(e.Code)
		}
		return &e
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(a.body, resp); err != nil {
		return Errorf(CodeInternal, "%s: undecodable answer: %v", method, err)
	}
	return nil
}

// encode is a request's body, in pieces written as they are, and its
// type: a send's frame (its message not copied), JSON for every other
// call.
func encode(req any) ([][]byte, string, error) {
	if s, ok := req.(*SendRequest); ok {
		return [][]byte{s.frameHead(), s.Raw}, SendContentType, nil
	}
	b, err := json.Marshal(req)
	return [][]byte{b}, "application/json", err
}

// DeadlineHeader carries the caller's deadline so the plane can stop work
// that nobody waits for any more.
const DeadlineHeader = "Mailplane-Deadline"

func unwrapNet(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	return err
}

// Health asks whether the plane and its store are up.
func (c *Client) Health(ctx context.Context) (HealthResponse, error) {
	var r HealthResponse
	return r, c.Call(ctx, MethodHealth, &Empty{}, &r)
}

// Send offers one message.
func (c *Client) Send(ctx context.Context, req *SendRequest) (SendResponse, error) {
	var r SendResponse
	return r, c.Call(ctx, MethodSend, req, &r)
}

// CheckCredential asks whether a credential opens a trial for writing.
func (c *Client) CheckCredential(ctx context.Context, req *CredentialRequest) error {
	return c.Call(ctx, MethodCredentialCheck, req, nil)
}

// ResolveCredential is CheckCredential, answering the namespace the
// credential opened.
func (c *Client) ResolveCredential(ctx context.Context, req *CredentialRequest) (CredentialResponse, error) {
	var r CredentialResponse
	return r, c.Call(ctx, MethodCredentialCheck, req, &r)
}

// ResolveReader asks which namespace req's inbox token (a shared inbox's
// request) or read capability (the gateway's, for req.Namespace) opens;
// only those fields are judged, and nothing is read or recorded.
func (c *Client) ResolveReader(ctx context.Context, req *ReadRequest) (CredentialResponse, error) {
	var r CredentialResponse
	return r, c.Call(ctx, MethodReadCheck, req, &r)
}

// Refused records a request the writer refused for its form, if its
// credential opens a trial; else it answers as CheckCredential.
func (c *Client) Refused(ctx context.Context, req *RefusalRequest) error {
	return c.Call(ctx, MethodRefusal, req, nil)
}

// Bootstrap trades a bootstrap token for write coordinates.
func (c *Client) Bootstrap(ctx context.Context, token string) (BootstrapResponse, error) {
	var r BootstrapResponse
	return r, c.Call(ctx, MethodBootstrap, &BootstrapRequest{Token: token}, &r)
}

// List returns the namespace's messages, oldest first.
func (c *Client) List(ctx context.Context, req *ReadRequest) ([]Message, error) {
	var r ListResponse
	err := c.Call(ctx, MethodList, req, &r)
	return r.Messages, err
}

// Get returns one message by id.
func (c *Client) Get(ctx context.Context, req *ReadRequest) (Message, error) {
	var r Message
	return r, c.Call(ctx, MethodGet, req, &r)
}

// Latest returns the newest matching message, CodeNotFound when none.
func (c *Client) Latest(ctx context.Context, req *ReadRequest) (Message, error) {
	var r Message
	return r, c.Call(ctx, MethodLatest, req, &r)
}

// TrialCreate mints a trial.
func (c *Client) TrialCreate(ctx context.Context, req *TrialCreateRequest) (Identity, error) {
	var r Identity
	return r, c.Call(ctx, MethodTrialCreate, req, &r)
}

// TrialRotate moves a trial to a fresh namespace and seals the previous one.
func (c *Client) TrialRotate(ctx context.Context, req *TrialRotateRequest) (RotateResponse, error) {
	var r RotateResponse
	return r, c.Call(ctx, MethodTrialRotate, req, &r)
}

// TrialSeal retires a trial's writer and keeps evaluator reads.
func (c *Client) TrialSeal(ctx context.Context, namespace string) error {
	return c.Call(ctx, MethodTrialSeal, &TrialRequest{Namespace: namespace}, nil)
}

// TrialList describes open trials, a page at a time (req may be nil: the
// first page).
func (c *Client) TrialList(ctx context.Context, req *TrialListRequest) (TrialListResponse, error) {
	if req == nil {
		req = &TrialListRequest{}
	}
	var r TrialListResponse
	return r, c.Call(ctx, MethodTrialList, req, &r)
}

// TrialInfo describes one open trial, by any of its namespaces, without
// its secrets.
func (c *Client) TrialInfo(ctx context.Context, namespace string) (TrialInfo, error) {
	var r TrialInfo
	return r, c.Call(ctx, MethodTrialInfo, &TrialRequest{Namespace: namespace}, &r)
}

// AllTrials describes every open trial, page after page.
func (c *Client) AllTrials(ctx context.Context) ([]TrialInfo, error) {
	var all []TrialInfo
	req := &TrialListRequest{}
	for {
		page, err := c.TrialList(ctx, req)
		if err != nil {
			return all, err
		}
		all = append(all, page.Trials...)
		if page.Next == 0 {
			return all, nil
		}
		req.After = page.Next
	}
}

// TrialOpen opens a trial on a stack of shared surfaces and returns its
// bundle.
func (c *Client) TrialOpen(ctx context.Context, req *TrialOpenRequest) (Bundle, error) {
	var r Bundle
	return r, c.Call(ctx, MethodTrialOpen, req, &r)
}

// TrialClose closes a trial: everything of it is revoked, its mail deleted.
func (c *Client) TrialClose(ctx context.Context, namespace string) error {
	return c.Call(ctx, MethodTrialClose, &TrialRequest{Namespace: namespace}, nil)
}

// PortsSync is one turn of a supervisor's port loop.
func (c *Client) PortsSync(ctx context.Context, req *PortsSyncRequest) (PortsSyncResponse, error) {
	var r PortsSyncResponse
	return r, c.Call(ctx, MethodPortsSync, req, &r)
}

// GrantCreate mints a gateway or admin grant.
func (c *Client) GrantCreate(ctx context.Context, role Role) (string, error) {
	var r GrantResponse
	err := c.Call(ctx, MethodGrantCreate, &GrantCreateRequest{Role: role}, &r)
	return r.Grant, err
}

// Events reads a namespace's trail (a gateway, with its caller's read
// capability).
func (c *Client) Events(ctx context.Context, req *EventsRequest) (EventsResponse, error) {
	var r EventsResponse
	return r, c.Call(ctx, MethodEvents, req, &r)
}

// Export reads a page of a trail for the operator, open or closed.
func (c *Client) Export(ctx context.Context, req *EventsRequest) (EventsResponse, error) {
	var r EventsResponse
	return r, c.Call(ctx, MethodExport, req, &r)
}

// Report tells the plane of SMTP sessions the writer refused.
func (c *Client) Report(ctx context.Context, req *ReportRequest) error {
	return c.Call(ctx, MethodReport, req, nil)
}

// Click records the agent's click on a link of a message (the inbox's
// ping route).
func (c *Client) Click(ctx context.Context, req *ClickRequest) error {
	return c.Call(ctx, MethodClick, req, nil)
}

// Flag sets or clears a flag of the agent's messages (MethodFlag).
func (c *Client) Flag(ctx context.Context, req *FlagRequest) error {
	return c.Call(ctx, MethodFlag, req, nil)
}

// TrialPlant plants the evaluator's labelled message in a trial.
func (c *Client) TrialPlant(ctx context.Context, req *PlantRequest) (PlantResponse, error) {
	var r PlantResponse
	return r, c.Call(ctx, MethodTrialPlant, req, &r)
}
