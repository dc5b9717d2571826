package domain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The store loop, both ways (DESIGN.md section 18): an order message that asks the customer to
// confirm and writes the answer back to the order, delayed and abandoned-checkout messages, the
// suppression list of customers who said STOP, messages sent later, and quiet hours.

// Send-later statuses (DESIGN.md section 18). A message accepted with a sendAt ahead is
// scheduled: durable in the outbox with its allowance reserved, handed to its session's queue
// at that time (it reads as queued from then on). One cancelled before it went is cancelled.
const (
	MsgScheduled MessageStatus = "scheduled"
)

// MaxSendAhead bounds sendAt: at most this far ahead of the accept.
const MaxSendAhead = 90 * 24 * time.Hour

// Codes a scheduled message is cancelled with before it went (OutboxEntry.Code when its
// status is cancelled).
const (
	// SkipOrderCancelled: the order was cancelled before its delayed message was due.
	SkipOrderCancelled = "order_cancelled"
	// SkipOrderPlaced: an order came from the abandoned checkout before its reminder was due.
	SkipOrderPlaced = "order_placed"
	// SkipAnswered: the customer answered before the confirmation's follow-up was due.
	SkipAnswered = "answered"
	// SkipOptedOut: the recipient opted out before the message was due.
	SkipOptedOut = "opted_out"
	// SkipCancelled: cancelled through DELETE /api/v1/messages/{id}.
	SkipCancelled = "cancelled"
)

// ErrOptedOut: the recipient is on the account's suppression list (they replied STOP).
var ErrOptedOut = E("opted_out", "the recipient opted out of your messages (they replied STOP); send with transactional: true only for a message they asked for")

// ---- confirmations ----

// Confirm is a store topic's confirmation question (PUT /api/client/templates `confirm`): the
// order message asks it with two answers, and the answer is written back to the order.
type Confirm struct {
	Question string `json:"question"`
	Yes      string `json:"yes"`
	No       string `json:"no"`
	// FollowUpAfter: one reminder this long after the question when no answer came (0: none).
	FollowUpAfter time.Duration `json:"followUpAfter"`
	// TagYes and TagNo are added to the order (Shopify type) with the answer.
	TagYes string `json:"tagYes,omitempty"`
	TagNo  string `json:"tagNo,omitempty"`
	// CancelOnNo cancels the order on the platform when the answer is no.
	CancelOnNo bool `json:"cancelOnNo,omitempty"`
}

// Confirmation defaults: what a cash-on-delivery shop asks when it leaves a field out.
const (
	DefaultConfirmQuestion = "Please confirm your order {order_number}"
	DefaultConfirmYes      = "Yes, confirm"
	DefaultConfirmNo       = "No, cancel"
	DefaultTagYes          = "cod-confirmed"
	DefaultTagNo           = "cod-cancelled"
	DefaultFollowUpAfter   = 2 * time.Hour
	// ConfirmTextMax bounds the question and each answer (a poll's own limit is 255).
	ConfirmTextMax = 255
)

// Answers of a confirmation.
const (
	AnswerYes = "yes"
	AnswerNo  = "no"
)

// AnswerOf recognises a typed answer to c: "1" or the yes answer (or its first word) is yes,
// "2" or the no answer (or its first word) is no, case-insensitive, surrounding spaces and
// trailing punctuation ignored. Anything else is not an answer.
func (c Confirm) AnswerOf(text string) (string, bool) {
	t := trimAnswer(text)
	if t == "" {
		return "", false
	}
	switch {
	case t == "1" || matchesOption(t, c.Yes, c.No):
		return AnswerYes, true
	case t == "2" || matchesOption(t, c.No, c.Yes):
		return AnswerNo, true
	}
	return "", false
}

// VoteOf recognises a poll vote: the options chosen, one of them an answer's text.
func (c Confirm) VoteOf(options []string) (string, bool) {
	if len(options) != 1 {
		return "", false // a vote taken back, or more than one choice: not an answer
	}
	switch o := strings.TrimSpace(options[0]); {
	case strings.EqualFold(o, strings.TrimSpace(c.Yes)):
		return AnswerYes, true
	case strings.EqualFold(o, strings.TrimSpace(c.No)):
		return AnswerNo, true
	}
	return "", false
}

// matchesOption: t is option, or option's first word when the other answer starts otherwise.
func matchesOption(t, option, other string) bool {
	option = trimAnswer(option)
	if option == "" {
		return false
	}
	if strings.EqualFold(t, option) {
		return true
	}
	w, ow := firstWord(option), firstWord(trimAnswer(other))
	return w != "" && !strings.EqualFold(w, ow) && strings.EqualFold(t, w)
}

