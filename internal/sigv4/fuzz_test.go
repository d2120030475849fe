package sigv4

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/complexity"
)

func requestWith(auth, date, query string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v2/email/outbound-emails", nil)
	r.URL.RawQuery = strings.TrimPrefix(query, "?")
	r.Header.Set("Authorization", auth)
	r.Header.Set("X-Amz-Date", date)
	return r
}

// FuzzProve: any Authorization header, date and query either fail to
// prove or make a proof that Verify checks without panicking, and only the
// right secret could verify.
func FuzzProve(f *testing.F) {
	now := time.Now().UTC()
	f.Add("AWS4-HMAC-SHA256 Credential=trial-x/"+now.Format(dateLayout)+"/us-east-1/ses/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("0", 64), now.Format(amzDateLayout), "?a=b&a=%20")
	f.Fuzz(func(t *testing.T, auth, date, query string) {
		p, err := Prove(requestWith(auth, date, query), []byte("{}"))
		if err != nil {
			return
		}
		if Verify(p, "secret", now) == nil {
			t.Fatalf("a made-up signature verified: %+v", p)
		}
	})
}

// TestProveLinear: the header parse and the canonical request are linear
// in the header's parts, the query and signed headers' values.
func TestProveLinear(t *testing.T) {
	now := time.Now().UTC()
	good := "AWS4-HMAC-SHA256 Credential=trial-x/" + now.Format(dateLayout) + "/us-east-1/ses/aws4_request, SignedHeaders=host;x-amz-date;x-long, Signature=" + strings.Repeat("0", 64)
	for _, c := range []struct {
		name   string
		req    func(n int) *http.Request
		base   int
		repeat int // parses per run, so that the base run takes milliseconds
	}{
		{"commas in the header", func(n int) *http.Request {
			return requestWith("AWS4-HMAC-SHA256 "+strings.Repeat(",", min(n, maxAuthorization)), now.Format(amzDateLayout), "")
		}, 1000, 800},
		{"long query", func(n int) *http.Request {
			return requestWith(good, now.Format(amzDateLayout), "?"+strings.Repeat("a=%20b&", n))
		}, 2000, 40},
		{"long signed header", func(n int) *http.Request {
			r := requestWith(good, now.Format(amzDateLayout), "")
			r.Header.Set("X-Long", strings.Repeat("a   ", n))
			return r
		}, 20000, 45},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "sigv4/"+c.name, func(n int) func() {
				r := c.req(n)
				return complexity.Repeat(c.repeat, func() { Prove(r, []byte("{}")) })
			}, c.base)
		})
	}
}
