// Package mailindex is what the plane reads of a message, derived once,
// when the message is accepted: its parts as text, its attachments'
// metadata and inline images, its header fields, and the codes and links
// found in it. The plane stores the index with the message (package
// ledger's Offer.Index) and serves every read from it, so no read runs a
// MIME or HTML parser over a candidate's bytes.
package mailindex

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/otp"
	"github.com/websitebench/mailplane/internal/render"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Version is the index's format: an index of another version is not
// read, and its message is indexed again (Decode).
const Version = 1

// Index is one message's index.
type Index struct {
	V       int    `json:"v"`
	Subject string `json:"subject"`
	// FromName and FromAddress are the From header's display name and
	// address (mailmsg.Sender); a reader shows the name only with the
	// address it goes with.
	FromName    string `json:"from_name,omitempty"`
	FromAddress string `json:"from_address,omitempty"`
	Label       string `json:"label,omitempty"`
	Text        string `json:"text"`
	HTML        string `json:"html,omitempty"`
	// HTMLText is the HTML part's text as a person reads it
	// (mailmsg.HTMLText), when it is not Text.
	HTMLText string `json:"html_text,omitempty"`
	// Attachments are the non-body parts' metadata (attachments, then
	// inline parts); Inline the inline images' bytes, which the agent's
	// inbox shows where the HTML names them.
	Attachments []rpc.Attachment  `json:"attachments"`
	Inline      []rpc.InlineImage `json:"inline,omitempty"`
	Headers     []rpc.Header      `json:"headers"`
	// Found is otp.Extract's.
	Found rpc.Found `json:"found"`
	// LinkURLs are the links the inbox shows, in the order its pings
	// number them (render.LinkURLs).
	LinkURLs []string `json:"link_urls"`
}

// Of indexes raw, a scrubbed message. Each step is linear in the
// message (mailmsg.Parse, otp.Extract, render.LinkURLs), and the message
// is bounded by the send's limits (internal/limits), so the index is at
// most a constant times the message's size.
func Of(raw []byte) Index {
	p := mailmsg.Parse(raw)
	x := Index{V: Version, Subject: p.Subject, FromName: p.FromName, FromAddress: p.FromAddress, Label: p.Label,
		Text: p.Text, HTML: p.HTML, Attachments: []rpc.Attachment{}, Headers: []rpc.Header{}}
	for _, a := range p.Attachments {
		x.Attachments = append(x.Attachments, rpc.Attachment{
			Checksums: rpc.Checksums{MD5: a.MD5, SHA1: a.SHA1, SHA256: a.SHA256},
			ContentID: a.ContentID, ContentType: a.ContentType, FileName: a.FileName, PartID: a.PartID, Size: a.Size,
		})
		if a.Data != nil {
			x.Inline = append(x.Inline, rpc.InlineImage{ContentID: a.ContentID, ContentType: a.ContentType, Data: a.Data})
		}
	}
	for _, f := range p.Headers {
		x.Headers = append(x.Headers, rpc.Header{Name: f.Name, Value: f.Value})
	}
	if p.HTMLText != p.Text {
		x.HTMLText = p.HTMLText
	}
	found := otp.Extract(p.Subject, p.Text, p.HTML)
	x.Found = rpc.Found{OTP: found.OTP, Codes: found.Codes, Links: found.Links, ActionLink: found.ActionLink}
	if x.Found.Codes == nil {
		x.Found.Codes = []string{}
	}
	if x.Found.Links == nil {
		x.Found.Links = []string{}
	}
	x.LinkURLs = render.LinkURLs(rpc.Message{Text: p.Text, HTML: p.HTML})
	if x.LinkURLs == nil {
		x.LinkURLs = []string{}
	}
	return x
}

// An index is stored as a uvarint length, its small fields as JSON, then
// the bytes of its text, its HTML, its HTML's text and its inline images, each as long as
// the JSON says: decoding the large parts is a copy, not a JSON string
// scan (which cost more than parsing the MIME).
type stored struct {
	Index
	TextLen     int   `json:"text_len"`
	HTMLLen     int   `json:"html_len"`
	HTMLTextLen int   `json:"html_text_len"`
	InlineLen   []int `json:"inline_len,omitempty"`
}

// Encode is the index as stored.
func (x Index) Encode() []byte {
	s := stored{Index: x, TextLen: len(x.Text), HTMLLen: len(x.HTML), HTMLTextLen: len(x.HTMLText)}
	s.Text, s.HTML, s.HTMLText = "", "", ""
	s.Inline = make([]rpc.InlineImage, len(x.Inline))
	for i, im := range x.Inline {
		s.Inline[i] = rpc.InlineImage{ContentID: im.ContentID, ContentType: im.ContentType}
		s.InlineLen = append(s.InlineLen, len(im.Data))
	}
	if x.Inline == nil {
		s.Inline = nil
	}
	var meta bytes.Buffer
	enc := json.NewEncoder(&meta)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // strings, byte slices and ints always encode
	}
	out := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+meta.Len()+len(x.Text)+len(x.HTML)+len(x.HTMLText)), uint64(meta.Len()))
	out = append(out, meta.Bytes()...)
	out = append(out, x.Text...)
	out = append(out, x.HTML...)
	out = append(out, x.HTMLText...)
	for _, im := range x.Inline {
		out = append(out, im.Data...)
	}
	return out
}

// ErrStale is a stored index of another version.
var ErrStale = errors.New("mailindex: an index of another version")

// errCorrupt is a stored index that does not read.
var errCorrupt = errors.New("mailindex: a stored index does not read")

// Decode reads a stored index. It is the plane's own encoding, not a
// candidate's bytes; b is not kept.
func Decode(b []byte) (Index, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return Index{}, errCorrupt
	}
	var s stored
	if err := json.Unmarshal(b[k:k+int(n)], &s); err != nil {
		return Index{}, errCorrupt
	}
	if s.V != Version {
		return Index{}, ErrStale
	}
	rest := b[k+int(n):]
	take := func(l int) ([]byte, bool) {
		if l < 0 || l > len(rest) {
			return nil, false
		}
		p := rest[:l]
		rest = rest[l:]
		return p, true
	}
	x := s.Index
	text, ok1 := take(s.TextLen)
	html, ok2 := take(s.HTMLLen)
	htmlText, ok3 := take(s.HTMLTextLen)
	if !ok1 || !ok2 || !ok3 || len(s.InlineLen) != len(x.Inline) {
		return Index{}, errCorrupt
	}
	x.Text, x.HTML, x.HTMLText = string(text), string(html), string(htmlText)
	for i, l := range s.InlineLen {
		data, ok := take(l)
		if !ok {
			return Index{}, errCorrupt
		}
		x.Inline[i].Data = bytes.Clone(data)
	}
	if len(rest) != 0 {
		return Index{}, errCorrupt
	}
	return x, nil
}
