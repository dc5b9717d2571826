package httpapi

import (
	"strings"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
)

// The Cloud API's message kinds on the send routes (DESIGN.md section 17): a template with its
// body's parameters, reply buttons, a list; and how answers show them and the way a message
// went.

// templateRequest is a send's template: {name, language, parameters: [...]}.
type templateRequest struct {
	Name       string   `json:"name"`
	Language   string   `json:"language"`
	Parameters []string `json:"parameters"`
}

// templateSendJSON is a template message as answers show it.
type templateSendJSON struct {
	Name       string   `json:"name"`
	Language   string   `json:"language"`
	Parameters []string `json:"parameters,omitempty"`
}

// routeJSON is the way the account's routing sent a message, and what Meta charged it as.
type routeJSON struct {
	Via       string `json:"via,omitempty"`
	ViaReason string `json:"viaReason,omitempty"`
	Pricing   string `json:"pricing,omitempty"`
}

func routeOf(e domain.OutboxEntry) routeJSON {
	return routeJSON{Via: e.Via, ViaReason: e.ViaReason, Pricing: e.Pricing}
}

// waitingCode is the code a queued message waiting for its contact shows ("" otherwise).
func waitingCode(e domain.OutboxEntry) string {
	if e.Waiting && e.Status == domain.MsgQueued {
		return domain.CodeWaitingForContact
	}
	return ""
}

// cloudContent adds a template's, buttons' or list's content to an answer.
func cloudContent(c *contentJSON, m domain.Message) {
	if t := m.Template; t != nil {
		c.Template = &templateSendJSON{Name: t.Name, Language: t.Language, Parameters: t.Params}
	}
	c.Buttons, c.Button, c.Sections, c.Header, c.Footer, c.ButtonID = m.Buttons, m.ListButton, m.Sections, m.Header, m.Footer, m.ButtonID
}

// cloudKindOf reads a template, buttons or list send (textField: the route's name of the text,
// a buttons' or list's body).
func cloudKindOf(msg *domain.Message, req *messageRequest, textField string) error {
	if msg.ReplyTo != nil && msg.Kind == domain.KindTemplate {
		return badInput("validation_failed", "a template cannot reply to a message")
	}
	if msg.Kind == domain.KindTemplate {
		t := req.Template
		if t == nil || strings.TrimSpace(t.Name) == "" || strings.TrimSpace(t.Language) == "" {
			return badInput("validation_failed", "template is required for type template: {name, language, parameters}")
		}
		if len(t.Parameters) > 100 {
			return badInput("validation_failed", "template.parameters: at most 100")
		}
		for _, p := range t.Parameters {
			if strings.TrimSpace(p) == "" || len(p) > 1024 || !utf8.ValidString(p) {
				return badInput("validation_failed", "template.parameters: each is 1 to 1,024 bytes of UTF-8 (Meta refuses empty ones)")
			}
		}
		msg.Template = &domain.TemplateSend{Name: strings.TrimSpace(t.Name), Language: strings.TrimSpace(t.Language), Params: t.Parameters}
		return nil
	}
	text := req.Message
	if text == nil {
		text = req.Text
	}
	body, err := requireText(textField, text)
	if err != nil {
		return err
	}
	if utf8.RuneCountInString(body) > domain.InteractiveBody {
		return badInput("validation_failed", "%s: a %s's body is at most %d characters", textField, msg.Kind, domain.InteractiveBody)
	}
	if utf8.RuneCountInString(req.Header) > domain.HeaderMax || utf8.RuneCountInString(req.Footer) > domain.FooterMax {
		return badInput("validation_failed", "header and footer are at most %d characters", domain.HeaderMax)
	}
	msg.Text, msg.Header, msg.Footer = body, strings.TrimSpace(req.Header), strings.TrimSpace(req.Footer)
	if msg.Kind == domain.KindButtons {
		if len(req.Buttons) < 1 || len(req.Buttons) > domain.MaxButtons {
			return badInput("validation_failed", "buttons: 1 to %d reply buttons {id, title}", domain.MaxButtons)
		}
		ids, titles := map[string]bool{}, map[string]bool{}
		for _, b := range req.Buttons {
			if err := choiceOK(b.ID, b.Title, 256, domain.ButtonTitleMax); err != nil {
				return err
			}
			if ids[b.ID] || titles[b.Title] {
				return badInput("validation_failed", "buttons: ids and titles must be distinct")
			}
			ids[b.ID], titles[b.Title] = true, true
		}
		msg.Buttons = req.Buttons
		return nil
	}
	if b := strings.TrimSpace(req.Button); b == "" || utf8.RuneCountInString(b) > domain.ListButtonMax {
		return badInput("validation_failed", "button: the list's button text, 1 to %d characters", domain.ListButtonMax)
	}
	if len(req.Sections) < 1 || len(req.Sections) > domain.MaxListSections {
		return badInput("validation_failed", "sections: 1 to %d sections of rows", domain.MaxListSections)
	}
	rows := 0
	for _, sec := range req.Sections {
		if len(sec.Rows) == 0 || (len(req.Sections) > 1 && strings.TrimSpace(sec.Title) == "") || utf8.RuneCountInString(sec.Title) > domain.RowTitleMax {
			return badInput("validation_failed", "sections: each has rows (and a title of at most %d characters when there are several)", domain.RowTitleMax)
		}
		for _, r := range sec.Rows {
			if err := choiceOK(r.ID, r.Title, 200, domain.RowTitleMax); err != nil {
				return err
			}
			if utf8.RuneCountInString(r.Description) > domain.RowDescMax {
				return badInput("validation_failed", "a row's description is at most %d characters", domain.RowDescMax)
			}
			rows++
		}
	}
	if rows > domain.MaxListRows {
		return badInput("validation_failed", "sections: at most %d rows in all", domain.MaxListRows)
	}
	msg.ListButton, msg.Sections = strings.TrimSpace(req.Button), req.Sections
	return nil
}

// choiceOK checks a button's or a row's id and title.
func choiceOK(id, title string, idMax, titleMax int) error {
	if id == "" || len(id) > idMax || strings.TrimSpace(id) != id {
		return badInput("validation_failed", "each button and row needs an id of 1 to %d characters without leading or trailing spaces", idMax)
	}
	if strings.TrimSpace(title) == "" || utf8.RuneCountInString(title) > titleMax {
		return badInput("validation_failed", "a title is 1 to %d characters", titleMax)
	}
	return nil
}
