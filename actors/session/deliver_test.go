package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// What the deliverer does with each network error (network.go's list): settle the message,
// hold its recipient, pause the whole queue, or back off; and until when.
func TestJudge(t *testing.T) {
	now := t0
	end := now.Add(3 * time.Hour)
	rl := &network.RetryLaterError{Err: network.ErrRateLimited, Code: 429, After: 15 * time.Minute}
	refused := &network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: 5 * time.Minute}
	notReachable := fmt.Errorf("463: %w", network.ErrNotReachable)
	for _, tc := range []struct {
		name     string
		err      error
		attempts int
		v        verdict
		until    time.Time
	}{
		{"sent", nil, 1, settle, time.Time{}},
		{"not on the network", fmt.Errorf("x: %w", network.ErrNotOnNetwork), 1, settle, time.Time{}},
		{"unsupported", network.ErrUnsupported, 1, settle, time.Time{}},
		{"unknown outcome", fmt.Errorf("ack: %w", network.ErrUnknownOutcome), 1, backoffAll, time.Time{}},
		{"unknown outcome, tenth time", network.ErrUnknownOutcome, 10, backoffAll, time.Time{}},
		{"not connected", domain.ErrNotConnected, 1, backoffAll, time.Time{}},
		{"our timeout", context.DeadlineExceeded, 1, backoffAll, time.Time{}},
		{"banned", network.ErrBanned, 1, backoffAll, time.Time{}},
		{"outdated", network.ErrOutdated, 1, backoffAll, time.Time{}},
		{"timelock with its end", &network.TimelockError{Until: end, Code: 463}, 1, timelocked, end},
		{"timelock without an end", &network.TimelockError{Code: 463}, 1, timelocked, now.Add(time.Hour)},
		{"463 for this recipient", notReachable, 1, holdTo, now.Add(notReachableRetry)},
		{"463 for this recipient again", notReachable, 2, settle, time.Time{}},
		{"rate limited", rl, 1, pauseAll, now.Add(15 * time.Minute)},
		{"rate limited, fifth time", rl, 5, pauseAll, now.Add(15 * time.Minute)},
		{"refused once", refused, 1, holdTo, now.Add(5 * time.Minute)},
		{"refused again", refused, 2, settle, time.Time{}},
		{"other", errors.New("boom"), 1, settle, time.Time{}},
	} {
		v, until := judge(tc.err, now, tc.attempts)
		if v != tc.v || !until.Equal(tc.until) {
			t.Errorf("%s: %v until %v, want %v until %v", tc.name, v, until, tc.v, tc.until)
		}
	}
	if !errors.Is(classify(notReachable), domain.ErrRecipientNotReachable) || domain.CodeOf(classify(refused)) != "network_error" {
		t.Error("classify: 463 twice is recipient_not_reachable, 479 twice a network error")
	}
}

// The gap and the per-minute cap: sends are at least the gap apart and at most PerMinute in any
// 60 s; nothing waits longer than pacing says.
func TestPacingGapAndPerMinute(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{MinGapMs: 10_000, PerMinute: 3})
	for range 5 {
		r.send("15550000001")
	}
	r.settle()
	if got := len(r.sentTo("15550000001")); got != 1 {
		t.Fatalf("at t0: %d sent, want 1", got)
	}
	r.advance(9 * time.Second)
	if got := len(r.sentTo("15550000001")); got != 1 {
		t.Fatalf("before the gap: %d sent", got)
	}
	r.advance(time.Second)
	r.advance(10 * time.Second)
	if got := len(r.sentTo("15550000001")); got != 3 {
		t.Fatalf("after two gaps: %d sent, want 3", got)
	}
	// Three in the minute: the fourth waits until the first leaves the window (t0+60 s).
	r.advance(30 * time.Second) // t0+50 s
	if got := len(r.sentTo("15550000001")); got != 3 {
		t.Fatalf("per-minute cap: %d sent at t0+50 s", got)
	}
	r.advance(10 * time.Second) // t0+60 s
	if got := len(r.sentTo("15550000001")); got != 4 {
		t.Fatalf("at t0+60 s: %d sent, want 4", got)
	}
	sends := r.client().sent()
	for i := 1; i < len(sends); i++ {
		if gap := sends[i].at.Sub(sends[i-1].at); gap < 10*time.Second {
			t.Fatalf("sends %d and %d only %v apart", i-1, i, gap)
		}
	}
}

