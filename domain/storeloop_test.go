package domain

import (
	"testing"
	"time"
)

func TestConfirmAnswerOf(t *testing.T) {
	c := Confirm{Yes: "Yes, confirm", No: "No, cancel"}
	for text, want := range map[string]string{
		"1": AnswerYes, " 2 ": AnswerNo, "yes, CONFIRM": AnswerYes, "No, cancel!": AnswerNo, "YES": AnswerYes,
		"no": AnswerNo, "yes.": AnswerYes, "3": "", "": "", "maybe": "", "yes please": "", "12": "",
	} {
		got, ok := c.AnswerOf(text)
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", text, got, ok, want)
		}
	}
	// Answers sharing a first word are recognised whole only.
	same := Confirm{Yes: "Order it", No: "Order nothing"}
	if _, ok := same.AnswerOf("order"); ok {
		t.Error("a first word both answers share is no answer")
	}
	if a, ok := same.AnswerOf("ORDER NOTHING"); !ok || a != AnswerNo {
		t.Error("the whole answer")
	}
	if a, ok := c.VoteOf([]string{"No, cancel"}); !ok || a != AnswerNo {
		t.Error("vote no")
	}
	if _, ok := c.VoteOf(nil); ok {
		t.Error("a vote taken back is no answer")
	}
	if _, ok := c.VoteOf([]string{"Yes, confirm", "No, cancel"}); ok {
		t.Error("both options is no answer")
	}
}

func TestStopWords(t *testing.T) {
	for text, want := range map[string]bool{
		"STOP": true, "stop": true, " Stop. ": true, "arrêt": true, "ARRÊT": true, "Unsubscribe": true, "parar": true,
		"stopp": true, "please stop": false, "stop it": false, "": false, "start": false, "halt": true,
	} {
		if _, got := IsStopWord(text, []string{"HALT"}); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
	if !IsStartWord(" start ") || IsStartWord("restart") {
		t.Error("START")
	}
}

func TestQuietUntil(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	night := &QuietHours{From: "21:00", To: "08:00"}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, paris)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		now, until string
		quiet      bool
	}{
		{"2026-11-28 22:30", "2026-11-29 08:00", true},
		{"2026-11-28 21:00", "2026-11-29 08:00", true},
		{"2026-11-29 07:59", "2026-11-29 08:00", true},
		{"2026-11-29 08:00", "", false},
		{"2026-11-29 12:00", "", false},
		{"2026-03-29 01:30", "2026-03-29 08:00", true}, // the night clocks go forward
	} {
		until, quiet := QuietUntil(at(c.now).UTC(), paris, night)
		if quiet != c.quiet || (quiet && !until.Equal(at(c.until))) {
			t.Errorf("%s: %v %v", c.now, until, quiet)
		}
	}
	day := &QuietHours{From: "12:00", To: "14:00"}
	if u, q := QuietUntil(at("2026-11-28 13:00"), paris, day); !q || !u.Equal(at("2026-11-28 14:00")) {
		t.Errorf("lunch: %v %v", u, q)
	}
	if _, q := QuietUntil(at("2026-11-28 15:00"), paris, day); q {
		t.Error("after lunch")
	}
	if _, q := QuietUntil(at("2026-11-28 22:00"), paris, nil); q {
		t.Error("no quiet hours")
	}
	for _, bad := range []QuietHours{{"24:00", "08:00"}, {"9:5", "08:00"}, {"08:00", "08:00"}, {"", "01:00"}} {
		if bad.Check() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestScheduledStatus(t *testing.T) {
	e := OutboxEntry{}
	e.SetStatus(MsgScheduled, time.Unix(1, 0))
	if e.Final() {
		t.Fatal("scheduled is not final")
	}
	if !e.SetStatus(MsgQueued, time.Unix(2, 0)) || e.Final() || len(e.History) != 2 {
		t.Fatalf("scheduled → queued: %+v", e)
	}
	c := OutboxEntry{}
	c.SetStatus(MsgScheduled, time.Unix(1, 0))
	if !c.SetStatus(MsgCancelled, time.Unix(2, 0)) || !c.Final() || c.SetStatus(MsgQueued, time.Unix(3, 0)) {
		t.Fatalf("cancelled: %+v", c)
	}
}

// An event's time has three digits of milliseconds on the wire, always, and reads back.
func TestEventTimeOnTheWire(t *testing.T) {
	for at, want := range map[time.Time]string{
		time.Date(2026, 3, 1, 9, 31, 0, 0, time.UTC):                              `"2026-03-01T09:31:00.000Z"`,
		time.Date(2026, 3, 1, 9, 31, 0, 670_123_456, time.FixedZone("CET", 3600)): `"2026-03-01T08:31:00.670Z"`,
	} {
		b, err := EventTime(at).MarshalJSON()
		if err != nil || string(b) != want {
			t.Fatalf("%v: %s %v, want %s", at, b, err, want)
		}
		var back EventTime
		if err := back.UnmarshalJSON(b); err != nil || !time.Time(back).Equal(at.Truncate(time.Millisecond)) {
			t.Fatalf("%s read back as %v (%v)", b, time.Time(back), err)
		}
	}
}
