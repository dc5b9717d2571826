package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

var (
	customerLID = types.NewJID("100000000000099", types.HiddenUserServer)
	customerPN  = types.NewJID("15550009999", types.DefaultUserServer)
)

func resolveCustomer(_ context.Context, lid types.JID) (types.JID, error) {
	if lid == customerLID {
		return customerPN, nil
	}
	return types.JID{}, nil
}

func TestIncomingEvent(t *testing.T) {
	at := time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)
	src := types.MessageSource{Chat: customerLID, Sender: customerLID}
	msg := func(m *waE2E.Message) *events.Message {
		return &events.Message{Info: types.MessageInfo{MessageSource: src, ID: "ABC", PushName: "Ana", Timestamp: at}, Message: m}
	}
	st := linkState{paired: true, phone: "15550001111", lids: resolveCustomer}
	ctx := context.Background()
	o := network.Origin{ID: "ABC", From: "15550009999", FromLID: "100000000000099", PushName: "Ana", At: at}
	got := incomingEvent(ctx, msg(&waE2E.Message{Conversation: proto.String("where is my order?")}), st)
	want := network.Incoming{Origin: o, Message: domain.Message{ID: "ABC", Kind: domain.KindText, Text: "where is my order?"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("text: %#v, want %#v", got, want)
	}
	doc := incomingEvent(ctx, msg(&waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
		FileName: proto.String("invoice.pdf"), Mimetype: proto.String("application/pdf"), FileLength: proto.Uint64(1234), Caption: proto.String("here"),
	}}), st).(network.Incoming).Message
	if doc.Kind != domain.KindDocument || doc.FileName != "invoice.pdf" || doc.MimeType != "application/pdf" || doc.Size != 1234 || doc.Caption != "here" {
		t.Fatalf("document: %#v", doc)
	}
	own := msg(&waE2E.Message{Conversation: proto.String("x")})
	own.Info.IsFromMe = true
	if e := incomingEvent(ctx, own, st); e != nil {
		t.Fatalf("own message reported: %#v", e)
	}

	// A reply quoting the session's own message (the participant is the device's account).
	reply := incomingEvent(ctx, msg(&waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text: proto.String("thanks"), ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("OURS1"),
			Participant: proto.String("15550001111@s.whatsapp.net"), QuotedMessage: &waE2E.Message{Conversation: proto.String("shipped")}},
	}}), st).(network.Incoming).Message
	if reply.Text != "thanks" || reply.ReplyTo == nil || *reply.ReplyTo != (domain.MessageRef{ID: "OURS1", FromMe: true, Kind: domain.KindText, Text: "shipped"}) {
		t.Fatalf("reply: %#v (quoting %#v)", reply, reply.ReplyTo)
	}
	// A reaction, an edit, a revoke.
	key := &waCommon.MessageKey{ID: proto.String("OURS1"), FromMe: proto.Bool(false), RemoteJID: proto.String(customerLID.String())}
	if r := incomingEvent(ctx, msg(&waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Key: key, Text: proto.String("🙏")}}), st); !reflect.DeepEqual(r, network.Reaction{Origin: o, Target: "OURS1", Emoji: "🙏"}) {
		t.Fatalf("reaction: %#v", r)
	}
	edit := incomingEvent(ctx, msg(&waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(), Key: key,
		EditedMessage: &waE2E.Message{Conversation: proto.String("thanks!!")}}}), st)
	if e, ok := edit.(network.Edited); !ok || e.Target != "OURS1" || e.Message.Text != "thanks!!" || e.Message.Kind != domain.KindText {
		t.Fatalf("edit: %#v", edit)
	}
	if r := incomingEvent(ctx, msg(&waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum(), Key: key}}), st); !reflect.DeepEqual(r, network.Revoked{Origin: o, Target: "OURS1"}) {
		t.Fatalf("revoke: %#v", r)
	}
	// A message in a group: the sender is the participant, the group is named.
	group := msg(&waE2E.Message{Conversation: proto.String("hi all")})
	group.Info.Chat, group.Info.IsGroup = types.NewJID("120363000000000001", types.GroupServer), true
	g, ok := incomingEvent(ctx, group, st).(network.Incoming)
	if !ok || g.Group != "120363000000000001@g.us" || g.From != "15550009999" || g.Message.Text != "hi all" {
		t.Fatalf("group message: %#v", g)
	}
	// A poll someone else made.
	poll := incomingEvent(ctx, msg(&waE2E.Message{PollCreationMessageV3: &waE2E.PollCreationMessage{Name: proto.String("Lunch?"),
		Options: []*waE2E.PollCreationMessage_Option{{OptionName: proto.String("Yes")}, {OptionName: proto.String("No")}}, SelectableOptionsCount: proto.Uint32(1)}}), st).(network.Incoming).Message
	if poll.Kind != domain.KindPoll || poll.Question != "Lunch?" || !reflect.DeepEqual(poll.Options, []string{"Yes", "No"}) || poll.Multiple {
		t.Fatalf("poll: %#v", poll)
	}
}

