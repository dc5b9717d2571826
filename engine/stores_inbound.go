package engine

import (
	"context"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// storeLoopIncoming reads a customer's text to one of the user's sessions for the store loop
// (DESIGN.md section 18): exactly a stop word or START changes the suppression list; otherwise a
// "1", "2" or an answer's word answers the order that awaits this phone's answer. In the
// background: a session actor never waits on storage.
func (e *Engine) storeLoopIncoming(s domain.Session, m network.Incoming) {
	if m.Kind != domain.KindText || m.Text == "" || m.From == "" {
		return
	}
	uid := s.AssignedTo
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		ctx, cancel := context.WithTimeout(e.stopCtx, 2*e.cfg.AskTimeout)
		defer cancel()
		if e.OptOuts.incoming(ctx, uid, s.ID, m.From, m.Text) {
			return
		}
		e.Stores.s.incomingAnswer(ctx, uid, m.From, m.Text)
	}()
}
