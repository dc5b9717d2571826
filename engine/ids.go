package engine

import (
	"crypto/rand"
	"crypto/sha256"
)

// NewMessageID makes a message id in the shape WhatsApp Web uses (3EB0 + 20 hex digits).
func NewMessageID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return messageID(&b)
}

// DerivedID is the id of what an Idempotency-Key makes (a message, a campaign): a function of
// the API key and the Idempotency-Key, so a retry after a crash names the same message.
func DerivedID(keyID, idemKey string) string {
	sum := sha256.Sum256([]byte(keyID + "\x00" + idemKey))
	return messageID((*[10]byte)(sum[:10]))
}

// messageID writes "3EB0" and b in upper-case hex into one string: one allocation (the hex
// encoding, its upper-casing and the concatenation were three, and a tenth of the accept's
// own work in the send path's profile).
func messageID(b *[10]byte) string {
	const digits = "0123456789ABCDEF"
	var out [24]byte
	copy(out[:], "3EB0")
	for i, c := range b {
		out[4+2*i], out[5+2*i] = digits[c>>4], digits[c&15]
	}
	return string(out[:])
}
