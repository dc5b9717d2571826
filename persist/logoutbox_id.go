package persist

import (
	"encoding/binary"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// Message ids that say where their accept record is (LogOutbox): the WhatsApp Web shape the
// gateway's ids have always had (3EB0 and 20 upper-case hex digits), its 80 bits being 22 bits
// of segment number (modulo 2^22), 26 bits of offset (segments are at most 64 MiB) and 32
// random bits that the accept record keeps with the whole id. A read decodes the id, reads the
// record there and answers only if the record is an accept of that very id: an id forged, from
// another gateway, or naming a position whose record a power cut lost (SyncInterval) and a
// later accept took, reads as not found.
const (
	idSegBits = 22
	idOffBits = 26
	// logSegmentSize is the LogOutbox's segments' size: every offset fits idOffBits.
	logSegmentSize = 1 << idOffBits
)

// idPlaceholder is logID(0, 0): an id's length in a new accept's record until its position,
// and so its id, is known (a constant: no string made an accept).
const idPlaceholder = "3EB000000000000000000000"

// logID is the id of the accept at p with random bits rnd.
func logID(p outlog.Pos, rnd uint32) string {
	b := logIDBytes(p, rnd)
	return string(b[:])
}

// logIDBytes is logID's bytes: queueAccept writes them into the record under the log's lock
// and makes the string after it (an allocation fewer under the log's lock).
func logIDBytes(p outlog.Pos, rnd uint32) [24]byte {
	v := posBits(p)
	var b [10]byte
	binary.BigEndian.PutUint16(b[:2], uint16(v>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(v))
	binary.BigEndian.PutUint32(b[6:], rnd)
	return domain.WebMessageIDBytes(&b)
}

// posBits are the 48 bits of position p that an id in logID's shape holds: its segment's
// number modulo 2^22 and its offset.
func posBits(p outlog.Pos) uint64 {
	return uint64(p.Seg()&(1<<idSegBits-1))<<idOffBits | uint64(p.Off()&(1<<idOffBits-1))
}

// idBits decodes an id in logID's shape as it stands: its position's bits (posBits) and its
// random bits; ok is false for any other string (lower-case hex included).
func idBits(id string) (v uint64, rnd uint32, ok bool) {
	if len(id) != 24 || id[:4] != "3EB0" {
		return 0, 0, false
	}
	var b [10]byte
	for i := range b {
		hi, ok1 := hexDigit(id[4+2*i])
		lo, ok2 := hexDigit(id[5+2*i])
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		b[i] = hi<<4 | lo
	}
	v = uint64(binary.BigEndian.Uint16(b[:2]))<<32 | uint64(binary.BigEndian.Uint32(b[2:6]))
	return v, binary.BigEndian.Uint32(b[6:]), true
}

// parseLogID decodes an id in logID's shape: the position it names (the newest segment at or
// before cur with its number's low 22 bits) and its random bits; ok is false for any other
// string (lower-case hex included: logID writes upper case only).
func parseLogID(id string, cur uint32) (p outlog.Pos, rnd uint32, ok bool) {
	v, rnd, ok := idBits(id)
	if !ok {
		return 0, 0, false
	}
	low, off := uint32(v>>idOffBits), uint32(v&(1<<idOffBits-1))
	seg := cur&^(1<<idSegBits-1) | low
	if seg > cur {
		if cur < 1<<idSegBits {
			return 0, 0, false
		}
		seg -= 1 << idSegBits
	}
	if seg == 0 {
		return 0, 0, false
	}
	return outlog.At(seg, off), rnd, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
