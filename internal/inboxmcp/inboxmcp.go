// Package inboxmcp is the agent's mailbox as an MCP server (streamable
// HTTP, the official Go SDK): the same mailbox the HTML inbox shows, read
// through the same plane calls with the same inbox grant, as three tools.
//
// It shows what the inbox page shows and nothing more: senders as
// "Name <address>", when each message arrived and whether the agent has
// opened it, subjects, the text as sent and its links, and the readable
// text of the HTML part (what a person reads of it, links as "words
// (URL)"); never the HTML's markup, a code, an action link or any field
// of the gateway's JSON. The server is stateless (a request holds no
// session), answers JSON, and reads a request body of at most
// maxRequestBytes.
package inboxmcp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Plane is what the tools read through: the inbox's plane client.
type Plane interface {
	List(ctx context.Context, req *rpc.ReadRequest) ([]rpc.Message, error)
	Get(ctx context.Context, req *rpc.ReadRequest) (rpc.Message, error)
}

const (
	// maxRequestBytes bounds one MCP request's body: a tool call's
	// arguments are a few numbers.
	maxRequestBytes = 64 << 10
	// defaultWait is wait_for_message's timeout when none is given.
	defaultWait = 30 * time.Second
)

// Handler answers MCP for one mailbox per request: the inbox routes
// /mcp/{token} to Serve with the read request its token selects. One MCP
// server serves every request; each request's mailbox travels in its
// context, which the SDK hands to the tools.
type Handler struct {
	plane Plane
	log   zerolog.Logger
	// server is built on the first MCP request: its tools' schemas, which
	// the SDK derives by reflection, are 130 KB of heap (and more built
	// and dropped) that an inbox whose agents never use MCP does not need.
	server func() *mcp.Server
	http   *mcp.StreamableHTTPHandler
}

// mailboxKey carries a request's mailbox to the tools.
type mailboxKey struct{}

// mailbox is one request's: the read request its token selects, and when
// its answer must be written by.
type mailbox struct {
	read  rpc.ReadRequest
	until time.Time
}

// New returns the MCP handler reading through plane.
func New(plane Plane, log zerolog.Logger) *Handler {
	h := &Handler{plane: plane, log: log}
	h.server = sync.OnceValue(h.newServer)
	h.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.server() },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return h
}

// writeMargin is the time an answer is given to be written after a wait
// ends, and that a wait ends before its connection must close.
const writeMargin = 2 * time.Second

// Serve answers one MCP request for the mailbox base selects (a shared
// inbox's names its token; a trial-bound inbox's names nothing). A wait
// may hold the answer up to rpc.MaxWait, as the gateway's does, but ends
// in time for the answer to be written before the connection's lifetime
// (package connlimit) is over.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, base rpc.ReadRequest) {
	base.Door = rpc.DoorInboxMCP
	hold := min(rpc.MaxWait, connlimit.Remaining(r.Context())-2*writeMargin)
	until := time.Now().Add(max(hold, 0))
	http.NewResponseController(w).SetWriteDeadline(until.Add(writeMargin))
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	h.http.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mailboxKey{}, mailbox{read: base, until: until})))
}

// instructions is what the server tells a model about itself.
const instructions = "One mailbox, read-only: the mail sent to you. " +
	"Tools list, read and wait for its messages. Nothing is extracted for you: " +
	"find codes and links in a message's text."

// newServer is the MCP server of every mailbox: its tools read the
// mailbox of the request they answer.
func (h *Handler) newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mailplane-inbox", Version: "1"}, &mcp.ServerOptions{Instructions: instructions})
	t := tools{plane: h.plane, log: h.log}
	addTool(s, &mcp.Tool{Name: "list_messages", Description: "List the messages in your mailbox, oldest first: " +
		"id, sender, subject, when each was received and whether you have read it. Read one with read_message; no codes or links are extracted here."},
		t.list)
	addTool(s, &mcp.Tool{Name: "read_message", Description: "Read one message by its id: sender, recipients, subject, " +
		"date, its text as sent, the links in that text, and, for a message with an HTML part that reads otherwise, the text of " +
		"that HTML as a person sees it (html_text). Codes are not extracted: find them in the text."},
		t.read)
	addTool(s, &mcp.Tool{Name: "wait_for_message", Description: "Wait until a message with an id greater than after_id " +
		"(0: any) arrives, for at most timeout_seconds (default 30, at most 60). Returns the new messages, or none if the time ran out " +
		"(it may answer sooner with none: call it again)."},
		t.wait)
	return s
}

// Summary is one message in a list.
type Summary struct {
	ID       int64  `json:"id"`
	From     string `json:"from" jsonschema:"the sender: Name <address>, or the address"`
	Subject  string `json:"subject"`
	Received string `json:"received" jsonschema:"when it arrived (RFC 3339, UTC)"`
	Unread   bool   `json:"unread" jsonschema:"you have not read it yet (by read_message or the inbox's page)"`
}

// List is list_messages' and wait_for_message's answer.
type List struct {
	Messages []Summary `json:"messages"`
}

// ReadInput is read_message's argument.
type ReadInput struct {
	ID int64 `json:"id" jsonschema:"the message's id, from list_messages"`
}

// Message is read_message's answer.
type Message struct {
	ID      int64         `json:"id"`
	From    string        `json:"from" jsonschema:"the sender: Name <address>, or the address"`
	To      []string      `json:"to"`
	Subject string        `json:"subject"`
	Date    string        `json:"date" jsonschema:"when it arrived (RFC 3339, UTC)"`
	Text    string        `json:"text" jsonschema:"the message's text as sent"`
	Links   []render.Link `json:"links" jsonschema:"the links in the text, in order"`
	// HTMLText is what a person reads of the HTML part, when it says
	// other than Text (a mail with no text part has its Text derived
	// from the HTML already).
	HTMLText string `json:"html_text,omitempty" jsonschema:"the text of the message's HTML part as a person reads it, links as words (URL); absent when it is the text"`
}

