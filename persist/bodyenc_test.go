package persist

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/gateway/gateway/domain"
)

// A body written by hand reads back as the same entry, and as the same JSON, as the reflecting
// encoder's, whatever its fields hold.
func TestBodyByHandReadsBack(t *testing.T) {
	at := domain.Millis(1764000000123)
	for i, e := range []domain.OutboxEntry{
		{ID: "3EB0ABCDEF0123456789ABCD", SessionID: "s1", UserID: "u1", Origin: "api", From: "4915100000001", CreatedAt: at,
			Message: domain.Message{ID: "3EB0ABCDEF0123456789ABCD", To: "4915112345678", Kind: domain.KindText, Text: "Your order 1042 has shipped."}},
		{ID: "m\"1\\", CreatedAt: at, Message: domain.Message{ID: "other id", To: "1", Kind: domain.KindImage, Caption: "<b>&\u2028\u2029\x01\t\n\r é \xff",
			FileName: "a b.jpg", MimeType: "image/jpeg", Data: []byte{0, 1, 2, 0xff, 0xfe, 'x'}}},
		{ID: "loc", Message: domain.Message{Kind: domain.KindLocation, Lat: -33.868820000000001, Lng: 151.20929, Address: "Sydney"}},
		{ID: "tiny", Message: domain.Message{Lat: 1e-300, Lng: math.MaxFloat64, ContactName: "Ann", ContactPhone: "+49 151"}},
		{ID: "one", Message: domain.Message{Lat: 1e21, Lng: 123456789.125, Data: []byte{7}}},
		{ID: "later", CreatedAt: at, SendAt: at + 5000, Transactional: true, Message: domain.Message{Kind: domain.KindText, Text: "at five"}},
		{ID: "poll", Message: domain.Message{Kind: domain.KindPoll, Question: "Confirm \"order\"?", Options: []string{"Yes", "No ✗"}, Multiple: true, Typing: true,
			ReplyTo: &domain.MessageRef{ID: "IN1", From: "15550001111", FromLID: "123", Kind: domain.KindText, Text: "hi"}}},
		{ID: "react", Message: domain.Message{Kind: domain.KindReaction, To: "120363000000000001@g.us", Emoji: "👍", Target: &domain.MessageRef{ID: "X", FromMe: true, Group: "120363000000000001@g.us"}}},
		{ID: "voice", Message: domain.Message{Kind: domain.KindAudio, PTT: true, Size: 12, LocationName: "x"}},
		{ID: "cold", Via: domain.ViaCloud, ViaReason: domain.ViaCold, Waiting: true, Message: domain.Message{Kind: domain.KindTemplate, Text: "Order 1 \"ok\"",
			Template: &domain.TemplateSend{Name: "order", Language: "en_US", Params: []string{"1"}}, MediaURL: "https://x/y.png"}},
		{ID: "buttons", Via: domain.ViaLinked, ViaReason: domain.ViaWarm, Message: domain.Message{Kind: domain.KindButtons, Text: "Confirm?", Header: "h", Footer: "f",
			Buttons: []domain.Button{{ID: "y", Title: "Yes"}}, ColdTemplate: &domain.TemplateSend{Name: "c", Language: "en"}}},
		{ID: "list", Message: domain.Message{Kind: domain.KindList, ListButton: "Pick", Sections: []domain.ListSection{{Title: "s", Rows: []domain.ListRow{{ID: "r", Title: "R"}}}}, ButtonID: "b"}},
		{},
	} {
		hash := ""
		if i%2 == 1 {
			hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
		}
		ref := ""
		if len(e.Message.Data) > 3 {
			ref = "media-" + e.ID // media kept apart: the record names it
		}
		b := body{ID: e.ID, SessionID: e.SessionID, UserID: e.UserID, Origin: e.Origin, From: e.From, Message: e.Message, CreatedAt: e.CreatedAt, IdemHash: hash,
			Via: e.Via, ViaReason: e.ViaReason, Waiting: e.Waiting,
			DataRef: ref, SendAt: e.SendAt, Transactional: e.Transactional}
		if b.Message.ID == e.ID {
			b.Message.ID = ""
		}
		if ref != "" {
			b.Message.Data = nil
		}
		want, err := Encode(bodyVersion3, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeBody(e, hash, ref)
		if err != nil {
			t.Fatal(err)
		}
		var wj, gj any
		if err := json.Unmarshal(want[1:], &wj); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got[1:], &gj); err != nil {
			t.Fatalf("%d: by hand is not JSON: %v\n%s", i, err, got[1:])
		}
		if got[0] != bodyVersion3 || !reflect.DeepEqual(wj, gj) {
			t.Errorf("%d: by hand\n%s\nreflecting\n%s", i, got[1:], want[1:])
		}
		we, wh, wref, err := decodeRef(want)
		if err != nil {
			t.Fatal(err)
		}
		ge, gh, gref, err := decodeRef(got)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(we, ge) || wh != hash || gh != hash || wref != ref || gref != ref {
			t.Errorf("%d: reads back as\n%+v (%q)\nwant\n%+v (%q)", i, ge, gref, we, ref)
		}
	}
	if _, err := encodeBody(domain.OutboxEntry{ID: "x", Message: domain.Message{Lat: math.NaN()}}, "", ""); err == nil {
		t.Error("a NaN location was encoded")
	}
}

// BenchmarkBodyEncode: a text message's body record by hand and through the reflecting
// encoder. `go test -run X -bench BodyEncode ./persist`.
func BenchmarkBodyEncode(b *testing.B) {
	e := domain.OutboxEntry{ID: "3EB0ABCDEF0123456789ABCD", SessionID: "0b6a2c1e-5f7d-4e0a-9a77-3c1d2e4f5a6b", UserID: "u042", Origin: "api",
		From: "4915100000001", CreatedAt: 1764000000123, Message: domain.Message{ID: "3EB0ABCDEF0123456789ABCD", To: "4915112345678",
			Kind: domain.KindText, Text: "Your order 1042 has shipped and is on its way to you."}}
	b.Run("byHand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeBody(e, "", ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflecting", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bd := body{ID: e.ID, SessionID: e.SessionID, UserID: e.UserID, Origin: e.Origin, From: e.From, Message: e.Message, CreatedAt: e.CreatedAt}
			bd.Message.ID = ""
			if _, err := Encode(bodyVersion3, bd); err != nil {
				b.Fatal(err)
			}
		}
	})
}
