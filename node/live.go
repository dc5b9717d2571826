package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// liveEvents carries users' live events across the cluster (DESIGN.md section 13.1): every
// partition's events facet publishes them on <prefix>.events.<user> (engine.LiveSink), and the
// node that holds a user's stream subscribes to that subject while the stream is open (its
// hub). The user id is one subject token in unpadded base64url. Core NATS: what a stream misses
// while it is not connected comes from the journal in the user's partition's records when it
// resumes (Last-Event-ID, DESIGN.md section 20). The journal keeps the events of the users who
// streamed lately (engine.Watchers): the node where a stream opens marks its user on every node
// (<prefix>.eventwatch) and in the records of no partition, which a node reads as it starts.
//
// Interest: an owner builds and publishes a user's live events only while some node streams
// them (a send makes three or four events, and streams are rare). A node announces on
// <prefix>.events-interest when a user's first stream opens and its last ends, and again every
// liveAnnounce for the users it streams (an owner that started since, or missed one, learns them
// within that; a node that starts asks every node to announce at once); an owner keeps a user
// listened to while some node's announcement holds: each node's own, for 3 × liveAnnounce after
// it said so, or until that node says its last stream of the user ended (another node's end does
// not stop the events of a user a third node still streams).
type liveEvents struct {
	nc       *nats.Conn
	prefix   string
	node     string // this node's id, in its announcements
	log      *slog.Logger
	hub      *engine.LiveHub
	subs     map[string]*nats.Subscription // guarded by the hub's lock (first and last run under it)
	watchers *engine.Watchers
	marks    watchMarks
	watchSub *nats.Subscription

	mu        sync.Mutex
	listening map[string]map[string]time.Time // users some node streams → those nodes → until when it is believed
	interest  []*nats.Subscription
	stop      chan struct{}
	stopOnce  sync.Once
}

// watchMarks is where the marks of streaming users are written down (persist.Webhooks on the
// records of no partition).
type watchMarks interface {
	MarkWatched(ctx context.Context, uid string, until time.Time) error
	WatchMarks() (map[string]time.Time, error)
}

// watchWire is a mark as nodes tell each other: the user, and until when (unix ms).
type watchWire struct {
	UID   string `json:"uid"`
	Until int64  `json:"until"`
}

type liveWire struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// liveInterest is an announcement: a node streams the users of On (On false: no longer), or
// asks every node to announce (Sync).
type liveInterest struct {
	Node  string   `json:"node,omitempty"` // who announces
	Users []string `json:"users,omitempty"`
	On    bool     `json:"on,omitempty"`
	Sync  bool     `json:"sync,omitempty"`
}

// liveAnnounce is how often a node says again which users it streams.
const liveAnnounce = 10 * time.Second

func newLiveEvents(nc *nats.Conn, prefix, node string, log *slog.Logger) *liveEvents {
	l := &liveEvents{nc: nc, prefix: prefix, node: node, log: log, subs: map[string]*nats.Subscription{}, watchers: engine.NewWatchers(),
		listening: map[string]map[string]time.Time{}, stop: make(chan struct{})}
	l.hub = engine.NewLiveHub(l.subscribe, l.unsubscribe)
	sub, err := nc.Subscribe(l.interestSubject(), l.onInterest)
	if err != nil {
		l.log.Warn("live events: interest", "err", err)
	} else {
		l.interest = append(l.interest, sub)
	}
	l.announce(liveInterest{Sync: true})
	go l.reannounce()
	return l
}

// startWatch follows the marks other nodes announce, then reads those written down before.
func (l *liveEvents) startWatch(marks watchMarks) error {
	l.marks = marks
	sub, err := l.nc.Subscribe(l.prefix+".eventwatch", func(m *nats.Msg) {
		var w watchWire
		if json.Unmarshal(m.Data, &w) == nil && w.UID != "" {
			l.watchers.Mark(w.UID, time.UnixMilli(w.Until))
		}
	})
	if err != nil {
		return fmt.Errorf("live events: follow the streaming users: %w", err)
	}
	l.watchSub = sub
	all, err := marks.WatchMarks()
	if err != nil {
		return fmt.Errorf("live events: read the streaming users: %w", err)
	}
	for uid, until := range all {
		l.watchers.Mark(uid, until)
	}
	return nil
}

// stopWatch stops following the marks.
func (l *liveEvents) stopWatch() {
	if l.watchSub != nil {
		_ = l.watchSub.Unsubscribe()
	}
}