func firstWord(s string) string {
	f := strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) })
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// trimAnswer drops surrounding space and trailing punctuation ("Yes!" is "Yes").
func trimAnswer(s string) string {
	return strings.TrimRightFunc(strings.TrimSpace(s), func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// Confirmation states (Confirmation.State).
const (
	ConfirmAwaiting  = "awaiting"
	ConfirmConfirmed = "confirmed"
	ConfirmCancelled = "cancelled" // the customer answered no
)

// Write-back states (Confirmation.WriteBack).
const (
	WriteBackPending = "pending" // the answer is being written to the order
	WriteBackDone    = "done"
	WriteBackFailed  = "failed" // gave up (WriteBackError says why)
	WriteBackNone    = "none"   // the store was connected without API access: nothing to write
)

// Confirmation is where one order's question stands: how it was asked, the answer, and its
// write-back to the order.
type Confirmation struct {
	State   string    `json:"state"`
	Via     string    `json:"via"` // how it was asked: poll, buttons or text ("reply 1 or 2")
	Confirm Confirm   `json:"confirm"`
	AskedAt time.Time `json:"askedAt"`
	// MessageID is the message carrying the question (a poll's votes answer it).
	MessageID  string    `json:"messageId"`
	FollowUpID string    `json:"followUpId,omitempty"`
	FollowUpAt time.Time `json:"followUpAt,omitempty"`
	Answer     string    `json:"answer,omitempty"`     // yes or no
	AnsweredBy string    `json:"answeredBy,omitempty"` // vote, button or text
	AnsweredAt time.Time `json:"answeredAt,omitempty"` // when it came
	AnswerText string    `json:"answerText,omitempty"` // what the customer chose or typed
	WriteBack  string    `json:"writeBack,omitempty"`  // WriteBack* once answered
	WriteError string    `json:"writeError,omitempty"` // the last failure
	Attempts   int       `json:"writeAttempts,omitempty"`
	WrittenAt  time.Time `json:"writtenAt,omitempty"`
}

// OrderMessage is one message sent or scheduled for an order (its store screen line, and what
// a cancellation of the order skips while it waits).
type OrderMessage struct {
	Topic     string    `json:"topic"`
	MessageID string    `json:"messageId"`
	SendAt    time.Time `json:"sendAt,omitempty"` // zero: sent at once
	// EventN is the store event's record (StoreEvent.N) that accepted it.
	EventN int64 `json:"eventN,omitempty"`
	// Skipped is the code it was cancelled with before it went (SkipOrderCancelled...).
	Skipped string `json:"skipped,omitempty"`
}

// StoreOrder is what the store loop keeps of one order: its scheduled messages and its
// confirmation. Orders that need neither have no record.
type StoreOrder struct {
	Shop      string   `json:"shop"`
	UserID    string   `json:"userId"`
	Platform  Platform `json:"platform"`
	OrderID   int64    `json:"orderId"`
	OrderName string   `json:"orderName,omitempty"`
	Phone     string   `json:"phone,omitempty"`
	// Cancelled: the platform said the order was cancelled (its cancel webhook).
	Cancelled    bool           `json:"cancelled,omitempty"`
	Messages     []OrderMessage `json:"messages,omitempty"`
	Confirmation *Confirmation  `json:"confirmation,omitempty"`
	CreatedAt    time.Time      `json:"createdAt"`
	UpdatedAt    time.Time      `json:"updatedAt"`
}

// StoreOrderRetention is how long an order's record is kept after its last change.
const StoreOrderRetention = 30 * 24 * time.Hour

// ConfirmAnswerWindow is how long after the question an answer is taken.
const ConfirmAnswerWindow = 7 * 24 * time.Hour

// ConfirmRef names the order a customer's answer is for: the answer index (by phone, and by the
// question's message id for votes).
type ConfirmRef struct {
	Shop    string    `json:"shop"`
	OrderID int64     `json:"orderId"`
	AskedAt time.Time `json:"askedAt"`
}

// StoreCheckout is an abandoned checkout waiting for its reminder: an order from the same
// checkout (or phone) before it is due cancels the reminder.
type StoreCheckout struct {
	Shop      string    `json:"shop"`
	Token     string    `json:"token"`
	Phone     string    `json:"phone,omitempty"`
	MessageID string    `json:"messageId"`
	EventN    int64     `json:"eventN,omitempty"`
	SendAt    time.Time `json:"sendAt"`
}

// Topics of the store loop beside SPEC.md's five.
const (
	// TopicCheckoutAbandoned: a checkout left without an order (Shopify type's checkouts/create
	// and checkouts/update; WooCommerce type's abandoned-cart webhook).
	TopicCheckoutAbandoned = "checkout_abandoned"
	// DefaultCheckoutAfter is how long after an abandoned checkout its reminder goes.
	DefaultCheckoutAfter = time.Hour
)

// MaxTopicDelay bounds a topic's delay and a checkout reminder's after.
const MaxTopicDelay = 30 * 24 * time.Hour

// ---- opt-outs ----

// OptOut is a phone on an account's suppression list.
type OptOut struct {
	Phone  string    `json:"phone"`
	At     time.Time `json:"at"`
	Source string    `json:"source"`         // reply (the customer wrote a stop word), api, dashboard
	Word   string    `json:"word,omitempty"` // the stop word they wrote
}

// Opt-out sources (OptOut.Source).
const (
	OptOutReply     = "reply"
	OptOutAPI       = "api"
	OptOutDashboard = "dashboard"
)

// DefaultStopWords are the words that opt a customer out, whatever the account adds.
var DefaultStopWords = []string{"STOP", "UNSUBSCRIBE", "STOPP", "PARAR", "ARRÊT"}

// StartWord takes a phone off the suppression list.
const StartWord = "START"

// Default replies to a stop word and to START.
const (
	DefaultStopReply  = "You will not receive any more messages from us. Reply START to receive them again."
	DefaultStartReply = "Welcome back: you will receive our messages again. Reply STOP to stop them."
)

// IsStopWord tells whether an incoming text is exactly one of the stop words (the defaults and
// the account's own), case-insensitive, surrounding space and punctuation ignored; it returns
// the word.
func IsStopWord(text string, own []string) (string, bool) {
	t := trimAnswer(text)
	if t == "" || len(t) > 64 {
		return "", false
	}
	for _, w := range append(slices.Clip(DefaultStopWords), own...) {
		if w = strings.TrimSpace(w); w != "" && strings.EqualFold(t, w) {
			return w, true
		}
	}
	return "", false
}

// IsStartWord tells whether an incoming text is exactly START (case-insensitive).
func IsStartWord(text string) bool { return strings.EqualFold(trimAnswer(text), StartWord) }

// ---- quiet hours ----

// QuietHours is the part of each day in which campaign and store messages wait (in the user's
// time zone): From "21:00" to To "08:00" spans midnight.
type QuietHours struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ParseClock reads "HH:MM" (24 h) as minutes after midnight.
func ParseClock(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("%w: %q is not a time of day HH:MM (00:00 to 23:59)", ErrValidation, s)
	}
	return hh*60 + mm, nil
}

// Check validates q (from and to two different times of day).
func (q QuietHours) Check() error {
	f, err := ParseClock(q.From)
	if err != nil {
		return err
	}
	t, err := ParseClock(q.To)
	if err != nil {
		return err
	}
	if f == t {
		return fmt.Errorf("%w: quietHours from and to must differ", ErrValidation)
	}
	return nil
}

// QuietUntil tells whether t falls in quiet hours q in zone loc, and when they end (the first
// moment after t that is outside them). A zero q or nil loc has none.
func QuietUntil(t time.Time, loc *time.Location, q *QuietHours) (time.Time, bool) {
	if q == nil || loc == nil {
		return time.Time{}, false
	}
	from, err1 := ParseClock(q.From)
	to, err2 := ParseClock(q.To)
	if err1 != nil || err2 != nil || from == to {
		return time.Time{}, false
	}
	lt := t.In(loc)
	day := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
	at := func(d time.Time, min int) time.Time {
		return time.Date(d.Year(), d.Month(), d.Day(), min/60, min%60, 0, 0, loc)
	}
	now := lt.Hour()*60 + lt.Minute()
	if from < to { // within one day: 01:00-06:00
		if now >= from && now < to {
			return at(day, to), true
		}
		return time.Time{}, false
	}
	// Across midnight: 21:00-08:00.
	switch {
	case now >= from:
		return at(day.AddDate(0, 0, 1), to), true
	case now < to:
		return at(day, to), true
	}
	return time.Time{}, false
}

// UserSettings are a user's store-loop settings, kept on the profile (GET and PATCH
// /api/client/me).
type UserSettings struct {
	// Timezone is an IANA zone name ("Europe/Paris"); "" is UTC.
	Timezone   string      `json:"timezone,omitempty"`
	QuietHours *QuietHours `json:"quietHours,omitempty"`
	// StopWords are the account's own stop words (beside DefaultStopWords).
	StopWords []string `json:"stopWords,omitempty"`
	// StopReply answers a stop word once ("" : DefaultStopReply); StartReply answers START.
	StopReply  string `json:"stopReply,omitempty"`
	StartReply string `json:"startReply,omitempty"`
}

// Location is the settings' time zone (UTC when unset or unknown).
func (s UserSettings) Location() *time.Location {
	if s.Timezone == "" {
		return time.UTC
	}
	if loc, err := time.LoadLocation(s.Timezone); err == nil {
		return loc
	}
	return time.UTC
}

// OrderAnswerData is the data of order.confirmed and order.cancelled: the customer's answer to
// an order's confirmation (order.cancelled: they answered no; the order is cancelled on the
// platform only with cancelOnNo).
type OrderAnswerData struct {
	Store     string    `json:"store"`
	Order     string    `json:"order"` // the order's name ("#1001")
	OrderID   int64     `json:"orderId"`
	Phone     string    `json:"phone"`
	Answer    string    `json:"answer"`         // yes or no
	Text      string    `json:"text,omitempty"` // what the customer chose or typed
	Via       string    `json:"via"`            // vote, button or text
	MessageID string    `json:"messageId"`      // the question
	At        EventTime `json:"at"`
}

// EventTime is a time as an event's data carries it: RFC 3339 UTC with milliseconds, always
// three digits (the webhooks section's Timestamp; a time.Time drops trailing zeros).
type EventTime time.Time

// MarshalJSON implements json.Marshaler.
func (t EventTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *EventTime) UnmarshalJSON(b []byte) error {
	var v time.Time
	if err := v.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = EventTime(v)
	return nil
}
