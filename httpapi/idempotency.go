package httpapi

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/actors"
	"github.com/gateway/gateway/engine"
)

// idempotent runs a v1 POST under its Idempotency-Key (DESIGN.md section 5): within 24 h the same
// key and API key replay the first successful response and send nothing again. Error responses
// are not kept, so a failed request can be retried with the same key.
func (s *Server) idempotent(ctx *fasthttp.RequestCtx, key actors.KeyResult, h func()) {
	idemKey := ctx.Request.Header.Peek("Idempotency-Key")
	if len(idemKey) == 0 {
		h()
		return
	}
	if len(idemKey) > 255 {
		s.writeError(ctx, badInput("validation_failed", "Idempotency-Key must be at most 255 characters"))
		return
	}
	sum := sha256.Sum256(ctx.PostBody())
	rec, found, done, err := s.eng.BeginIdempotent(key.Key.ID, string(idemKey), hex.EncodeToString(sum[:]))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if found {
		ctx.Response.Header.Set("Idempotent-Replayed", "true")
		ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
		ctx.SetStatusCode(rec.Status)
		ctx.SetBody(rec.Body)
		return
	}
	finished := false
	defer func() {
		if !finished {
			_ = done(nil) // a panic in h: release the key so the caller can retry
		}
	}()
	h()
	finished = true
	status := ctx.Response.StatusCode()
	if status < 200 || status > 299 {
		_ = done(nil)
		return
	}
	body := append([]byte(nil), ctx.Response.Body()...)
	if err := done(&engine.IdemRecord{Status: status, Body: body}); err != nil {
		s.reqLog(ctx).Error("idempotency: save response", "err", err)
	}
}
