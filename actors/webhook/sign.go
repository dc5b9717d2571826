package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/gateway/gateway/cloudapi"
)

// The Standard Webhooks wire format (https://www.standardwebhooks.com, DESIGN.md section 10):
// the headers below, and webhook-signature = "v1," + base64(HMAC-SHA256(key, id.timestamp.body))
// where key is the secret's bytes after "whsec_". Signing goes through the specification's own
// Go library; the tests verify with independent implementations.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature

	secretPrefix = "whsec_"
	secretBytes  = 32
)

// ErrSecret: a stored secret is not whsec_ + base64.
var ErrSecret = errors.New("webhook: malformed secret")

// NewSecret returns a new signing secret: whsec_ + base64 of 32 random bytes.
func NewSecret() (string, error) {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook: secret: %w", err)
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// Signer signs deliveries with one subscription's secret. Safe for concurrent use.
type Signer struct {
	wh *standardwebhooks.Webhook
	// hub, when set, is the secret as a Meta app secret: each body also gets its
	// X-Hub-Signature-256 (a subscription of format meta, DESIGN.md section 20).
	hub string
}

// WithHub returns the signer that also signs as Meta does (cloudapi.Sign: the hex
// HMAC-SHA256 of the body in cloudapi.SignatureHeader), with secret, the whole whsec_...
// string, as the app secret.
func (s Signer) WithHub(secret string) Signer {
	s.hub = secret
	return s
}

// NewSigner decodes secret (whsec_ + base64).
func NewSigner(secret string) (Signer, error) {
	raw, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return Signer{}, ErrSecret
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(key) == 0 {
		return Signer{}, ErrSecret
	}
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return Signer{}, fmt.Errorf("%w: %w", ErrSecret, err)
	}
	return Signer{wh: wh}, nil
}

// Headers are the three Standard Webhooks headers of one attempt.
type Headers struct {
	ID, Timestamp, Signature string
	// HubSignature is the X-Hub-Signature-256 value ("": none).
	HubSignature string
}

// Sign returns the headers for body sent as message id at time at (whole seconds: the
// timestamp header is Unix seconds).
func (s Signer) Sign(id string, at time.Time, body []byte) (Headers, error) {
	sig, err := s.wh.Sign(id, at, body)
	if err != nil {
		return Headers{}, fmt.Errorf("webhook: sign: %w", err)
	}
	h := Headers{ID: id, Timestamp: strconv.FormatInt(at.Unix(), 10), Signature: sig}
	if s.hub != "" {
		h.HubSignature = cloudapi.Sign(body, s.hub)
	}
	return h, nil
}
