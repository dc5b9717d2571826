package httpapi

// GET /api/client/events/stream (DESIGN.md sections 15 and 20): Server-Sent Events with the same
// types and data as the webhooks, for the signed-in user. The token comes in the Authorization
// header or, for a browser's EventSource (which cannot set headers), as ?token=. A client that
// lost its connection sends the last id it saw (Last-Event-ID, as EventSource does by itself,
// or ?lastEventId=): the events after it come first, from the journal (24 h), then the live
// ones.

import (
	"bufio"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

// Stream timing: a comment line keeps proxies and the client's connection from timing out; a
// stream ends after streamMaxAge (well inside the server's write timeout) and the browser
// reconnects by itself after streamRetryMs.
const (
	streamPing    = 15 * time.Second
	streamMaxAge  = 30 * time.Minute
	streamRetryMs = "3000"
	// replayedIDs: how many of the replayed events' ids a stream remembers, to skip them when
	// they also arrive live (the listener opened before the journal was read). More events
	// than a listener buffers cannot be both: it would have fallen behind and ended.
	replayedIDs = 1024
)

// replayFunc replays a user's events after lastID (engine.Events.Replay).
type replayFunc func(lastID string, fn func(engine.LiveEvent) error) (found bool, err error)

// eventStream authenticates like every dashboard route, then holds the connection open and
// writes each of the user's events as it is committed: "id", "event" (the type) and "data" (the
// webhook body {type, timestamp, data}). A shutdown ends every open stream first (Shutdown).
func (s *Server) eventStream(ctx *fasthttp.RequestCtx) error {
	if len(ctx.Request.Header.Peek("Authorization")) == 0 {
		if tok := ctx.QueryArgs().Peek("token"); len(tok) > 0 {
			ctx.Request.Header.Set("Authorization", "Bearer "+string(tok))
		}
	}
	last := string(ctx.Request.Header.Peek("Last-Event-ID"))
	if last == "" {
		last = string(ctx.QueryArgs().Peek("lastEventId"))
	}
	if s.cfg.Cluster != nil {
		// Served here, from the events the user's partition owner publishes on NATS (and,
		// resumed, from the journal in the partition's records).
		c, err := s.verify(ctx)
		if err != nil {
			return err
		}
		l := s.cfg.Cluster.Listen(c.UID)
		return s.stream(ctx, l, last, func(lastID string, fn func(engine.LiveEvent) error) (bool, error) {
			return s.cfg.Cluster.Replay(c.UID, lastID, fn)
		})
	}
	u, err := s.user(ctx)
	if err != nil {
		return err
	}
	if s.cfg.Webhooks == nil {
		return errNotFound
	}
	// The listener opens before the journal is read: an event committed in between is in both,
	// and the stream skips its second copy.
	l := s.cfg.Webhooks.Listen(u.ID)
	return s.stream(ctx, l, last, func(lastID string, fn func(engine.LiveEvent) error) (bool, error) {
		return s.cfg.Webhooks.Replay(u.ID, lastID, fn)
	})
}

func (s *Server) stream(ctx *fasthttp.RequestCtx, l *engine.Listener, last string, replay replayFunc) error {
	closing := s.streams
	h := &ctx.Response.Header
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on at once
	ctx.SetStatusCode(fasthttp.StatusOK)
	s.metrics.streams.Inc()
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.metrics.streams.Dec()
		defer l.Close()
		w.WriteString("retry: " + streamRetryMs + "\n: connected\n\n")
		var seen recentIDs
		if last != "" && !s.resume(w, last, replay, &seen) {
			return
		}
		ping := time.NewTicker(streamPing)
		defer ping.Stop()
		end := time.NewTimer(streamMaxAge)
		defer end.Stop()
		for {
			if w.Flush() != nil {
				return // the client has gone
			}
			select {
			case ev, ok := <-l.C:
				if !ok {
					return // fell behind, or the events facet stopped: the client reconnects
				}
				if seen.has(ev.ID) {
					continue // replayed already
				}
				writeEvent(w, ev)
			case <-ping.C:
				w.WriteString(": ping\n\n")
			case <-end.C:
				return
			case <-closing:
				return
			}
		}
	})
	return nil
}

// resume writes the events after last from the journal, remembering the newest ids in seen;
// when the journal does not hold last, a "resync" event says the client may have missed
// events and reloads what it shows. false: the stream ends (the client has gone, or the
// journal could not be read: the client reconnects with the same Last-Event-ID).
func (s *Server) resume(w *bufio.Writer, last string, replay replayFunc, seen *recentIDs) bool {
	n := 0
	found, err := replay(last, func(ev engine.LiveEvent) error {
		writeEvent(w, ev)
		seen.add(ev.ID)
		if n++; n%256 == 0 {
			return w.Flush()
		}
		return nil
	})
	if err != nil {
		s.log.Warn("event stream: replay after Last-Event-ID", "err", err)
		return false
	}
	if !found {
		data, _ := json.Marshal(resyncData{LastEventID: last, Reason: "the events after this id are not all kept (24 h): reload what you show"})
		w.WriteString("event: resync\ndata: ")
		w.Write(data)
		w.WriteString("\n\n")
	}
	return w.Flush() == nil
}

// resyncData is the data of a "resync" event.
type resyncData struct {
	LastEventID string `json:"lastEventId"`
	Reason      string `json:"reason"`
}

func writeEvent(w *bufio.Writer, ev engine.LiveEvent) {
	w.WriteString("id: " + ev.ID + "\nevent: " + string(ev.Type) + "\ndata: ")
	w.Write(ev.Body) // compact JSON: one line
	w.WriteString("\n\n")
}

// recentIDs remembers the last replayedIDs ids added.
type recentIDs struct {
	set  map[string]struct{}
	ring []string
	next int
}

func (r *recentIDs) add(id string) {
	if r.set == nil {
		r.set = make(map[string]struct{}, replayedIDs)
		r.ring = make([]string, replayedIDs)
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % replayedIDs
}

func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}
