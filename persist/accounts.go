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
// the outbox on this store (Outbox, not LogOutbox). It returns, per user whose snapshot misses
// messages, the snapshot as it should be this month (now's), stamped as read at now, and the
// send times it now counts; the caller writes those snapshots before anything else runs.
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
	snaps := map[string]domain.Allowance{}
	var newest int64
	if err := a.t.Scan("", func(id string, s domain.Allowance) error {
		s.UserID = id
		snaps[id] = s
		newest = max(newest, s.At)
		return nil
	}); err != nil {
		return nil, err
	}
	if newest == 0 {
		return nil, nil // no snapshot says when it was read (none, or written by an older release)
	}
	bound := newest - margin.Milliseconds()
	from := bound
	for _, s := range snaps {
		if s.At >= bound && s.Since > 0 {
			from = min(from, s.Since)
		}
	}
	// threshold is the send time from which a user's messages are left out of its snapshot,
	// and how many of those the snapshot counts.
	threshold := func(uid string) (int64, int64) {
		if s, ok := snaps[uid]; ok && s.At >= bound && s.Since > 0 {
			return s.Since, s.Recent
		}
		return bound, 0
	}
	type sent struct {
		id, pos string
		at      domain.Millis
	}
	var cands []sent
	kv := a.t.KV()
	prefix := []byte(outboxStatusTable + "/")
	visit := func(key, value []byte) error {
		var c outcome
		if v, err := Decode(value, statusVersion2, &c); err != nil || v != statusVersion2 {
			return nil // not an outcome of this layout: written before any snapshot with At
		}
		if c.SentAt == 0 || c.Pos == "" || notTaken(c.Status) {
			return nil
		}
		uid, ok := posUser(c.Pos)
		if !ok {
			return nil
		}
		if thr, _ := threshold(uid); int64(c.SentAt) >= thr {
			cands = append(cands, sent{id: string(key[len(prefix):]), pos: c.Pos, at: c.SentAt})
		}
		return nil
	}
	var err error
	if ss, ok := kv.(sinceScanner); ok {
		err = ss.ScanSince(prefix, time.UnixMilli(from).Add(-RecountSkew), visit)
	} else {
		err = kv.Scan(prefix, visit)
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
	y, m, _ := now.UTC().Date()
	monthStart := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	period, startMs := monthStart.Format("2006-01"), monthStart.UnixMilli()
	byUser := map[string][]domain.Millis{}
	for i, c := range cands {
		if bodies[i] == nil {
			continue
		}
		e, _, err := decodeBody(bodies[i])
		if err != nil || !e.Message.Kind.Charged() || e.UserID == "" {
			continue
		}
		byUser[e.UserID] = append(byUser[e.UserID], c.at)
	}
	out := map[string]domain.AccountRecount{}
	for uid, ats := range byUser {
		s, ok := snaps[uid]
		if !ok {
			s = domain.Allowance{UserID: uid}
		}
		thr, recent := threshold(uid)
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
		// Stamped as read now, counting every message of the window it was recounted from, so
		// that a snapshot written from it is exact for the next boot's recount too.
		s.At, s.Since, s.Recent = now.UnixMilli(), max(thr, startMs), int64(len(ats))
		s.Mark = max(s.Mark, s.Sent)
		out[uid] = domain.AccountRecount{Allowance: s, Sent: ats}
	}
	return out, nil
}

// notTaken tells whether a status is not one of a message the network took (sent, delivered,
// read): those are the ones counted.
func notTaken(s domain.MessageStatus) bool {
	return s != domain.MsgSent && s != domain.MsgDelivered && s != domain.MsgRead
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
