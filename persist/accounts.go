package persist

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsonenc"
)

// Accounts persists account snapshots (the monthly allowance).
type Accounts struct{ t *Table[domain.Allowance] }

// NewAccounts returns the account table on kv.
func NewAccounts(kv KV) Accounts { return Accounts{NewTable[domain.Allowance](kv, accountTable, 1)} }

// GetAccount returns a user's snapshot (a zero one when none).
func (a Accounts) GetAccount(uid string) (domain.Allowance, error) {
	s, err := a.t.Get(uid)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.Allowance{UserID: uid}, nil
	}
	return s, err
}

// PutAccount writes a snapshot. It is written for every user every few milliseconds under
// load, from a goroutine of its own: the JSON is written by hand (the reflecting encoder's deep
// stack was grown again in each save's goroutine, 2 % of the CPU of a send, profiled).
func (a Accounts) PutAccount(ctx context.Context, s domain.Allowance) error {
	v := append(make([]byte, 0, 128), recordVersion1)
	v = append(v, `{"userId":`...)
	v = jsonenc.AppendString(v, s.UserID)
	v = append(v, `,"period":`...)
	v = jsonenc.AppendString(v, s.Period)
	v = strconv.AppendInt(append(v, `,"sent":`...), s.Sent, 10)
	v = strconv.AppendInt(append(v, `,"mark":`...), s.Mark, 10)
	if s.At != 0 {
		v = strconv.AppendInt(append(v, `,"at":`...), s.At, 10)
		v = strconv.AppendInt(append(v, `,"since":`...), s.Since, 10)
		v = strconv.AppendInt(append(v, `,"recent":`...), s.Recent, 10)
	}
	op, err := a.t.PutRawOp(s.UserID, append(v, '}'), 0)
	if err != nil {
		return err
	}
	return a.t.KV().Commit(background(ctx), op) // written behind, on a clock of its own
}

// RecountSkew: the records of a store read by their write time (NATS: the server's clock) are
// read from this much before the gateway's time wanted (clocks within 1 s, DESIGN.md 13.1).
const RecountSkew = 10 * time.Second

// Recount counts, after a kill -9, the messages the account snapshots left out: the count is
// written behind, so a message counted in memory since its user's last snapshot is in no
// snapshot, though its sent outcome is durable in the outbox (a message is counted only once
// its outcome is durable). Run at boot, before any account is loaded or any message sent; for
// the outbox on this store (Outbox; the log outbox's is LogRecount, the same count). It
// returns, per user whose snapshot misses messages, the snapshot as it should be this month (now's), stamped as read when the dead
// process was last known alive (not now: a boot that wrote only some of them recounts the
// same), and the send times it now counts; the caller writes those snapshots before anything
// else runs.
//
// Which messages: a snapshot read its count at At; the messages it counts that were sent at or
// after Since number Recent; and a message is counted within recentWindow of being sent. So
// the user's messages sent (their outcome's send time) at or after Since, less Recent, are
// those it left out. margin bounds how far before the newest snapshot (its At) a message left
// out can have been sent: a message counted is in a snapshot within the flush interval and
// two writes, unless the process died first, and no process died before the newest snapshot
// was read. A snapshot read before that bound counts no message sent after it (the next one
// would have been written), so for it every message sent from the bound on is left out. Only
// the outcomes written since the earliest of these times are read: on a store with a time
// index (NATS JetStream) those of about a margin, else (Memory) the whole table.
//
// Each message's kind is read from its accept record (an edit or a revoke is not charged).
// Not counted: a message sent at the turn of a month and counted in the next one by the dead
// process (it counted by its own clock, after the outcome; the recount goes by send time),
// nor one whose send took longer than recentWindow to become durable and counted.
func (a Accounts) Recount(now time.Time, margin time.Duration) (map[string]domain.AccountRecount, error) {
	w, err := a.recountWindow(margin)
	if err != nil || w == nil {
		return nil, err
	}
	type sent struct {
		id, pos string
		at      domain.Millis
	}
	var cands []sent
	kv := a.t.KV()
	prefix := []byte(outboxStatusTable + "/")
	seen := map[string]bool{} // a message counts once, read in a record and a page alike
	count := func(id string, c outcome) error {
		if !c.counts() || seen[id] {
			return nil
		}
		seen[id] = true
		uid, ok := posUser(c.Pos)
		if !ok {
			return nil
		}
		if thr, _ := w.threshold(uid); int64(c.SentAt) >= thr {
			cands = append(cands, sent{id: id, pos: c.Pos, at: c.SentAt})
		}
		return nil
	}
	visit := func(key, value []byte) error {
		var c outcome
		if v, err := Decode(value, statusVersion2, &c); err != nil || v != statusVersion2 {
			return nil // not an outcome of this layout: written before any snapshot with At
		}
		return count(string(key[len(prefix):]), c)
	}
	// The snapshots' times are on the engine's clock (now's), the records' on the store's.
	since := onStoreClock(time.UnixMilli(w.from), now).Add(-RecountSkew)
	if ss, ok := kv.(sinceScanner); ok {
		err = ss.ScanSince(prefix, since, visit)
	} else {
		err = kv.Scan(prefix, visit)
	}
	if err == nil {
		err = pagedSince(kv, since, count) // the outcomes paged (outbox_nats.go)
	}
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	keys := make([][]byte, len(cands))
	for i, c := range cands {
		keys[i] = acceptKeyAt(c.pos, c.id)
	}
	bodies, err := GetMany(kv, keys)
	if err != nil {
		return nil, err
	}
	read := w.newest
	byUser := map[string][]domain.Millis{}
	for i, c := range cands {
		read = max(read, int64(c.at))
		if bodies[i] == nil {
			continue
		}
		e, _, err := decodeBody(bodies[i])
		if err != nil || !e.Message.Kind.Charged() || e.UserID == "" {
			continue
		}
		byUser[e.UserID] = append(byUser[e.UserID], c.at)
	}
	return w.recounted(now, read, byUser), nil
}

