package persist

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsonenc"
)

// appendBody appends b's JSON as Encode writes it (the same fields, absent ones left out), by
// hand: one per accepted message, where the reflecting encoder and its copy of the record were
// 2-3 % of a send's CPU (issue 21). decodeBody reads it with the reflecting decoder, so the
// two can never disagree on a field's meaning: TestBodyByHandReadsBack.
func appendBody(out []byte, b *body) ([]byte, error) {
	m := &b.Message
	if math.IsNaN(m.Lat) || math.IsInf(m.Lat, 0) || math.IsNaN(m.Lng) || math.IsInf(m.Lng, 0) {
		return nil, fmt.Errorf("persist: encode: a message's location is not a number")
	}
	out = jsonenc.AppendString(append(out, `{"id":`...), b.ID)
	out = jsonenc.AppendField(out, `,"session":`, b.SessionID)
	out = jsonenc.AppendField(out, `,"user":`, b.UserID)
	out = jsonenc.AppendField(out, `,"origin":`, b.Origin)
	out = jsonenc.AppendField(out, `,"from":`, b.From)
	out = jsonenc.AppendString(append(out, `,"message":{"id":`...), m.ID)
	out = jsonenc.AppendString(append(out, `,"to":`...), m.To)
	out = jsonenc.AppendString(append(out, `,"kind":`...), string(m.Kind))
	out = jsonenc.AppendField(out, `,"text":`, m.Text)
	out = jsonenc.AppendField(out, `,"caption":`, m.Caption)
	out = jsonenc.AppendField(out, `,"fileName":`, m.FileName)
	out = jsonenc.AppendField(out, `,"mimeType":`, m.MimeType)
	if len(m.Data) > 0 {
		out = append(out, `,"data":"`...)
		out = base64.StdEncoding.AppendEncode(out, m.Data)
		out = append(out, '"')
	}
	if m.Lat != 0 {
		out = strconv.AppendFloat(append(out, `,"lat":`...), m.Lat, 'g', -1, 64)
	}
	if m.Lng != 0 {
		out = strconv.AppendFloat(append(out, `,"lng":`...), m.Lng, 'g', -1, 64)
	}
	out = jsonenc.AppendField(out, `,"address":`, m.Address)
	out = jsonenc.AppendField(out, `,"contactName":`, m.ContactName)
	out = jsonenc.AppendField(out, `,"contactPhone":`, m.ContactPhone)
	if m.Size != 0 || m.PTT || m.LocationName != "" || m.Question != "" || len(m.Options) > 0 || m.Multiple ||
		m.Emoji != "" || m.ReplyTo != nil || m.Target != nil || m.Typing || m.MediaURL != "" || m.Template != nil ||
		m.ColdTemplate != nil || len(m.Buttons) > 0 || m.ListButton != "" || len(m.Sections) > 0 || m.Header != "" ||
		m.Footer != "" || m.ButtonID != "" {
		// The kinds of DESIGN.md sections 16 and 17: rarer than texts and media, through the
		// reflecting encoder (the same names and omissions).
		rest, err := json.Marshal(conversationFields{Size: m.Size, PTT: m.PTT, LocationName: m.LocationName,
			Question: m.Question, Options: m.Options, Multiple: m.Multiple, Emoji: m.Emoji, ReplyTo: m.ReplyTo,
			Target: m.Target, Typing: m.Typing, MediaURL: m.MediaURL, Template: m.Template, ColdTemplate: m.ColdTemplate,
			Buttons: m.Buttons, ListButton: m.ListButton, Sections: m.Sections, Header: m.Header, Footer: m.Footer, ButtonID: m.ButtonID})
		if err != nil {
			return nil, fmt.Errorf("persist: encode: %w", err)
		}
		out = append(append(out, ','), rest[1:len(rest)-1]...)
	}
	out = strconv.AppendInt(append(out, `},"at":`...), int64(b.CreatedAt), 10)
	out = jsonenc.AppendField(out, `,"ih":`, b.IdemHash)
	out = jsonenc.AppendField(out, `,"via":`, b.Via)
	out = jsonenc.AppendField(out, `,"viaReason":`, b.ViaReason)
	if b.Waiting {
		out = append(out, `,"waiting":true`...)
	}
	out = jsonenc.AppendField(out, `,"dataRef":`, b.DataRef)
	if b.SendAt != 0 {
		out = strconv.AppendInt(append(out, `,"sendAt":`...), int64(b.SendAt), 10)
	}
	if b.Transactional {
		out = append(out, `,"tx":true`...)
	}
	return append(out, '}'), nil
}

// conversationFields are domain.Message's fields of DESIGN.md section 16, with its JSON names.
type conversationFields struct {
	Size         int64              `json:"size,omitempty"`
	PTT          bool               `json:"ptt,omitempty"`
	LocationName string             `json:"locationName,omitempty"`
	Question     string             `json:"question,omitempty"`
	Options      []string           `json:"options,omitempty"`
	Multiple     bool               `json:"multiple,omitempty"`
	Emoji        string             `json:"emoji,omitempty"`
	ReplyTo      *domain.MessageRef `json:"replyTo,omitempty"`
	Target       *domain.MessageRef `json:"target,omitempty"`
	Typing       bool               `json:"typing,omitempty"`
	// The Cloud API's (DESIGN.md section 17).
	MediaURL     string               `json:"mediaUrl,omitempty"`
	Template     *domain.TemplateSend `json:"template,omitempty"`
	ColdTemplate *domain.TemplateSend `json:"coldTemplate,omitempty"`
	Buttons      []domain.Button      `json:"buttons,omitempty"`
	ListButton   string               `json:"listButton,omitempty"`
	Sections     []domain.ListSection `json:"sections,omitempty"`
	Header       string               `json:"header,omitempty"`
	Footer       string               `json:"footer,omitempty"`
	ButtonID     string               `json:"buttonId,omitempty"`
}
