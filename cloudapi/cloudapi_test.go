package cloudapi_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
)

func TestSignature(t *testing.T) {
	body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	sig := cloudapi.Sign(body, "s3cret")
	// The value whatsapp-api-js checks: "sha256=" and the hex HMAC-SHA256 of the raw body.
	if !cloudapi.VerifySignature(body, sig, "s3cret") {
		t.Fatal("its own signature does not verify")
	}
	for _, bad := range []struct{ sig, secret string }{{sig, "other"}, {sig[7:], "s3cret"}, {"sha256=zz", "s3cret"}, {"", "s3cret"}, {sig, ""}} {
		if cloudapi.VerifySignature(body, bad.sig, bad.secret) {
			t.Fatalf("%q with %q verifies", bad.sig, bad.secret)
		}
	}
	if cloudapi.VerifySignature(append(body, ' '), sig, "s3cret") {
		t.Fatal("a changed body verifies")
	}
}

// Every kind maps to its Graph request and back to the same message.
func TestRequestRoundTrip(t *testing.T) {
	msgs := []domain.Message{
		{ID: "a", To: "15550100001", Kind: domain.KindText, Text: "hello", ReplyTo: &domain.MessageRef{ID: "wamid.q"}},
		{ID: "b", To: "15550100001", Kind: domain.KindImage, MediaURL: "https://example.com/a.png", Caption: "blue"},
		{ID: "c", To: "15550100001", Kind: domain.KindDocument, MediaURL: "https://example.com/a.pdf", Caption: "invoice", FileName: "a.pdf"},
		{ID: "d", To: "15550100001", Kind: domain.KindAudio, MediaURL: "https://example.com/a.ogg", PTT: true},
		{ID: "e", To: "15550100001", Kind: domain.KindLocation, Lat: 52.5, Lng: 13.4, LocationName: "Shop", Address: "Alexanderplatz 1"},
		{ID: "f", To: "15550100001", Kind: domain.KindContact, ContactName: "Support", ContactPhone: "447700900123"},
		{ID: "g", To: "15550100001", Kind: domain.KindReaction, Emoji: "👍", Target: &domain.MessageRef{ID: "wamid.t"}},
		{ID: "h", To: "15550100001", Kind: domain.KindTemplate, Template: &domain.TemplateSend{Name: "order", Language: "en_US", Params: []string{"1001", "shipped"}}},
		{ID: "i", To: "15550100001", Kind: domain.KindButtons, Text: "Confirm order 1001?", Header: "Order", Footer: "Reply any time",
			Buttons: []domain.Button{{ID: "yes", Title: "Confirm"}, {ID: "no", Title: "Cancel"}}},
		{ID: "j", To: "15550100001", Kind: domain.KindList, Text: "Pick a slot", ListButton: "Slots",
			Sections: []domain.ListSection{{Title: "Monday", Rows: []domain.ListRow{{ID: "m9", Title: "9:00", Description: "morning"}}}}},
	}
	for _, m := range msgs {
		req, err := cloudapi.NewRequest(m)
		if err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
		wire, _ := json.Marshal(req)
		var back cloudapi.SendRequest
		if err := json.Unmarshal(wire, &back); err != nil {
			t.Fatal(err)
		}
		got, mediaID, err := back.Message()
		if err != nil || mediaID != "" {
			t.Fatalf("%s: %v %q", m.Kind, err, mediaID)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: %s came back as\n%+v, want\n%+v", m.Kind, wire, got, m)
		}
	}
	for _, k := range []domain.Kind{domain.KindPoll, domain.KindEdit, domain.KindRevoke} {
		if _, err := cloudapi.NewRequest(domain.Message{To: "15550100001", Kind: k}); !errors.Is(err, domain.ErrNotOnCloud) {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if _, err := cloudapi.NewRequest(domain.Message{To: "123@g.us", Kind: domain.KindText, Text: "x"}); !errors.Is(err, domain.ErrNotOnCloud) {
		t.Fatalf("a group: %v", err)
	}
}

// An incoming webhook as Meta's documentation shows it reads into the gateway's message.
func TestIncomingWebhook(t *testing.T) {
	body := `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{
	  "messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},
	  "contacts":[{"profile":{"name":"Sheena Nelson"},"wa_id":"16505551234"}],
	  "messages":[
	    {"from":"16505551234","id":"wamid.A","timestamp":"1749416383","type":"text","text":{"body":"Does it come in another color?"},"context":{"from":"15550783881","id":"wamid.Q"}},
	    {"from":"16505551234","id":"wamid.B","timestamp":"1749416384","type":"location","location":{"latitude":"37.48","longitude":-122.14,"name":"HQ"}},
	    {"from":"16505551234","id":"wamid.C","timestamp":"1749416385","type":"interactive","interactive":{"type":"list_reply","list_reply":{"id":"m9","title":"9:00"}}},
	    {"from":"16505551234","id":"wamid.D","timestamp":"1749416386","type":"unsupported","unsupported":{"type":"poll"}},
	    {"context":{"from":"15550783881","id":"wamid.BUTTONS"},"from":"16505551234","id":"wamid.E","timestamp":"1749416387","type":"interactive",
	     "interactive":{"type":"button_reply","button_reply":{"id":"yes","title":"Yes, confirm"}}}
	  ]},"field":"messages"}]}]}`
	var n cloudapi.Notification
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		t.Fatal(err)
	}
	v := n.Entry[0].Changes[0].Value
	if v.Metadata.PhoneNumberID != "106540352242922" || v.Contacts[0].Profile.Name != "Sheena Nelson" {
		t.Fatalf("%+v", v)
	}
	a, b, c, d := v.Messages[0].Message(), v.Messages[1].Message(), v.Messages[2].Message(), v.Messages[3].Message()
	if a.Kind != domain.KindText || a.Text != "Does it come in another color?" || a.ReplyTo.ID != "wamid.Q" {
		t.Fatalf("text %+v", a)
	}
	if b.Kind != domain.KindLocation || b.Lat != 37.48 || b.Lng != -122.14 || b.LocationName != "HQ" {
		t.Fatalf("location %+v", b)
	}
	if c.Kind != domain.KindButtonReply || c.ButtonID != "m9" || c.Text != "9:00" {
		t.Fatalf("list reply %+v", c)
	}
	if d.Kind != cloudapi.KindOther {
		t.Fatalf("unsupported %+v", d)
	}
	// A tapped reply button names the buttons' message in its context (what the store loop's
	// confirmation reads its answer by).
	if e := v.Messages[4].Message(); e.Kind != domain.KindButtonReply || e.ButtonID != "yes" || e.Text != "Yes, confirm" || e.ReplyTo == nil || e.ReplyTo.ID != "wamid.BUTTONS" {
		t.Fatalf("button reply %+v", e)
	}
	if got := cloudapi.Time(v.Messages[0].Timestamp); got.Unix() != 1749416383 {
		t.Fatalf("time %v", got)
	}
}

func TestTemplateParameters(t *testing.T) {
	pos := domain.CloudTemplate{Body: "Order {{1}} is {{2}}. Thanks, {{1}}!"}
	if pos.BodyParams() != 2 || pos.Render([]string{"1001", "shipped"}) != "Order 1001 is shipped. Thanks, 1001!" {
		t.Fatalf("positional: %d %q", pos.BodyParams(), pos.Render([]string{"1001", "shipped"}))
	}
	named := domain.CloudTemplate{ParameterFormat: "NAMED", Body: "Hi {{name}}, order {{order}} for {{name}}"}
	if !reflect.DeepEqual(named.ParamNames(), []string{"name", "order"}) || named.Render([]string{"Ann", "7"}) != "Hi Ann, order 7 for Ann" {
		t.Fatalf("named: %v %q", named.ParamNames(), named.Render([]string{"Ann", "7"}))
	}
	tpl := cloudapi.TemplateOf(domain.TemplateSend{Name: "x", Language: "en", Params: []string{"Ann", "7"}, Names: []string{"name", "order"}})
	if p := tpl.Components[0].Parameters; p[0].ParameterName != "name" || p[1].Text != "7" || tpl.Language.Policy != "deterministic" {
		t.Fatalf("%+v", tpl)
	}
	// A parameter goes on one line: Meta refuses line breaks, tabs and more than four spaces.
	tpl = cloudapi.TemplateOf(domain.TemplateSend{Name: "x", Language: "en", Params: []string{"Hi John,\n\nPlease confirm\t#1001:     1. Yes\r\n"}})
	if p := tpl.Components[0].Parameters[0].Text; p != "Hi John, Please confirm #1001: 1. Yes" {
		t.Fatalf("a parameter with line breaks went as %q", p)
	}
}

func TestErrorShape(t *testing.T) {
	body := `{"error":{"message":"(#131047) Re-engagement message","type":"OAuthException","code":131047,
	  "error_data":{"messaging_product":"whatsapp","details":"Message failed to send because more than 24 hours have passed"},
	  "error_subcode":2494010,"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam"}}`
	var er cloudapi.ErrorResponse
	if err := json.Unmarshal([]byte(body), &er); err != nil {
		t.Fatal(err)
	}
	if er.Error.Code != cloudapi.CodeOutsideWindow || er.Error.ErrorSubcode != 2494010 || er.Error.FBTraceID == "" || er.Error.ErrorData.Details == "" {
		t.Fatalf("%+v", er.Error)
	}
	if ge, ok := cloudapi.AsError(&er.Error); !ok || ge.Code != 131047 {
		t.Fatal("AsError")
	}
}
