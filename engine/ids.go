package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// NewMessageID makes a message id in the shape WhatsApp Web uses (3EB0 + 20 hex digits).
func NewMessageID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "3EB0" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// DerivedID is the id of what an Idempotency-Key makes (a message, a campaign): a function of
// the API key and the Idempotency-Key, so a retry after a crash names the same message.
func DerivedID(keyID, idemKey string) string {
	sum := sha256.Sum256([]byte(keyID + "\x00" + idemKey))
	return "3EB0" + strings.ToUpper(hex.EncodeToString(sum[:10]))
}
