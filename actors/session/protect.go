package session

import (
	"context"
	"maps"
	"time"

	"github.com/gateway/gateway/domain"
)

// The protections of the linked phone (DESIGN.md section 14): what the network holds against
// the account (a timelock, a ban's end), today's counts, the link time the new-contact ramp
// counts from, and the recipients the network refused. They are records keyed by (session,
// phone), written when they change and read back when the actor starts, so a restart or a
// move to another node restores every one of them.

// Records keeps the protections of each linked phone (persist.Protections).
type Records interface {
	// GetProtections reads a phone's protections on a session (ok false: never linked).
	GetProtections(sessionID, phone string) (domain.Protections, bool, error)
	PutProtections(ctx context.Context, p domain.Protections) error
	// CountSends writes the protections with today's counts and the numbers written to for
	// the first time, in one commit.
	CountSends(ctx context.Context, p domain.Protections, firsts []string) error
	// Contact is what the phone's contact book knows of a number (zero: nothing).
	Contact(sessionID, phone, number string) (domain.Contact, error)
	// Wrote records that a number wrote to the phone (with the LID and profile name the network
	// gave) and clears its mark.
	Wrote(ctx context.Context, sessionID, phone, number string, at time.Time, lid, name string) (domain.Contact, error)
	// Sent records that the phone wrote to numbers (with the LIDs the network addressed them by).
	Sent(ctx context.Context, sessionID, phone string, at time.Time, sent []domain.NumberCheck) error
	PutMark(ctx context.Context, sessionID, phone string, m domain.RecipientMark, now time.Time) error
	// Marks lists the phone's recipient marks in force.
	Marks(sessionID, phone string) ([]domain.RecipientMark, error)
}

// Half rate (DESIGN.md section 14).
const (
	// slowFor is how long a session runs at half rate after a ban or too many refusals.
	slowFor = 24 * time.Hour
	// refusalShare: half rate when over 1 in 10 of the last hour's sends were refused...
	refusalShare = 10
	// refusalMinSends: ...out of at least this many.
	refusalMinSends = 20
)

// loadPhone makes phone's protections the ones in force, read from the records; a phone never
// linked to the session starts anew (linked at linkedAt).
func (s *Session) loadPhone(phone string, linkedAt time.Time) {
	if phone == "" || phone == s.prot.Phone {
		return
	}
	// Nothing is sent from a phone whose protections could not be read (pick tries again).
	pr, ok, err := s.deps.Records.GetProtections(s.st.ID, phone)
	if err != nil {
		s.deps.Log.Error("session: read protections", "session_id", s.st.ID, "err", err)
		return
	}
	marks, err := s.deps.Records.Marks(s.st.ID, phone)
	if err != nil {
		s.deps.Log.Error("session: read recipient marks", "session_id", s.st.ID, "err", err)
		return
	}
	if !ok {
		pr = domain.Protections{SessionID: s.st.ID, Phone: phone, LinkedAt: domain.MillisOf(linkedAt)}
		if err := s.deps.Records.PutProtections(context.Background(), pr); err != nil {
			s.deps.Log.Error("session: save protections", "session_id", s.st.ID, "err", err)
			return
		}
	}
	s.prot = pr
	s.marks = nil
	if len(marks) > 0 {
		s.marks = make(map[string]time.Time, len(marks))
		for _, m := range marks {
			s.marks[m.To] = m.Until.Time()
		}
	}
	s.q.holds = nil
	s.st.TimelockUntil = pr.TimelockUntil.Time()
	if pr.TimelockUntil == 0 {
		s.st.TimelockUntil = time.Time{}
	}
	s.st.Unreachable = s.marks
	s.stir()
}

// saveProtections writes the protections in force.
func (s *Session) saveProtections() {
	if s.prot.Phone == "" {
		return
	}
	if err := s.deps.Records.PutProtections(context.Background(), s.prot); err != nil {
		s.deps.Log.Error("session: save protections", "session_id", s.st.ID, "err", err)
	}
}

// pacingAt is the pacing in force at now: the session's, halved while it is slowed down.
func (s *Session) pacingAt(now time.Time) domain.Pacing {
	if s.prot.SlowUntil != 0 && now.Before(s.prot.SlowUntil.Time()) {
		return s.q.pacing.Half()
	}
	return s.q.pacing
}

// linkedDays is the day of the linked phone's life on the session (0: the UTC day it was
// linked), which the new-contact ramp follows.
func (s *Session) linkedDays(now time.Time) int {
	if s.prot.LinkedAt == 0 {
		return 0
	}
	return max(domain.DayOf(now)-domain.DayOf(s.prot.LinkedAt.Time()), 0)
}

func (s *Session) timelockActive(now time.Time) bool {
	return s.prot.TimelockUntil != 0 && now.Before(s.prot.TimelockUntil.Time())
}

// setTimelock records the network's account-wide timelock (zero until: lifted).
func (s *Session) setTimelock(until time.Time) {
	at := domain.MillisOf(until)
	if until.IsZero() {
		at = 0
	}
	if s.prot.TimelockUntil == at {
		return
	}
	s.prot.TimelockUntil = at
	s.saveProtections()
	s.st.TimelockUntil = until
	s.stir()
	if err := s.save(); err != nil {
		s.deps.Log.Error("session: save snapshot", "session_id", s.st.ID, "err", err)
	}
	s.publish()
	s.statusEvent()
}

