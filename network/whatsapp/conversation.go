package whatsapp

// Conversations (DESIGN.md section 16) as WhatsApp encodes them, read in whatsmeow's source
// (send.go's BuildMessageKey, BuildReaction, BuildEdit, BuildRevoke; msgsecret.go's poll
// creation and vote encryption; group.go) and mapped as mautrix-whatsapp maps them
// (pkg/connector/handlematrix.go, pkg/msgconv): a reply carries a ContextInfo naming the quoted
// message (StanzaID, its sender as Participant, the quoted content); a reaction, an edit and a
// revoke carry the target's MessageKey (FromMe, the chat as RemoteJID, the sender as
// Participant in groups); a poll carries a random MessageSecret, which whatsmeow keeps so that
// votes (encrypted with it) can be decrypted; typing is a chat state (composing, or recording
// before a voice note).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// groupJID parses a group id (<digits>@g.us, or <digits>-<digits>@g.us for older groups).
func groupJID(id string) (types.JID, error) {
	j, err := types.ParseJID(id)
	if err != nil || j.Server != types.GroupServer || j.User == "" {
		return types.JID{}, fmt.Errorf("whatsapp: %q is not a group id: %w", id, domain.ErrGroupNotFound)
	}
	return j, nil
}

// ownJIDs are the device's account as a phone-number JID and as a LID.
func ownJIDs(wa *whatsmeow.Client) (pn, lid types.JID) {
	if wa.Store.ID != nil {
		pn = wa.Store.ID.ToNonAD()
	}
	return pn, wa.Store.GetLID().ToNonAD()
}

// senderJID is the JID of who sent ref in a chat addressed as chat: the device's own account
// (FromMe) or the contact, by LID in LID-addressed chats when its LID is known.
func senderJID(wa *whatsmeow.Client, chat types.JID, ref domain.MessageRef) types.JID {
	pn, lid := ownJIDs(wa)
	if ref.FromMe {
		if (chat.Server == types.HiddenUserServer || chat.Server == types.GroupServer) && !lid.IsEmpty() {
			return lid
		}
		return pn
	}
	if ref.FromLID != "" && chat.Server != types.DefaultUserServer {
		return types.NewJID(ref.FromLID, types.HiddenUserServer)
	}
	if ref.From != "" {
		return types.NewJID(ref.From, types.DefaultUserServer)
	}
	if ref.FromLID != "" {
		return types.NewJID(ref.FromLID, types.HiddenUserServer)
	}
	return types.EmptyJID
}

// replyContext is the ContextInfo of a reply quoting ref (mautrix's generateContextInfo, with
// the quoted text: WhatsApp shows it even when the recipient no longer has the message).
func replyContext(wa *whatsmeow.Client, chat types.JID, ref domain.MessageRef) *waE2E.ContextInfo {
	ci := &waE2E.ContextInfo{
		StanzaID:      proto.String(ref.ID),
		QuotedMessage: &waE2E.Message{Conversation: proto.String(ref.Text)},
		QuotedType:    waE2E.ContextInfo_EXPLICIT.Enum(),
	}
	if s := senderJID(wa, chat, ref); !s.IsEmpty() {
		ci.Participant = proto.String(s.String())
	}
	return ci
}

// withContext sets ci on the message's content (a plain text becomes an extended text, which
// is the one that can carry it).
func withContext(msg *waE2E.Message, ci *waE2E.ContextInfo) *waE2E.Message {
	if msg.Conversation != nil {
		return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: msg.Conversation, ContextInfo: ci}}
	}
	if f := contextField(msg); f != nil {
		*f = ci
	}
	return msg
}

// contextOf is the ContextInfo a received message's content carries (nil: none).
func contextOf(m *waE2E.Message) *waE2E.ContextInfo {
	if f := contextField(m); f != nil {
		return *f
	}
	return nil
}

// contextField is where a message's content keeps its ContextInfo (nil: content of a kind
// that has none, or no content).
func contextField(m *waE2E.Message) **waE2E.ContextInfo {
	switch {
	case m.ExtendedTextMessage != nil:
		return &m.ExtendedTextMessage.ContextInfo
	case m.ImageMessage != nil:
		return &m.ImageMessage.ContextInfo
	case m.VideoMessage != nil:
		return &m.VideoMessage.ContextInfo
	case m.AudioMessage != nil:
		return &m.AudioMessage.ContextInfo
	case m.DocumentMessage != nil:
		return &m.DocumentMessage.ContextInfo
	case m.GetDocumentWithCaptionMessage().GetMessage().GetDocumentMessage() != nil:
		return &m.DocumentWithCaptionMessage.Message.DocumentMessage.ContextInfo
	case m.StickerMessage != nil:
		return &m.StickerMessage.ContextInfo
	case m.LocationMessage != nil:
		return &m.LocationMessage.ContextInfo
	case m.ContactMessage != nil:
		return &m.ContactMessage.ContextInfo
	case m.PollCreationMessage != nil:
		return &m.PollCreationMessage.ContextInfo
	case m.PollCreationMessageV3 != nil:
		return &m.PollCreationMessageV3.ContextInfo
	}
	return nil
}

