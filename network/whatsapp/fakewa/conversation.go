package fakewa

// Conversations, as WhatsApp's server and phones carry them (read in whatsmeow's send.go,
// message.go, msgsecret.go, receipt.go, presence.go and group.go): the phones decrypt what linked
// devices send them (direct messages under the device's Signal session, group messages under its
// sender key) and see replies, reactions, edits, revokes and polls as the device encoded them;
// they see "typing…" (chat states) and read receipts; they write, quote, react, vote (encrypted
// with the poll's message secret), edit and revoke; the server keeps groups (create, list, info,
// participants, invite links) in whatsmeow's w:g2 IQs.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"go.mau.fi/libsignal/groups"
	"go.mau.fi/libsignal/protocol"
	"go.mau.fi/libsignal/session"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/util/gcmutil"
	"go.mau.fi/whatsmeow/util/hkdfutil"
	"google.golang.org/protobuf/proto"
)

// Received is a message a phone got from a linked device, decrypted as the phone reads it.
type Received struct {
	ID      string
	From    string         // the sending device's phone
	To      string         // the phone that got it, or the group (its id, …@g.us)
	Message *waE2E.Message // as the device encoded it
	Typing  bool           // the device showed "typing…" (a composing chat state) to it first
	At      time.Time
}

// sentByPhone is a message one of the fake's phones sent (to resolve what a reply quotes, and
// whose message an edit or a revoke is).
type sentByPhone struct {
	id, from, to, group string
	msg                 *waE2E.Message
}

// fakeGroup is a group on the fake network.
type fakeGroup struct {
	id      string // its user part (digits)
	subject string
	created time.Time
	creator string          // phone
	members map[string]bool // phone → admin
	invite  string
}

// Received lists what phone to (or, for a group id, the group) got from linked devices, in
// order.
func (s *Server) Received(to string) []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Received
	for _, r := range s.received {
		if r.To == to {
			out = append(out, r)
		}
	}
	return out
}

// Reads lists the ids of the messages from phone from that a linked device marked read.
func (s *Server) Reads(from string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads[from])
}

// noteSent records a message a phone sent.
func (s *Server) noteSent(from, to, group, id string, msg *waE2E.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phoneSent = append(s.phoneSent, sentByPhone{id: id, from: from, to: to, group: group, msg: msg})
}

// openMessage is the phones reading a message a linked device sent (its participants' enc
// nodes, and the sender-key message of a group), recorded as Received. A message the server
// refused is not delivered, so not opened.
func (c *conn) openMessage(n *node, sender types.JID) {
	id, _ := n.Attrs["id"].(string)
	to, _ := n.Attrs["to"].(types.JID)
	s := c.s
	s.mu.Lock()
	from := s.accounts[sender.User]
	if from == nil {
		s.mu.Unlock()
		return
	}
	senderAddr := types.JID{User: from.lid, Server: types.HiddenUserServer, Device: sender.Device}.SignalAddress()
	typing := s.composing[from.phone]
	delete(s.composing, from.phone)
	s.mu.Unlock()
	var skmsg []byte
	for _, child := range n.GetChildren() {
		if child.Tag == "enc" && child.Attrs["type"] == "skmsg" {
			skmsg, _ = child.Content.([]byte)
		}
	}
	parts, _ := n.GetOptionalChildByTag("participants")
	groupDone := false
	for _, p := range parts.GetChildren() {
		jid, _ := p.Attrs["jid"].(types.JID)
		enc, ok := p.GetOptionalChildByTag("enc")
		if !ok || jid.Device != 0 {
			continue // only phones read here: linked devices are the clients under test
		}
		s.mu.Lock()
		a := s.byJID(jid)
		s.mu.Unlock()
		if a == nil || a == from {
			continue
		}
		msg, err := s.decryptDM(a, senderAddr, enc)
		if err != nil {
			continue
		}
		r := Received{ID: id, From: from.phone, To: a.phone, Message: msg, Typing: typing[a.phone], At: time.Now()}
		if to.Server == types.GroupServer {
			if groupDone || msg.GetSenderKeyDistributionMessage() == nil || skmsg == nil {
				continue
			}
			gm, err := s.decryptGroup(a, to, senderAddr, msg.GetSenderKeyDistributionMessage(), skmsg)
			if err != nil {
				continue
			}
			groupDone = true
			r.To, r.Message, r.Typing = to.String(), gm, typing[to.String()]
		}
		s.mu.Lock()
		s.received = append(s.received, r)
		s.mu.Unlock()
	}
}

