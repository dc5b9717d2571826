package httpapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/persist"
)

// HTTP-layer errors (the domain ones live in actors and are re-exported by engine).
var (
	// errNoCredentials: the request carries no API key or ID token.
	errNoCredentials = errors.New("missing credentials: send Authorization: Bearer <token>")
	// errInvalidToken: the ID token did not verify.
	errInvalidToken = errors.New("invalid or expired ID token")
	// errNotAdmin: the caller's role is not admin.
	errNotAdmin = errors.New("this route needs the admin role")
	// errInternalOnly: a route public only inside --internal-cidrs was called from outside
	// without an admin token.
	errInternalOnly = errors.New("this route is public only to internal addresses; send an admin ID token")
	// errBodyTooLarge: the request body is over the route's limit.
	errBodyTooLarge = errors.New("request body too large")
	// errUnsupportedSubject: the token verified but its sub cannot be a user id.
	errUnsupportedSubject = errors.New("this account's subject cannot be used as a user id")
	// errTooManyAttempts: too many failed guesses from one client (or at one shop).
	errTooManyAttempts = errors.New("too many failed attempts; retry later")
	// errNotFound, errMethod: no such route / method.
	errNotFound = errors.New("no such route")
	errMethod   = errors.New("method not allowed on this route")
)

// inputError is a 400 with its own code: malformed JSON, a wrong type, a missing field.
type inputError struct {
	code string
	msg  string
}

func (e *inputError) Error() string { return e.msg }

func badInput(code, format string, args ...any) error {
	return &inputError{code: code, msg: fmt.Sprintf(format, args...)}
}

// missing is the error for a required field that is absent or empty.
func missing(field string) error {
	return badInput("validation_failed", "%s is required", field)
}

// statusOf maps every error to its HTTP status and stable code: the one place that does so.
func statusOf(err error) (int, string) {
	var in *inputError
	switch {
	case errors.As(err, &in):
		return fasthttp.StatusBadRequest, in.code
	case errors.Is(err, engine.ErrInvalidPhone):
		return fasthttp.StatusBadRequest, "invalid_phone"
	case errors.Is(err, engine.ErrInvalidShop):
		return fasthttp.StatusBadRequest, "invalid_shop"
	case errors.Is(err, engine.ErrInvalidPayload):
		return fasthttp.StatusBadRequest, "invalid_json"
	case errors.Is(err, engine.ErrStoreTokenRejected):
		// The store platform refused the token the user gave: bad input, not the caller's
		// credentials (a 401 would read as "sign in again" to the dashboard).
		return fasthttp.StatusBadRequest, "store_token_rejected"
	case errors.Is(err, engine.ErrValidation):
		return fasthttp.StatusBadRequest, "validation_failed"
	case errors.Is(err, engine.ErrInvalidSignature):
		return fasthttp.StatusUnauthorized, "invalid_signature"
	case errors.Is(err, engine.ErrStoreNotFound):
		return fasthttp.StatusNotFound, "store_not_found"
	case errors.Is(err, engine.ErrStoreTaken):
		return fasthttp.StatusConflict, "store_connected_elsewhere"
	case errors.Is(err, engine.ErrStorePlatform):
		return fasthttp.StatusBadGateway, "store_platform_error"
	case errors.Is(err, identity.ErrUnavailable):
		return fasthttp.StatusServiceUnavailable, "idp_unavailable"
	case errors.Is(err, persist.ErrStorageUnavailable):
		return fasthttp.StatusServiceUnavailable, "storage_unavailable"
	case errors.Is(err, identity.ErrNotAllowed):
		return fasthttp.StatusForbidden, "sign_in_not_allowed"
	case errors.Is(err, errUnsupportedSubject):
		return fasthttp.StatusForbidden, "unsupported_subject"
	case errors.Is(err, errTooManyAttempts):
		return fasthttp.StatusTooManyRequests, "too_many_attempts"
	case errors.Is(err, errNoCredentials):
		return fasthttp.StatusUnauthorized, "missing_credentials"
	case errors.Is(err, errInvalidToken):
		return fasthttp.StatusUnauthorized, "invalid_token"
	case errors.Is(err, engine.ErrUnknownKey):
		return fasthttp.StatusUnauthorized, "invalid_api_key"
	case errors.Is(err, engine.ErrKeyRevoked):
		return fasthttp.StatusUnauthorized, "key_revoked"
	case errors.Is(err, engine.ErrKeyExpired):
		return fasthttp.StatusUnauthorized, "key_expired"
	case errors.Is(err, engine.ErrInsufficientScope):
		return fasthttp.StatusForbidden, "insufficient_scope"
	case errors.Is(err, errNotAdmin):
		return fasthttp.StatusForbidden, "forbidden"
	case errors.Is(err, engine.ErrForbidden):
		return fasthttp.StatusForbidden, "forbidden"
	case errors.Is(err, errInternalOnly):
		return fasthttp.StatusForbidden, "internal_only"
	case errors.Is(err, engine.ErrUserNotFound):
		return fasthttp.StatusNotFound, "user_not_found"
	case errors.Is(err, engine.ErrKeyNotFound):
		return fasthttp.StatusNotFound, "key_not_found"
	case errors.Is(err, engine.ErrSessionNotFound):
		return fasthttp.StatusNotFound, "session_not_found"
	case errors.Is(err, errNotFound):
		return fasthttp.StatusNotFound, "not_found"
	case errors.Is(err, engine.ErrAlreadyConnected):
		return fasthttp.StatusConflict, "already_connected"
	case errors.Is(err, engine.ErrNotConnected):
		return fasthttp.StatusConflict, "session_not_connected"
	case errors.Is(err, errMethod):
		return fasthttp.StatusMethodNotAllowed, "method_not_allowed"
	case errors.Is(err, engine.ErrAlreadyExists):
		return fasthttp.StatusConflict, "already_exists"
	case errors.Is(err, errBodyTooLarge):
		return fasthttp.StatusRequestEntityTooLarge, "body_too_large"
	case errors.Is(err, engine.ErrRateLimited):
		return fasthttp.StatusTooManyRequests, "rate_limited"
	case errors.Is(err, engine.ErrQuotaExceeded):
		return fasthttp.StatusTooManyRequests, "quota_exceeded"
	case errors.Is(err, engine.ErrRecipientNotOnNetwork):
		return fasthttp.StatusBadRequest, "recipient_not_on_network"
	case errors.Is(err, engine.ErrCampaignNotFound):
		return fasthttp.StatusNotFound, "campaign_not_found"
	case errors.Is(err, engine.ErrMessageNotFound):
		return fasthttp.StatusNotFound, "message_not_found"
	case errors.Is(err, engine.ErrIdempotencyInFlight):
		return fasthttp.StatusConflict, "idempotency_in_progress"
	case errors.Is(err, engine.ErrIdempotencyMismatch):
		return fasthttp.StatusConflict, "idempotency_key_reused"
	case errors.Is(err, errMediaTooLarge):
		return fasthttp.StatusRequestEntityTooLarge, "media_too_large"
	case errors.Is(err, errMediaType):
		return fasthttp.StatusUnsupportedMediaType, "unsupported_media_type"
	case errors.Is(err, errMediaRef):
		return fasthttp.StatusBadRequest, "invalid_media"
	case errors.Is(err, errMediaBlocked):
		return fasthttp.StatusBadRequest, "media_url_blocked"
	case errors.Is(err, errMediaFetch):
		return fasthttp.StatusBadGateway, "media_fetch_failed"
	case errors.Is(err, engine.ErrNetwork):
		return fasthttp.StatusBadGateway, "network_error"
	case errors.Is(err, engine.ErrUnavailable):
		return fasthttp.StatusServiceUnavailable, "unavailable"
	}
	return fasthttp.StatusInternalServerError, "internal"
}

