package plane

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailindex"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/plant"
	"github.com/websitebench/mailplane/internal/redact"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// What the agent does with its mail, on the record: its opens (an inbox
// read of one message, evidence.go), its clicks (the browser's ping of a
// link, Click), and the evaluator's planted mail (Plant), which the
// agent's views cannot tell from the candidate's.

// Plant stores the evaluator's labelled message in a trial's current
// namespace, as a send would but outside the quota, with its planting
// recorded (with the label) in the same savepoint.
func (b *Broker) Plant(ctx context.Context, req *rpc.PlantRequest) (rpc.PlantResponse, error) {
	_, ns, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.PlantResponse{}, err
	}
	sender := rpc.CandidateSender
	if len(ns.AllowedSenders) > 0 {
		sender = ns.AllowedSenders[0]
	}
	var to []string
	if len(req.To) == 0 {
		if to, err = b.lastRecipients(ctx, ns.Name); err != nil {
			return rpc.PlantResponse{}, err
		}
	}
	m, err := plant.Check(req, sender, to, time.Now())
	if err != nil {
		return rpc.PlantResponse{}, err
	}
	stored, err := mailmsg.Scrub(ctx, m.Raw, m.From, m.To, mailmsg.LabelHeader+": "+m.Label)
	if errors.Is(err, mailmsg.ErrHeaderTooLarge) {
		return rpc.PlantResponse{}, rpc.Errorf(rpc.CodeMessageTooLarge, "the message's header is too large")
	}
	if err != nil {
		return rpc.PlantResponse{}, b.storeErr("scrub", err)
	}
	offer := &ledger.Offer{
		Namespace: ns.Name, UUID: ident.UUID(), From: m.From, To: m.To, Size: len(stored), Exempt: true,
		Index: mailindex.Of(stored).Encode(),
		Event: &evidence.Event{Door: evidence.DoorPlane, Action: evidence.ActionPlant, Outcome: evidence.Accepted,
			From: address(m.From), To: addresses(m.To), Label: m.Label},
	}
	env := msgstore.Envelope{From: m.From, To: m.To}
	sns := msgstore.Namespace{Name: ns.Name, Tag: ns.Tag}
	e, replayed, decided, err := b.bodies.stage(ctx, b, offer, sns, env, stored)
	if !decided {
		e, replayed, err = b.ledger.Accept(ctx, offer)
	}
	resp, err := b.sendAnswer(ns.Name, "plant", e, replayed, err)
	return rpc.PlantResponse{ID: resp.Seq}, err
}

// lastRecipients are the recipients of the namespace's latest message:
// the agent's address, which planted mail goes to unless told otherwise.
func (b *Broker) lastRecipients(ctx context.Context, ns string) ([]string, error) {
	es, err := b.ledger.Entries(ctx, ns, 0)
	if err != nil {
		return nil, b.storeErr("entries", err)
	}
	if len(es) == 0 {
		return nil, nil
	}
	return es[len(es)-1].To, nil
}

// clicked is what a click resolved to, for its event only: the answer
// to the inbox is empty.
type clicked struct {
	host, label string
}

// Click checks that link req.Link of message req.ID (its index in
// render.LinkURLs, kept in the message's index) is one the inbox shows in
// the mailbox t is bound to, and answers the link's host (read from the
// stored message, never from the ping) for the trail.
func (b *Broker) Click(ctx context.Context, t target, req *rpc.ClickRequest) (clicked, error) {
	if req.ID < 1 || req.Link < 0 {
		return clicked{}, rpc.Errorf(rpc.CodeBadRequest, "id and link must be positive")
	}
	e, err := b.ledger.Entry(ctx, t.ns.Name, req.ID)
	if errors.Is(err, ledger.ErrNotFound) {
		return clicked{}, rpc.Errorf(rpc.CodeNotFound, "no such message")
	}
	if err != nil {
		return clicked{}, b.storeErr("entry", err)
	}
	x, err := b.index(ctx, t.ns, e)
	if errors.Is(err, errGone) {
		if cerr := b.stillOpen(ctx, t); cerr != nil {
			return clicked{}, cerr
		}
	}
	if err != nil {
		return clicked{}, b.storeErr("get", err)
	}
	links := x.LinkURLs // the text's links, then the HTML's others
	if req.Link >= len(links) {
		return clicked{}, rpc.Errorf(rpc.CodeNotFound, "no such link")
	}
	host := ""
	if u, err := url.Parse(links[req.Link]); err == nil {
		host = strings.ToLower(u.Hostname())
	}
	return clicked{host: host, label: x.Label}, b.stillOpen(ctx, t)
}

func clickEvent(t target, req *rpc.ClickRequest, c clicked, err error) *evidence.Event {
	link := req.Link
	e := &evidence.Event{Door: evidence.DoorInbox, Action: evidence.ActionClick, Credential: t.credential,
		MessageIDs: []int64{req.ID}, Link: &link, Label: c.label}
	if c.host != "" {
		e.Host = c.host
		if mayHoldSecret(c.host) {
			e.Host = redact.Text(c.host)
		}
	}
	return outcome(e, err)
}

// Flag sets or clears one of the agent's flags on messages of the
// mailbox t is bound to: \Seen or \Flagged, each message checked to be
// in it.
func (b *Broker) Flag(ctx context.Context, t target, req *rpc.FlagRequest) (rpc.Empty, error) {
	if req.Flag != rpc.FlagSeen && req.Flag != rpc.FlagFlagged {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeBadRequest, `flag must be \Seen or \Flagged`)
	}
	if len(req.IDs) == 0 || len(req.IDs) > rpc.MaxFlagIDs {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeBadRequest, "ids must name 1 to %d messages", rpc.MaxFlagIDs)
	}
	for _, id := range req.IDs {
		if id < 1 {
			return rpc.Empty{}, rpc.Errorf(rpc.CodeBadRequest, "ids must be positive")
		}
		if _, err := b.ledger.Entry(ctx, t.ns.Name, id); errors.Is(err, ledger.ErrNotFound) {
			return rpc.Empty{}, rpc.Errorf(rpc.CodeNotFound, "no such message")
		} else if err != nil {
			return rpc.Empty{}, b.storeErr("entry", err)
		}
	}
	if err := b.ledger.SetFlag(ctx, t.ns.Name, req.IDs, req.Flag, req.Set); err != nil {
		return rpc.Empty{}, b.storeErr("flag", err)
	}
	return rpc.Empty{}, b.stillOpen(ctx, t)
}

func flagEvent(t target, req *rpc.FlagRequest, _ rpc.Empty, err error) *evidence.Event {
	flag := "-" + req.Flag
	if req.Set {
		flag = "+" + req.Flag
	}
	e := &evidence.Event{Door: evidence.DoorIMAP, Action: evidence.ActionFlag, Credential: t.credential, Flag: flag}
	if len(req.IDs) <= rpc.MaxFlagIDs {
		e.MessageIDs = req.IDs
	}
	return outcome(e, err)
}

// agentDoor is the door an inbox read came in by: the HTML pages, the
// MCP tools or IMAP.
func agentDoor(req *rpc.ReadRequest) string {
	switch req.Door {
	case rpc.DoorInboxMCP:
		return evidence.DoorInboxMCP
	case rpc.DoorIMAP:
		return evidence.DoorIMAP
	}
	return evidence.DoorInbox
}