// decryptDM decrypts an enc node a device sent phone a, as the phone's Signal session does.
func (s *Server) decryptDM(a *account, from *protocol.SignalAddress, enc node) (*waE2E.Message, error) {
	ct, _ := enc.Content.([]byte)
	sig, unlock := s.lockSignal(a)
	defer unlock()
	ctx := context.Background()
	builder := session.NewBuilder(sig, sig, sig, sig, from, store.SignalProtobufSerializer)
	cipher := session.NewCipher(builder, from)
	var plain []byte
	var err error
	if enc.Attrs["type"] == "pkmsg" {
		var m *protocol.PreKeySignalMessage
		if m, err = protocol.NewPreKeySignalMessageFromBytes(ct, store.SignalProtobufSerializer.PreKeySignalMessage, store.SignalProtobufSerializer.SignalMessage); err == nil {
			plain, err = cipher.DecryptMessage(ctx, m)
		}
	} else {
		var m *protocol.SignalMessage
		if m, err = protocol.NewSignalMessageFromBytes(ct, store.SignalProtobufSerializer.SignalMessage); err == nil {
			plain, err = cipher.Decrypt(ctx, m)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fakewa: %s decrypts from %s: %w", a.phone, from, err)
	}
	return messageOf(plain)
}

// decryptGroup takes a device's sender key (its distribution message) and decrypts the group
// message under it, as a member's phone does.
func (s *Server) decryptGroup(a *account, group types.JID, from *protocol.SignalAddress, skd *waE2E.SenderKeyDistributionMessage, skmsg []byte) (*waE2E.Message, error) {
	sig, unlock := s.lockSignal(a)
	defer unlock()
	ctx := context.Background()
	name := protocol.NewSenderKeyName(group.String(), from)
	builder := groups.NewGroupSessionBuilder(sig, store.SignalProtobufSerializer)
	dist, err := protocol.NewSenderKeyDistributionMessageFromBytes(skd.GetAxolotlSenderKeyDistributionMessage(), store.SignalProtobufSerializer.SenderKeyDistributionMessage)
	if err != nil {
		return nil, err
	}
	if err := builder.Process(ctx, name, dist); err != nil {
		return nil, err
	}
	m, err := protocol.NewSenderKeyMessageFromBytes(skmsg, store.SignalProtobufSerializer.SenderKeyMessage)
	if err != nil {
		return nil, err
	}
	plain, err := groups.NewGroupCipher(builder, name, sig).Decrypt(ctx, m)
	if err != nil {
		return nil, err
	}
	return messageOf(plain)
}

// groupEncrypt makes a phone's group message: its sender key distribution message (to send to
// each member device in a Signal message) and the message under the sender key.
func (s *Server) groupEncrypt(sender *account, group string, plaintext []byte) (skdm, skmsg []byte, err error) {
	sig, unlock := s.lockSignal(sender)
	defer unlock()
	ctx := context.Background()
	name := protocol.NewSenderKeyName(group, types.NewJID(sender.lid, types.HiddenUserServer).SignalAddress())
	builder := groups.NewGroupSessionBuilder(sig, store.SignalProtobufSerializer)
	dist, err := builder.Create(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	ct, err := groups.NewGroupCipher(builder, name, sig).Encrypt(ctx, plaintext)
	if err != nil {
		return nil, nil, err
	}
	skdm, err = proto.Marshal(&waE2E.Message{SenderKeyDistributionMessage: &waE2E.SenderKeyDistributionMessage{
		GroupID: proto.String(group), AxolotlSenderKeyDistributionMessage: dist.Serialize()}})
	return skdm, ct.SignedSerialize(), err
}

// chatState records that a device showed a phone (or a group) "typing…".
func (c *conn) chatState(n *node) {
	jid := c.loginJID()
	to, _ := n.Attrs["to"].(types.JID)
	if jid == nil {
		return
	}
	if _, composing := n.GetOptionalChildByTag("composing"); !composing {
		return
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	key := to.String()
	if a := s.byJID(to); a != nil {
		key = a.phone
	}
	if s.composing[jid.User] == nil {
		s.composing[jid.User] = map[string]bool{}
	}
	s.composing[jid.User][key] = true
}

// readReceipt records a device marking a phone's messages read.
func (c *conn) readReceipt(n *node) {
	if t, _ := n.Attrs["type"].(string); t != "read" && t != "read-self" {
		return
	}
	chat, _ := n.Attrs["to"].(types.JID)
	participant, _ := n.Attrs["participant"].(types.JID)
	ids := []string{}
	if id, ok := n.Attrs["id"].(string); ok {
		ids = append(ids, id)
	}
	if list, ok := n.GetOptionalChildByTag("list"); ok {
		for _, item := range list.GetChildren() {
			if id, ok := item.Attrs["id"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	who := chat
	if chat.Server == types.GroupServer {
		who = participant
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.byJID(who); a != nil {
		s.reads[a.phone] = append(s.reads[a.phone], ids...)
	}
}

// Act is what a phone does in a conversation with a linked device's account (Do).
type Act struct {
	Type      string   // "text" (the default), "reaction", "poll_vote", "edit", "revoke"
	Text      string   // text, edit
	MessageID string   // what a reaction, a vote, an edit or a revoke is about
	Emoji     string   // reaction ("" takes it back)
	Options   []string // poll_vote: the options chosen
	ReplyTo   string   // text: quote this message
	Group     string   // in this group (…@g.us) instead of the direct chat
	HidePN    bool     // the sender is known by its LID only (no sender_pn)
}

// Do plays phone from acting on the account of phone to (its linked devices): writing (quoting
// a message), reacting, voting in a poll the account sent (encrypted with the poll's message
// secret), editing or revoking a message from sent; in the direct chat or in a group. It returns
// the id of the message the phone sent.
func (s *Server) Do(from, to string, act Act) (string, error) {
	s.mu.Lock()
	toAcct, fromAcct := s.accounts[to], s.account(from)
	s.mu.Unlock()
	if toAcct == nil {
		return "", fmt.Errorf("fakewa: %s is not on the network", to)
	}
	// The chat as the phone names it: the account (by LID) or the group.
	chat := types.NewJID(toAcct.lid, types.HiddenUserServer)
	if act.Group != "" {
		g, err := types.ParseJID(act.Group)
		if err != nil {
			return "", err
		}
		chat = g
	}
	key := func(id string) (*waCommon.MessageKey, error) {
		k := &waCommon.MessageKey{RemoteJID: proto.String(chat.String()), ID: proto.String(id)}
		ref, ok := s.refOf(from, id)
		if !ok {
			return nil, fmt.Errorf("fakewa: %s knows no message %s", from, id)
		}
		k.FromMe = proto.Bool(ref.fromPhone)
		if act.Group != "" && !ref.fromPhone {
			k.Participant = proto.String(ref.sender.String())
		}
		return k, nil
	}
	var msg *waE2E.Message
	switch act.Type {
	case "", "text":
		msg = &waE2E.Message{Conversation: proto.String(act.Text)}
		if act.ReplyTo != "" {
			ref, ok := s.refOf(from, act.ReplyTo)
			if !ok {
				return "", fmt.Errorf("fakewa: %s knows no message %s", from, act.ReplyTo)
			}
			participant := ref.sender
			if ref.fromPhone {
				participant = types.NewJID(fromAcct.lid, types.HiddenUserServer)
			}
			msg = &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String(act.Text), ContextInfo: &waE2E.ContextInfo{
				StanzaID: proto.String(act.ReplyTo), Participant: proto.String(participant.String()), QuotedMessage: ref.msg,
			}}}
		}
	case "reaction":
		k, err := key(act.MessageID)
		if err != nil {
			return "", err
		}
		msg = &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Key: k, Text: proto.String(act.Emoji), SenderTimestampMS: proto.Int64(time.Now().UnixMilli())}}
	case "edit", "revoke":
		k, err := key(act.MessageID)
		if err != nil {
			return "", err
		}
		if !k.GetFromMe() {
			return "", fmt.Errorf("fakewa: %s did not send %s", from, act.MessageID)
		}
		if act.Type == "revoke" {
			msg = &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum(), Key: k}}
			break
		}
		msg = &waE2E.Message{EditedMessage: &waE2E.FutureProofMessage{Message: &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
			Type: waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(), Key: k, EditedMessage: &waE2E.Message{Conversation: proto.String(act.Text)},
			TimestampMS: proto.Int64(time.Now().UnixMilli()),
		}}}}
	case "poll_vote":
		vote, err := s.pollVote(fromAcct, toAcct, chat, act)
		if err != nil {
			return "", err
		}
		msg = vote
	default:
		return "", fmt.Errorf("fakewa: unknown act %q", act.Type)
	}
	if act.Group != "" {
		return s.SendGroup(from, act.Group, msg, SendOptions{HidePN: act.HidePN})
	}
	return s.Send(from, to, msg, SendOptions{HidePN: act.HidePN})
}

