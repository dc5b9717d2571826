package cloudapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// SendResponse is the answer to a message sent: who it went to and its id (a wamid).
type SendResponse struct {
	MessagingProduct string        `json:"messaging_product"`
	Contacts         []SentContact `json:"contacts"`
	Messages         []SentMessage `json:"messages"`
}

// SentContact names the recipient as the request did (Input) and its WhatsApp id.
type SentContact struct {
	Input string `json:"input"`
	WaID  string `json:"wa_id,omitempty"`
}

// SentMessage is a sent message's id; MessageStatus "accepted" or "held_for_quality_assessment".
type SentMessage struct {
	ID            string `json:"id"`
	MessageStatus string `json:"message_status,omitempty"`
}

// SuccessResponse answers a read mark.
type SuccessResponse struct {
	Success bool `json:"success"`
}

// MediaResponse answers an upload: the medium's id, to send it by.
type MediaResponse struct {
	ID string `json:"id"`
}

// PhoneNumberFields are the fields connect asks of a phone number.
const PhoneNumberFields = "id,display_phone_number,verified_name,quality_rating,platform_type,throughput,code_verification_status"

// PhoneNumber is GET /{version}/{phone-number-id}.
type PhoneNumber struct {
	ID                     string      `json:"id"`
	DisplayPhoneNumber     string      `json:"display_phone_number"`
	VerifiedName           string      `json:"verified_name,omitempty"`
	QualityRating          string      `json:"quality_rating,omitempty"`
	PlatformType           string      `json:"platform_type,omitempty"`
	CodeVerificationStatus string      `json:"code_verification_status,omitempty"`
	Throughput             *Throughput `json:"throughput,omitempty"`
}

// Throughput is a number's level: STANDARD (80 messages/s), HIGH (1,000), NOT_APPLICABLE.
type Throughput struct {
	Level string `json:"level"`
}

// MessagesPerSecond is the level's throughput (0 when the level does not say).
func (t *Throughput) MessagesPerSecond() int {
	if t == nil {
		return 0
	}
	switch t.Level {
	case "STANDARD":
		return 80
	case "HIGH":
		return 1000
	}
	return 0
}

// TemplateList is a page of GET /{version}/{waba-id}/message_templates.
type TemplateList struct {
	Data   []MessageTemplate `json:"data"`
	Paging *Paging           `json:"paging,omitempty"`
}

// Paging is a Graph list's cursors; Next is the next page's URL ("" on the last).
type Paging struct {
	Cursors *Cursors `json:"cursors,omitempty"`
	Next    string   `json:"next,omitempty"`
}

// Cursors are a page's cursors.
type Cursors struct {
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// MessageTemplate is one template of a WABA.
type MessageTemplate struct {
	ID              string              `json:"id,omitempty"`
	Name            string              `json:"name"`
	Language        string              `json:"language"`
	Status          string              `json:"status"`
	Category        string              `json:"category"`
	ParameterFormat string              `json:"parameter_format,omitempty"`
	Components      []TemplateComponent `json:"components,omitempty"`
}

// TemplateComponent is one of a template's parts as defined (HEADER, BODY, FOOTER, BUTTONS).
type TemplateComponent struct {
	Type    string          `json:"type"`
	Format  string          `json:"format,omitempty"`
	Text    string          `json:"text,omitempty"`
	Buttons json.RawMessage `json:"buttons,omitempty"`
	Example json.RawMessage `json:"example,omitempty"`
}

// BodyText is the template's BODY text ("" when it has none).
func (t MessageTemplate) BodyText() string {
	for _, c := range t.Components {
		if strings.EqualFold(c.Type, "BODY") {
			return c.Text
		}
	}
	return ""
}

// ErrorResponse is the Graph API's error answer.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error is a Graph API error: in an answer (with Type, ErrorSubcode, FBTraceID), or in a
// failed status or an incoming message of a webhook (with Title, Href).
type Error struct {
	Message      string     `json:"message"`
	Type         string     `json:"type,omitempty"`
	Code         int        `json:"code"`
	ErrorSubcode int        `json:"error_subcode,omitempty"`
	ErrorData    *ErrorData `json:"error_data,omitempty"`
	FBTraceID    string     `json:"fbtrace_id,omitempty"`
	Title        string     `json:"title,omitempty"`
	Href         string     `json:"href,omitempty"`
	// HTTPStatus is the answer's status (not on the wire).
	HTTPStatus int `json:"-"`
}

// ErrorData is an error's detail.
type ErrorData struct {
	MessagingProduct string `json:"messaging_product,omitempty"`
	Details          string `json:"details"`
}

func (e *Error) Error() string {
	msg := cmp.Or(e.Message, e.Title)
	if e.ErrorData != nil && e.ErrorData.Details != "" && e.ErrorData.Details != msg {
		msg += ": " + e.ErrorData.Details
	}
	return fmt.Sprintf("graph api error %d: %s", e.Code, msg)
}

// AsError returns the Graph error in err's chain.
func AsError(err error) (*Error, bool) {
	var ge *Error
	ok := errors.As(err, &ge)
	return ge, ok
}

// Error codes the gateway acts on (developers.facebook.com/documentation/business-messaging/
// whatsapp/support/error-codes).
const (
	// CodeAccessToken: the access token expired or was revoked (OAuthException).
	CodeAccessToken = 190
	// CodeInvalidParameter: a parameter is wrong.
	CodeInvalidParameter = 100
	// CodeThroughput: the number's throughput was exceeded ("Rate limit hit").
	CodeThroughput = 130429
	// CodeGeneric: "Something went wrong" (a retry may go).
	CodeGeneric = 131000
	// CodeUndeliverable: "Message undeliverable" (the recipient cannot be reached).
	CodeUndeliverable = 131026
	// CodeOutsideWindow: "Re-engagement message": more than 24 hours since the contact wrote.
	CodeOutsideWindow = 131047
	// CodeParamValue: "Parameter value is not valid" (a button's title over 20 characters, say).
	CodeParamValue = 131009
	// CodeUnsupportedType: "Unsupported message type".
	CodeUnsupportedType = 131051
	// CodePairRate: "Spam rate limit hit": too many messages to the same contact.
	CodePairRate = 131056
	// CodeTemplateParams: the template's parameters do not match its definition.
	CodeTemplateParams = 132000
	// CodeTemplateMissing: the template does not exist in that language (or is not approved).
	CodeTemplateMissing = 132001
	// CodeTemplatePaused and CodeTemplateDisabled.
	CodeTemplatePaused   = 132015
	CodeTemplateDisabled = 132016
)