// counts tells whether an outcome counts its message: counted once sent (the send time set
// with its sent outcome), whatever came after: a late failure (the network's, after the send)
// rewrites the record failed with its send time kept, and the message stays counted (the
// snapshot's Recent holds it). A cancelled message is not.
func (c *outcome) counts() bool {
	return c.SentAt != 0 && c.Pos != "" && c.Status != domain.MsgCancelled
}

// recountWindow is what a recount reads of the snapshots (Accounts.Recount): each user's, the
// newest one's At, the bound (that less the margin) and from, the earliest send time a
// message left out of a snapshot can have.
type recountWindow struct {
	snaps               map[string]domain.Allowance
	newest, bound, from int64
}

// recountWindow reads the snapshots: nil when none says when it was read (none, or written
// by an older release).
func (a Accounts) recountWindow(margin time.Duration) (*recountWindow, error) {
	w := &recountWindow{snaps: map[string]domain.Allowance{}}
	if err := a.t.Scan("", func(id string, s domain.Allowance) error {
		s.UserID = id
		w.snaps[id] = s
		w.newest = max(w.newest, s.At)
		return nil
	}); err != nil {
		return nil, err
	}
	if w.newest == 0 {
		return nil, nil
	}
	w.bound = w.newest - margin.Milliseconds()
	w.from = w.bound
	for _, s := range w.snaps {
		if s.At >= w.bound && s.Since > 0 {
			w.from = min(w.from, s.Since)
		}
	}
	return w, nil
}

// threshold is the send time from which a user's messages are left out of its snapshot, and
// how many of those the snapshot counts.
func (w *recountWindow) threshold(uid string) (int64, int64) {
	if s, ok := w.snaps[uid]; ok && s.At >= w.bound && s.Since > 0 {
		return s.Since, s.Recent
	}
	return w.bound, 0
}

// recounted is the recount's answer from the send times of each user's charged messages sent
// from its threshold on. read: when the dead process was last known alive, by its own clock:
// the newest snapshot's At, or a send time after it (of any message the recount read). Every
// message a recounted snapshot counts was sent by then, and none since (this process sends
// once they are written).
func (w *recountWindow) recounted(now time.Time, read int64, byUser map[string][]domain.Millis) map[string]domain.AccountRecount {
	y, m, _ := now.UTC().Date()
	monthStart := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	period, startMs := monthStart.Format("2006-01"), monthStart.UnixMilli()
	out := map[string]domain.AccountRecount{}
	for uid, ats := range byUser {
		s, ok := w.snaps[uid]
		if !ok {
			s = domain.Allowance{UserID: uid}
		}
		thr, recent := w.threshold(uid)
		kept := ats[:0] // this month's (a snapshot's Since is within its month)
		for _, at := range ats {
			if int64(at) >= startMs {
				kept = append(kept, at)
			}
		}
		ats = kept
		switch {
		case s.Period == period:
			s.Sent = max(s.Sent, s.Sent+int64(len(ats))-recent)
		case s.Period < period:
			// The snapshot is of a month that has ended: none of this month's messages is in it.
			s = domain.Allowance{UserID: uid, Period: period, Sent: int64(len(ats))}
		default:
			continue // a month after now's (a clock set back): left as it is
		}
		if len(ats) == 0 {
			continue
		}
		// Stamped as read at read (not now), counting every message of the window it was
		// recounted from, so that a snapshot written from it is exact for the next boot's
		// recount too, and the recount the same again when a boot wrote only some of its
		// snapshots: read now, one written would move the next recount's bound (the newest
		// At less the margin) past the messages of the users whose snapshot was not, when the
		// process was down longer than the margin.
		s.At, s.Since, s.Recent = read, max(thr, startMs), int64(len(ats))
		s.Mark = max(s.Mark, s.Sent)
		out[uid] = domain.AccountRecount{Allowance: s, Sent: ats}
	}
	return out
}

// posUser is the user of an outcome's pos (posOf: the path-escaped uid, "/", 13 digits).
func posUser(pos string) (string, bool) {
	i := strings.LastIndexByte(pos, '/')
	if i <= 0 {
		return "", false
	}
	uid, err := url.PathUnescape(pos[:i])
	return uid, err == nil
}