// phoneRef is a message as a phone knows it: sent by the phone itself, or by a device (sender).
type phoneRef struct {
	fromPhone bool
	sender    types.JID // the device account's LID, when not the phone's
	msg       *waE2E.Message
}

// refOf finds message id as phone knows it.
func (s *Server) refOf(phone, id string) (phoneRef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.phoneSent {
		if m.id == id && m.from == phone {
			return phoneRef{fromPhone: true, msg: m.msg}, true
		}
	}
	for _, r := range s.received {
		if r.ID == id {
			if a := s.accounts[r.From]; a != nil {
				return phoneRef{sender: types.NewJID(a.lid, types.HiddenUserServer), msg: r.Message}, true
			}
		}
	}
	return phoneRef{}, false
}

// pollVote is phone voter's vote in a poll the account owner sent it: the SHA-256 of each chosen
// option's name, encrypted with a key derived from the poll's message secret (whatsmeow's
// EncryptPollVote: HKDF over the poll's id, its sender, the voter and "Poll Vote"; AES-GCM with
// the poll's id and the voter as additional data).
func (s *Server) pollVote(voter, owner *account, chat types.JID, act Act) (*waE2E.Message, error) {
	// Only who got the poll can vote: its recipient, or a member of its group.
	where := voter.phone
	if act.Group != "" {
		where = chat.String()
	}
	s.mu.Lock()
	var poll *waE2E.Message
	for _, r := range s.received {
		if r.ID == act.MessageID && r.From == owner.phone && r.To == where {
			poll = r.Message
		}
	}
	if g := s.groups[chat.User]; act.Group != "" && (g == nil || !hasMember(g, voter.phone)) {
		poll = nil
	}
	s.mu.Unlock()
	secret := poll.GetMessageContextInfo().GetMessageSecret()
	if poll.GetPollCreationMessage() == nil || len(secret) == 0 {
		return nil, fmt.Errorf("fakewa: %s got no poll %s with its secret", voter.phone, act.MessageID)
	}
	var hashes [][]byte
	for _, o := range act.Options {
		sum := sha256.Sum256([]byte(o))
		hashes = append(hashes, sum[:])
	}
	plain, err := proto.Marshal(&waE2E.PollVoteMessage{SelectedOptions: hashes})
	if err != nil {
		return nil, err
	}
	pollSender := types.NewJID(owner.lid, types.HiddenUserServer).String()
	voterJID := types.NewJID(voter.lid, types.HiddenUserServer).String()
	useCase := act.MessageID + pollSender + voterJID + "Poll Vote"
	key := hkdfutil.SHA256(secret, nil, []byte(useCase), 32)
	iv := make([]byte, 12)
	_, _ = rand.Read(iv)
	ct, err := gcmutil.Encrypt(key, iv, plain, fmt.Appendf(nil, "%s\x00%s", act.MessageID, voterJID))
	if err != nil {
		return nil, err
	}
	pollKey := &waCommon.MessageKey{RemoteJID: proto.String(chat.String()), FromMe: proto.Bool(false), ID: proto.String(act.MessageID)}
	if act.Group != "" {
		pollKey.Participant = proto.String(pollSender)
	}
	return &waE2E.Message{PollUpdateMessage: &waE2E.PollUpdateMessage{
		PollCreationMessageKey: pollKey,
		Vote:                   &waE2E.PollEncValue{EncPayload: ct, EncIV: iv},
		SenderTimestampMS:      proto.Int64(time.Now().UnixMilli()),
	}}, nil
}