// No pacing: a burst goes out in order, one batch at a time (the session's worker is run by
// one send goroutine at a time, though not always the same one: runq.go).
func TestUnpacedBatchesOneAtATime(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{})
	var ids []string
	for range 100 {
		ids = append(ids, r.send("15550000001"))
	}
	r.eventually("100 outcomes", func() bool { return len(r.out.all()) == 100 })
	if got := r.sentTo("15550000001"); !slices.Equal(got, ids) {
		t.Fatalf("order: %v", got)
	}
	if r.client().overlap.Load() {
		t.Fatal("two of the session's sends were under way at once")
	}
}

// The new-contact cap follows the linked phone's ramp by UTC day; known contacts and contacts
// who wrote are not new; the day's count is counted before the send.
func TestNewContactCapAndRamp(t *testing.T) {
	// Ramp: 5 on the day of the link, 7 the next day, 10 from day 2.
	r := newRig(t, "447700900001", domain.Pacing{NewContactsPerDay: 10, RampDays: 2})
	r.do(func(s *Session) { s.prot.LinkedAt = domain.MillisOf(t0) })
	r.hw.Send(r.pid, netEvent{ev: network.Incoming{Origin: network.Origin{From: "15550000099", At: t0}}})
	for i := range 7 {
		r.send(fmt.Sprint("155500001", i))
	}
	r.send("15550000099") // wrote first: not a new contact
	r.settle()
	if got := len(r.client().sent()); got != 6 {
		t.Fatalf("day 0: %d sent, want 5 new contacts and the reply", got)
	}
	if got := r.sentTo("15550000099"); len(got) != 1 {
		t.Fatalf("the reply waited behind the cap: %v", got)
	}
	pr, _, _ := r.records.GetProtections(r.id, "447700900001")
	if pr.NewContacts != 5 || pr.Sends != 6 {
		t.Fatalf("counts on record: %+v", pr)
	}
	// A second message to a contact written to today is not a new contact.
	r.send("1555000010")
	r.settle()
	if got := r.sentTo("1555000010"); len(got) != 2 {
		t.Fatalf("a known contact waited: %v", got)
	}
	// Tomorrow (day 1 of the ramp: 7): the two waiting go.
	r.advance(domain.DayStart(domain.DayOf(t0)+1).Sub(t0) - time.Second)
	if got := len(r.client().sent()); got != 7 {
		t.Fatalf("before midnight: %d sent", got)
	}
	r.advance(time.Second)
	if got := len(r.client().sent()); got != 9 {
		t.Fatalf("after midnight: %d sent, want 9", got)
	}
}

// The daily total counts replies too.
func TestDailyTotalCap(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{PerDay: 3})
	for range 5 {
		r.send("15550000001")
	}
	r.settle()
	if got := len(r.client().sent()); got != 3 {
		t.Fatalf("%d sent with a daily total of 3", got)
	}
	r.advance(domain.DayStart(domain.DayOf(t0) + 1).Sub(t0))
	if got := len(r.client().sent()); got != 5 {
		t.Fatalf("next day: %d sent, want 5", got)
	}
}

