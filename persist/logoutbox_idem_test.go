package persist

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// countingReads is a Badger that counts its reads: one read transaction each.
type countingReads struct {
	*Badger
	gets, many int
}

func (c *countingReads) Get(key []byte) ([]byte, error) { c.gets++; return c.Badger.Get(key) }

func (c *countingReads) readMany(keys [][]byte) ([][]byte, error) {
	c.many++
	return c.Badger.readMany(keys)
}

// The log outbox's IdemFind answers what IdemOf of each id, then Idem, answer one by one (the
// first record keep takes, in that order): a message pending here, one settled and found
// through its outlog_pos in Badger, the campaign's own record, none; and it reads the records'
// store once for them all, where one by one read it once an id.
func TestLogOutboxIdemFind(t *testing.T) {
	dir, clock := t.TempDir(), &testClock{}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock.set(at)
	db, err := OpenBadger(t.TempDir(), BadgerOptions{Fsync: FsyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kv := &countingReads{Badger: db}
	lo, _ := openLogOutbox(t, dir, kv, clock)
	ctx := context.Background()
	for _, id := range []string{"m-pending", "m-settled"} {
		e := logQueued(id, at)
		if err := lo.Accept(ctx, &e, "hash-"+id); err != nil {
			t.Fatal(err)
		}
	}
	plain := logQueued("m-plain", at) // an id of its own, no Idempotency-Key
	if err := lo.Accept(ctx, &plain, ""); err != nil {
		t.Fatal(err)
	}
	settleLog(t, lo, "m-settled", domain.MsgSent, at.Add(time.Second))
	lo.Flush()
	if err := lo.Checkpoint(); err != nil { // m-settled's outlog_pos into Badger
		t.Fatal(err)
	}
	lo.mu.Lock()
	for i := range 2 * recentMax { // and out of the recently settled
		lo.remember("other-"+strconv.Itoa(i), 1)
	}
	lo.mu.Unlock()
	campaign := domain.IdemRecord{BodyHash: "hash-c", CampaignID: "c-1", At: domain.MillisOf(at)}
	op, err := lo.IdemOp("k1/own", campaign)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(ctx, op); err != nil {
		t.Fatal(err)
	}
	all := func(domain.IdemRecord) bool { return true }
	for _, c := range []struct {
		ids    []string
		idemID string
		keep   func(domain.IdemRecord) bool
		want   string // the record's message or campaign id, "" for not found
	}{
		{[]string{"m-pending", "", "m-settled"}, "", all, "m-pending"},
		{[]string{"m-none", "m-settled", "m-pending"}, "k1/own", all, "m-settled"},
		{[]string{"m-none", "m-settled"}, "k1/own", func(r domain.IdemRecord) bool { return r.MessageID != "m-settled" }, "c-1"},
		{[]string{"m-none", "m-plain", "", "m-later"}, "k1/own", all, "c-1"},
		{[]string{"m-none", "m-plain"}, "k1/none", all, ""},
		{[]string{"m-none"}, "", all, ""},
	} {
		one := func() (domain.IdemRecord, error) { // IdemOf each, then Idem: the engine's own way
			for _, id := range c.ids {
				if id == "" {
					continue
				}
				rec, err := lo.IdemOf(id)
				switch {
				case err == nil && c.keep(rec):
					return rec, nil
				case err != nil && !errors.Is(err, domain.ErrRecordNotFound):
					return rec, err
				}
			}
			if c.idemID == "" {
				return domain.IdemRecord{}, domain.ErrRecordNotFound
			}
			rec, err := lo.Idem(c.idemID)
			if err == nil && !c.keep(rec) {
				err = domain.ErrRecordNotFound
			}
			return rec, err
		}
		kv.gets, kv.many = 0, 0
		wantRec, wantErr := one()
		oneGets := kv.gets
		kv.gets, kv.many = 0, 0
		got, err := lo.IdemFind(c.ids, c.idemID, c.keep)
		if id := got.MessageID + got.CampaignID; id != c.want || (c.want == "") != errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("IdemFind(%v, %q) = %q, %v; want %q", c.ids, c.idemID, id, err, c.want)
		}
		if !reflect.DeepEqual(got, wantRec) || errors.Is(err, domain.ErrRecordNotFound) != errors.Is(wantErr, domain.ErrRecordNotFound) {
			t.Fatalf("IdemFind(%v, %q) = %+v, %v; one by one %+v, %v", c.ids, c.idemID, got, err, wantRec, wantErr)
		}
		if kv.gets != 0 || kv.many != 1 {
			t.Fatalf("IdemFind(%v, %q): %d gets and %d reads of many (one by one: %d gets); want one read", c.ids, c.idemID, kv.gets, kv.many, oneGets)
		}
	}
}