// operation builds a reaction, an edit or a revoke of m.Target in chat.
func operation(ctx context.Context, wa *whatsmeow.Client, chat types.JID, m domain.Message, now time.Time) (*waE2E.Message, error) {
	if m.Target == nil || m.Target.ID == "" {
		return nil, fmt.Errorf("whatsapp: %s without the message it is about: %w", m.Kind, network.ErrUnsupported)
	}
	t := *m.Target
	switch m.Kind {
	case domain.KindReaction:
		msg := wa.BuildReaction(chat, senderJID(wa, chat, t), t.ID, m.Emoji)
		msg.ReactionMessage.SenderTimestampMS = proto.Int64(now.UnixMilli())
		return msg, nil
	case domain.KindEdit:
		if !t.FromMe {
			return nil, fmt.Errorf("whatsapp: only the session's own messages can be edited: %w", network.ErrUnsupported)
		}
		content, err := buildMessage(ctx, nil, domain.Message{Kind: domain.KindText, Text: m.Text}, now)
		if err != nil {
			return nil, err
		}
		msg := wa.BuildEdit(chat, t.ID, content)
		msg.EditedMessage.Message.ProtocolMessage.TimestampMS = proto.Int64(now.UnixMilli())
		return msg, nil
	default: // revoke
		if !t.FromMe {
			return nil, fmt.Errorf("whatsapp: only the session's own messages can be revoked: %w", network.ErrUnsupported)
		}
		return wa.BuildRevoke(chat, types.EmptyJID, t.ID), nil
	}
}

// pollMessage is a poll: whatsmeow's BuildPollCreation (with its random message secret, which
// SendMessage keeps in the device store for the votes); at most one choice unless m.Multiple.
func pollMessage(wa *whatsmeow.Client, m domain.Message) (*waE2E.Message, error) {
	if m.Question == "" || len(m.Options) < domain.PollMinOptions || len(m.Options) > domain.PollMaxOptions {
		return nil, fmt.Errorf("whatsapp: a poll needs a question and %d to %d options: %w",
			domain.PollMinOptions, domain.PollMaxOptions, network.ErrUnsupported)
	}
	selectable := 1
	if m.Multiple {
		selectable = 0 // any number
	}
	return wa.BuildPollCreation(m.Question, m.Options, selectable), nil
}

// typing shows the recipient "typing…" (or "recording…" before a voice note) for
// network.TypingFor(m), then stops it: the message follows at once.
func typing(ctx context.Context, wa *whatsmeow.Client, to types.JID, m domain.Message) error {
	media := types.ChatPresenceMediaText
	if m.Kind == domain.KindAudio && m.PTT {
		media = types.ChatPresenceMediaAudio
	}
	if err := wa.SendChatPresence(ctx, to, types.ChatPresenceComposing, media); err != nil {
		return fmt.Errorf("whatsapp: typing: %w", classifyError(err))
	}
	t := time.NewTimer(network.TypingFor(m))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	_ = wa.SendChatPresence(ctx, to, types.ChatPresencePaused, "")
	return nil
}

// Lookup asks the network about numbers in one query (answers cached per number, with LIDs).
func (c *client) Lookup(ctx context.Context, phones []string) ([]domain.NumberCheck, error) {
	out := make([]domain.NumberCheck, len(phones))
	var ask []string
	for i, p := range phones {
		digits, err := phoneDigits(p)
		if err != nil {
			return nil, err
		}
		out[i].Phone = digits
		if r, ok := c.lookups.get(digits, time.Now()); ok {
			out[i].OnNetwork, out[i].LID = r.in, r.lid.User
			continue
		}
		ask = append(ask, digits)
	}
	if len(ask) > 0 {
		wa, err := c.ready(ctx)
		if err != nil {
			return nil, err
		}
		found, err := c.lookupMany(ctx, wa, ask)
		if err != nil {
			return nil, err
		}
		for i := range out {
			if r, ok := found[out[i].Phone]; ok {
				out[i].OnNetwork, out[i].LID = r.in, r.lid.User
			}
		}
	}
	return out, nil
}

