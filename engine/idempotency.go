package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/gateway/gateway/persist"
)

// IdempotencyTTL is how long a v1 POST's response is replayed for the same Idempotency-Key.
const IdempotencyTTL = 24 * time.Hour

// ErrIdempotencyInFlight: a request with the same Idempotency-Key is being processed.
var ErrIdempotencyInFlight = domain.ErrIdempotencyInFlight

// ErrIdempotencyMismatch: the Idempotency-Key was used before with another request body.
var ErrIdempotencyMismatch = domain.ErrIdempotencyMismatch

// IdemRecord is a stored response.
type IdemRecord struct {
	BodyHash string `json:"bodyHash"` // SHA-256 of the request body
	Status   int    `json:"status"`
	Body     []byte `json:"body"`
}

// idempotency stores responses per (API key, Idempotency-Key) with a 24 h TTL, and guards
// against two concurrent requests with the same key.
type idempotency struct {
	table    *persist.Table[IdemRecord]
	mu       sync.Mutex
	inflight map[string]struct{}
}

func newIdempotency(kv persist.KV) *idempotency {
	return &idempotency{table: persist.NewTable[IdemRecord](kv, "idem", 1), inflight: map[string]struct{}{}}
}

// BeginIdempotent looks the key up: a stored record is returned for replay (found); otherwise
// the key is marked in flight and done must be called with the response to keep (nil to keep
// none, e.g. after an error the caller may retry).
func (e *Engine) BeginIdempotent(keyID, idemKey, bodyHash string) (rec IdemRecord, found bool, done func(*IdemRecord) error, err error) {
	id := keyID + "/" + idemKey
	x := e.idem
	x.mu.Lock()
	if _, busy := x.inflight[id]; busy {
		x.mu.Unlock()
		return IdemRecord{}, false, nil, ErrIdempotencyInFlight
	}
	x.inflight[id] = struct{}{}
	x.mu.Unlock()
	release := func() {
		x.mu.Lock()
		delete(x.inflight, id)
		x.mu.Unlock()
	}
	rec, err = x.table.Get(id)
	switch {
	case err == nil:
		release()
		if rec.BodyHash != bodyHash {
			return IdemRecord{}, false, nil, ErrIdempotencyMismatch
		}
		return rec, true, nil, nil
	case !errors.Is(err, persist.ErrNotFound):
		release()
		return IdemRecord{}, false, nil, ErrUnavailable
	}
	return IdemRecord{}, false, func(r *IdemRecord) error {
		defer release()
		if r == nil {
			return nil
		}
		r.BodyHash = bodyHash
		op, err := x.table.PutTTLOp(id, *r, IdempotencyTTL)
		if err != nil {
			return err
		}
		return x.table.KV().Commit(context.Background(), op)
	}, nil
}
