// Package domain is the gateway's vocabulary: the value types every layer speaks (users, keys,
// messages, sessions, campaigns, stores) and every error with its stable code. It imports only
// the standard library, so every other package may import it and it imports none of them.
package domain

import "errors"

// Error is a domain error with a stable, snake_case code: the HTTP layer maps the code to a
// status in one table, clients match on the code. Sentinels are pointers, so errors.Is matches
// them through any wrapping (fmt.Errorf("%w: detail", domain.ErrX)).
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is lets a wrapped sentinel of the same code match (two declarations of one code are one
// error).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// E declares a domain error.
func E(code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// CodeOf returns the code of the first domain error in err's chain ("" for none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Every domain error, by the status class it maps to (DESIGN.md section 4): each is declared
// here once, and the other packages return these.
var (
	// 400: the input is wrong.
	ErrValidation            = E("validation_failed", "validation failed")
	ErrInvalidJSON           = E("invalid_json", "the body is not valid JSON")
	ErrInvalidPhone          = E("invalid_phone", "validation failed: phone must be 8 to 15 digits with country code")
	ErrInvalidShop           = E("invalid_shop", "ecom: invalid shop domain")
	ErrInvalidPayload        = E("invalid_json", "the webhook body is not a valid JSON object")
	ErrStoreTokenRejected    = E("store_token_rejected", "ecom: store platform rejected the credentials")
	ErrRecipientNotOnNetwork = E("recipient_not_on_network", "the recipient is not on the messaging network")
	// ErrRecipientNotReachable: the network refused this recipient twice (WhatsApp's 463 for a
	// cold contact); messages to it fail at once for a day unless it writes to the session.
	ErrRecipientNotReachable = E("recipient_not_reachable", "the network refuses messages to this recipient for now; it must write to the session first")
	ErrInvalidMedia          = E("invalid_media", "invalid media reference")
	ErrMediaBlocked          = E("media_url_blocked", "media URL not allowed")
	ErrWebhookURL            = E("invalid_webhook_url", "invalid webhook URL")
	ErrWebhookBlocked        = E("webhook_url_blocked", "webhook URL not allowed")
	// The Cloud API (DESIGN.md section 17). ErrOutsideServiceWindow: Meta refused a message
	// that is not a template because the contact last wrote more than 24 hours ago (131047).
	ErrOutsideServiceWindow = E("outside_service_window", "more than 24 hours have passed since the contact last wrote: only an approved template may be sent")
	// ErrTemplateNotApproved: the template is not APPROVED at Meta (or not in the account).
	ErrTemplateNotApproved = E("template_not_approved", "the template is not approved by Meta")
	// ErrNotOnCloud: the Cloud API has no such message kind or operation (polls, edits,
	// revokes, groups, number lookups, pair codes).
	ErrNotOnCloud = E("not_supported_on_cloud", "the WhatsApp Cloud API has no such message or operation")
	// ErrNeedsCloud: templates, buttons and lists are the Cloud API's own: a linked session
	// cannot send them, and the account has no cloud session for them.
	ErrNeedsCloud = E("cloud_session_required", "this message goes only over a Cloud API number; connect one")
	// ErrContactNeverWrote: a message to a cold contact with no template to go as waited 72
	// hours for the contact to write, who did not.
	ErrContactNeverWrote = E("contact_did_not_write", "the contact did not write within 72 hours; a message to a cold contact without a cold template waits for them")

	// 401: credentials.
	ErrUnknownKey       = E("invalid_api_key", "Invalid API key") //nolint:staticcheck // SPEC.md's exact text
	ErrKeyRevoked       = E("key_revoked", "API key has been revoked")
	ErrKeyExpired       = E("key_expired", "API key has expired")
	ErrInvalidSignature = E("invalid_signature", "invalid webhook signature")
	// ErrVerifyToken: a webhook subscription check (GET hub.verify_token) with a token that is
	// none of the verify tokens shown at connect.
	ErrVerifyToken = E("verify_token_mismatch", "the webhook verify token does not match")

	// 403: not allowed.
	ErrInsufficientScope = E("insufficient_scope", "API key lacks the required scope")
	ErrForbidden         = E("forbidden", "forbidden")

	// 404: no such record.
	ErrUserNotFound     = E("user_not_found", "user not found")
	ErrKeyNotFound      = E("key_not_found", "API key not found")
	ErrSessionNotFound  = E("session_not_found", "session not found")
	ErrStoreNotFound    = E("store_not_found", "store not found")
	ErrCampaignNotFound = E("campaign_not_found", "campaign not found")
	ErrMessageNotFound  = E("message_not_found", "message not found")
	ErrWebhookNotFound  = E("webhook_not_found", "webhook subscription not found") // or not the caller's
	ErrEventNotFound    = E("event_not_found", "no recent delivery of this event") // to redeliver
	ErrGroupNotFound    = E("group_not_found", "group not found")                  // or the session is not in it
	ErrMediaNotFound    = E("media_not_found", "media not found")                  // or not the caller's

	// 409: state conflicts.
	ErrAlreadyConnected    = E("already_connected", "session is already connected")
	ErrNotConnected        = E("session_not_connected", "session is not connected")
	ErrAlreadyExists       = E("already_exists", "already exists")
	ErrStoreTaken          = E("store_connected_elsewhere", "this store is connected to another account")
	ErrIdempotencyInFlight = E("idempotency_in_progress", "a request with this Idempotency-Key is in progress")
	ErrIdempotencyMismatch = E("idempotency_key_reused", "this Idempotency-Key was used with a different request")
	ErrWebhookLimit        = E("webhook_limit", "too many webhook subscriptions")
	ErrWebhookDisabled     = E("webhook_disabled", "the webhook subscription is disabled") // a redelivery would never be sent
	// A queued message's session left the account it was accepted for (DESIGN.md section 14):
	// the message fails and is never sent from another phone.
	ErrSessionReassigned = E("session_reassigned", "the session was assigned to another user before the message was sent")
	ErrSessionLoggedOut  = E("session_logged_out", "the session was logged out before the message was sent")
	ErrSessionDeleted    = E("session_deleted", "the session was deleted before the message was sent")
	// Conversations (DESIGN.md section 16).
	// ErrCancelled: a queued message was cancelled (DELETE /api/v1/messages/{id}) before it was
	// sent; its status is cancelled, not failed.
	ErrCancelled    = E("cancelled", "the message was cancelled before it was sent")
	ErrNotEditable  = E("not_editable", "only a text the session sent can be edited, within 15 minutes of being sent")
	ErrNotRevocable = E("not_revocable", "only a message the session sent can be revoked, within 48 hours of being sent")
	// ErrNotGroupAdmin: a change to a group only its admins may make.
	ErrNotGroupAdmin = E("not_group_admin", "the session's phone is not an admin of the group")

	// 413, 415: media.
	ErrMediaTooLarge = E("media_too_large", "media too large")
	ErrMediaType     = E("unsupported_media_type", "unsupported media type")

	// 429: limits.
	ErrRateLimited   = E("rate_limited", "daily request limit reached")
	ErrQuotaExceeded = E("quota_exceeded", "monthly message allowance used up")
	// ErrCheckLimit: the session looked up its day's share of numbers on the network.
	ErrCheckLimit = E("check_limit_reached", "this session has looked up its 200 numbers for today")

	// 502: an upstream failed.
	ErrNetwork       = E("network_error", "the messaging network failed the send")
	ErrStorePlatform = E("store_platform_error", "ecom: store platform request failed")
	ErrMediaFetch    = E("media_fetch_failed", "media fetch failed")

	// 503: a dependency did not answer; retry later.
	ErrUnavailable        = E("unavailable", "service temporarily unavailable")
	ErrStorageUnavailable = E("storage_unavailable", "storage unavailable")
	ErrIdPUnavailable     = E("idp_unavailable", "identity provider unavailable")
	// ErrNodeUnavailable: in a cluster, the node owning the request's data is being handed
	// over or did not answer in time; the retry goes to its new owner.
	ErrNodeUnavailable = E("node_unavailable", "the node that owns this data is unavailable; retry shortly")

	// 403: a verified identity the gateway does not let in.
	ErrSignInNotAllowed = E("sign_in_not_allowed", "sign-in not allowed")
)
