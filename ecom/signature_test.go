package ecom

import (
	"encoding/hex"
	"net/url"
	"strconv"
	"sync"
	"testing"
)

func TestVerifyWebhookHMAC(t *testing.T) {
	// RFC 4231 test case 2, base64-encoded as the platforms send it.
	body := []byte("what do ya want for nothing?")
	const secret, sig = "Jefe", "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM="
	if got := SignWebhook(body, secret); got != sig {
		t.Fatalf("SignWebhook = %q, want %q", got, sig)
	}
	cases := []struct {
		name   string
		body   string
		header string
		secret string
		want   bool
	}{
		{"known vector", string(body), sig, secret, true},
		{"surrounding space in header", string(body), "  " + sig + "\n", secret, true},
		{"tampered body", string(body) + " ", sig, secret, false},
		{"other secret", string(body), sig, "jefe", false},
		{"empty secret never verifies", string(body), SignWebhook(body, ""), "", false},
		{"empty header", string(body), "", secret, false},
		{"not base64", string(body), "%%%", secret, false},
		{"truncated signature", string(body), sig[:20], secret, false},
		{"hex instead of base64", string(body), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", secret, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := VerifyWebhookHMAC([]byte(c.body), c.header, c.secret); got != c.want {
				t.Fatalf("VerifyWebhookHMAC = %v, want %v", got, c.want)
			}
			// The pooled form, as the webhook receiver runs it: the same answers, and again
			// with a state taken back from the pool.
			v := NewWebhookVerifier(c.secret)
			for range 2 {
				sig, ok := ParseWebhookSignature([]byte(c.header))
				if got := ok && v.Verify([]byte(c.body), sig); got != c.want {
					t.Fatalf("WebhookVerifier.Verify = %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestWebhookVerifierConcurrent(t *testing.T) {
	v := NewWebhookVerifier("secret")
	var zero WebhookVerifier
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				body := []byte(strconv.Itoa(i*1000 + j))
				sig, ok := ParseWebhookSignature([]byte(SignWebhook(body, "secret")))
				if !ok || !v.Verify(body, sig) {
					t.Errorf("body %s does not verify", body)
					return
				}
				if v.Verify(append(body, 'x'), sig) || zero.Verify(body, sig) {
					t.Errorf("body %s: a wrong body or the zero verifier verified", body)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestVerifyOAuthHMAC(t *testing.T) {
	// The example from Shopify's OAuth documentation (secret "hush").
	const secret = "hush"
	raw := "code=0907a61c0c8d55e99db179b68161bc00&hmac=700e2dadb827fcc8609e9d5ce208b2e9cdaab9df07390d2cbca10d7c328fc4bf" +
		"&shop=some-shop.myshopify.com&state=0.6784241404160823&timestamp=1337178173"
	q, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !VerifyOAuthHMAC(q, secret) {
		t.Fatal("Shopify's documented example does not verify")
	}
	if got := SignOAuthQuery(q, secret); got != q.Get("hmac") {
		t.Fatalf("SignOAuthQuery = %s, want %s", got, q.Get("hmac"))
	}

	tamper := func(k, v string) url.Values {
		c := url.Values{}
		for key, vs := range q {
			c[key] = append([]string(nil), vs...)
		}
		c.Set(k, v)
		return c
	}
	for name, bad := range map[string]url.Values{
		"other shop":      tamper("shop", "evil.myshopify.com"),
		"other state":     tamper("state", "1"),
		"added parameter": tamper("extra", "x"),
		"uppercase hex":   tamper("hmac", "700E2DADB827FCC8609E9D5CE208B2E9CDAAB9DF07390D2CBCA10D7C328FC4BF"), // still verifies: hex is case-free
		"no hmac":         tamper("hmac", ""),
		"short hmac":      tamper("hmac", "700e2d"),
	} {
		want := name == "uppercase hex"
		if got := VerifyOAuthHMAC(bad, secret); got != want {
			t.Errorf("%s: VerifyOAuthHMAC = %v, want %v", name, got, want)
		}
	}
	if VerifyOAuthHMAC(q, "") || VerifyOAuthHMAC(q, "hush2") {
		t.Error("verified under a wrong or empty secret")
	}

	t.Run("signature parameter is excluded", func(t *testing.T) {
		withSig := tamper("signature", "anything")
		if !VerifyOAuthHMAC(withSig, secret) {
			t.Fatal("a signature parameter changed the signed message")
		}
	})

	t.Run("repeated ids are signed as a list", func(t *testing.T) {
		bulk := url.Values{"shop": {"a.myshopify.com"}, "ids[]": {"2", "1"}, "timestamp": {"1"}}
		if want := `ids=["2", "1"]&shop=a.myshopify.com&timestamp=1`; oauthMessage(bulk) != want {
			t.Fatalf("message = %s, want %s", oauthMessage(bulk), want)
		}
		bulk.Set("hmac", SignOAuthQuery(bulk, secret))
		if !VerifyOAuthHMAC(bulk, secret) {
			t.Fatal("bulk query does not verify")
		}
	})

	t.Run("special characters escaped as documented", func(t *testing.T) {
		q := url.Values{"a=b": {"x&y%z"}, "protocol": {"https://"}}
		if want := "a%3Db=x%26y%25z&protocol=https://"; oauthMessage(q) != want {
			t.Fatalf("message = %s, want %s", oauthMessage(q), want)
		}
	})

	t.Run("form-encoded variant accepted", func(t *testing.T) {
		q := url.Values{"host": {"YWRtaW4uc2hvcGlmeS5jb20vc3RvcmUvYQ=="}, "shop": {"a.myshopify.com"}}
		q.Set("hmac", hexMAC(secret, q.Encode()))
		if !VerifyOAuthHMAC(q, secret) {
			t.Fatal("form-encoded signature does not verify")
		}
	})
}

func hexMAC(secret, msg string) string {
	return hex.EncodeToString(macSHA256(secret, []byte(msg)))
}
