package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

// v1Post runs a v1 POST under its Idempotency-Key (DESIGN.md section 9). With a key, what the
// request makes gets an id derived from (API key, Idempotency-Key, the day: engine.Idem) and
// the key's record is committed with it; a retry with the same key and body, before or after a crash, is answered
// from what the first made, and is looked up before the daily cap is charged (a replay after
// the cap is used up still succeeds). The same key with another body is 409
// idempotency_key_reused. idem is nil without a key.
func (s *Server) v1Post(ctx *fasthttp.RequestCtx, scope string, h func(key domain.Grant, idem *engine.Idem) error, replay func(uid string, rec domain.IdemRecord) error) error {
	idemKey := ctx.Request.Header.PeekCanonical(hdrIdempotencyKey)
	if len(idemKey) == 0 {
		key, err := s.apiKey(ctx, scope)
		if err != nil {
			return err
		}
		return h(key, nil)
	}
	if len(idemKey) > 255 {
		return badInput("validation_failed", "Idempotency-Key must be at most 255 characters")
	}
	var idem *engine.Idem
	// The key is checked (status, expiry, scope) without counting a call; a key that does not
	// pass goes through the counting check below, which answers why.
	if k, err := s.engine(ctx).Messages.PeekKey(s.rawKey(ctx), scope); err == nil {
		sum := sha256.Sum256(ctx.PostBody())
		idem = &engine.Idem{KeyID: k.ID, Key: string(idemKey), BodyHash: hex.EncodeToString(sum[:])}
		rec, found, release, err := s.engine(ctx).Messages.BeginIdempotent(idem)
		if err != nil {
			return err
		}
		if found {
			ctx.Response.Header.Set("Idempotent-Replayed", "true")
			if rec.MessageID == "" && rec.CampaignID == "" {
				// A response stored by an earlier release: replay its bytes.
				ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
				ctx.SetStatusCode(rec.Status)
				ctx.SetBody(rec.Body)
				return nil
			}
			return replay(k.UserID, rec)
		}
		defer release()
	}
	key, err := s.apiKey(ctx, scope)
	if err != nil {
		return err
	}
	if idem == nil || idem.KeyID != key.Key.ID {
		return nil // cannot happen: the key passed the check above (kept defensive)
	}
	return h(key, idem)
}

// rawKey is the API key of the request: `Authorization: Bearer` or `x-api-key`.
func (s *Server) rawKey(ctx *fasthttp.RequestCtx) []byte {
	if raw := bearer(ctx); len(raw) > 0 {
		return raw
	}
	if isFront(ctx) { // Graph's ?access_token= (Chatwoot checks its settings so)
		if raw := ctx.QueryArgs().Peek("access_token"); len(raw) > 0 {
			return raw
		}
	}
	return ctx.Request.Header.PeekCanonical(hdrAPIKey)
}

var preferWait = []byte("wait=")

// waitOf is how long a send waits for the network's outcome: `?wait=N` or `Prefer: wait=N`
// (0 to 60 s), else def.
func waitOf(ctx *fasthttp.RequestCtx, def time.Duration) (time.Duration, error) {
	v := ctx.QueryArgs().Peek("wait")
	if len(v) == 0 {
		if p := ctx.Request.Header.PeekCanonical(hdrPrefer); len(p) > 0 {
			for _, part := range bytes.Split(p, []byte(",")) {
				part = bytes.TrimSpace(part)
				if bytes.HasPrefix(part, preferWait) {
					v = part[len(preferWait):]
				}
			}
		}
	}
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.ParseFloat(string(v), 64)
	if err != nil || !(n >= 0 && n <= 60) { // NaN too
		return 0, badInput("validation_failed", "wait must be a number of seconds from 0 to 60")
	}
	return time.Duration(n * float64(time.Second)), nil
}
