package engine

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
)

// A user's store-loop settings (DESIGN.md section 18), kept on the profile: the time zone and
// quiet hours (campaign and store messages wait them out), the account's own stop words and the
// replies to a stop word and to START.

// SettingsPatch changes some of a user's settings (nil = unchanged; an empty QuietHours value
// with both times "" removes them).
type SettingsPatch struct {
	Timezone   *string
	QuietHours **domain.QuietHours
	StopWords  *[]string
	StopReply  *string
	StartReply *string
}

// Settings limits.
const (
	maxStopWords   = 20
	maxStopWordLen = 32
	maxReplyLen    = 1000
)

// UpdateSettings applies a patch to the user's settings.
func (us *Users) UpdateSettings(ctx context.Context, uid string, p SettingsPatch) (domain.User, error) {
	us.create.Lock()
	defer us.create.Unlock()
	u, ok := us.lookup(uid)
	if !ok {
		return domain.User{}, fmt.Errorf("%w: %s", domain.ErrUserNotFound, uid)
	}
	s := u.Settings
	if p.Timezone != nil {
		tz := strings.TrimSpace(*p.Timezone)
		if tz != "" {
			if _, err := time.LoadLocation(tz); err != nil || strings.EqualFold(tz, "local") {
				return domain.User{}, fmt.Errorf("%w: timezone %q is not an IANA time zone (Europe/Paris, America/New_York, UTC)", domain.ErrValidation, tz)
			}
		}
		s.Timezone = tz
	}
	if p.QuietHours != nil {
		q := *p.QuietHours
		if q != nil && (q.From != "" || q.To != "") {
			if err := q.Check(); err != nil {
				return domain.User{}, fmt.Errorf("quietHours: %w", err)
			}
			c := domain.QuietHours{From: strings.TrimSpace(q.From), To: strings.TrimSpace(q.To)}
			s.QuietHours = &c
		} else {
			s.QuietHours = nil
		}
	}
	if p.StopWords != nil {
		var words []string
		for _, w := range *p.StopWords {
			w = strings.TrimSpace(w)
			switch {
			case w == "":
				continue
			case utf8.RuneCountInString(w) > maxStopWordLen || strings.ContainsAny(w, " \t\n"):
				return domain.User{}, fmt.Errorf("%w: a stop word is one word of at most %d characters", domain.ErrValidation, maxStopWordLen)
			case domain.IsStartWord(w):
				return domain.User{}, fmt.Errorf("%w: START takes a phone off the list; it cannot be a stop word", domain.ErrValidation)
			}
			words = append(words, w)
		}
		if len(words) > maxStopWords {
			return domain.User{}, fmt.Errorf("%w: at most %d stop words of your own", domain.ErrValidation, maxStopWords)
		}
		s.StopWords = words
	}
	for _, r := range []struct {
		in  *string
		out *string
		f   string
	}{{p.StopReply, &s.StopReply, "stopReply"}, {p.StartReply, &s.StartReply, "startReply"}} {
		if r.in == nil {
			continue
		}
		v := strings.TrimSpace(*r.in)
		if len(v) > maxReplyLen || !utf8.ValidString(v) {
			return domain.User{}, fmt.Errorf("%w: %s must be valid UTF-8 of at most %d bytes", domain.ErrValidation, r.f, maxReplyLen)
		}
		*r.out = v
	}
	u.Settings = s
	u.UpdatedAt = us.e.now().UTC()
	if err := us.e.cfg.Store.PutUser(ctx, u); err != nil {
		return domain.User{}, fmt.Errorf("%w: save settings: %w", domain.ErrUnavailable, err)
	}
	us.put(u)
	return u, nil
}

// settings are a user's settings (zero for an unknown user).
func (us *Users) settings(uid string) domain.UserSettings {
	u, _ := us.lookup(uid)
	return u.Settings
}

// QuietUntil tells whether t falls in the user's quiet hours, and when they end.
func (us *Users) QuietUntil(uid string, t time.Time) (time.Time, bool) {
	s := us.settings(uid)
	if s.QuietHours == nil {
		return time.Time{}, false
	}
	return domain.QuietUntil(t, s.Location(), s.QuietHours)
}

// afterQuiet is t, or the end of the user's quiet hours when t falls in them.
func (us *Users) afterQuiet(uid string, t time.Time) time.Time {
	if until, quiet := us.QuietUntil(uid, t); quiet {
		return until
	}
	return t
}
