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
// read, and its message is indexed again (Decode), except one of
// version 1, which Decode still reads.
const Version = 2

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
		Text: p.Text, HTML: p.HTML, Attachments: make([]rpc.Attachment, 0, len(p.Attachments)),
		Headers: make([]rpc.Header, 0, len(p.Headers))}
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

// An index is stored as a zero byte, its version as a uvarint, then its
// fields in the order of Index: a string or a byte slice as a uvarint
// length and its bytes, an int as a varint, a slice as a uvarint count
// plus one (zero for a nil slice) and its elements. Encoding is appends
// and decoding a copy per field, with no field names to write or to
// read.
//
// Version 1 stored a uvarint length, the small fields as JSON (stored),
// then the bytes of the text, the HTML, the HTML's text and the inline
// images. Its first byte is never zero: the JSON is never empty.
type stored struct {
	Index
	TextLen     int   `json:"text_len"`
	HTMLLen     int   `json:"html_len"`
	HTMLTextLen int   `json:"html_text_len"`
	InlineLen   []int `json:"inline_len,omitempty"`
}

// Encode is the index as stored.
func (x Index) Encode() []byte {
	n := 64 + len(x.Subject) + len(x.Text) + len(x.HTML) + len(x.HTMLText)
	for _, im := range x.Inline {
		n += len(im.Data)
	}
	out := binary.AppendUvarint(append(make([]byte, 0, n), 0), uint64(x.V))
	str := func(s string) {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	count := func(n int, isNil bool) {
		if isNil {
			out = append(out, 0)
			return
		}
		out = binary.AppendUvarint(out, uint64(n)+1)
	}
	strs := func(ss []string) {
		count(len(ss), ss == nil)
		for _, s := range ss {
			str(s)
		}
	}
	str(x.Subject)
	str(x.FromName)
	str(x.FromAddress)
	str(x.Label)
	str(x.Text)
	str(x.HTML)
	str(x.HTMLText)
	count(len(x.Attachments), x.Attachments == nil)
	for _, a := range x.Attachments {
		str(a.Checksums.MD5)
		str(a.Checksums.SHA1)
		str(a.Checksums.SHA256)
		str(a.ContentID)
		str(a.ContentType)
		str(a.FileName)
		str(a.PartID)
		out = binary.AppendVarint(out, int64(a.Size))
	}
	count(len(x.Inline), x.Inline == nil)
	for _, im := range x.Inline {
		str(im.ContentID)
		str(im.ContentType)
		count(len(im.Data), im.Data == nil)
		out = append(out, im.Data...)
	}
	count(len(x.Headers), x.Headers == nil)
	for _, h := range x.Headers {
		str(h.Name)
		str(h.Value)
	}
	str(x.Found.OTP)
	strs(x.Found.Codes)
	strs(x.Found.Links)
	str(x.Found.ActionLink)
	strs(x.LinkURLs)
	return out
}

// ErrStale is a stored index of another version.
var ErrStale = errors.New("mailindex: an index of another version")

// errCorrupt is a stored index that does not read.
var errCorrupt = errors.New("mailindex: a stored index does not read")

// Decode reads a stored index. It is the plane's own encoding, not a
// candidate's bytes; b is not kept.
func Decode(b []byte) (Index, error) {
	if len(b) == 0 || b[0] != 0 {
		return decodeV1(b)
	}
	// The strings share one copy of b.
	d := decoder{b: b[1:], s: string(b[1:])}
	v, ok := d.uvarint()
	if !ok {
		return Index{}, errCorrupt
	}
	if v != Version {
		return Index{}, ErrStale
	}
	x := Index{V: Version, Subject: d.str(), FromName: d.str(), FromAddress: d.str(), Label: d.str(),
		Text: d.str(), HTML: d.str(), HTMLText: d.str()}
	if n, isNil := d.count(8); !isNil {
		x.Attachments = make([]rpc.Attachment, n)
		for i := range x.Attachments {
			a := &x.Attachments[i]
			a.Checksums = rpc.Checksums{MD5: d.str(), SHA1: d.str(), SHA256: d.str()}
			a.ContentID, a.ContentType, a.FileName, a.PartID = d.str(), d.str(), d.str(), d.str()
			size, k := binary.Varint(d.b)
			if k <= 0 {
				return Index{}, errCorrupt
			}
			a.Size = int(size)
			d.skip(k)
		}
	}
	if n, isNil := d.count(3); !isNil {
		x.Inline = make([]rpc.InlineImage, n)
		for i := range x.Inline {
			im := &x.Inline[i]
			im.ContentID, im.ContentType = d.str(), d.str()
			if l, isNil := d.count(1); !isNil {
				im.Data = bytes.Clone(d.b[:l:l])
				d.skip(l)
			}
		}
	}
	if n, isNil := d.count(2); !isNil {
		x.Headers = make([]rpc.Header, n)
		for i := range x.Headers {
			x.Headers[i] = rpc.Header{Name: d.str(), Value: d.str()}
		}
	}
	x.Found.OTP = d.str()
	x.Found.Codes = d.strs()
	x.Found.Links = d.strs()
	x.Found.ActionLink = d.str()
	x.LinkURLs = d.strs()
	if d.bad || len(d.b) != 0 {
		return Index{}, errCorrupt
	}
	return x, nil
}

// decoder reads the fields of a stored index from b, which s holds as a
// string. bad says a length ran past the end: what follows is still read
// within the bounds of b, and the index is refused.
type decoder struct {
	b   []byte
	s   string
	bad bool
}

func (d *decoder) skip(n int) {
	d.b = d.b[n:]
	d.s = d.s[n:]
}

// uvarint reads a number that is at most the bytes left after it (a
// length, a count plus one, the version).
func (d *decoder) uvarint() (int, bool) {
	v, k := binary.Uvarint(d.b)
	if k <= 0 || v > uint64(len(d.b)-k)+1 {
		d.bad = true
		return 0, false
	}
	d.skip(k)
	return int(v), true
}

// str reads a string.
func (d *decoder) str() string {
	n, ok := d.uvarint()
	if !ok || n > len(d.b) {
		d.bad = true
		return ""
	}
	s := d.s[:n]
	d.skip(n)
	return s
}

// count reads a slice's length, and whether the slice is nil. Each
// element takes size bytes at least, so a count past the bytes left is
// refused, not allocated.
func (d *decoder) count(size int) (int, bool) {
	n, ok := d.uvarint()
	if !ok || n == 0 {
		return 0, true
	}
	if n-1 > len(d.b)/size {
		d.bad = true
		return 0, true
	}
	return n - 1, false
}

func (d *decoder) strs() []string {
	n, isNil := d.count(1)
	if isNil {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// decodeV1 reads an index stored by version 1.
func decodeV1(b []byte) (Index, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return Index{}, errCorrupt
	}
	var s stored
	if err := json.Unmarshal(b[k:k+int(n)], &s); err != nil {
		return Index{}, errCorrupt
	}
	if s.V != 1 {
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
