package httpapi

// The error model (DESIGN.md section 4). A handler (server.go) writes its response and returns
// nil, or writes no body and returns an error; route turns that error into the answer with
// writeError, the one place that does so: statusOf maps it to its status and stable code
// (statusByCode), and the body is {success: false, error, code}. A 500 hides its text; 5xx
// are logged with the request id.
//
// Headers of an error answer: Retry-After is writeError's too. It follows from the code (503s,
// too_many_attempts, quota_exceeded), or the error carries it: retryAfter(err, seconds) wraps
// an error with its own delay (a key over its daily cap: until the day's reset), keeping its
// text, status and code. Headers that belong to every answer of a route, error or not (the
// X-RateLimit-* of an API key), are set by the handler before it returns.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

// HTTP-layer errors (the domain ones live in actors and are re-exported by engine).
var (
	// errNoCredentials: the request carries no API key or ID token.
	errNoCredentials = domain.E("missing_credentials", "missing credentials: send Authorization: Bearer <token>")
	// errInvalidToken: the ID token did not verify.
	errInvalidToken = domain.E("invalid_token", "invalid or expired ID token")
	// errNotAdmin: the caller's role is not admin.
	errNotAdmin = domain.E("forbidden", "this route needs the admin role")
	// errInternalOnly: a route public only inside --internal-cidrs was called from outside
	// without an admin token.
	errInternalOnly = domain.E("internal_only", "this route is public only to internal addresses; send an admin ID token")
	// errDevSignInInternal: the dev sign-in was called from outside --internal-cidrs.
	errDevSignInInternal = domain.E("internal_only", "dev sign-in is open only to internal addresses")
	// errBodyTooLarge: the request body is over the route's limit.
	errBodyTooLarge = domain.E("body_too_large", "request body too large")
	// errUnsupportedSubject: the token verified but its sub cannot be a user id.
	errUnsupportedSubject = domain.E("unsupported_subject", "this account's subject cannot be used as a user id")
	// errTooManyAttempts: too many failed guesses from one client (or at one shop).
	errTooManyAttempts = domain.E("too_many_attempts", "too many failed attempts; retry later")
	// errNotFound, errMethod: no such route / method.
	errNotFound = domain.E("not_found", "no such route")
	errMethod   = domain.E("method_not_allowed", "method not allowed on this route")
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

// statusByCode maps each domain error code to its HTTP status (DESIGN.md section 4): the one
// table that does so. Codes are the domain's (domain/errors.go) and the HTTP layer's own below.
var statusByCode = map[string]int{
	"validation_failed": 400, "invalid_json": 400, "invalid_phone": 400, "invalid_shop": 400,
	"store_token_rejected": 400, "recipient_not_on_network": 400, "invalid_media": 400,
	"media_url_blocked": 400, "recipient_not_reachable": 400,
	"session_reassigned": 409, "session_logged_out": 409, "session_deleted": 409,
	"invalid_api_key": 401, "key_revoked": 401, "key_expired": 401, "invalid_signature": 401,
	"missing_credentials": 401, "invalid_token": 401,
	"insufficient_scope": 403, "forbidden": 403, "internal_only": 403,
	"user_not_found": 404, "key_not_found": 404, "session_not_found": 404, "store_not_found": 404,
	"campaign_not_found": 404, "message_not_found": 404, "not_found": 404,
	"method_not_allowed": 405, "not_scanning": 409, "bad_code": 400,
	"already_connected": 409, "session_not_connected": 409, "already_exists": 409,
	"store_connected_elsewhere": 409, "idempotency_in_progress": 409, "idempotency_key_reused": 409,
	"body_too_large": 413, "media_too_large": 413,
	"unsupported_media_type": 415,
	"rate_limited":           429, "quota_exceeded": 429,
	"network_error": 502, "store_platform_error": 502, "media_fetch_failed": 502,
	"unavailable":       503,
	"webhook_not_found": 404, "invalid_webhook_url": 400, "webhook_url_blocked": 400, "webhook_limit": 409,
	"webhook_disabled": 409, "event_not_found": 404,
	"storage_unavailable": 503, "idp_unavailable": 503, "node_unavailable": 503, "sign_in_not_allowed": 403,
	"unsupported_subject": 403, "too_many_attempts": 429,
}

// statusOf maps every error to its HTTP status and stable code: the one place that does so.
// Domain errors carry their code; the few adapter errors not translated at their edge yet are
// matched here.
func statusOf(err error) (int, string) {
	var in *inputError
	if errors.As(err, &in) {
		return fasthttp.StatusBadRequest, in.code
	}
	if code := domain.CodeOf(err); code != "" {
		if st, ok := statusByCode[code]; ok {
			return st, code
		}
	}
	for _, a := range adapterErrors {
		if errors.Is(err, a.err) {
			return statusByCode[a.code], a.code
		}
	}
	return fasthttp.StatusInternalServerError, "internal"
}

// adapterErrors are adapter errors (store platform, media) and their codes.
var adapterErrors = []struct {
	err  error
	code string
}{
	{engine.ErrInvalidShop, "invalid_shop"},
	{engine.ErrInvalidPayload, "invalid_json"},
	{engine.ErrStoreTokenRejected, "store_token_rejected"},
	{engine.ErrStoreTaken, "store_connected_elsewhere"},
	{engine.ErrStorePlatform, "store_platform_error"},
	{errMediaTooLarge, "media_too_large"},
	{errMediaType, "unsupported_media_type"},
	{errMediaRef, "invalid_media"},
	{errMediaBlocked, "media_url_blocked"},
	{errMediaFetch, "media_fetch_failed"},
	{engine.ErrWebhookNotFound, "webhook_not_found"},
	{engine.ErrWebhookURL, "invalid_webhook_url"},
	{engine.ErrWebhookBlocked, "webhook_url_blocked"},
	{engine.ErrWebhookLimit, "webhook_limit"},
}

// retryError is an error whose answer says when to retry (Retry-After, in seconds).
type retryError struct {
	err     error
	seconds int64
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// retryAfter makes err answered with Retry-After: seconds.
func retryAfter(err error, seconds int64) error {
	return &retryError{err: err, seconds: seconds}
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
	var retry *retryError
	hinted := errors.As(err, &retry) // before err is rewrapped below
	if code == "unavailable" {
		// The core reports a failed write as unavailable and keeps the storage's error only
		// as text (%v): recognise it by its text, or by storage refusing writes right now.
		if strings.Contains(err.Error(), domain.ErrStorageUnavailable.Msg) {
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
	case hinted:
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(retry.seconds, 10))
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
