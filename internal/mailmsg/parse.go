package mailmsg

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// parses counts the calls of Parse and HTMLText, the parsers of
// a stored message: package plane's tests read it to show that a read of
// a stored message parses nothing (its index was made when the message
// was accepted, package mailindex).
var parses atomic.Int64

// Parses returns how many times Parse and HTMLText have run in
// this process.
func Parses() int64 { return parses.Load() }

// Parsed is what readers see of a stored message.
type Parsed struct {
	Subject string
	// FromName and FromAddress are the top-level From header's first
	// address and its cleaned display name (Sender).
	FromName, FromAddress string
	// Label is the evaluator's label of a planted message (LabelHeader).
	Label string
	Text  string // the text/plain part as sent, or text derived from HTML
	HTML  string
	// HTMLText is the HTML part's text as a person reads it (HTMLText),
	// made once: it is Text when the message has no text part.
	HTMLText    string
	Attachments []Attachment // attachments first, then inline parts
	// Headers are the top-level header's fields, as Headers returns them.
	Headers []Field
}

// Attachment describes one non-body part.
type Attachment struct {
	PartID, FileName, ContentType, ContentID string
	Size                                     int
	MD5, SHA1, SHA256                        string
	inline                                   bool
	// Data is the decoded content of an inline image (a Content-ID and an
	// image/* type), which the agent's inbox shows where the HTML names it.
	Data []byte
}

// Parse reads a stored message. It never fails: a message that is not valid
// MIME is shown as its raw body, which is what a person would want to see.
// A header block over the limits (which Scrub never stores) is read up to
// them, and the rest of the message is shown as its body.
func Parse(raw []byte) Parsed {
	parses.Add(1)
	header, sep, body, over := splitHeader(raw)
	if sep == nil && !over {
		body = nil
	}
	var p Parsed
	fields := headerFields(header)
	h := make(textproto.MIMEHeader, len(fields))
	// The first value of each name is a piece of one array, not a slice
	// of its own as h.Add makes (a repeated name's values grow apart).
	firsts := make([]string, 0, len(fields))
	p.Headers = make([]Field, 0, len(fields))
	for _, f := range fields {
		if f.name == "" {
			continue
		}
		name, v := strings.TrimSpace(f.name), unfold(f.value)
		if key := textproto.CanonicalMIMEHeaderKey(name); h[key] != nil {
			h[key] = append(h[key], v)
		} else {
			firsts = append(firsts, v)
			h[key] = firsts[len(firsts)-1 : len(firsts) : len(firsts)]
		}
		if name != "" {
			p.Headers = append(p.Headers, Field{Name: name, Value: decodeHeader(noBreaks(v))})
		}
	}
	if len(p.Headers) == 0 {
		p.Headers = nil // a block without fields reads as none, as it always did
	}
	p.Subject = decodeHeader(h.Get("Subject"))
	p.FromName, p.FromAddress = Sender(h.Get("From"))
	p.Label = h.Get(LabelHeader)
	w := walker{out: &p}
	w.entity(h, body, "", 0)
	if p.HTML != "" {
		p.HTMLText = HTMLText(p.HTML)
		if p.Text == "" {
			p.Text = p.HTMLText
		}
	}
	var att, inl []Attachment
	for _, a := range p.Attachments {
		if a.inline {
			inl = append(inl, a)
		} else {
			att = append(att, a)
		}
	}
	p.Attachments = append(att, inl...)
	return p
}

var wordDecoder = mime.WordDecoder{CharsetReader: charsetReader}

func decodeHeader(v string) string {
	if d, err := wordDecoder.DecodeHeader(v); err == nil {
		return d
	}
	return v
}

type walker struct {
	out      *Parsed
	haveText bool
	haveHTML bool
}

