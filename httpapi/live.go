package httpapi

// GET /api/client/events/stream (DESIGN.md section 15): Server-Sent Events with the same types
// and data as the webhooks, for the signed-in user. The token comes in the Authorization header
// or, for a browser's EventSource (which cannot set headers), as ?token=.

import (
	"bufio"
	"time"

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
)

// eventStream authenticates like every dashboard route, then holds the connection open and
// writes each of the user's events as it is committed: "id", "event" (the type) and "data" (the
// webhook body {type, timestamp, data}). A shutdown ends every open stream first (Shutdown).
func (s *Server) eventStream(ctx *fasthttp.RequestCtx) error {
	if len(ctx.Request.Header.Peek("Authorization")) == 0 {
		if tok := ctx.QueryArgs().Peek("token"); len(tok) > 0 {
			ctx.Request.Header.Set("Authorization", "Bearer "+string(tok))
		}
	}
	if s.cfg.Cluster != nil {
		// Served here, from the events the user's partition owner publishes on NATS.
		c, err := s.verify(ctx)
		if err != nil {
			return err
		}
		return s.stream(ctx, s.cfg.Cluster.Listen(c.UID))
	}
	u, err := s.user(ctx)
	if err != nil {
		return err
	}
	if s.cfg.Webhooks == nil {
		return errNotFound
	}
	return s.stream(ctx, s.cfg.Webhooks.Listen(u.ID))
}

func (s *Server) stream(ctx *fasthttp.RequestCtx, l *engine.Listener) error {
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
		ping := time.NewTicker(streamPing)
		defer ping.Stop()
		end := time.NewTimer(streamMaxAge)
		defer end.Stop()
		w.WriteString("retry: " + streamRetryMs + "\n: connected\n\n")
		for {
			if w.Flush() != nil {
				return // the client has gone
			}
			select {
			case ev, ok := <-l.C:
				if !ok {
					return // fell behind, or the events facet stopped: the client reconnects
				}
				w.WriteString("id: " + ev.ID + "\nevent: " + string(ev.Type) + "\ndata: ")
				w.Write(ev.Body) // compact JSON: one line
				w.WriteString("\n\n")
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