// A recipient the network refuses (463, no timelock notice) holds only its own messages: the
// others go in order; it is tried twice, then failed recipient_not_reachable and marked, and
// its later messages fail without a send; writing to the phone clears the mark.
func TestNotReachableRecipientNeverHoldsTheQueue(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{})
	const bad = "15550000463"
	r.client().script(func(m domain.Message) error {
		if m.To == bad {
			return fmt.Errorf("sim 463: %w", network.ErrNotReachable)
		}
		return nil
	})
	first := r.send(bad)
	second := r.send(bad)
	var others []string
	for i := range 9 {
		others = append(others, r.send(fmt.Sprint("1555000020", i%3)))
	}
	r.eventually("the nine delivered", func() bool {
		n := 0
		for _, id := range others {
			if o, ok := r.outcome(id); ok && o.err == nil {
				n++
			}
		}
		return n == 9
	})
	if _, ok := r.outcome(first); ok {
		t.Fatal("the refused message settled before its second try")
	}
	if got := r.sentTo(bad); len(got) != 1 {
		t.Fatalf("tries before the backoff: %v", got)
	}
	r.advance(notReachableRetry)
	o := r.waitOutcome(first)
	if !errors.Is(o.err, domain.ErrRecipientNotReachable) || o.e.Code != "recipient_not_reachable" || o.e.Attempts != 2 {
		t.Fatalf("after two tries: %+v %v", o.e, o.err)
	}
	o2 := r.waitOutcome(second)
	if o2.e.Code != "recipient_not_reachable" || o2.e.Attempts != 0 {
		t.Fatalf("the later message: %+v", o2.e)
	}
	if got := r.sentTo(bad); len(got) != 2 {
		t.Fatalf("sends to the refused recipient: %v, want 2", got)
	}
	if until, ok := r.view.get().Unreachable[bad]; !ok || !until.Equal(t0.Add(notReachableRetry).Add(domain.RecipientMarkTTL)) {
		t.Fatalf("mark in the view: %v", r.view.get().Unreachable)
	}
	if ms, _ := r.records.Marks(r.id, "447700900001"); len(ms) != 1 || ms[0].To != bad {
		t.Fatalf("mark on record: %v", ms)
	}
	third := r.send(bad)
	if o := r.waitOutcome(third); o.e.Code != "recipient_not_reachable" || len(r.sentTo(bad)) != 2 {
		t.Fatalf("a message to a marked recipient: %+v, %d sends", o.e, len(r.sentTo(bad)))
	}
	// It writes: the mark goes, its messages go again.
	r.client().script(nil)
	r.client().emit(network.Incoming{Origin: network.Origin{From: bad, At: r.clock.Now()}})
	r.eventually("the mark cleared", func() bool { return len(r.view.get().Unreachable) == 0 })
	if ms, _ := r.records.Marks(r.id, "447700900001"); len(ms) != 0 {
		t.Fatalf("mark on record after the reply: %v", ms)
	}
	fourth := r.send(bad)
	if o := r.waitOutcome(fourth); o.err != nil {
		t.Fatalf("after it wrote: %v", o.err)
	}
}

// 479 is tried twice, then failed (never re-sent forever); 429 pauses the whole queue and
// never fails a message; an unknown outcome is sent again under its id, never failed.
func TestRefusalsRateLimitAndUnknownOutcome(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{})
	tries := map[string]int{}
	r.client().script(func(m domain.Message) error {
		tries[m.ID]++
		switch {
		case m.To == "15550000479":
			return &network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: 5 * time.Minute}
		case m.To == "15550000429" && tries[m.ID] <= 2:
			return &network.RetryLaterError{Err: network.ErrRateLimited, Code: 429, After: 15 * time.Minute}
		case m.To == "15550000000" && tries[m.ID] == 1:
			return fmt.Errorf("ack lost: %w", network.ErrUnknownOutcome)
		}
		return nil
	})
	refused := r.send("15550000479")
	r.advance(5 * time.Minute)
	if o := r.waitOutcome(refused); o.e.Code != "network_error" || o.e.Attempts != 2 {
		t.Fatalf("479 twice: %+v", o.e)
	}
	r.advance(time.Hour)
	if got := r.sentTo("15550000479"); len(got) != 2 {
		t.Fatalf("479 re-sent: %v", got)
	}

	limited := r.send("15550000429")
	other := r.send("15550000001")
	r.settle()
	if _, ok := r.outcome(other); ok {
		t.Fatal("a 429 let the next message through")
	}
	r.advance(15 * time.Minute)
	r.advance(15 * time.Minute)
	if o := r.waitOutcome(limited); o.err != nil || o.e.Attempts != 3 {
		t.Fatalf("after two 429s: %+v %v", o.e, o.err)
	}
	if o := r.waitOutcome(other); o.err != nil {
		t.Fatalf("behind the 429: %v", o.err)
	}

	unknown := r.send("15550000000")
	r.settle()
	if _, ok := r.outcome(unknown); ok {
		t.Fatal("an unknown outcome was settled")
	}
	r.advance(retryFirst)
	if o := r.waitOutcome(unknown); o.err != nil || o.e.Attempts != 2 || len(r.sentTo("15550000000")) != 2 {
		t.Fatalf("unknown outcome: %+v %v", o.e, o.err)
	}
}