// WaitInput is wait_for_message's argument.
type WaitInput struct {
	AfterID        int64    `json:"after_id,omitempty" jsonschema:"only messages with a greater id count (0: any)"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"how long to wait, 0 to 60 (default 30)"`
}

type tools struct {
	plane Plane
	log   zerolog.Logger
}

// mailboxOf is the mailbox of the request a tool answers; a request that
// came in by no route of the inbox has none.
func mailboxOf(ctx context.Context) (mailbox, error) {
	mb, ok := ctx.Value(mailboxKey{}).(mailbox)
	if !ok {
		return mb, errNoMailbox
	}
	return mb, nil
}

func (t tools) list(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, List, error) {
	mb, err := mailboxOf(ctx)
	if err != nil {
		return nil, List{}, err
	}
	req := mb.read
	msgs, err := t.plane.List(ctx, &req)
	if err != nil {
		return nil, List{}, t.fail(ctx, err, false)
	}
	return nil, summaries(msgs), nil
}

func (t tools) read(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, Message, error) {
	mb, err := mailboxOf(ctx)
	if err != nil {
		return nil, Message{}, err
	}
	if in.ID < 1 {
		return nil, Message{}, errNoMessage
	}
	req := mb.read
	req.ID = in.ID
	m, err := t.plane.Get(ctx, &req)
	if err != nil {
		return nil, Message{}, t.fail(ctx, err, true)
	}
	return nil, Message{
		ID: m.ID, From: mailmsg.ShowSender(m.FromName, m.EnvelopeFrom), To: nonNil(m.Recipients), Subject: m.Subject,
		Date: stamp(m.Received), Text: m.Text, Links: render.Links(m.Text), HTMLText: m.HTMLText,
	}, nil
}

func (t tools) wait(ctx context.Context, _ *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, List, error) {
	wait := defaultWait
	if in.TimeoutSeconds != nil {
		s := *in.TimeoutSeconds
		if !(s >= 0 && s <= rpc.MaxWait.Seconds()) {
			return nil, List{}, errTimeout
		}
		wait = time.Duration(s * float64(time.Second))
	}
	if in.AfterID < 0 {
		return nil, List{}, errAfter
	}
	mb, err := mailboxOf(ctx)
	if err != nil {
		return nil, List{}, err
	}
	wait = max(min(wait, time.Until(mb.until)), 0)
	req := mb.read
	req.After, req.WaitMillis = in.AfterID, wait.Milliseconds()
	if req.WaitMillis == 0 && wait > 0 {
		req.WaitMillis = 1
	}
	msgs, err := t.plane.List(ctx, &req)
	if err != nil {
		return nil, List{}, t.fail(ctx, err, false)
	}
	return nil, summaries(msgs), nil
}

// Answers a tool gives for bad input (a tool result marked as an error,
// which a model reads and can correct) and for no mailbox or an outage
// (MCP errors). None says whether a token was ever valid.
var (
	errNoMessage = errors.New("no such message")
	errTimeout   = errors.New("timeout_seconds must be a number from 0 to 60")
	errAfter     = errors.New("after_id must not be negative")
	// Code -32001 is ours (the JSON-RPC range for servers).
	errNoMailbox   = &jsonrpc.Error{Code: -32001, Message: "no mailbox here"}
	errUnavailable = &jsonrpc.Error{Code: -32002, Message: "the mailbox is unavailable; try again shortly"}
	errInternal    = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
)

// planeAnswers is the MCP errors each class of plane error gets: an
// outage is "unavailable", a bug "internal error"; not_found (no message)
// and a wrong or closed token are "no mailbox here", as the inbox page's
// "Not found" says no more for a wrong token. Any other refusal is the
// inbox's bug.
var planeAnswers = rpc.Answers[error]{
	Refused: map[string]error{
		rpc.CodeNotFound:         errNoMailbox,
		rpc.CodeForbidden:        errNoMailbox,
		rpc.CodeUnauthenticated:  errNoMailbox,
		rpc.CodePermissionDenied: errNoMailbox,
	},
	Outage: errUnavailable,
	Bug:    errInternal,
}

// fail maps a plane error by planeAnswers; for read_message (one)
// not_found is "no such message". The plane's message is only logged.
func (t tools) fail(ctx context.Context, err error, one bool) error {
	if ctx.Err() != nil {
		t.log.Warn().Msg("mcp: the call ended before the plane answered")
		return errUnavailable
	}
	answer, class := planeAnswers.For(err)
	switch code := rpc.CodeOf(err); {
	case class == rpc.Outage:
		t.log.Warn().Str("code", code).Msg("mcp: plane unavailable")
	case class == rpc.Bug:
		t.log.Error().Str("code", code).Msg("mcp: the plane failed or refused the inbox's read")
	case code == rpc.CodeNotFound && one:
		return errNoMessage
	case code != rpc.CodeNotFound:
		t.log.Error().Str("code", code).Msg("mcp: the plane refused the inbox's grant")
	}
	return answer
}

func summaries(msgs []rpc.Message) List {
	out := List{Messages: make([]Summary, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, Summary{ID: m.ID, From: mailmsg.ShowSender(m.FromName, m.EnvelopeFrom),
			Subject: m.Subject, Received: stamp(m.Received), Unread: !m.Opened})
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