func TestReceiptEvent(t *testing.T) {
	at := time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)
	r := &events.Receipt{MessageSource: types.MessageSource{Chat: customerLID, Sender: customerLID},
		MessageIDs: []types.MessageID{"M1", "M2"}, Timestamp: at, Type: types.ReceiptTypeRead}
	got := receiptEvent(context.Background(), r, resolveCustomer)
	want := network.MessageReceipt{IDs: []string{"M1", "M2"}, Status: network.StatusRead, From: "15550009999", At: at}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("receipt: %#v, want %#v", got, want)
	}
	r.Type = types.ReceiptTypeRetry
	if e := receiptEvent(context.Background(), r, resolveCustomer); e != nil {
		t.Fatalf("retry receipt reported: %#v", e)
	}
}

func TestClassifySendError(t *testing.T) {
	c := &client{n: &Network{ctx: context.Background()}, timelockNotice: make(chan struct{})}
	c.timelockActive, c.timelockUntil = true, time.Now().Add(time.Hour)
	code := func(n int) error { return fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, n) }
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"463 under a timelock notice", code(463), network.ErrTimelock},
		{"479 refused", code(479), network.ErrRefused},
		{"429 rate limited", code(429), network.ErrRateLimited},
		{"ack timeout", whatsmeow.ErrMessageTimedOut, network.ErrUnknownOutcome},
		{"deadline while waiting", fmt.Errorf("x: %w", context.DeadlineExceeded), network.ErrUnknownOutcome},
		{"dropped while waiting", &whatsmeow.DisconnectedError{Action: "message send"}, network.ErrUnknownOutcome},
		{"frame never left", fmt.Errorf("failed to send message node: %w", whatsmeow.ErrNotConnected), domain.ErrNotConnected},
		{"no LID", errors.New("no LID found for 1555@s.whatsapp.net from server"), network.ErrRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.classifySendError(context.Background(), tt.err)
			if !errors.Is(got, tt.want) || !errors.Is(got, tt.err) && !errors.As(tt.err, new(*whatsmeow.DisconnectedError)) {
				t.Fatalf("classifySendError(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if tt.want != network.ErrUnknownOutcome && errors.Is(got, network.ErrUnknownOutcome) {
				t.Fatalf("definite error %v classified unknown", tt.err)
			}
		})
	}
}

// A 463 is a timelock only while a notice is in force: with none (or one that ended, or was
// lifted) it refuses this recipient, after a short wait for a notice on its way.
func TestClassify463(t *testing.T) {
	c := &client{n: &Network{ctx: context.Background()}, timelockNotice: make(chan struct{})}
	err463 := fmt.Errorf("%w 463", whatsmeow.ErrServerReturnedError)
	now := time.Now()
	cases := []struct {
		name   string
		active bool
		until  time.Time
		want   error
	}{
		{"no notice", false, time.Time{}, network.ErrNotReachable},
		{"notice ended", true, now.Add(-time.Minute), network.ErrNotReachable},
		{"notice lifted", false, now.Add(time.Hour), network.ErrNotReachable},
		{"notice in force", true, now.Add(time.Hour), network.ErrTimelock},
		{"notice with no end", true, time.Time{}, network.ErrTimelock},
	}
	for _, tc := range cases {
		c.timelockActive, c.timelockUntil = tc.active, tc.until
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		got := c.classifySendError(ctx, err463)
		cancel()
		if !errors.Is(got, tc.want) || !errors.Is(got, whatsmeow.ErrServerReturnedError) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if tc.want == network.ErrNotReachable && (errors.Is(got, network.ErrTimelock) || errors.Is(got, network.ErrUnknownOutcome)) {
			t.Fatalf("%s: %v is also a timelock or unknown", tc.name, got)
		}
		if until, ok := network.TimelockUntil(got); tc.want == network.ErrTimelock && (!ok || !until.Equal(tc.until)) {
			t.Fatalf("%s: until %v, want %v", tc.name, until, tc.until)
		}
	}

	// A notice that arrives while the 463 is being read turns it into a timelock.
	c.timelockActive, c.timelockUntil = false, time.Time{}
	ends := now.Add(time.Hour).UTC()
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.mu.Lock()
		c.timelockActive, c.timelockUntil = true, ends
		close(c.timelockNotice)
		c.timelockNotice = make(chan struct{})
		c.mu.Unlock()
	}()
	got := c.classifySendError(context.Background(), err463)
	if until, ok := network.TimelockUntil(got); !ok || !until.Equal(ends) {
		t.Fatalf("463 with the notice right behind it: %v, want a timelock until %v", got, ends)
	}
}
