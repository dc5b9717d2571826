package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/gateway/gateway/domain"
)

// NewMessageID makes a message id in the shape WhatsApp Web uses (3EB0 + 20 hex digits): its
// first 4 bytes are the clock in microseconds (modulo 2^32: about 71 minutes), the other 6 are
// random. Ids made one after another sort one after another, so the records keyed by them
// (outbox_status/<id>, outbox_receipt/<id>/...) are inserted beside the ones just written,
// whose nodes in Badger's memtable are still in the cache: with wholly random ids each insert
// searched the 32 MiB skiplist through cold memory (the inserts 5.0 µs of CPU a message in
// process, 2.9 with these ids: bench/README.md, "Seventh pass"). The odds that two ids are equal stay those of 80 random bits over any
// set of ids spread over 71 minutes or more (what the outbox keeps), and two ids made in
// different microseconds of one such window never are.
func NewMessageID() string {
	var b [10]byte
	binary.BigEndian.PutUint32(b[:4], uint32(time.Now().UnixMicro()))
	_, _ = rand.Read(b[4:])
	return domain.WebMessageID(&b)
}

// DerivedID is the id the release before this one derived from an Idempotency-Key (a function
// of the API key and the Idempotency-Key alone): a key sent again after its 24 hours named the
// old message again. It is only looked up now (Idem.Derived is the one made): a record it
// wrote still answers its retry within its 24 hours.
func DerivedID(keyID, idemKey string) string {
	sum := sha256.Sum256([]byte(keyID + "\x00" + idemKey))
	return domain.WebMessageID((*[10]byte)(sum[:10]))
}

// DerivedIDOn is the id of the message an Idempotency-Key makes on day (IdemDay): a function of
// the API key, the Idempotency-Key and the day, so a retry after a crash names the same message
// and the key used again after its 24 hours names a new one.
func DerivedIDOn(keyID, idemKey string, day int64) string {
	// The bytes fmt's "%s\x00%s\x00%d" makes (TestDerivedIDOnUnchanged), on the stack for the
	// usual lengths: a keyed send derives three or four ids.
	var buf [128]byte
	b := append(buf[:0], keyID...)
	b = append(append(append(b, 0), idemKey...), 0)
	sum := sha256.Sum256(strconv.AppendInt(b, day, 10))
	return domain.WebMessageID((*[10]byte)(sum[:10]))
}

// IdemDay is the 24-hour period t falls in (days since the Unix epoch: UTC days).
func IdemDay(t time.Time) int64 {
	const day = int64(24 * time.Hour / time.Second)
	s := t.Unix()
	if s < 0 {
		return (s+1)/day - 1
	}
	return s / day
}

// revokeID is the id of the revoke of message id: derived from it, so the one revoke a message
// gets is found again (Messages.Delete).
func revokeID(id string) string {
	sum := sha256.Sum256([]byte("revoke\x00" + id))
	return domain.WebMessageID((*[10]byte)(sum[:10]))
}
