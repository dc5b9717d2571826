package persist

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"
)

// MessageLog is the history index of section 15: every user's messages in both directions,
// keyed by user and time, so a page of the listing is one seek and a walk over that page (never
// a scan of every message). An outgoing entry is the outbox's accept record (Outbox.Accept: the
// message itself, its one record at accept), incoming ones are written by Webhooks.SaveInbound
// with their message.received event.
//
//	msg_log/<uid>/<unix ms: 13 digits>/in/<msgID>/<session>  domain.LogEntry (v1), TTL 7 days
//	                                                   (before: .../in/<msgID>, still read)
//	msg_log/<uid>/<unix ms: 13 digits>/out/<msgID>   the accept record (v3), TTL 14 days (listed while
//	                                                   its outcome lives: 7 days)
//
// The user id is path-escaped (url.PathEscape), so keys stay printable and one user's prefix
// never covers another's; a page's cursor is the key after the user's prefix.
type MessageLog struct {
	kv KV
	t  *Table[domain.LogEntry]
}

// NewMessageLog returns the history index on kv.
func NewMessageLog(kv KV) *MessageLog {
	return &MessageLog{kv: kv, t: NewTable[domain.LogEntry](kv, messageLogTable, recordVersion1)}
}

func logUserPrefix(uid string) string { return url.PathEscape(uid) + "/" }

// pos is an entry's place in its user's history (the key after the user's prefix).
func logPos(at time.Time, dir, id string) string {
	return string(appendLogPos(nil, at.UnixMilli(), dir, id))
}

func appendLogPos(b []byte, ms int64, dir, id string) []byte {
	var digits [13]byte
	v := max(ms, 0)
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	b = append(b, digits[:]...)
	b = append(append(append(b, '/'), dir...), '/')
	return append(b, id...)
}

// logOut is the value of an outgoing message's entry of the older layout (version 2): its
// direction, id and time are in its key, so only the rest is stored (version 1 held the whole
// domain.LogEntry, the time as text). Now an outgoing entry is the outbox's accept record
// (version 3, outbox.go): the message itself.
type logOut struct {
	SessionID string `json:"session"`
	Peer      string `json:"peer"`
}

const logOutVersion = 2

// decodeLog reads an entry at pos (the key after the user's prefix); listed is false for an
// outgoing message the history does not list (a reaction, an edit, a revoke: shown on the
// message they are about).
func decodeLog(pos, value []byte) (e domain.LogEntry, listed bool, err error) {
	if len(value) > 0 && (value[0] == logOutVersion || value[0] == bodyVersion3) {
		// pos is "<13 digits>/out/<id>" (written by the outbox's accept).
		if len(pos) < 19 || string(pos[13:18]) != "/"+domain.DirOut+"/" {
			return e, false, fmt.Errorf("%w: an outgoing entry at %q", domain.ErrRecordInvalid, pos)
		}
		ms, err := strconv.ParseInt(string(pos[:13]), 10, 64)
		if err != nil {
			return e, false, fmt.Errorf("%w: an outgoing entry at %q", domain.ErrRecordInvalid, pos)
		}
		e = domain.LogEntry{Dir: domain.DirOut, ID: string(pos[18:]), At: time.UnixMilli(ms).UTC()}
		if value[0] == bodyVersion3 {
			m, _, err := decodeBody(value)
			if err != nil {
				return e, false, err
			}
			e.SessionID, e.Peer = m.SessionID, m.Message.To
			return e, listedKind(m.Message.Kind), nil
		}
		var o logOut
		if _, err := Decode(value, logOutVersion, &o); err != nil {
			return e, false, err
		}
		e.SessionID, e.Peer = o.SessionID, o.Peer
		return e, true, nil
	}
	_, err = Decode(value, recordVersion1, &e)
	return e, true, err
}

