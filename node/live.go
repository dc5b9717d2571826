package node

import (
	"encoding/base64"
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
// hub). The user id is one subject token in unpadded base64url. Core NATS: like a stream on a
// single node, what a stream misses while it is not connected is not replayed.
//
// Interest: an owner builds and publishes a user's events only while some node streams them (a
// send makes three or four events, and streams are rare). A node announces on
// <prefix>.events-interest when a user's first stream opens and its last ends, and again every
// liveAnnounce for the users it streams (an owner that started since, or missed one, learns them
// within that; a node that starts asks every node to announce at once); an owner keeps a user
// listened to for 3 × liveAnnounce after the last announcement.
type liveEvents struct {
	nc     *nats.Conn
	prefix string
	log    *slog.Logger
	hub    *engine.LiveHub
	subs   map[string]*nats.Subscription // guarded by the hub's lock (first and last run under it)

	mu        sync.Mutex
	listening map[string]time.Time // users some node streams → until when it is believed
	interest  []*nats.Subscription
	stop      chan struct{}
	stopOnce  sync.Once
}

type liveWire struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// liveInterest is an announcement: a node streams the users of On (On false: no longer), or
// asks every node to announce (Sync).
type liveInterest struct {
	Users []string `json:"users,omitempty"`
	On    bool     `json:"on,omitempty"`
	Sync  bool     `json:"sync,omitempty"`
}

// liveAnnounce is how often a node says again which users it streams.
const liveAnnounce = 10 * time.Second

func newLiveEvents(nc *nats.Conn, prefix string, log *slog.Logger) *liveEvents {
	l := &liveEvents{nc: nc, prefix: prefix, log: log, subs: map[string]*nats.Subscription{},
		listening: map[string]time.Time{}, stop: make(chan struct{})}
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
		if in.On {
			l.listening[uid] = until
		} else {
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
		l.announce(liveInterest{Users: users, On: true})
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
		for uid, until := range l.listening {
			if now.After(until) {
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
	l.announce(liveInterest{Users: []string{uid}, On: true})
}

func (l *liveEvents) unsubscribe(uid string) {
	l.mu.Lock()
	sub := l.subs[uid]
	delete(l.subs, uid)
	l.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
		l.announce(liveInterest{Users: []string{uid}})
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
	})
}
