package httpapi

import (
	"fmt"

	"github.com/valyala/fasthttp"
)

// Meta's error shape for the Cloud-API-shaped front (front.go): {error: {message, type, code,
// error_subcode, error_data, fbtrace_id}}. The status stays the gateway's (a 4xx for bad input,
// 503 for a dependency down, Retry-After as writeError sets it); code is the Graph or
// WhatsApp error code a Cloud API client acts on, error_data.details names the gateway's own
// code, fbtrace_id is the request id (the access log's and the X-Request-ID header's).

// frontErrorBody is the answer.
type frontErrorBody struct {
	Error frontErrorJSON `json:"error"`
}

type frontErrorJSON struct {
	Message      string         `json:"message"`
	Type         string         `json:"type"`
	Code         int            `json:"code"`
	ErrorSubcode int            `json:"error_subcode"`
	ErrorData    frontErrorData `json:"error_data"`
	FBTraceID    string         `json:"fbtrace_id"`
}

type frontErrorData struct {
	MessagingProduct string `json:"messaging_product"`
	Details          string `json:"details"`
}

// metaCode is a gateway error code's Graph error: its code, subcode and type.
type metaCode struct {
	code, subcode int
	typ           string
}

// Graph's error codes the front answers with (developers.facebook.com/docs/whatsapp/cloud-api/
// support/error-codes, and Graph's own: 1 unknown, 2 service, 4 app rate limit, 10 permission,
// 100 invalid parameter (subcode 33: no such object), 190 access token (463 expired)).
var metaByCode = map[string]metaCode{
	"missing_credentials": {190, 0, "OAuthException"}, "invalid_api_key": {190, 0, "OAuthException"},
	"key_revoked": {190, 460, "OAuthException"}, "key_expired": {190, 463, "OAuthException"},
	"invalid_token":      {190, 0, "OAuthException"},
	"insufficient_scope": {10, 0, "OAuthException"}, "forbidden": {10, 0, "OAuthException"},
	"rate_limited": {4, 0, "OAuthException"}, "quota_exceeded": {80007, 0, "OAuthException"},
	"session_not_found": {100, 33, "GraphMethodException"}, "media_not_found": {100, 33, "GraphMethodException"},
	"message_not_found": {100, 33, "GraphMethodException"}, "not_found": {100, 33, "GraphMethodException"},
	"method_not_allowed": {100, 0, "GraphMethodException"},
	// A kind the session's network cannot carry: "Unsupported message type".
	"cloud_session_required": {131051, 0, "OAuthException"}, "not_supported_on_cloud": {131051, 0, "OAuthException"},
	"recipient_not_on_network": {131026, 0, "OAuthException"}, "recipient_not_reachable": {131026, 0, "OAuthException"},
	"outside_service_window": {131047, 0, "OAuthException"}, "contact_did_not_write": {131047, 0, "OAuthException"},
	"template_not_approved": {132001, 0, "OAuthException"}, "opted_out": {131050, 0, "OAuthException"},
	"invalid_media": {131053, 0, "OAuthException"}, "media_too_large": {131053, 0, "OAuthException"},
	"unsupported_media_type": {131053, 0, "OAuthException"}, "media_fetch_failed": {131052, 0, "OAuthException"},
	"media_url_blocked":     {131052, 0, "OAuthException"},
	"session_not_connected": {133010, 0, "OAuthException"}, "session_logged_out": {133010, 0, "OAuthException"},
	"session_deleted": {133010, 0, "OAuthException"}, "session_reassigned": {133010, 0, "OAuthException"},
	"network_error": {131000, 0, "OAuthException"},
}

// frontError is err's answer in Meta's shape, at status with the gateway's code.
func (s *Server) frontError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	mc, ok := metaByCode[code]
	switch {
	case ok:
	case status == fasthttp.StatusServiceUnavailable:
		mc = metaCode{2, 0, "OAuthException"} // "Service temporarily unavailable"
	case status >= 500:
		mc = metaCode{1, 0, "OAuthException"} // "An unknown error occurred"
	default:
		mc = metaCode{100, 0, "OAuthException"} // "Invalid parameter"
	}
	writeJSON(ctx, status, frontErrorBody{Error: frontErrorJSON{
		Message: fmt.Sprintf("(#%d) %s", mc.code, msg), Type: mc.typ, Code: mc.code, ErrorSubcode: mc.subcode,
		ErrorData: frontErrorData{MessagingProduct: "whatsapp", Details: code + ": " + msg}, FBTraceID: s.requestID(ctx),
	}})
}