// SendGroup plays phone from writing msg in group (…@g.us): every member's logged-in devices
// get it, under the phone's sender key.
func (s *Server) SendGroup(from, group string, msg *waE2E.Message, opts ...SendOptions) (string, error) {
	plain, o, err := sendArgs(msg, opts)
	if err != nil {
		return "", err
	}
	gj, err := types.ParseJID(group)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	g := s.groups[gj.User]
	if g == nil || !hasMember(g, from) {
		s.mu.Unlock()
		return "", fmt.Errorf("fakewa: %s is not in group %s", from, group)
	}
	id := s.nextMessageID()
	sender := s.account(from)
	var conns []*conn
	for p := range g.members {
		if p != from {
			conns = append(conns, s.loggedIn(p)...)
		}
	}
	s.mu.Unlock()
	s.noteSent(from, "", group, id, msg)
	for _, c := range conns {
		if err := c.deliver(sender, id, group, padded(plain), o); err != nil {
			return "", err
		}
	}
	return id, nil
}

func hasMember(g *fakeGroup, phone string) bool { _, ok := g.members[phone]; return ok }

// groupIQ answers whatsmeow's w:g2 queries: create, participating, query (info), add, remove,
// invite.
func (c *conn) groupIQ(n *node, first node) error {
	content, code, text := c.groupAnswer(n, first)
	if code != 0 {
		return c.send(node{Tag: "iq", Attrs: attrs{"from": n.Attrs["to"], "type": "error", "id": n.Attrs["id"]},
			Content: []node{{Tag: "error", Attrs: attrs{"code": strconv.Itoa(code), "text": text}}}})
	}
	return c.result(n, content)
}