type errorBody struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	Code    string `json:"code"`
}

// writeError writes the error model of DESIGN.md section 4. Server errors are logged with the
// request id and answered with a generic text (no internals leak).
func (s *Server) writeError(ctx *fasthttp.RequestCtx, err error) {
	status, code := statusOf(err)
	if code == "unavailable" {
		// The core reports a failed write as unavailable and keeps the storage's error only
		// as text (%v): recognise it by its text, or by storage refusing writes right now.
		if strings.Contains(err.Error(), persist.ErrStorageUnavailable.Error()) {
			code = "storage_unavailable"
		} else if s.cfg.Storage != nil {
			if serr := s.cfg.Storage(); serr != nil {
				code, err = "storage_unavailable", fmt.Errorf("%w (%v)", serr, err)
			}
		}
	}
	msg := err.Error()
	switch {
	case status == fasthttp.StatusServiceUnavailable:
		// A dependency is down (identity provider, disk): its own WARN names the cause once;
		// one line per refused request stays below ERROR.
		s.reqLog(ctx).Warn("request refused", "status", status, "code", code, "err", err)
	case status >= 500:
		s.reqLog(ctx).Error("request failed", "status", status, "err", err)
	}
	if status == fasthttp.StatusInternalServerError {
		msg = "internal error"
	}
	switch {
	case code == "storage_unavailable":
		ctx.Response.Header.Set("Retry-After", "5")
	case status == fasthttp.StatusServiceUnavailable:
		ctx.Response.Header.Set("Retry-After", "1")
	case code == "too_many_attempts":
		ctx.Response.Header.Set("Retry-After", "1")
	case code == "quota_exceeded":
		// The monthly allowance comes back at the start of the next UTC month.
		now := time.Now().UTC()
		next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(int64(next.Sub(now).Seconds())+1, 10))
	}
	writeJSON(ctx, status, errorBody{Error: msg, Code: code})
}