func (w *walker) entity(h textproto.MIMEHeader, body []byte, partID string, depth int) {
	ct := h.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil {
		mt, params = "text/plain", map[string]string{"charset": "utf-8"}
	}
	if strings.HasPrefix(mt, "multipart/") && params["boundary"] != "" && depth < maxDepth {
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for i := 1; ; i++ {
			part, err := mr.NextRawPart()
			if err != nil {
				break
			}
			data, err := io.ReadAll(part)
			if err != nil {
				break
			}
			id := strconv.Itoa(i)
			if partID != "" {
				id = partID + "." + id
			}
			w.entity(part.Header, data, id, depth+1)
		}
		return
	}
	if partID == "" {
		partID = "1"
	}
	decoded := decodeBody(h.Get("Content-Transfer-Encoding"), body)
	disp, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	filename := decodeHeader(dparams["filename"])
	if filename == "" {
		filename = decodeHeader(params["name"])
	}
	isBody := disp != "attachment" && filename == ""
	switch {
	case isBody && mt == "text/plain" && !w.haveText:
		w.out.Text, w.haveText = toUTF8(decoded, params["charset"]), true
	case isBody && mt == "text/html" && !w.haveHTML:
		w.out.HTML, w.haveHTML = toUTF8(decoded, params["charset"]), true
	case isBody && strings.HasPrefix(mt, "text/"):
		// further alternatives of a body we already have
	default:
		inline := disp != "attachment" && h.Get("Content-Id") != ""
		var data []byte
		if inline && strings.HasPrefix(mt, "image/") {
			data = decoded
		}
		md := md5.Sum(decoded)
		s1 := sha1.Sum(decoded)
		s2 := sha256.Sum256(decoded)
		w.out.Attachments = append(w.out.Attachments, Attachment{
			PartID:      partID,
			FileName:    filename,
			ContentType: mt,
			ContentID:   strings.Trim(h.Get("Content-Id"), "<>"),
			Size:        len(decoded),
			MD5:         hex.EncodeToString(md[:]),
			SHA1:        hex.EncodeToString(s1[:]),
			SHA256:      hex.EncodeToString(s2[:]),
			inline:      inline,
			Data:        data,
		})
	}
}

func decodeBody(cte string, body []byte) []byte {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		// The decoder skips line breaks itself: a body without blanks,
		// which is most, is decoded as it is, without a cleaned copy.
		clean := body
		if bytes.IndexByte(body, ' ') >= 0 || bytes.IndexByte(body, '\t') >= 0 {
			clean = unblank(body)
		}
		out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
		if n, err := base64.StdEncoding.Decode(out, clean); err == nil {
			return out[:n]
		}
		// Unpadded or over-padded base64 is common enough in the wild.
		raw := bytes.TrimRight(unblank(body), "=")
		out = make([]byte, base64.RawStdEncoding.DecodedLen(len(raw)))
		if n, err := base64.RawStdEncoding.Decode(out, raw); err == nil {
			return out[:n]
		}
		return body
	case "quoted-printable":
		out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			return body
		}
		return out
	}
	return body
}

// unblank returns body without its line breaks and blanks, byte by byte:
// any other byte stays, and one that is not base64 fails the decoding as
// it would have as the U+FFFD a rune-wise bytes.Map made of it.
func unblank(body []byte) []byte {
	clean, n := make([]byte, len(body)), 0
	for _, c := range body {
		clean[n] = c
		if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
			n++
		}
	}
	return clean[:n]
}

// toUTF8 converts text in the charsets mail commonly uses; anything else is
// passed through when it is already valid UTF-8, else decoded as Latin-1 so
// that nothing becomes unreadable.
func toUTF8(b []byte, charset string) string {
	cs := strings.ToLower(strings.TrimSpace(charset))
	switch cs {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return string(b)
	case "iso-8859-1", "latin1", "latin-1", "windows-1252", "cp1252":
		return latin1(b)
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return latin1(b)
}

func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(input)
	if err != nil {
		return nil, err
	}
	return strings.NewReader(toUTF8(b, charset)), nil
}
