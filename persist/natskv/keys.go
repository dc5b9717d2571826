package natskv

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gateway/gateway/domain"
)

// MaxEncodedKey bounds a key's subject tokens (table, id parts, dots; the prefix and the
// partition not counted): DESIGN.md section 13.1's 1 KiB. The longest key of letters is
// MaxEncodedKey-3 bytes (it gets the "!.!" of a key without "/"); the gateway's longest,
// idem/<keyID>/<255-byte Idempotency-Key>, encodes to under 900 bytes even escaped whole.
const MaxEncodedKey = 1024

// The key encoding. A key's bytes split at "/" into parts; the first part is the table token,
// the others the id tokens, each encoded byte by byte:
//
//	0-9 A-Z a-z _      as they are
//	0x00-0x2E          "," + two upper-case hex digits  (so "-" is ",2D", "." is ",2E")
//	0x3A-0x40          ":" + hex                         (":" is ":3A")
//	0x5B-0x5E          "^" + hex
//	0x60               "`60"
//	0x7B-0xFF          "~" + hex
//
// An empty part is "," when it is the key's last part and ",~" otherwise. A key without "/"
// is all table token, marked with a "!" at its end (sorting before anything that can follow),
// and gets the id token "!" (every record subject has at least four tokens). Every escape's
// first character sorts where its byte sorts among the bytes kept as they are, "." (the token
// separator) sorts where "/" does (after 0x00-0x2E, before "0"), and the two empty-part tokens
// and the "!" mark sort where their keys do, so comparing
// two encodings byte by byte gives the order of the keys: the encoding keeps order (within a
// partition; the partition token sits after the table) and is reversible (decodeKey). No token
// is empty, and none holds a space, ".", "*" or ">": every one is a literal NATS subject token.
const (
	noIDToken       = "!"
	lastEmptyToken  = ","
	innerEmptyToken = ",~"
	hexDigits       = "0123456789ABCDEF"
)

// internalTable is the table token of the store's own records (the lease, condition
// carriers): no key encodes to it, so no scan of the gateway's keys returns them.
const internalTable = "!"

func appendPart(dst, part []byte, last bool) []byte {
	if len(part) == 0 {
		if last {
			return append(dst, lastEmptyToken...)
		}
		return append(dst, innerEmptyToken...)
	}
	for _, b := range part {
		var esc byte
		switch {
		case b >= '0' && b <= '9', b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', b == '_':
			dst = append(dst, b)
			continue
		case b < '/':
			esc = ','
		case b <= '@':
			esc = ':'
		case b <= '^':
			esc = '^'
		case b == '`':
			esc = '`'
		default:
			esc = '~'
		}
		dst = append(dst, esc, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

var errBadToken = errors.New("natskv: not a key token")

func decodePart(dst []byte, tok string) ([]byte, error) {
	if tok == lastEmptyToken || tok == innerEmptyToken {
		return dst, nil
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch c {
		case ',', ':', '^', '`', '~':
			if i+3 > len(tok) {
				return nil, errBadToken
			}
			v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
			if err != nil {
				return nil, errBadToken
			}
			dst = append(dst, byte(v))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, nil
}

// decodeKey is encodeKey's inverse on a record subject's tokens after the prefix:
// table, partition, id tokens.
func decodeKey(tokens []string) ([]byte, error) {
	if len(tokens) < 3 || tokens[0] == internalTable {
		return nil, errBadToken
	}
	ids := tokens[2:]
	if table, ok := strings.CutSuffix(tokens[0], noIDToken); ok {
		if len(ids) != 1 || ids[0] != noIDToken {
			return nil, errBadToken
		}
		return decodePart(nil, table)
	}
	key, err := decodePart(nil, tokens[0])
	if err != nil {
		return nil, err
	}
	for _, t := range ids {
		key = append(key, '/')
		if key, err = decodePart(key, t); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// subject is the record subject of key: <prefix>.<table>.<partition>.<id tokens>, with the
// partition token tok ("" = Options.Partition's, "*" = any partition: a filter). Built in one
// pooled buffer (encodeKey's split and its two token slices were 4-6 allocations a commit on
// the send path; now one, the string).
func (s *Store) subject(tok string, key []byte) (string, error) {
	if tok == "" {
		tok = strconv.FormatUint(uint64(s.partition(key)), 10)
	}
	bp := subjectBufs.Get().(*[]byte)
	b, err := appendSubject((*bp)[:0], s.prefix, tok, key)
	out := string(b)
	if cap(b) <= 4096 {
		*bp = b
		subjectBufs.Put(bp)
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

var subjectBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// appendSubject appends <prefix>.<table>.<tok>.<id tokens> for key to dst: encodeKey's
// encoding, or ErrInvalid when its tokens exceed MaxEncodedKey.
func appendSubject(dst []byte, prefix, tok string, key []byte) ([]byte, error) {
	dst = append(append(dst, prefix...), '.')
	start := len(dst)
	slash := bytes.IndexByte(key, '/')
	if slash < 0 {
		dst = append(appendPart(dst, key, true), noIDToken...)
	} else {
		dst = appendPart(dst, key[:slash], false)
	}
	n := len(dst) - start + 1 // the table and the dot before the id
	dst = append(append(append(dst, '.'), tok...), '.')
	start = len(dst)
	if slash < 0 {
		dst = append(dst, noIDToken...)
	} else {
		for rest := key[slash+1:]; ; {
			j := bytes.IndexByte(rest, '/')
			if j < 0 {
				dst = appendPart(dst, rest, true)
				break
			}
			dst = append(appendPart(dst, rest[:j], false), '.')
			rest = rest[j+1:]
		}
	}
	if n += len(dst) - start; n > MaxEncodedKey {
		return dst, fmt.Errorf("%w: key of %d bytes encodes to %d, over the NATS store's %d", domain.ErrRecordInvalid, len(key), n, MaxEncodedKey)
	}
	return dst, nil
}

// partitionOf is a record subject's partition token.
func (s *Store) partitionOf(subject string) string {
	rest, _ := strings.CutPrefix(subject, s.prefix+".")
	if _, rest, ok := strings.Cut(rest, "."); ok {
		tok, _, _ := strings.Cut(rest, ".")
		return tok
	}
	return ""
}

// keyOf decodes a record subject back to its key; ok is false for the store's own records and
// for subjects that are not records.
func (s *Store) keyOf(subject string) ([]byte, bool) {
	rest, found := strings.CutPrefix(subject, s.prefix+".")
	if !found {
		return nil, false
	}
	key, err := decodeKey(strings.Split(rest, "."))
	return key, err == nil
}

// filter is the subject filter of a scan of prefix in partition tok ("*": every partition):
// the tokens of its complete "/"-parts, then ">"; the last, partial part is matched on the
// decoded keys.
func (s *Store) filter(tok string, prefix []byte) string {
	i := bytes.LastIndexByte(prefix, '/')
	if i < 0 {
		return s.prefix + ".*." + tok + ".>"
	}
	parts := bytes.Split(prefix[:i], []byte("/"))
	var b []byte
	b = append(b, s.prefix...)
	b = append(b, '.')
	b = appendPart(b, parts[0], false)
	b = append(b, '.')
	b = append(b, tok...)
	for _, p := range parts[1:] {
		b = append(b, '.')
		b = appendPart(b, p, false)
	}
	return string(append(b, ".>"...))
}
