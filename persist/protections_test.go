package persist

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// The protection records are per (session, phone): another phone of the same session, or the
// same phone on another session, sees none of them; counts and first contacts land together;
// a reply clears the mark; deleting a session removes its records only.
func TestProtectionsPerSessionAndPhone(t *testing.T) {
	ctx := context.Background()
	p := NewProtections(NewMemory())
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := domain.DayOf(now)

	if _, ok, err := p.GetProtections("s1", "111"); ok || err != nil {
		t.Fatalf("nothing yet: %v %v", ok, err)
	}
	pr := domain.Protections{SessionID: "s1", Phone: "111", LinkedAt: domain.MillisOf(now), Day: day, Sends: 2, NewContacts: 1}
	if err := p.CountSends(ctx, pr, []string{"900"}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := p.GetProtections("s1", "111")
	if !ok || err != nil || got != pr {
		t.Fatalf("read back %+v %v %v, want %+v", got, ok, err, pr)
	}
	if c, _ := p.Contact("s1", "111", "900"); c.SentDay != day || !c.Known() {
		t.Fatalf("first contact not in the book: %+v", c)
	}
	// A later count does not move a contact's first day.
	pr.Day, pr.Sends = day+1, 1
	if err := p.CountSends(ctx, pr, []string{"900"}); err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Contact("s1", "111", "900"); c.SentDay != day {
		t.Fatalf("first day moved: %+v", c)
	}
	for _, other := range [][2]string{{"s1", "222"}, {"s2", "111"}} {
		if _, ok, _ := p.GetProtections(other[0], other[1]); ok {
			t.Fatalf("%v sees s1/111's protections", other)
		}
		if c, _ := p.Contact(other[0], other[1], "900"); c.Known() {
			t.Fatalf("%v knows s1/111's contact", other)
		}
	}

	// Marks: listed per phone, cleared by a reply (which the book keeps).
	m := domain.RecipientMark{To: "901", Code: "recipient_not_reachable", Until: domain.MillisOf(time.Now().Add(time.Hour))}
	if err := p.PutMark(ctx, "s1", "111", m, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.PutMark(ctx, "s1", "222", domain.RecipientMark{To: "902", Until: m.Until}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ms, err := p.Marks("s1", "111"); err != nil || len(ms) != 1 || ms[0] != m {
		t.Fatalf("marks of s1/111: %v %v", ms, err)
	}
	c, err := p.Wrote(ctx, "s1", "111", "901", now, "77701", "Ana")
	if err != nil || c.Wrote != domain.MillisOf(now) || c.LastIn != domain.MillisOf(now) || c.LID != "77701" || c.Name != "Ana" {
		t.Fatalf("wrote: %+v %v", c, err)
	}
	if ms, _ := p.Marks("s1", "111"); len(ms) != 0 {
		t.Fatalf("a reply left the mark: %v", ms)
	}
	if c, _ := p.Wrote(ctx, "s1", "111", "901", now.Add(time.Hour), "", ""); c.Wrote != domain.MillisOf(now) ||
		c.LastIn != domain.MillisOf(now.Add(time.Hour)) || c.LID != "77701" || c.First != domain.MillisOf(now) {
		t.Fatalf("a second reply moved the first, or not the last: %+v", c)
	}
	// Written to: the last time and the LID; then the book in number order, a page at a time.
	if err := p.Sent(ctx, "s1", "111", now.Add(2*time.Hour), []domain.NumberCheck{{Phone: "901"}, {Phone: "905", LID: "77705"}}); err != nil {
		t.Fatal(err)
	}
	page, err := p.Book("s1", "111", "", 2)
	if err != nil || len(page) != 2 || page[0].Number != "900" || page[1].Number != "901" || page[1].LastOut != domain.MillisOf(now.Add(2*time.Hour)) {
		t.Fatalf("book page 1: %+v %v", page, err)
	}
	page, err = p.Book("s1", "111", "901", 2)
	if err != nil || len(page) != 1 || page[0].Number != "905" || page[0].LID != "77705" || page[0].First != domain.MillisOf(now.Add(2*time.Hour)) {
		t.Fatalf("book page 2: %+v %v", page, err)
	}

	// A mark lives until its end.
	short := domain.RecipientMark{To: "903", Until: domain.MillisOf(time.Now().Add(50 * time.Millisecond))}
	if err := p.PutMark(ctx, "s1", "111", short, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the mark to expire", func() bool {
		ms, _ := p.Marks("s1", "111")
		return len(ms) == 0
	})

	if err := p.PutProtections(ctx, domain.Protections{SessionID: "s2", Phone: "111", Day: day}); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.GetProtections("s1", "111"); ok {
		t.Fatal("s1's protections survived its deletion")
	}
	if c, _ := p.Contact("s1", "111", "900"); c.Known() {
		t.Fatal("s1's book survived its deletion")
	}
	if ms, _ := p.Marks("s1", "222"); len(ms) != 0 {
		t.Fatal("s1's marks survived its deletion")
	}
	if _, ok, _ := p.GetProtections("s2", "111"); !ok {
		t.Fatal("deleting s1 removed s2's records")
	}
}
