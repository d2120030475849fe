package writer

import (
	"bytes"
	"encoding/base64"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/sendapi"
)

// Resend's attachments, stored as MIME parts of the composed message, so
// that they count against the namespace's quota bytes like any other byte
// and the evaluator's message JSON lists them (name, type, size,
// checksums; mailmsg.Parse). The inbox shows names only.
//
// An attachment is {"filename", "content", "content_type", "content_id"}.
// content is base64 (Resend's REST shape and its Node SDK's) or a list of
// byte values (Resend's Go SDK sends one). path, which Resend fetches from
// a URL, is refused with 422 attachment_path_unsupported: a local plane
// fetches nothing from anywhere, and a candidate must not make it reach
// out. content_id (or the Go SDK's inline_content_id) makes the part
// inline, for cid: references in the html.

// Limits on attachments, beyond the body and message size.
const (
	maxAttachments        = 32
	maxFilenameChars      = 255
	maxAttachmentTypeLen  = 255
	maxContentIDLen       = 255
	attachmentDefaultType = "application/octet-stream"
)

// attachment is one validated attachment.
type attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	ContentID   string `json:"content_id,omitempty"`
	Content     []byte `json:"content"`
}

var (
	errAttachmentPath = &apierr.Error{Status: http.StatusUnprocessableEntity, Code: "attachment_path_unsupported", Name: "validation_error", Message: "Attachments by path (a URL to fetch) are not supported here; send their content."}
	errScheduled      = &apierr.Error{Status: http.StatusUnprocessableEntity, Code: "scheduling_unsupported", Name: "validation_error", Message: "scheduled_at is not supported here: mail is delivered at once."}
)

// attachmentKeys are the keys an attachment object may have.
var attachmentKeys = []string{"filename", "content", "content_type", "content_id", "inline_content_id", "path"}

// parseAttachments reads the attachments field (a list, or null).
func parseAttachments(v any) ([]attachment, *apierr.Error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok || len(list) > maxAttachments {
		return nil, errAttachments
	}
	out := make([]attachment, 0, len(list))
	for _, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, errAttachments
		}
		a, fail := parseAttachment(obj)
		if fail != nil {
			return nil, fail
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAttachment(obj map[string]any) (attachment, *apierr.Error) {
	var a attachment
	for k, v := range obj {
		if !slices.Contains(attachmentKeys, k) {
			return a, errAttachments
		}
		if v == nil {
			delete(obj, k)
		}
	}
	if p, ok := obj["path"]; ok {
		if s, isStr := p.(string); !isStr || s != "" {
			return a, errAttachmentPath
		}
	}
	content, ok := attachmentContent(obj["content"])
	if !ok {
		return a, errAttachments
	}
	a.Content = content
	var valid bool
	if a.Filename, valid = obj["filename"].(string); !valid || !validFilename(a.Filename) {
		return a, errAttachments
	}
	if ct, present := obj["content_type"]; present {
		s, isStr := ct.(string)
		if !isStr {
			return a, errAttachments
		}
		if a.ContentType, valid = attachmentType(s); !valid {
			return a, errAttachments
		}
	} else {
		a.ContentType = typeByName(a.Filename)
	}
	for _, k := range []string{"content_id", "inline_content_id"} {
		cid, present := obj[k]
		if !present {
			continue
		}
		s, isStr := cid.(string)
		if !isStr || !validContentID(s) || (a.ContentID != "" && a.ContentID != s) {
			return a, errAttachments
		}
		a.ContentID = s
	}
	return a, nil
}

// attachmentContent decodes content: a base64 string (standard alphabet,
// padded or not, line breaks allowed) or a JSON list of byte values.
func attachmentContent(v any) ([]byte, bool) {
	switch t := v.(type) {
	case string:
		return sendapi.DecodeBase64(t)
	case []any:
		out := make([]byte, len(t))
		for i, x := range t {
			f, ok := x.(float64)
			if !ok || f < 0 || f > 255 || f != float64(int(f)) {
				return nil, false
			}
			out[i] = byte(f)
		}
		return out, true
	}
	return nil, false
}

// validFilename: 1 to 255 characters of UTF-8 text, no control
// characters, no path, and no "=?", which readers would decode as an
// RFC 2047 encoded-word (so the name would not read back as sent).
func validFilename(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxFilenameChars || strings.ContainsAny(s, `/\`) ||
		s == "." || s == ".." || strings.Contains(s, "=?") {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// attachmentType returns a content type's bare media type: a valid
// type/subtype that is not a multipart or message type, which would change
// the message's structure.
func attachmentType(s string) (string, bool) {
	if len(s) > maxAttachmentTypeLen {
		return "", false
	}
	mt, _, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(mt, "/") || strings.HasPrefix(mt, "multipart/") || strings.HasPrefix(mt, "message/") {
		return "", false
	}
	return mt, true
}

// typeByName derives a content type from a file name's extension, as
// Resend does when none is given.
func typeByName(name string) string {
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(name))); t != "" {
		if mt, ok := attachmentType(t); ok {
			return mt
		}
	}
	return attachmentDefaultType
}

// validContentID: printable ASCII without blanks or angle brackets.
func validContentID(s string) bool {
	if s == "" || len(s) > maxContentIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '<' || c == '>' {
			return false
		}
	}
	return true
}

// writeAttachments writes each attachment as a part of the multipart/mixed
// entity delimited by boundary, and closes it.
func writeAttachments(b *bytes.Buffer, boundary string, list []attachment) {
	for _, a := range list {
		b.WriteString("--" + boundary + "\r\n")
		b.WriteString("Content-Type: " + mime.FormatMediaType(a.ContentType, map[string]string{"name": a.Filename}) + "\r\n")
		disposition := "attachment"
		if a.ContentID != "" {
			disposition = "inline"
			b.WriteString("Content-ID: <" + a.ContentID + ">\r\n")
		}
		b.WriteString("Content-Disposition: " + mime.FormatMediaType(disposition, map[string]string{"filename": a.Filename}) + "\r\n")
		b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.StdEncoding.EncodeToString(a.Content)
		for len(enc) > base64Line {
			b.WriteString(enc[:base64Line])
			b.WriteString("\r\n")
			enc = enc[base64Line:]
		}
		b.WriteString(enc)
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
}
