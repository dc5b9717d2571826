package ecom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"
)

// VerifyWebhookHMAC reports whether headerValue is the base64 HMAC-SHA256 of body under secret:
// Shopify's X-Shopify-Hmac-Sha256 and WooCommerce's X-WC-Webhook-Signature are both this. The
// comparison is constant-time. An empty secret never verifies (anyone could sign with it).
func VerifyWebhookHMAC(body []byte, headerValue, secret string) bool {
	if secret == "" {
		return false
	}
	given, err := base64.StdEncoding.DecodeString(strings.TrimSpace(headerValue))
	if err != nil || len(given) != sha256.Size {
		return false
	}
	return hmac.Equal(given, macSHA256(secret, body))
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