// groupAnswer is a w:g2 query's answer, or its error code and text.
func (c *conn) groupAnswer(n *node, first node) ([]node, int, string) {
	jid := c.loginJID()
	if jid == nil {
		return nil, 401, "not-authorized"
	}
	to, _ := n.Attrs["to"].(types.JID)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	me := jid.User
	if to.User == "" {
		switch first.Tag {
		case "create":
			s.seq++
			g := &fakeGroup{id: fmt.Sprintf("120363%012d", s.seq), created: time.Now(), creator: me, members: map[string]bool{me: true}}
			g.subject, _ = first.Attrs["subject"].(string)
			for _, p := range first.GetChildren() {
				if p.Tag != "participant" {
					continue
				}
				pj, _ := p.Attrs["jid"].(types.JID)
				if a := s.byJID(pj); a != nil {
					g.members[a.phone] = false
				}
			}
			s.groups[g.id] = g
			return []node{s.groupNode(g)}, 0, ""
		case "participating":
			var gs []node
			ids := make([]string, 0, len(s.groups))
			for id := range s.groups {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if hasMember(s.groups[id], me) {
					gs = append(gs, s.groupNode(s.groups[id]))
				}
			}
			return []node{{Tag: "groups", Content: gs}}, 0, ""
		}
		return nil, 0, ""
	}
	g := s.groups[to.User]
	switch {
	case g == nil:
		return nil, 404, "item-not-found"
	case !hasMember(g, me):
		return nil, 403, "forbidden"
	}
	switch first.Tag {
	case "query":
		return []node{s.groupNode(g)}, 0, ""
	case "add", "remove":
		if !g.members[me] {
			return nil, 403, "forbidden"
		}
		var out []node
		for _, p := range first.GetChildren() {
			pj, _ := p.Attrs["jid"].(types.JID)
			a := s.byJID(pj)
			if a == nil {
				out = append(out, node{Tag: "participant", Attrs: attrs{"jid": pj, "error": "404"}})
				continue
			}
			if first.Tag == "add" {
				if _, in := g.members[a.phone]; !in {
					g.members[a.phone] = false
				}
			} else if a.phone != me {
				delete(g.members, a.phone)
			}
			out = append(out, node{Tag: "participant", Attrs: attrs{"jid": pj}})
		}
		return []node{{Tag: first.Tag, Content: out}}, 0, ""
	case "invite":
		if !g.members[me] {
			return nil, 401, "not-authorized"
		}
		if g.invite == "" {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			g.invite = base64.RawURLEncoding.EncodeToString(b)[:22]
		}
		return []node{{Tag: "invite", Attrs: attrs{"code": g.invite}}}, 0, ""
	}
	return nil, 0, ""
}

// groupNode is a group as the server describes it (LID-addressed, each member with its number).
// Called with mu held.
func (s *Server) groupNode(g *fakeGroup) node {
	phones := make([]string, 0, len(g.members))
	for p := range g.members {
		phones = append(phones, p)
	}
	sort.Strings(phones)
	var parts []node
	for _, p := range phones {
		a := s.account(p)
		pa := attrs{"jid": types.NewJID(a.lid, types.HiddenUserServer), "phone_number": types.NewJID(p, types.DefaultUserServer)}
		switch {
		case p == g.creator:
			pa["type"] = "superadmin"
		case g.members[p]:
			pa["type"] = "admin"
		}
		parts = append(parts, node{Tag: "participant", Attrs: pa})
	}
	creator := s.account(g.creator)
	return node{Tag: "group", Attrs: attrs{
		"id": g.id, "subject": g.subject, "s_t": strconv.FormatInt(g.created.Unix(), 10),
		"creation": strconv.FormatInt(g.created.Unix(), 10), "creator": types.NewJID(creator.lid, types.HiddenUserServer),
		"creator_pn": types.NewJID(g.creator, types.DefaultUserServer), "addressing_mode": "lid",
		"size": strconv.Itoa(len(g.members)),
	}, Content: parts}
}

// Group lists a group's members (phone → admin), for tests.
func (s *Server) Group(id string) (subject string, members map[string]bool, ok bool) {
	j, err := types.ParseJID(id)
	if err != nil {
		return "", nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[j.User]
	if g == nil {
		return "", nil, false
	}
	m := make(map[string]bool, len(g.members))
	for k, v := range g.members {
		m[k] = v
	}
	return g.subject, m, true
}