// An account-wide timelock holds first messages to new contacts until its end, and nothing
// else: a reply to a contact who wrote goes at once. The view shows its end.
func TestTimelockHoldsOnlyNewContacts(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{})
	end := t0.Add(2 * time.Hour)
	r.client().emit(network.Incoming{Origin: network.Origin{From: "15550000010", At: t0}})
	r.client().emit(network.Timelock{Active: true, Until: end})
	r.eventually("restrictedUntil in the view", func() bool { return r.view.get().TimelockUntil.Equal(end) })
	r.eventually("a session.status event with it", func() bool {
		r.events.mu.Lock()
		defer r.events.mu.Unlock()
		n := len(r.events.statuses)
		return n > 0 && r.events.statuses[n-1].TimelockUntil.Equal(end)
	})
	cold := r.send("15550000020")
	reply := r.send("15550000010")
	if o := r.waitOutcome(reply); o.err != nil {
		t.Fatalf("reply: %v", o.err)
	}
	r.advance(time.Hour)
	if len(r.sentTo("15550000020")) != 0 {
		t.Fatal("a first message went during the timelock")
	}
	r.advance(time.Hour)
	if o := r.waitOutcome(cold); o.err != nil {
		t.Fatalf("after the timelock: %v", o.err)
	}
	if !r.view.get().TimelockUntil.IsZero() {
		t.Fatalf("timelock still shown after its end: %v", r.view.get().TimelockUntil)
	}

	// A 463 with the notice in force (TimelockError) starts the same hold.
	r.client().script(func(m domain.Message) error {
		if r.clock.Now().Before(end.Add(3 * time.Hour)) {
			return &network.TimelockError{Until: end.Add(3 * time.Hour), Code: 463}
		}
		return nil
	})
	next := r.send("15550000030")
	r.settle()
	if !r.view.get().TimelockUntil.Equal(end.Add(3 * time.Hour)) {
		t.Fatalf("timelock from the send's error: %v", r.view.get().TimelockUntil)
	}
	r.advance(3 * time.Hour)
	if o := r.waitOutcome(next); o.err != nil || len(r.sentTo("15550000030")) != 2 {
		t.Fatalf("after the timelock from an error: %v, %d sends", o.err, len(r.sentTo("15550000030")))
	}
}

// A restart reads the protections back: the day's new-contact count, the timelock, the marks,
// and the link time of the ramp.
func TestRestartFromTheRecords(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{NewContactsPerDay: 3})
	for i := range 3 {
		r.waitOutcome(r.send(fmt.Sprint("155500003", i)))
	}
	r.client().emit(network.Timelock{Active: true, Until: t0.Add(time.Hour)})
	r.client().script(func(m domain.Message) error {
		if m.To == "15550000463" {
			return network.ErrNotReachable
		}
		return nil
	})
	r.hw.Send(r.pid, netEvent{ev: network.Incoming{Origin: network.Origin{From: "15550000463", At: t0}}}) // it wrote: sent during the timelock
	marked := r.send("15550000463")
	r.advance(notReachableRetry)
	r.waitOutcome(marked)
	r.stop()

	r.spawn()
	if until := r.view.get().TimelockUntil; !until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("timelock after the restart: %v", until)
	}
	if _, ok := r.view.get().Unreachable["15550000463"]; !ok {
		t.Fatalf("mark after the restart: %v", r.view.get().Unreachable)
	}
	r.advance(time.Hour) // the timelock ends; the cap is still reached today
	late := r.send("15550000040")
	r.settle()
	if _, ok := r.outcome(late); ok {
		t.Fatal("a fourth new contact went after the restart: the day's count was lost")
	}
	r.advance(domain.DayStart(domain.DayOf(t0) + 1).Sub(r.clock.Now()))
	if o := r.waitOutcome(late); o.err != nil {
		t.Fatalf("next day: %v", o.err)
	}
}