// expireTimelock clears a timelock whose end passed (the view stops showing it).
func (s *Session) expireTimelock(now time.Time) {
	if s.prot.TimelockUntil != 0 && !now.Before(s.prot.TimelockUntil.Time()) {
		s.setTimelock(time.Time{})
	}
}

// slowDown puts the session at half rate for a day, with a session.warning saying why.
func (s *Session) slowDown(now time.Time, reason string) {
	until := now.Add(slowFor)
	if s.prot.SlowUntil != 0 && !s.prot.SlowUntil.Time().Before(until) {
		return
	}
	s.prot.SlowUntil, s.prot.SlowReason = domain.MillisOf(until), reason
	s.saveProtections()
	s.deps.Log.Warn("session slowed to half rate", "session_id", s.st.ID, "reason", reason, "until", until)
	if s.deps.Events != nil {
		s.deps.Events.SessionWarning(s.st, reason, until)
	}
	s.stir()
}

// countAnswers records the network's answers for the refusal rate: over 10 % refused out of at
// least 20 in a rolling hour slows the session down.
func (s *Session) countAnswers(now time.Time, answers, refused int) {
	w := &s.refusals
	w.add(now, answers, refused)
	if sent, ref := w.sum(now); sent >= refusalMinSends && ref*refusalShare > sent {
		s.slowDown(now, domain.WarnRefusals)
		*w = refusalWindow{}
	}
}

// refusalWindow counts the network's answers and refusals of the last 60 minutes, by minute.
type refusalWindow struct {
	minute  [60]int64
	answers [60]int
	refused [60]int
}

func (w *refusalWindow) add(now time.Time, answers, refused int) {
	m := now.Unix() / 60
	i := m % 60
	if w.minute[i] != m {
		w.minute[i], w.answers[i], w.refused[i] = m, 0, 0
	}
	w.answers[i] += answers
	w.refused[i] += refused
}

func (w *refusalWindow) sum(now time.Time) (answers, refused int) {
	m := now.Unix() / 60
	for i := range w.minute {
		if w.minute[i] > m-60 && w.minute[i] <= m {
			answers += w.answers[i]
			refused += w.refused[i]
		}
	}
	return answers, refused
}

// marked tells whether messages to a recipient fail at once (the network refused it twice).
func (s *Session) marked(to string, now time.Time) bool {
	until, ok := s.marks[to]
	return ok && now.Before(until)
}

// mark records that the network refused a recipient twice: its messages fail at once for a
// day (the queued ones now, new ones at accept), unless it writes to the phone.
func (s *Session) mark(to string, now time.Time) {
	until := now.Add(domain.RecipientMarkTTL)
	m := domain.RecipientMark{To: to, Code: domain.ErrRecipientNotReachable.Code, Until: domain.MillisOf(until)}
	if err := s.deps.Records.PutMark(context.Background(), s.st.ID, s.prot.Phone, m, now); err != nil {
		s.deps.Log.Error("session: save recipient mark", "session_id", s.st.ID, "err", err)
	}
	s.setMarks(func(ms map[string]time.Time) { ms[to] = until })
	s.failWhere(func(e *domain.OutboxEntry) error { return s.mustFail(e, now) })
	s.publish()
}

// setMarks changes the marks copy-on-write (the published view's map never changes), and drops
// the ones past their end.
func (s *Session) setMarks(change func(map[string]time.Time)) {
	next := make(map[string]time.Time, len(s.marks)+1)
	maps.Copy(next, s.marks)
	change(next)
	now := s.deps.Clock.Now()
	maps.DeleteFunc(next, func(_ string, until time.Time) bool { return !now.Before(until) })
	if len(next) == 0 {
		next = nil
	}
	s.marks = next
	s.st.Unreachable = next
}

// wrote records that someone wrote to the phone: replies to them go out during a timelock,
// they are no longer a new contact, and their mark (if any) is cleared; the contact book keeps
// their LID and name.
func (s *Session) wrote(from string, at time.Time, lid, name string) {
	if from == "" || s.prot.Phone == "" {
		return
	}
	if _, err := s.deps.Records.Wrote(context.Background(), s.st.ID, s.prot.Phone, from, at, lid, name); err != nil {
		s.deps.Log.Error("session: record a contact who wrote", "session_id", s.st.ID, "err", err)
	}
	if _, ok := s.marks[from]; ok {
		s.setMarks(func(ms map[string]time.Time) { delete(ms, from) })
		s.publish()
	}
	delete(s.q.holds, from)
	s.stir()
}

// bookSent records in the contact book that the phone wrote to numbers (when last, and their
// LIDs): at most once an hour per number (the book keeps the hour), so a busy session does not
// write the book for every message.
func (s *Session) bookSent(now time.Time, sent []domain.NumberCheck) {
	if s.prot.Phone == "" || len(sent) == 0 {
		return
	}
	hour := now.Unix() / 3600
	if s.booked == nil || len(s.booked) > bookedMax {
		s.booked = map[string]int64{}
	}
	due := sent[:0:0]
	for _, n := range sent {
		if s.booked[n.Phone] != hour {
			due = append(due, n)
		}
	}
	if len(due) == 0 {
		return
	}
	if err := s.deps.Records.Sent(context.Background(), s.st.ID, s.prot.Phone, now, due); err != nil {
		s.deps.Log.Warn("session: contact book", "session_id", s.st.ID, "err", err)
		return
	}
	for _, n := range due {
		s.booked[n.Phone] = hour
	}
}

// bookedMax bounds the numbers a session remembers having booked this hour (then it starts
// again: a few numbers are written once more).
const bookedMax = 10_000
