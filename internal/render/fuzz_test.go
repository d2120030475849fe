package render

import (
	"strings"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzSanitize: whatever HTML a sender writes, the frame keeps only
// allowed elements and attributes, links to http(s) or mailto, images of
// the message's own inline parts, and styles that load nothing.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		`<table><tr><td style="color:red">x</td></tr></table>`,
		`<script>alert(1)</script><img src=x onerror=alert(1)>`,
		`<a href="javascript:alert(1)">x</a><a href=" https://a.example/ ">y</a>`,
		`<svg><style>x</style><a href="https://x/">s</a></svg>`,
		`<style>@import url(https://x/); p{background:u\72l(x)}</style>`,
		`<p style="background:URL(https://x/)">`,
		`<img src="cid:logo"><img src="CID:logo"><img src=" cid:logo ">`,
		`<title><a></title><textarea></textarea><noscript><p></noscript>`,
		`<!-- --!><p>x</p><![CDATA[<script>]]>`,
		`<plaintext><script>`,
		"<p style=\"\u0130\u1e9eURL(\">",
	} {
		f.Add(s)
	}
	inline := []rpc.InlineImage{{ContentID: "logo", ContentType: "image/png", Data: []byte("x")}}
	f.Fuzz(func(t *testing.T, h string) {
		checkSafe(t, h, sanitized(h, inline))
		for _, u := range LinkURLs(rpc.Message{HTML: h}) {
			if linkURL(u) != u || strings.HasPrefix(strings.ToLower(u), "mailto:") {
				t.Fatalf("LinkURLs(%q) has %q", h, u)
			}
		}
	})
}