// The protections belong to the phone: a new phone linked to the session starts a new book and
// a new ramp; the same phone linked again keeps its own.
func TestANewPhoneStartsANewBookAndRamp(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{NewContactsPerDay: 10, RampDays: 10})
	r.do(func(s *Session) { s.prot.LinkedAt = domain.MillisOf(t0.Add(-20 * 24 * time.Hour)) })
	for i := range 4 {
		r.waitOutcome(r.send(fmt.Sprint("155500005", i)))
	}
	// Logged out, then phone B linked: day 0 of B's ramp (cap 1), and A's contacts are new.
	reply := make(chan Reply, 1)
	r.hw.Send(r.pid, &Logout{Reply: reply})
	<-reply
	r.client().pair("447700900002")
	r.waitStatus(domain.StatusConnected)
	a := r.send("1555000050") // known to A, new to B
	b := r.send("1555000051")
	r.waitOutcome(a)
	r.settle()
	if _, ok := r.outcome(b); ok {
		t.Fatal("phone B sent two new contacts on its first day (cap 1)")
	}
	pb, _, _ := r.records.GetProtections(r.id, "447700900002")
	if pb.LinkedAt != domain.MillisOf(r.clock.Now()) || pb.NewContacts != 1 {
		t.Fatalf("phone B's record: %+v", pb)
	}
	// A linked again: its ramp (day 20: 10) and book (its four contacts are known).
	r.hw.Send(r.pid, &Logout{Reply: reply})
	<-reply
	if o := r.waitOutcome(b); o.e.Code != "session_logged_out" {
		t.Fatalf("B's queued message after B's logout: %+v", o.e)
	}
	r.client().pair("447700900001")
	r.waitStatus(domain.StatusConnected)
	pa, _, _ := r.records.GetProtections(r.id, "447700900001")
	if pa.LinkedAt != domain.MillisOf(t0.Add(-20*24*time.Hour)) {
		t.Fatalf("A's link time changed: %+v", pa)
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, r.send(fmt.Sprint("155500006", i)))
	}
	r.settle()
	sent := 0
	for _, id := range ids {
		if _, ok := r.outcome(id); ok {
			sent++
		}
	}
	if sent != 6 { // A's cap 10, 4 used today
		t.Fatalf("phone A again: %d new contacts sent, want 6", sent)
	}
}

// Queued messages follow their account: a logout fails them session_logged_out (or the given
// cause), a reassignment session_reassigned, a close session_deleted; none is sent afterwards.
func TestQueueFailsWithItsAccount(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{MinGapMs: 60_000})
	r.waitOutcome(r.send("15550000001"))
	queued := []string{r.send("15550000002"), r.send("15550000003")}
	reply := make(chan Reply, 1)
	r.hw.Send(r.pid, &Logout{Cause: domain.ErrSessionReassigned, Reply: reply})
	<-reply
	for _, id := range queued {
		if o := r.waitOutcome(id); o.e.Code != "session_reassigned" || !errors.Is(o.err, domain.ErrSessionReassigned) || o.e.Status != domain.MsgFailed {
			t.Fatalf("%s after the logout: %+v", id, o.e)
		}
	}
	if r.depth() != 0 {
		t.Fatal("queue not empty")
	}

	r.client().pair("447700900001")
	r.waitStatus(domain.StatusConnected)
	r.advance(time.Minute)
	r.waitOutcome(r.send("15550000004"))
	queued = []string{r.send("15550000005"), r.send("15550000006")}
	r.settle()
	assign := make(chan Reply, 1)
	r.hw.Send(r.pid, &Assign{UserID: "u2", Reply: assign})
	<-assign
	for _, id := range queued {
		if o := r.waitOutcome(id); o.e.Code != "session_reassigned" {
			t.Fatalf("%s after the reassignment: %+v", id, o.e)
		}
	}
	// Accepted for u1 after the reassignment (a race with the accept): failed, not sent.
	late := r.send("15550000007")
	if o := r.waitOutcome(late); o.e.Code != "session_reassigned" {
		t.Fatalf("late entry: %+v", o.e)
	}

	r.hw.Send(r.pid, &Assign{UserID: "u1", Reply: assign})
	<-assign
	r.advance(time.Minute)
	r.waitOutcome(r.send("15550000008"))
	queued = []string{r.send("15550000009")}
	closed := make(chan Reply, 1)
	r.hw.Send(r.pid, &Close{Reply: closed})
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not answer")
	}
	if o, ok := r.outcome(queued[0]); !ok || o.e.Code != "session_deleted" {
		t.Fatalf("after Close: %+v (answered before the failure was reported?)", o.e)
	}
	for _, s := range r.client().sent() {
		if slices.Contains([]string{"m02", "m03", "m05", "m06", "m07", "m09"}, s.id) {
			t.Fatalf("%s was sent", s.id)
		}
	}
}