// MarkRead sends a read receipt for an incoming message: to the chat it was written in (the
// group, or the sender by the address it wrote from), naming its sender in a group.
func (c *client) MarkRead(ctx context.Context, ref domain.MessageRef) error {
	wa, err := c.ready(ctx)
	if err != nil {
		return err
	}
	chat := senderJID(wa, types.JID{Server: types.HiddenUserServer}, ref)
	var sender types.JID
	if ref.Group != "" {
		g, err := groupJID(ref.Group)
		if err != nil {
			return err
		}
		chat, sender = g, senderJID(wa, g, ref)
	}
	if chat.IsEmpty() {
		return fmt.Errorf("whatsapp: mark %s read: no sender: %w", ref.ID, network.ErrUnsupported)
	}
	if err := wa.MarkRead(ctx, []types.MessageID{ref.ID}, time.Now(), chat, sender); err != nil {
		return fmt.Errorf("whatsapp: mark %s read: %w", ref.ID, classifyError(err))
	}
	return nil
}

// groupOf maps a group's info as the device's account sees it.
func groupOf(wa *whatsmeow.Client, info *types.GroupInfo) domain.Group {
	pn, lid := ownJIDs(wa)
	g := domain.Group{ID: info.JID.String(), Name: info.Name, Participants: []domain.GroupMember{}}
	for _, p := range info.Participants {
		m := domain.GroupMember{Admin: p.IsAdmin || p.IsSuperAdmin}
		switch {
		case !p.PhoneNumber.IsEmpty():
			m.Phone = p.PhoneNumber.User
		case p.JID.Server == types.DefaultUserServer:
			m.Phone = p.JID.User
		}
		switch {
		case !p.LID.IsEmpty():
			m.LID = p.LID.User
		case p.JID.Server == types.HiddenUserServer:
			m.LID = p.JID.User
		}
		if (m.Phone != "" && m.Phone == pn.User) || (m.LID != "" && m.LID == lid.User) {
			g.Admin = m.Admin
		}
		g.Participants = append(g.Participants, m)
	}
	slices.SortFunc(g.Participants, func(a, b domain.GroupMember) int { return strings.Compare(a.Phone+a.LID, b.Phone+b.LID) })
	return g
}

// groupError maps whatsmeow's answers about a group onto the port's.
func groupError(id string, err error) error {
	switch {
	case errors.Is(err, whatsmeow.ErrGroupNotFound), errors.Is(err, whatsmeow.ErrNotInGroup),
		errors.Is(err, whatsmeow.ErrIQNotFound):
		return fmt.Errorf("whatsapp: group %s: %w: %w", id, domain.ErrGroupNotFound, err)
	case errors.Is(err, whatsmeow.ErrIQForbidden), errors.Is(err, whatsmeow.ErrIQNotAuthorized),
		errors.Is(err, whatsmeow.ErrGroupInviteLinkUnauthorized):
		return fmt.Errorf("whatsapp: group %s: %w: %w", id, domain.ErrNotGroupAdmin, err)
	}
	return fmt.Errorf("whatsapp: group %s: %w", id, classifyError(err))
}

// Groups lists the groups the account is in.
func (c *client) Groups(ctx context.Context) ([]domain.Group, error) {
	wa, err := c.ready(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := wa.GetJoinedGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: groups: %w", classifyError(err))
	}
	out := make([]domain.Group, 0, len(infos))
	for _, info := range infos {
		out = append(out, groupOf(wa, info))
	}
	slices.SortFunc(out, func(a, b domain.Group) int { return strings.Compare(a.Name+"\x00"+a.ID, b.Name+"\x00"+b.ID) })
	return out, nil
}

// memberJIDs looks participants up (cached) and refuses one not on WhatsApp; they are named by
// phone number (whatsmeow attaches their privacy tokens).
func (c *client) memberJIDs(ctx context.Context, wa *whatsmeow.Client, phones []string) ([]types.JID, error) {
	checks, err := c.Lookup(ctx, phones)
	if err != nil {
		return nil, err
	}
	out := make([]types.JID, 0, len(checks))
	for _, ch := range checks {
		if !ch.OnNetwork {
			return nil, fmt.Errorf("whatsapp: %s: %w", ch.Phone, network.ErrNotOnNetwork)
		}
		out = append(out, types.NewJID(ch.Phone, types.DefaultUserServer))
	}
	return out, nil
}