// InOps are the index entries of an incoming message: the whole message in the history, and
// its id's entry (msg_in/<uid>/<id>/<session>: the history key after the user's prefix), by
// which a reply or a read mark finds it. Both are per session: a group message two of the
// user's sessions got is two messages (each session's copy kept and published), and the
// network sending one session's copy again is the same one (Webhooks.SaveInbound).
func (l *MessageLog) InOps(m domain.InboundMessage) ([]Op, error) {
	if m.UserID == "" || m.ID == "" {
		return nil, fmt.Errorf("%w: a message log entry needs a user and an id", domain.ErrRecordInvalid)
	}
	pos := logPos(m.Timestamp, domain.DirIn, m.ID) + "/" + url.PathEscape(m.SessionID)
	op, err := l.t.PutTTLOp(logUserPrefix(m.UserID)+pos,
		domain.LogEntry{Dir: domain.DirIn, ID: m.ID, SessionID: m.SessionID, Peer: m.From, At: m.Timestamp, In: &m}, domain.InboundRetention)
	if err != nil {
		return nil, err
	}
	idx := Op{Key: inboundIDKey(m.UserID, m.SessionID, m.ID), Value: []byte(pos), TTL: domain.InboundRetention}
	return []Op{op, idx}, nil
}

// inboundIDKey is the key of the index entry of incoming message id as session sid got it.
func inboundIDKey(uid, sid, id string) []byte {
	return []byte(inboundIDTable + "/" + logUserPrefix(uid) + id + "/" + url.PathEscape(sid))
}

// userInboundIDKey is the index entry's key before it was per session (msg_in/<uid>/<id>,
// one per user; history positions <ms>/in/<id>): still read, and still a message kept under
// it, whichever session got it, is not kept again (its 7 days run out on their own). This
// release writes it too, for an id's first copy (pointing at it: <ms>/in/<id>/<session>), for
// the nodes of the release before during a rolling upgrade (SaveInbound).
func userInboundIDKey(uid, id string) []byte {
	return []byte(inboundIDTable + "/" + logUserPrefix(uid) + id)
}

// InboundOf is Inbound preferring the copy session sid got, when it got one (a reply, a
// reaction or a read mark goes through that session).
func (l *MessageLog) InboundOf(uid, id, sid string) (domain.InboundMessage, error) {
	if sid == "" {
		return l.Inbound(uid, id)
	}
	pos, err := l.kv.Get(inboundIDKey(uid, sid, id))
	if errors.Is(err, domain.ErrRecordNotFound) {
		return l.Inbound(uid, id)
	}
	if err != nil {
		return domain.InboundMessage{}, err
	}
	return l.inboundAt(uid, id, pos)
}

// Inbound returns one of the user's incoming messages by id (domain.ErrRecordNotFound when
// none was kept): a message two of the user's sessions got is the first copy kept (the user's
// key points at it, SaveInbound), else the first session's by session id (kept by a release
// that wrote no user's key).
func (l *MessageLog) Inbound(uid, id string) (domain.InboundMessage, error) {
	pos, err := l.kv.Get(userInboundIDKey(uid, id))
	if errors.Is(err, domain.ErrRecordNotFound) {
		prefix := append(userInboundIDKey(uid, id), '/')
		err = stopped(l.kv.Scan(prefix, func(k, v []byte) error {
			if sid := k[len(prefix):]; bytes.IndexByte(sid, '/') >= 0 || !copyOf(v, id, sid) {
				// Another id's: "<id>/<x>/<session>" (a session's part has no '/'), or the
				// user's key of an id "<id>/<x>" (this release writes those too: SaveInbound).
				return nil
			}
			pos = slices.Clone(v)
			return errStopScan
		}))
		if err == nil && pos == nil {
			err = fmt.Errorf("%w: %s: %s", domain.ErrRecordNotFound, inboundIDTable, id)
		}
	}
	if err != nil {
		return domain.InboundMessage{}, err
	}
	return l.inboundAt(uid, id, pos)
}

