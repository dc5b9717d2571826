package node

import (
	"encoding/base64"
	"log/slog"

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
type liveEvents struct {
	nc     *nats.Conn
	prefix string
	log    *slog.Logger
	hub    *engine.LiveHub
	subs   map[string]*nats.Subscription // guarded by the hub's lock (first and last run under it)
}

type liveWire struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

func newLiveEvents(nc *nats.Conn, prefix string, log *slog.Logger) *liveEvents {
	l := &liveEvents{nc: nc, prefix: prefix, log: log, subs: map[string]*nats.Subscription{}}
	l.hub = engine.NewLiveHub(l.subscribe, l.unsubscribe)
	return l
}

func (l *liveEvents) subject(uid string) string {
	return l.prefix + ".events." + base64.RawURLEncoding.EncodeToString([]byte(uid))
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
	l.subs[uid] = sub
}

func (l *liveEvents) unsubscribe(uid string) {
	if sub := l.subs[uid]; sub != nil {
		_ = sub.Unsubscribe()
		delete(l.subs, uid)
	}
}

// Listening: whether a node streams uid's events is not known here; every event goes out.
func (l *liveEvents) Listening(string) bool { return true }

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
