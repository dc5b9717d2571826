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
	"sync"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"
)

// HTTP-layer errors (the domain ones live in domain/errors.go).
var (
	// errNoCredentials: the request carries no API key or ID token.
	errNoCredentials = domain.E("missing_credentials", "missing credentials: send Authorization: Bearer <token>")
	// errInvalidToken: the ID token did not verify.
	errInvalidToken = domain.E("invalid_token", "invalid or expired ID token")
	// errNotAdmin: the caller's role is not admin.
	errNotAdmin = fmt.Errorf("%w: this route needs the admin role", domain.ErrForbidden)
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
	"group_not_found": 404, "media_not_found": 404, "not_editable": 409, "not_revocable": 409, "not_group_admin": 403,
	"check_limit_reached": 429,
	"storage_unavailable": 503, "idp_unavailable": 503, "node_unavailable": 503, "sign_in_not_allowed": 403,
	"unsupported_subject": 403, "too_many_attempts": 429,
	"outside_service_window": 400, "template_not_approved": 400, "not_supported_on_cloud": 400,
	"cloud_session_required": 400, "contact_did_not_write": 409, "verify_token_mismatch": 403,
	"opted_out": 409,
}

// statusOf maps every error to its HTTP status and stable code: the one place that does so.
// Domain errors carry their code (the adapters return them too); anything else is a 500.
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
	return fasthttp.StatusInternalServerError, "internal"
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
		// In a cluster, a write refused because the partition moved to another node says so.
		if nodeUnavailable(err) {
			status, code = fasthttp.StatusServiceUnavailable, "node_unavailable"
		} else if strings.Contains(err.Error(), domain.ErrStorageUnavailable.Msg) {
			code = "storage_unavailable"
		} else if s.cfg.Storage != nil {
			if serr := s.cfg.Storage(); serr != nil {
				code, err = "storage_unavailable", fmt.Errorf("%w (%w)", serr, err)
			}
		}
	}
	msg := err.Error()
	switch {
	case status == fasthttp.StatusServiceUnavailable:
		// A dependency is down (identity provider, disk): its own WARN names the cause once
		// each way. Refusals are logged once when they start and then at most every
		// refusalReminder with their count, not once per request (7,000 lines in 25 s on a
		// full disk).
		if first, n := s.refusals.note(code, time.Now()); first {
			s.reqLog(ctx).Warn("request refused", "status", status, "code", code, "err", err)
		} else if n > 0 {
			s.reqLog(ctx).Warn("requests still refused", "status", status, "code", code, "refused", n, "err", err)
		}
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
	case code == "too_many_attempts", code == "idempotency_in_progress":
		ctx.Response.Header.Set("Retry-After", "1")
	case code == "quota_exceeded":
		// The monthly allowance comes back at the start of the next UTC month.
		now := time.Now().UTC()
		next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(int64(next.Sub(now).Seconds())+1, 10))
	}
	if isFront(ctx) {
		s.frontError(ctx, status, code, msg)
		return
	}
	writeJSON(ctx, status, errorBody{Error: msg, Code: code})
}

// refusalReminder is how often, at most, refusals of one code are logged again.
const refusalReminder = 30 * time.Second

// refusalLog rate-limits the log lines of 503 refusals, per code.
type refusalLog struct {
	mu     sync.Mutex
	byCode map[string]*refusalState
}

type refusalState struct {
	logged time.Time // last line
	since  int       // refusals not logged since
}

// note counts a refusal of code at now: first when it starts a series (nothing logged for a
// reminder's time), else the count to log in a reminder (0: stay quiet).
func (r *refusalLog) note(code string, now time.Time) (first bool, count int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byCode == nil {
		r.byCode = map[string]*refusalState{}
	}
	st := r.byCode[code]
	switch {
	case st == nil || now.Sub(st.logged) >= 2*refusalReminder && st.since == 0:
		r.byCode[code] = &refusalState{logged: now}
		return true, 0
	case now.Sub(st.logged) >= refusalReminder:
		n := st.since + 1
		st.logged, st.since = now, 0
		return false, n
	}
	st.since++
	return false, 0
}