// copyOf tells whether pos is the history position of the copy of incoming message id that
// session sid (escaped, as in its index key) got: "<time>/in/<id>/<sid>".
func copyOf(pos []byte, id string, sid []byte) bool {
	const dirAt = 14 // the time's 13 digits and '/'
	if len(pos) != dirAt+len(domain.DirIn)+len(id)+len(sid)+2 {
		return false
	}
	rest := pos[dirAt:]
	return string(rest[:len(domain.DirIn)]) == domain.DirIn && rest[len(domain.DirIn)] == '/' &&
		string(rest[len(domain.DirIn)+1:len(domain.DirIn)+1+len(id)]) == id &&
		rest[len(domain.DirIn)+1+len(id)] == '/' && bytes.Equal(rest[len(domain.DirIn)+2+len(id):], sid)
}

// inboundAt reads incoming message id at its history position pos.
func (l *MessageLog) inboundAt(uid, id string, pos []byte) (domain.InboundMessage, error) {
	e, err := l.t.Get(logUserPrefix(uid) + string(pos))
	if err != nil {
		return domain.InboundMessage{}, err
	}
	if e.In == nil {
		return domain.InboundMessage{}, fmt.Errorf("%w: %s is not an incoming message", domain.ErrRecordNotFound, id)
	}
	return *e.In, nil
}

// cursor turns an entry's place into an opaque cursor (url-safe base64).
func cursor(pos string) string { return base64.RawURLEncoding.EncodeToString([]byte(pos)) }

func parseCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 15 || b[13] != '/' || !printableKey(b) {
		return "", domain.ErrBadCursor
	}
	return string(b), nil
}

func printableKey(b []byte) bool {
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// ScanLog walks uid's history in the order s asks (newest first, or oldest first from
// s.Since), after s.Cursor, calling fn with each entry and the cursor that continues after it,
// until fn returns false or an error. Entries that do not decode stop the walk with an error.
func (l *MessageLog) ScanLog(uid string, s domain.LogScan, fn func(next string, e domain.LogEntry) (bool, error)) error {
	if uid == "" {
		return nil
	}
	prefix := l.t.key(logUserPrefix(uid))
	var after []byte
	if s.Cursor != "" {
		pos, err := parseCursor(s.Cursor)
		if err != nil {
			return err
		}
		after = append(slices.Clone(prefix), pos...)
	}
	walk := func(key, value []byte) error {
		e, listed, err := decodeLog(key[len(prefix):], value)
		if err != nil {
			return fmt.Errorf("%s %q: %w", messageLogTable, key, err)
		}
		if !listed {
			return nil // shown on the message it is about
		}
		more, err := fn(cursor(string(key[len(prefix):])), e)
		if err != nil {
			return err
		}
		if !more {
			return errStopScan
		}
		return nil
	}
	var err error
	if s.Since.IsZero() {
		err = l.scanNewest(prefix, after, walk)
	} else {
		start := append(slices.Clone(prefix), fmt.Sprintf("%013d", max(s.Since.UnixMilli(), 0))...)
		if after != nil && bytes.Compare(after, start) >= 0 {
			start = append(after, 0) // the first key after the cursor
		}
		err = scanFrom(l.kv, prefix, start, walk)
	}
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return err
}

// sinceScanner is a KV that reads the records of a prefix written since a time without reading
// the older ones (persist/natskv: the stream's time index; its records have no key order).
type sinceScanner interface {
	ScanSince(prefix []byte, since time.Time, fn func(key, value []byte) error) error
}

// logWindows are how far back a newest-first walk of a user's history reads, one window after
// the other, on a store without a reverse scan; the last covers the whole retention.
var logWindows = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 3 * 24 * time.Hour, domain.InboundRetention + 24*time.Hour}

// logSkew: an entry is written at its key's time or later (an outgoing one when accepted, an
// incoming one when received), give or take the clocks of the gateway, the network and the
// NATS server being apart (NTP: within a second; this margin is generous).
const logSkew = time.Minute

