package ecom

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// WebhookSignature is a decoded webhook signature: the HMAC-SHA256 of the body.
type WebhookSignature [sha256.Size]byte

// ParseWebhookSignature decodes a signature header (base64, surrounding space ignored) without
// allocating; false when it is not the base64 of 32 bytes.
func ParseWebhookSignature(headerValue []byte) (WebhookSignature, bool) {
	var sig WebhookSignature
	v := bytes.TrimSpace(headerValue)
	if base64.StdEncoding.DecodedLen(len(v)) > len(sig)+2 {
		return sig, false
	}
	var buf [sha256.Size + 3]byte
	n, err := base64.StdEncoding.Decode(buf[:], v)
	if err != nil || n != sha256.Size {
		return sig, false
	}
	copy(sig[:], buf[:n])
	return sig, true
}

// WebhookVerifier checks webhook signatures under one secret. It reuses its HMAC-SHA256 states
// (hmac.New allocates several objects, and the webhook route verifies every request). The zero
// value, and one made with an empty secret, verify nothing: anyone could sign with an empty
// secret. Safe for concurrent use.
type WebhookVerifier struct {
	pool *sync.Pool // nil: no secret
}

// NewWebhookVerifier returns the verifier of secret.
func NewWebhookVerifier(secret string) WebhookVerifier {
	if secret == "" {
		return WebhookVerifier{}
	}
	key := []byte(secret)
	return WebhookVerifier{pool: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// Verify reports whether sig is the HMAC-SHA256 of body under the verifier's secret. The
// comparison is constant-time.
func (v WebhookVerifier) Verify(body []byte, sig WebhookSignature) bool {
	if v.pool == nil {
		return false
	}
	h := v.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	v.pool.Put(h)
	return hmac.Equal(sum[:], sig[:])
}

// VerifyWebhookHMAC reports whether headerValue is the base64 HMAC-SHA256 of body under secret:
// Shopify's X-Shopify-Hmac-Sha256 and WooCommerce's X-WC-Webhook-Signature are both this. It is
// the one-shot form of WebhookVerifier: constant-time, and an empty secret never verifies.
func VerifyWebhookHMAC(body []byte, headerValue, secret string) bool {
	sig, ok := ParseWebhookSignature([]byte(headerValue))
	return ok && NewWebhookVerifier(secret).Verify(body, sig)
}

// SignWebhook returns the base64 HMAC-SHA256 of body under secret, as the platforms put it in
// their webhook signature header (for tests, benchmarks and fakes).
func SignWebhook(body []byte, secret string) string {
	return base64.StdEncoding.EncodeToString(macSHA256(secret, body))
}

// VerifyOAuthHMAC checks the `hmac` parameter of a Shopify OAuth redirect or admin request:
// the hex HMAC-SHA256, under the app secret, of the other parameters (minus `hmac` and
// `signature`) sorted by name and joined as name=value with '&'. Shopify's own description
// escapes only '%' and '&' (and '=' in names) and signs repeated `ids[]` parameters as
// ids=["1", "2"]; some of its client libraries sign the form-encoded query instead. Either
// canonical form is accepted (both need the secret). Constant-time; an empty secret never
// verifies.
func VerifyOAuthHMAC(query url.Values, secret string) bool {
	if secret == "" {
		return false
	}
	given, err := hex.DecodeString(strings.TrimSpace(query.Get("hmac")))
	if err != nil || len(given) != sha256.Size {
		return false
	}
	rawOK := hmac.Equal(given, macSHA256(secret, []byte(oauthMessage(query))))
	encodedOK := hmac.Equal(given, macSHA256(secret, []byte(oauthMessageEncoded(query))))
	return rawOK || encodedOK
}

// SignOAuthQuery returns the hex `hmac` value Shopify would add to query (Shopify's canonical
// form), for tests and fakes that play the platform's OAuth redirect.
func SignOAuthQuery(query url.Values, secret string) string {
	return hex.EncodeToString(macSHA256(secret, []byte(oauthMessage(query))))
}

func macSHA256(secret string, msg []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(msg)
	return m.Sum(nil)
}

// oauthMessage is Shopify's documented canonical form of a signed query.
func oauthMessage(query url.Values) string {
	valueEscaper := strings.NewReplacer("%", "%25", "&", "%26")
	keyEscaper := strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D")
	type pair struct{ name, text string }
	pairs := make([]pair, 0, len(query))
	for k, vs := range query {
		if k == "hmac" || k == "signature" {
			continue
		}
		var v string
		name := k
		if strings.HasSuffix(k, "[]") || len(vs) > 1 {
			name = strings.TrimSuffix(k, "[]")
			quoted := make([]string, len(vs))
			for i, x := range vs {
				quoted[i] = `"` + valueEscaper.Replace(x) + `"`
			}
			v = "[" + strings.Join(quoted, ", ") + "]"
		} else if len(vs) == 1 {
			v = valueEscaper.Replace(vs[0])
		}
		name = keyEscaper.Replace(name)
		pairs = append(pairs, pair{name, name + "=" + v})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].name < pairs[j].name })
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.text)
	}
	return b.String()
}

// oauthMessageEncoded is the form-encoded variant (sorted by name) some client libraries sign.
func oauthMessageEncoded(query url.Values) string {
	rest := make(url.Values, len(query))
	for k, vs := range query {
		if k != "hmac" && k != "signature" {
			rest[k] = vs
		}
	}
	return rest.Encode()
}