// watch marks uid as streaming from now, on every node and in the records, unless a mark made
// lately covers it already.
func (l *liveEvents) watch(uid string) {
	until := engine.WatchUntil(time.Now())
	if !l.watchers.Mark(uid, until) {
		return
	}
	if data, err := json.Marshal(watchWire{UID: uid, Until: until.UnixMilli()}); err == nil {
		if err := l.nc.Publish(l.prefix+".eventwatch", data); err != nil {
			l.log.Warn("live events: tell the nodes of a streaming user", "err", err)
		}
	}
	if l.marks == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.marks.MarkWatched(ctx, uid, until); err != nil {
			l.log.Warn("live events: write down a streaming user (the nodes running now know it)", "err", err)
		}
	}()
}

func (l *liveEvents) subject(uid string) string {
	return l.prefix + ".events." + base64.RawURLEncoding.EncodeToString([]byte(uid))
}

func (l *liveEvents) interestSubject() string { return l.prefix + ".events-interest" }

func (l *liveEvents) announce(m liveInterest) {
	data, err := json.Marshal(m)
	if err == nil {
		err = l.nc.Publish(l.interestSubject(), data)
	}
	if err != nil {
		l.log.Debug("live events: announce", "err", err)
	}
}

// onInterest takes another node's (or this node's own) announcement.
func (l *liveEvents) onInterest(m *nats.Msg) {
	var in liveInterest
	if json.Unmarshal(m.Data, &in) != nil {
		return
	}
	if in.Sync {
		l.announceMine()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	until := time.Now().Add(3 * liveAnnounce)
	for _, uid := range in.Users {
		nodes := l.listening[uid]
		if in.On {
			if nodes == nil {
				nodes = map[string]time.Time{}
				l.listening[uid] = nodes
			}
			nodes[in.Node] = until
			continue
		}
		delete(nodes, in.Node)
		if len(nodes) == 0 {
			delete(l.listening, uid)
		}
	}
}

// announceMine says which users this node streams.
func (l *liveEvents) announceMine() {
	var users []string
	l.mu.Lock()
	for uid := range l.subs {
		users = append(users, uid)
	}
	l.mu.Unlock()
	if len(users) > 0 {
		l.announce(liveInterest{Node: l.node, Users: users, On: true})
	}
}

func (l *liveEvents) reannounce() {
	t := time.NewTicker(liveAnnounce)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.announceMine()
		now := time.Now()
		l.mu.Lock()
		for uid, nodes := range l.listening {
			for node, until := range nodes {
				if now.After(until) {
					delete(nodes, node)
				}
			}
			if len(nodes) == 0 {
				delete(l.listening, uid)
			}
		}
		l.mu.Unlock()
	}
}

func (l *liveEvents) subscribe(uid string) {
	sub, err := l.nc.Subscribe(l.subject(uid), func(m *nats.Msg) {
		var w liveWire
		if json.Unmarshal(m.Data, &w) == nil {
			l.hub.Send(uid, engine.LiveEvent{ID: w.ID, Type: domain.EventType(w.Type), Body: w.Body})
		}
	})
	if err != nil {
		l.log.Warn("live events: subscribe", "err", err)
		return
	}
	l.mu.Lock()
	l.subs[uid] = sub
	l.mu.Unlock()
	l.announce(liveInterest{Node: l.node, Users: []string{uid}, On: true})
}

func (l *liveEvents) unsubscribe(uid string) {
	l.mu.Lock()
	sub := l.subs[uid]
	delete(l.subs, uid)
	l.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
		l.announce(liveInterest{Node: l.node, Users: []string{uid}})
	}
}

// Listening: some node streams uid's events (as its announcements say).
func (l *liveEvents) Listening(uid string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.listening[uid]
	return ok
}

// Send publishes ev for whichever node streams uid's events (none: NATS drops it).
func (l *liveEvents) Send(uid string, ev engine.LiveEvent) {
	data, err := json.Marshal(liveWire{ID: ev.ID, Type: string(ev.Type), Body: ev.Body})
	if err == nil {
		err = l.nc.Publish(l.subject(uid), data)
	}
	if err != nil {
		l.log.Debug("live events: publish", "err", err)
	}
}

// close ends the streams and the announcements.
func (l *liveEvents) close() {
	l.stopOnce.Do(func() {
		close(l.stop)
		for _, s := range l.interest {
			_ = s.Unsubscribe()
		}
		l.hub.Close()
		l.stopWatch()
	})
}