// A message accepted for one phone is never sent from another, even when the queue meets it
// after a new link (a restart in between).
func TestNeverSentFromAnotherPhone(t *testing.T) {
	r := newRig(t, "447700900002", domain.Pacing{})
	e := domain.OutboxEntry{ID: "old", UserID: "u1", From: "447700900001", Message: domain.Message{ID: "old", To: "15550000001", Kind: domain.KindText}}
	r.hw.Send(r.pid, Enqueue{Entry: e})
	if o := r.waitOutcome("old"); o.e.Code != "session_logged_out" || len(r.client().sent()) != 0 {
		t.Fatalf("an entry of another phone: %+v, %d sends", o.e, len(r.client().sent()))
	}
}

// Half rate for a day after a ban ends (and when over 10 % of an hour's sends were refused),
// with a session.warning: gaps doubled, caps halved.
func TestHalfRateAfterABanAndAfterRefusals(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{MinGapMs: 1000, PerDay: 100})
	r.client().emit(network.Disconnected{StatusReason: network.ReasonBanned, Until: t0.Add(time.Hour), Reconnecting: true})
	r.waitStatus(domain.StatusDisconnected)
	r.client().emit(network.Connected{Phone: "447700900001"})
	r.waitStatus(domain.StatusConnected)
	r.eventually("a ban_ended warning", func() bool { return len(r.events.warned()) == 1 })
	if w := r.events.warned()[0]; w.reason != domain.WarnBanEnded || !w.until.Equal(t0.Add(slowFor)) {
		t.Fatalf("warning: %+v", w)
	}
	r.send("15550000001")
	r.send("15550000001")
	r.settle()
	r.advance(1500 * time.Millisecond)
	if got := len(r.sentTo("15550000001")); got != 1 {
		t.Fatalf("half rate: %d sent 1.5 s apart with a 1 s gap doubled", got)
	}
	r.advance(500 * time.Millisecond)
	if got := len(r.sentTo("15550000001")); got != 2 {
		t.Fatalf("half rate: %d sent after 2 s", got)
	}
	if p, _, _ := r.records.GetProtections(r.id, "447700900001"); p.SlowReason != domain.WarnBanEnded || p.Banned {
		t.Fatalf("record: %+v", p)
	}
	if got := (domain.Pacing{MinGapMs: 1000, PerDay: 100, PerMinute: 1, NewContactsPerDay: 3}).Half(); got.MinGapMs != 2000 || got.PerDay != 50 || got.PerMinute != 1 || got.NewContactsPerDay != 1 {
		t.Fatalf("Half: %+v", got)
	}

	// Refusals: 3 of 20 answers in the hour refused (over 10 %).
	r2 := newRig(t, "447700900001", domain.Pacing{})
	r2.client().script(func(m domain.Message) error {
		if m.To == "15550000479" {
			return &network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: time.Second}
		}
		return nil
	})
	for i := range 17 {
		r2.waitOutcome(r2.send(fmt.Sprint("155500007", i%10)))
	}
	r2.send("15550000479")
	r2.advance(time.Second) // 2 refusals: 2 of 19
	if len(r2.events.warned()) != 0 {
		t.Fatal("warned under 20 answers")
	}
	r2.send("15550000479")
	r2.advance(time.Second) // 4 of 21
	r2.eventually("a refusals warning", func() bool { return len(r2.events.warned()) == 1 })
	if w := r2.events.warned()[0]; w.reason != domain.WarnRefusals {
		t.Fatalf("warning: %+v", w)
	}
}
