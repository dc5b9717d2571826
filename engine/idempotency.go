package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/google/uuid"
)

// Idem is an Idempotency-Key in force for one request (DESIGN.md section 9): what the request
// makes gets the id Derived, and the record is committed with it.
type Idem struct {
	KeyID, Key, BodyHash string
	// At is when the request came, on the engine's clock (BeginIdempotent sets it when zero):
	// its day (IdemDay) is part of the ids the key derives, so the key used again after its 24
	// hours (the SPEC lets it) makes a new message, never the old one's id again.
	At time.Time
}

// ID is the record's id.
func (i Idem) ID() string { return i.KeyID + "/" + i.Key }

// Derived is the id of the message the request makes.
func (i Idem) Derived() string { return DerivedIDOn(i.KeyID, i.Key, IdemDay(i.At)) }

// idemNamespace is the UUID namespace of campaign ids derived from Idempotency-Keys.
var idemNamespace = uuid.MustParse("6f1d4c52-0b7e-4f4e-9a57-2f6c1d0e9b31")

// DerivedCampaign is the id (a UUID, like every campaign id) of the campaign the request makes:
// of the key and its day, like Derived (a campaign's retry is answered from its record, which
// names the campaign, so no older derivation needs looking up).
func (i Idem) DerivedCampaign() string {
	return uuid.NewSHA1(idemNamespace, fmt.Appendf(nil, "%s\x00%s\x00%d", i.KeyID, i.Key, IdemDay(i.At))).String()
}

// idemSkew is how far apart two nodes' clocks may be and a retry on either still find the
// message the other derived on the next day (the cluster refuses a forwarded request signed
// more than 30 s from the owner's clock).
const idemSkew = time.Minute

// idempotency guards against two concurrent requests with the same key.
type idempotency struct {
	mu       sync.Mutex
	inflight map[string]struct{}
}

// BeginIdempotent looks the key up (setting i.At to the engine's clock when zero): a record
// in force is returned for replay (found); otherwise the key is marked in flight until release
// is called. It needs no daily-cap charge: callers look it up before authorizing the call.
func (ms *Messages) BeginIdempotent(i *Idem) (rec domain.IdemRecord, found bool, release func(), err error) {
	if i.At.IsZero() {
		i.At = ms.e.now()
	}
	id := i.ID()
	x := &ms.idem
	x.mu.Lock()
	if x.inflight == nil {
		x.inflight = map[string]struct{}{}
	}
	if _, busy := x.inflight[id]; busy {
		x.mu.Unlock()
		return domain.IdemRecord{}, false, nil, domain.ErrIdempotencyInFlight
	}
	x.inflight[id] = struct{}{}
	x.mu.Unlock()
	release = func() {
		x.mu.Lock()
		delete(x.inflight, id)
		x.mu.Unlock()
	}
	rec, err = ms.idemRecord(i)
	switch {
	case err == nil:
		release()
		if rec.BodyHash != i.BodyHash {
			return domain.IdemRecord{}, false, nil, domain.ErrIdempotencyMismatch
		}
		return rec, true, nil, nil
	case !errors.Is(err, domain.ErrRecordNotFound):
		release()
		return domain.IdemRecord{}, false, nil, fmt.Errorf("%w: idempotency: %w", domain.ErrUnavailable, err)
	}
	return domain.IdemRecord{}, false, release, nil
}

// idemRecord is the record of i's key in force at i.At, or domain.ErrRecordNotFound. A message
// carries its key's record (its id is derived from the key and the day it was first used), so
// the ids looked up are those of every day a record in force may have been made on: i's day,
// the day before (a record lives 24 hours), the next day near its start (a node whose clock is
// ahead made it), and the id the release before derived (no day: its records answer a retry
// within their 24 hours). Of a message made on one day, at most one record is in force at a
// time: a request on that day finds it in force, so none makes another. A campaign's record,
// and a message's of the older layout, are records of their own, under the key alone.
func (ms *Messages) idemRecord(i *Idem) (domain.IdemRecord, error) {
	day := IdemDay(i.At)
	ids := [4]string{DerivedIDOn(i.KeyID, i.Key, day), DerivedIDOn(i.KeyID, i.Key, day-1), DerivedID(i.KeyID, i.Key)}
	if IdemDay(i.At.Add(idemSkew)) != day {
		ids[3] = DerivedIDOn(i.KeyID, i.Key, day+1)
	}
	if f, ok := ms.msgs.outbox.(idemFinder); ok {
		rec, err := f.IdemFind(ids[:], i.ID(), func(rec domain.IdemRecord) bool { return inForce(rec, i.At) })
		if !errors.Is(err, errors.ErrUnsupported) {
			return rec, err
		}
	}
	for _, mid := range ids {
		if mid == "" {
			continue
		}
		rec, err := ms.msgs.outbox.IdemOf(mid)
		switch {
		case err == nil && inForce(rec, i.At):
			return rec, nil
		case err != nil && !errors.Is(err, domain.ErrRecordNotFound):
			return rec, err
		}
	}
	rec, err := ms.msgs.outbox.Idem(i.ID())
	if err == nil && !inForce(rec, i.At) {
		err = domain.ErrRecordNotFound
	}
	return rec, err
}

// idemFinder is an outbox that reads every record a key's look-up needs together
// (persist.Outbox.IdemFind: one round trip on a networked store, where one read at a time took
// up to nine; errors.ErrUnsupported on a store where it would not save reads).
type idemFinder interface {
	IdemFind(ids []string, idemID string, keep func(domain.IdemRecord) bool) (domain.IdemRecord, error)
}

// inForce says whether rec still binds its key at now: for domain.IdempotencyTTL after it was
// made, on the engine's clock (the store expires it by its own too; a record of the release
// before that has no time is in force while the store keeps it).
func inForce(rec domain.IdemRecord, now time.Time) bool {
	return rec.At == 0 || now.Sub(rec.At.Time()) <= domain.IdempotencyTTL
}

// PeekKey checks a raw API key for scope ("" = any) without counting a call: for an
// Idempotency-Key replay, which is looked up before the daily cap is charged.
func (ms *Messages) PeekKey(raw []byte, scope string) (domain.APIKey, error) {
	v, err := ms.e.Keys.Validate(raw)
	if err != nil {
		return v.Key, err
	}
	if scope != "" && !slices.Contains(v.Key.Scopes, scope) {
		return v.Key, domain.ErrInsufficientScope
	}
	return v.Key, nil
}
