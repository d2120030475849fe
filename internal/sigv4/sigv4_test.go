package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// capture serves one request and hands back what the writer would see of
// it: a real server's *http.Request and its body.
func capture(t *testing.T, send func(url string)) (*http.Request, []byte) {
	t.Helper()
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer srv.Close()
	send(srv.URL)
	return <-got, <-bodies
}

// signed sends body to path on url, signed by the AWS SDK's own SigV4
// signer with the given key pair, region and time.
func signed(t *testing.T, akid, secret, region, path, query string, body []byte, at time.Time, extra http.Header) func(string) {
	return func(url string) {
		req, err := http.NewRequest(http.MethodPost, url+path+query, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range extra {
			req.Header[k] = v
		}
		sum := sha256.Sum256(body)
		err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, req, hex.EncodeToString(sum[:]), Service, region, at)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// TestSDKSignatures: a request signed by the AWS SDK's signer proves
// itself with the trial's secret, in any region, with a query and
// repeated headers; the same proof fails with another trial's secret, a
// changed body, or a clock more than 15 minutes away.
func TestSDKSignatures(t *testing.T) {
	now := time.Now().UTC()
	ns := "trial-0123456789abcdef0123456789abcdef"
	key := []byte("the plane's SES key, 32 bytes...")
	secret := Secret(key, []byte("digest of trial A's token"), ns)
	other := Secret(key, []byte("digest of trial B's token"), "trial-ffffffffffffffffffffffffffffffff")
	if len(secret) != 40 || !strings.HasPrefix(secret, SecretPrefix) || secret == other {
		t.Fatalf("secrets %q %q", secret, other)
	}
	body := []byte(`{"FromEmailAddress":"a@example.com"}`)
	for _, c := range []struct {
		name, region, path, query string
		extra                     http.Header
	}{
		{"plain", "us-east-1", "/v2/email/outbound-emails", "", nil},
		{"another region", "eu-west-3", "/v2/email/outbound-emails", "", nil},
		{"query and odd path", "local", "/v2/email/a%20b/x=y", "?b=2&a=1&a=0&c=x%20y", nil},
		{"repeated header", "us-east-1", "/v2/email/outbound-emails", "", http.Header{"X-Amz-Meta": {"  a   b ", "c"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, got := capture(t, signed(t, ns, secret, c.region, c.path, c.query, body, now, c.extra))
			p, err := Prove(r, got)
			if err != nil {
				t.Fatalf("prove: %v", err)
			}
			if p.AccessKeyID != ns {
				t.Fatalf("access key id %q", p.AccessKeyID)
			}
			if err := Verify(p, secret, now); err != nil {
				t.Fatalf("verify: %v (string to sign %q)", err, p.StringToSign)
			}
			if err := Verify(p, other, now); !errors.Is(err, ErrMismatch) {
				t.Fatalf("another trial's secret: %v", err)
			}
			if err := Verify(p, secret, now.Add(16*time.Minute)); !errors.Is(err, ErrExpired) {
				t.Fatalf("late: %v", err)
			}
			changed, err := Prove(r, []byte(`{"FromEmailAddress":"b@example.com"}`))
			if err != nil {
				t.Fatalf("prove a changed body: %v", err)
			}
			if err := Verify(changed, secret, now); !errors.Is(err, ErrMismatch) {
				t.Fatalf("changed body: %v", err)
			}
		})
	}
}

// TestProveRefuses: requests that are not complete SigV4 requests are
// refused by the writer before the plane is asked.
func TestProveRefuses(t *testing.T) {
	now := time.Now().UTC()
	r, body := capture(t, signed(t, "trial-x", "secret", "us-east-1", "/v2/email/outbound-emails", "", []byte("{}"), now, nil))
	good := r.Header.Get("Authorization")
	for _, c := range []struct {
		name, auth string
		want       error
	}{
		{"no header", "", ErrMissing},
		{"another algorithm", strings.Replace(good, Algorithm, "AWS4-HMAC-SHA512", 1), ErrIncomplete},
		{"no signature", good[:strings.Index(good, ", Signature=")], ErrIncomplete},
		{"short credential", strings.Replace(good, "/aws4_request", "", 1), ErrIncomplete},
		{"host not signed", strings.Replace(good, "host;", "", 1), ErrIncomplete},
		{"unsorted headers", strings.Replace(good, "SignedHeaders=", "SignedHeaders=zzz;", 1), ErrIncomplete},
		{"too long", good + strings.Repeat(" ", maxAuthorization), ErrIncomplete},
	} {
		t.Run(c.name, func(t *testing.T) {
			r2 := r.Clone(context.Background())
			r2.Header.Set("Authorization", c.auth)
			if _, err := Prove(r2, body); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	r3 := r.Clone(context.Background())
	r3.Header.Set("X-Amz-Content-Sha256", unsignedPayload)
	if _, err := Prove(r3, body); !errors.Is(err, ErrPayload) {
		t.Fatalf("unsigned payload: %v", err)
	}
}

// TestVerifyRefusesForgedScopes: a string to sign the writer made up (a
// service other than ses, a scope day other than the request's, garbage)
// never verifies, whatever its signature.
func TestVerifyRefusesForgedScopes(t *testing.T) {
	now := time.Now().UTC()
	day, stamp := now.Format(dateLayout), now.Format(amzDateLayout)
	hash := strings.Repeat("a", 64)
	for _, sts := range []string{
		Algorithm + "\n" + stamp + "\n" + day + "/us-east-1/s3/aws4_request\n" + hash,
		Algorithm + "\n" + stamp + "\n" + "20000101/us-east-1/ses/aws4_request\n" + hash,
		Algorithm + "\n" + stamp + "\n" + day + "/us-east-1/ses/aws4_request\n" + hash + "\nextra",
		"",
	} {
		key := Key("secret", day, "us-east-1", "s3")
		p := Proof{AccessKeyID: "trial-x", StringToSign: sts, Signature: hex.EncodeToString(mac(key, sts))}
		if err := Verify(p, "secret", now); err == nil {
			t.Fatalf("verified %q", sts)
		}
	}
}