// CreateGroup makes a group with the account as its admin.
func (c *client) CreateGroup(ctx context.Context, name string, participants []string) (domain.Group, error) {
	wa, err := c.ready(ctx)
	if err != nil {
		return domain.Group{}, err
	}
	jids, err := c.memberJIDs(ctx, wa, participants)
	if err != nil {
		return domain.Group{}, err
	}
	info, err := wa.CreateGroup(ctx, whatsmeow.ReqCreateGroup{Name: name, Participants: jids})
	if err != nil {
		return domain.Group{}, fmt.Errorf("whatsapp: create group: %w", classifyError(err))
	}
	return groupOf(wa, info), nil
}

// UpdateParticipants adds and removes participants, then reads the group as it stands.
func (c *client) UpdateParticipants(ctx context.Context, id string, add, remove []string) (domain.Group, error) {
	wa, err := c.ready(ctx)
	if err != nil {
		return domain.Group{}, err
	}
	g, err := groupJID(id)
	if err != nil {
		return domain.Group{}, err
	}
	for _, change := range []struct {
		phones []string
		action whatsmeow.ParticipantChange
	}{{add, whatsmeow.ParticipantChangeAdd}, {remove, whatsmeow.ParticipantChangeRemove}} {
		if len(change.phones) == 0 {
			continue
		}
		var jids []types.JID
		if change.action == whatsmeow.ParticipantChangeAdd {
			if jids, err = c.memberJIDs(ctx, wa, change.phones); err != nil {
				return domain.Group{}, err
			}
		} else {
			for _, p := range change.phones {
				digits, err := phoneDigits(p)
				if err != nil {
					return domain.Group{}, err
				}
				jids = append(jids, types.NewJID(digits, types.DefaultUserServer))
			}
		}
		if _, err := wa.UpdateGroupParticipants(ctx, g, jids, change.action); err != nil {
			return domain.Group{}, groupError(id, err)
		}
	}
	info, err := wa.GetGroupInfo(ctx, g)
	if err != nil {
		return domain.Group{}, groupError(id, err)
	}
	return groupOf(wa, info), nil
}

// InviteLink returns the group's invite link (https://chat.whatsapp.com/...).
func (c *client) InviteLink(ctx context.Context, id string) (string, error) {
	wa, err := c.ready(ctx)
	if err != nil {
		return "", err
	}
	g, err := groupJID(id)
	if err != nil {
		return "", err
	}
	link, err := wa.GetGroupInviteLink(ctx, g, false)
	if err != nil {
		return "", groupError(id, err)
	}
	return link, nil
}

// pollVoteEvent decrypts a vote in a poll the session sent (whatsmeow's DecryptPollVote, with the
// poll's message secret kept when the poll was sent) and names the chosen options: a vote carries
// the SHA-256 of each option's name, matched against the poll's options from the outbox (the
// port's MessageSource). nil when the vote cannot be read (not our poll, an unknown secret).
func (c *client) pollVoteEvent(ctx context.Context, wa *whatsmeow.Client, e *events.Message, o network.Origin) network.Event {
	upd := e.Message.GetPollUpdateMessage()
	pollID := upd.GetPollCreationMessageKey().GetID()
	vote, err := wa.DecryptPollVote(ctx, e)
	if err != nil {
		c.log.Warn("poll vote not decrypted", "poll", pollID, "err", err)
		return nil
	}
	names, ok := c.polls.get(pollID)
	if src := c.opts.Load().Messages; !ok && src != nil {
		if poll, found := src.Message(ctx, pollID); found && poll.Kind == domain.KindPoll {
			names, ok = poll.Options, true
		}
	}
	if !ok {
		c.log.Warn("poll vote for a poll the adapter does not know (not one the session sent)", "poll", pollID)
		return nil
	}
	options := []string{}
	for _, h := range vote.GetSelectedOptions() {
		for _, name := range names {
			if sum := sha256.Sum256([]byte(name)); string(sum[:]) == string(h) {
				options = append(options, name)
			}
		}
	}
	if ts := upd.GetSenderTimestampMS(); ts > 0 {
		o.At = time.UnixMilli(ts).UTC()
	}
	return network.PollVote{Origin: o, Poll: pollID, Options: options}
}

// pollCache remembers the options of the polls a client sent lately (the outbox has them too:
// the port's MessageSource, asked when this forgot them), to name the options of their votes.
type pollCache struct {
	mu    sync.Mutex
	m     map[string][]string
	order []string
}

// pollCacheMax bounds the polls a client remembers.
const pollCacheMax = 1000

func (p *pollCache) put(id string, options []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string][]string{}
	}
	if _, ok := p.m[id]; !ok {
		p.order = append(p.order, id)
	}
	p.m[id] = options
	for len(p.order) > pollCacheMax {
		delete(p.m, p.order[0])
		p.order = p.order[1:]
	}
}

func (p *pollCache) get(id string) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.m[id]
	return o, ok
}