// scanNewest walks the history under prefix before end (nil: all), newest first. With a
// reverse scan (Badger, Memory) it is one seek; on a store whose records keep no key order but
// can be read from a time on (NATS JetStream), it reads the last hour, then the last 6 hours,
// and so on: every entry whose key time is at least a window's start (+ logSkew) was written
// within the window, so those come out in order before the next window is read, and a page of
// recent history never reads the week.
func (l *MessageLog) scanNewest(prefix, end []byte, fn func(key, value []byte) error) error {
	ss, ok := l.kv.(sinceScanner)
	if _, rev := l.kv.(reverseScanner); rev || !ok {
		return scanBefore(l.kv, prefix, end, fn)
	}
	type kvp struct{ k, v []byte }
	bound := end // keys at or past it were given to fn
	now := time.Now()
	for i, w := range logWindows {
		since := now.Add(-w)
		var cut []byte // the smallest key this window is complete for
		if i < len(logWindows)-1 {
			cut = fmt.Appendf(slices.Clone(prefix), "%013d", since.Add(logSkew).UnixMilli())
		} else {
			cut, since = prefix, time.Time{}
		}
		var got []kvp
		err := ss.ScanSince(prefix, since, func(key, value []byte) error {
			if (bound == nil || bytes.Compare(key, bound) < 0) && bytes.Compare(key, cut) >= 0 {
				got = append(got, kvp{slices.Clone(key), slices.Clone(value)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for j := len(got) - 1; j >= 0; j-- {
			if err := fn(got[j].k, got[j].v); err != nil {
				return err
			}
		}
		if bound == nil || bytes.Compare(cut, bound) < 0 {
			bound = cut
		}
	}
	return nil
}

// AdoptInbound moves the incoming messages kept by earlier versions (the "inbound" table,
// keyed with NUL separators) into the history index, keeping their expiry. It returns how many
// it moved; run once at start, before the listing is served.
func (l *MessageLog) AdoptInbound(ctx context.Context) (int, error) {
	var ops []Op
	n := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := l.kv.Commit(ctx, ops...)
		ops = ops[:0]
		return err
	}
	err := l.kv.Scan([]byte(inboundTable+"/"), func(key, value []byte) error {
		var m domain.InboundMessage
		if _, err := Decode(value, recordVersion1, &m); err != nil {
			return nil // unreadable: left to expire
		}
		uid, _, ok := strings.Cut(string(key[len(inboundTable)+1:]), "\x00")
		if !ok {
			return nil
		}
		m.UserID = uid
		in, err := l.InOps(m)
		if err != nil {
			return nil
		}
		// The copy expires when the original would have.
		if left := time.Until(m.Timestamp.Add(domain.InboundRetention)); left > time.Minute {
			for _, op := range in {
				op.TTL = left
				ops = append(ops, op)
			}
		}
		ops = append(ops, Op{Key: slices.Clone(key), Delete: true})
		n++
		if len(ops) >= deleteBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}

// scanFrom is kv's range scan from start, or a scan that skips the keys before start.
func scanFrom(kv KV, prefix, start []byte, fn func(key, value []byte) error) error {
	if r, ok := kv.(rangeScanner); ok {
		return r.ScanFrom(prefix, start, fn)
	}
	return kv.Scan(prefix, func(key, value []byte) error {
		if bytes.Compare(key, start) < 0 {
			return nil
		}
		return fn(key, value)
	})
}

// reverseScanner is a KV that walks a prefix backwards (Badger, Memory).
type reverseScanner interface {
	ScanBefore(prefix, end []byte, fn func(key, value []byte) error) error
}

// scanBefore walks the keys under prefix before end (nil: all), last first. A KV without a
// reverse scan is read forward into memory first (one user's week of messages at most).
func scanBefore(kv KV, prefix, end []byte, fn func(key, value []byte) error) error {
	if r, ok := kv.(reverseScanner); ok {
		return r.ScanBefore(prefix, end, fn)
	}
	type kvp struct{ k, v []byte }
	var all []kvp
	err := kv.Scan(prefix, func(key, value []byte) error {
		if end == nil || bytes.Compare(key, end) < 0 {
			all = append(all, kvp{slices.Clone(key), slices.Clone(value)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if err := fn(all[i].k, all[i].v); err != nil {
			return err
		}
	}
	return nil
}
