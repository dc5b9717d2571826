package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gateway/gateway/domain"
	"github.com/google/uuid"
)

// Idem is an Idempotency-Key in force for one request (DESIGN.md section 9): what the request
// makes gets the id Derived, and the record is committed with it.
type Idem struct {
	KeyID, Key, BodyHash string
}

// ID is the record's id.
func (i Idem) ID() string { return i.KeyID + "/" + i.Key }

// Derived is the id of the message the request makes.
func (i Idem) Derived() string { return DerivedID(i.KeyID, i.Key) }

// idemNamespace is the UUID namespace of campaign ids derived from Idempotency-Keys.
var idemNamespace = uuid.MustParse("6f1d4c52-0b7e-4f4e-9a57-2f6c1d0e9b31")

// DerivedCampaign is the id (a UUID, like every campaign id) of the campaign the request makes.
func (i Idem) DerivedCampaign() string {
	return uuid.NewSHA1(idemNamespace, []byte(i.KeyID+"\x00"+i.Key)).String()
}

// idempotency guards against two concurrent requests with the same key.
type idempotency struct {
	mu       sync.Mutex
	inflight map[string]struct{}
}

// BeginIdempotent looks the key up: a record is returned for replay (found); otherwise the key
// is marked in flight until release is called. It needs no daily-cap charge: callers look it up
// before authorizing the call.
func (ms *Messages) BeginIdempotent(i Idem) (rec domain.IdemRecord, found bool, release func(), err error) {
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
	// A message carries its key's record (its id is derived from the key); a campaign's, and a
	// message's of the older layout, are records of their own.
	rec, err = ms.msgs.outbox.IdemOf(i.Derived())
	if errors.Is(err, domain.ErrRecordNotFound) {
		rec, err = ms.msgs.outbox.Idem(id)
	}
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
