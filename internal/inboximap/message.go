package inboximap

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/backend/backendutil"
	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// boundary separates a message's text and HTML parts. It is fixed, so
// that a message's bytes (and its size and structure, which a client is
// told before it reads the body) are the same at every read; a line of
// a part that happened to equal it cannot occur: both parts are
// quoted-printable, whose lines never start with "--" followed by this.
const boundary = "mailplane-alternative-3b1e5c7a"

// entity is a message as a mail client is given it: a MIME message
// rebuilt from what the plane shows the agent (sender, recipients,
// subject, arrival, the text and the HTML part as sent), never the bytes
// the sender wrote: no header of theirs, no code, no evaluator data.
// Attachments and inline images are left out (the inbox pages do not
// offer them either).
func entity(m *rpc.Message) []byte {
	var b bytes.Buffer
	header(&b, "Date", m.Received.UTC().Format(time.RFC1123Z))
	header(&b, "From", sender(m))
	if len(m.Recipients) > 0 {
		header(&b, "To", strings.Join(m.Recipients, ", "))
	}
	header(&b, "Subject", mime.QEncoding.Encode("utf-8", oneLine(m.Subject)))
	if m.UUID != "" {
		header(&b, "Message-ID", "<"+m.UUID+"@mailplane.invalid>")
	}
	header(&b, "MIME-Version", "1.0")
	if m.HTML == "" {
		part(&b, "text/plain", m.Text)
		return b.Bytes()
	}
	header(&b, "Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
	b.WriteString("\r\n--" + boundary + "\r\n")
	part(&b, "text/plain", m.Text)
	b.WriteString("\r\n--" + boundary + "\r\n")
	part(&b, "text/html", m.HTML)
	b.WriteString("\r\n--" + boundary + "--\r\n")
	return b.Bytes()
}

// part writes one text part's header and its quoted-printable body.
func part(b *bytes.Buffer, typ, text string) {
	header(b, "Content-Type", typ+"; charset=utf-8")
	header(b, "Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	w := quotedprintable.NewWriter(b)
	w.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\n", "\r\n")))
	w.Close()
}

func header(b *bytes.Buffer, k, v string) { b.WriteString(k + ": " + v + "\r\n") }

// sender is From as the inbox shows it: the display name (quoted or
// encoded as it needs) and the envelope sender's address.
func sender(m *rpc.Message) string {
	return (&mail.Address{Name: oneLine(m.FromName), Address: m.EnvelopeFrom}).String()
}

// oneLine keeps a header value on one line whatever the stored text holds.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// item is one message of a connection's view: its id as UID, and its
// entity.
type item struct {
	uid    uint32
	msg    rpc.Message
	raw    []byte
	opened bool // the plane's record of the agent's opens, or this connection's
}

func newItem(m rpc.Message) *item {
	return &item{uid: uint32(m.ID), msg: m, raw: entity(&m), opened: m.Opened}
}

// flags are the message's flags: those the agent set, and \Seen once it
// has read the message.
func (it *item) flags() []string {
	out := append([]string{}, it.msg.Flags...)
	if it.opened && !slices.Contains(out, imap.SeenFlag) {
		out = append(out, imap.SeenFlag)
	}
	return out
}

// setFlag records a change the plane accepted.
func (it *item) setFlag(flag string, on bool) {
	i := slices.Index(it.msg.Flags, flag)
	switch {
	case on && i < 0:
		it.msg.Flags = append(slices.Clip(it.msg.Flags), flag)
	case !on && i >= 0:
		it.msg.Flags = slices.Delete(slices.Clone(it.msg.Flags), i, i+1)
	}
}

func (it *item) split() (textproto.Header, io.Reader, error) {
	r := bufio.NewReader(bytes.NewReader(it.raw))
	h, err := textproto.ReadHeader(r)
	return h, r, err
}

// fetch answers items for it, as the message numbered seq.
func (it *item) fetch(seq uint32, items []imap.FetchItem) (*imap.Message, error) {
	out := imap.NewMessage(seq, items)
	for _, fi := range items {
		switch fi {
		case imap.FetchEnvelope:
			h, _, err := it.split()
			if err != nil {
				return nil, err
			}
			if out.Envelope, err = backendutil.FetchEnvelope(h); err != nil {
				return nil, err
			}
		case imap.FetchBody, imap.FetchBodyStructure:
			h, body, err := it.split()
			if err != nil {
				return nil, err
			}
			if out.BodyStructure, err = backendutil.FetchBodyStructure(h, body, fi == imap.FetchBodyStructure); err != nil {
				return nil, err
			}
		case imap.FetchFlags:
			out.Flags = it.flags()
		case imap.FetchInternalDate:
			out.InternalDate = it.msg.Received
		case imap.FetchRFC822Size:
			out.Size = uint32(len(it.raw))
		case imap.FetchUid:
			out.Uid = it.uid
		default:
			section, err := imap.ParseBodySectionName(fi)
			if err != nil {
				return nil, err
			}
			h, body, err := it.split()
			if err != nil {
				return nil, err
			}
			l, err := backendutil.FetchBodySection(h, body, section)
			if err != nil {
				// A part the message has not: empty, as RFC 3501 allows.
				l = bytes.NewReader(nil)
			}
			out.Body[section] = l
		}
	}
	return out, nil
}

// readsBody reports whether items read any of a message's content
// (beyond its header, size and structure): that is an open.
func readsBody(items []imap.FetchItem) bool {
	for _, fi := range items {
		switch fi {
		case imap.FetchEnvelope, imap.FetchBody, imap.FetchBodyStructure, imap.FetchFlags,
			imap.FetchInternalDate, imap.FetchRFC822Size, imap.FetchUid:
			continue
		}
		s, err := imap.ParseBodySectionName(fi)
		if err != nil {
			continue
		}
		if len(s.Path) > 0 || (s.Specifier != imap.HeaderSpecifier && s.Specifier != imap.MIMESpecifier) {
			return true
		}
	}
	return false
}

// match reports whether it matches c as the message numbered seq.
func (it *item) match(seq uint32, c *imap.SearchCriteria) (bool, error) {
	e, err := message.Read(bytes.NewReader(it.raw))
	if err != nil && !message.IsUnknownCharset(err) {
		return false, err
	}
	return backendutil.Match(e, seq, it.uid, it.msg.Received, it.flags(), c)
}
