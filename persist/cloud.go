package persist

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gateway/gateway/domain"
)

// The Cloud API's records (DESIGN.md section 17):
//
//	net_send/<msgID>              domain.SendRecord (1)   7 days   the cloud network's sends (SendLog)
//	net_id/<networkID>            message id (raw)        7 days   Meta's id → the gateway's
//	cloud_template/<sessionID>    domain.TemplateSet (1)  -        a cloud session's templates, as synced
//	routing/<uid>                 domain.Routing (1)      -        an account's routing mode and cold template
//	cloud_window/<sid>/<contact>  last message (ms, raw)  24 h     a contact's service window with a cloud number
//	cloud_resend/<sid>/<msgID>    domain.CloudResend (1)  7 days   a message Meta failed for its rate limits, to send again

// cloudResendTable is kept here with the records it names (schema.go lists the others).
const cloudResendTable = "cloud_resend"

// SendLog is the cloud network's send log (network.SendLog).
type SendLog struct {
	t       *Table[domain.SendRecord]
	ids     *Table[string]
	resends *Table[domain.CloudResend]
}

// NewSendLog returns the send log on kv.
func NewSendLog(kv KV) SendLog {
	return SendLog{t: NewTable[domain.SendRecord](kv, netSendTable, recordVersion1), ids: NewTable[string](kv, netIDTable, recordVersion1),
		resends: NewTable[domain.CloudResend](kv, cloudResendTable, recordVersion1)}
}

// Begin records that message id is about to be sent, unless it was begun before; it returns
// what an earlier try recorded.
func (l SendLog) Begin(ctx context.Context, id string, at time.Time) (domain.SendRecord, error) {
	old, err := l.t.Get(id)
	if err == nil && !old.Begun.IsZero() {
		return old, nil
	}
	if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		return old, err
	}
	op, err := l.t.PutTTLOp(id, domain.SendRecord{Begun: at.UTC()}, OutboxRetention)
	if err != nil {
		return domain.SendRecord{}, err
	}
	return domain.SendRecord{}, l.t.KV().Commit(ctx, op)
}

// Taken records that the network took message id as networkID (and the way back).
func (l SendLog) Taken(ctx context.Context, id, networkID string) error {
	rec, err := l.t.Get(id)
	if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		return err
	}
	if rec.Begun.IsZero() {
		rec.Begun = time.Now().UTC()
	}
	rec.NetworkID = networkID
	put, err := l.t.PutTTLOp(id, rec, OutboxRetention)
	if err != nil {
		return err
	}
	back, err := l.ids.PutRawOp(networkID, []byte(id), OutboxRetention)
	if err != nil {
		return err
	}
	return l.t.KV().Commit(ctx, put, back)
}

// Get returns message id's record.
func (l SendLog) Get(id string) (domain.SendRecord, bool, error) {
	rec, err := getOrZero(l.t, id)
	return rec, err == nil && !rec.Begun.IsZero(), err
}

// ByNetworkID returns the id of the message the network knows as networkID.
func (l SendLog) ByNetworkID(networkID string) (string, bool, error) {
	if networkID == "" {
		return "", false, nil
	}
	v, err := l.ids.KV().Get(l.ids.key(networkID))
	if errors.Is(err, domain.ErrRecordNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(v), true, nil
}

// Forget drops message id's record (it is sent anew).
func (l SendLog) Forget(ctx context.Context, id string) error {
	return l.t.Delete(ctx, id)
}

// ResendLater keeps message id of a cloud session to be sent again (Meta failed it for its rate
// limits), until Resent.
func (l SendLog) ResendLater(ctx context.Context, sessionID, id string, r domain.CloudResend) error {
	op, err := l.resends.PutTTLOp(sessionID+"/"+id, r, OutboxRetention)
	if err != nil {
		return err
	}
	return l.resends.KV().Commit(ctx, op)
}

// Resent drops message id from the session's messages to send again.
func (l SendLog) Resent(ctx context.Context, sessionID, id string) error {
	return l.resends.Delete(ctx, sessionID+"/"+id)
}

// Resends calls fn for each message the session has to send again.
func (l SendLog) Resends(sessionID string, fn func(id string, r domain.CloudResend) error) error {
	prefix := sessionID + "/"
	return l.resends.Scan(prefix, func(key string, r domain.CloudResend) error {
		return fn(strings.TrimPrefix(key, prefix), r)
	})
}

// CloudTemplates keeps each cloud session's templates as last synced.
type CloudTemplates struct{ t *Table[domain.TemplateSet] }

// NewCloudTemplates returns the templates table on kv.
func NewCloudTemplates(kv KV) CloudTemplates {
	return CloudTemplates{NewTable[domain.TemplateSet](kv, cloudTemplateTable, recordVersion1)}
}

// CloudTemplates returns a session's templates (zero when never synced).
func (c CloudTemplates) CloudTemplates(sessionID string) (domain.TemplateSet, error) {
	return getOrZero(c.t, sessionID)
}

// getOrZero reads record id, or T's zero value when there is none.
func getOrZero[T any](t *Table[T], id string) (T, error) {
	v, err := t.Get(id)
	if errors.Is(err, domain.ErrRecordNotFound) {
		var zero T
		return zero, nil
	}
	return v, err
}

// PutCloudTemplates writes a session's templates.
func (c CloudTemplates) PutCloudTemplates(ctx context.Context, sessionID string, set domain.TemplateSet) error {
	return c.t.Put(ctx, sessionID, set)
}

// DeleteCloudTemplates drops a session's templates (it was deleted).
func (c CloudTemplates) DeleteCloudTemplates(ctx context.Context, sessionID string) error {
	return c.t.Delete(ctx, sessionID)
}

// Routings keeps each account's routing.
type Routings struct{ t *Table[domain.Routing] }

// NewRoutings returns the routing table on kv.
func NewRoutings(kv KV) Routings {
	return Routings{NewTable[domain.Routing](kv, routingTable, recordVersion1)}
}

// Routing returns an account's routing (zero: never set).
func (r Routings) Routing(uid string) (domain.Routing, error) { return getOrZero(r.t, uid) }

// PutRouting writes an account's routing.
func (r Routings) PutRouting(ctx context.Context, uid string, v domain.Routing) error {
	return r.t.Put(ctx, uid, v)
}

// Windows keeps each contact's service window with a cloud number: when the contact last
// wrote, for 24 hours (the window's length; a record gone is a window closed).
type Windows struct{ t *Table[domain.Millis] }

// NewWindows returns the windows table on kv.
func NewWindows(kv KV) Windows {
	return Windows{NewTable[domain.Millis](kv, cloudWindowTable, recordVersion1)}
}

func windowKey(sessionID, contact string) string { return sessionID + "/" + contact }

// LastInbound is when contact last wrote to the cloud session (zero: not in the last 24 hours).
func (w Windows) LastInbound(sessionID, contact string) (time.Time, error) {
	v, err := getOrZero(w.t, windowKey(sessionID, contact))
	if err != nil || v == 0 {
		return time.Time{}, err
	}
	return v.Time(), nil
}

// Wrote records that contact wrote to the cloud session at at (a later time only).
func (w Windows) Wrote(ctx context.Context, sessionID, contact string, at time.Time) error {
	if cur, err := w.LastInbound(sessionID, contact); err == nil && !cur.Before(at) {
		return nil
	}
	// Kept a little longer than the window: the reader judges it by its own clock.
	op, err := w.t.PutTTLOp(windowKey(sessionID, contact), domain.MillisOf(at), domain.ServiceWindow+time.Hour)
	if err != nil {
		return err
	}
	return w.t.KV().Commit(ctx, op)
}

// DeleteSession drops a deleted cloud session's windows.
func (w Windows) DeleteSession(ctx context.Context, sessionID string) error {
	var ops []Op
	err := w.t.Scan(sessionID+"/", func(id string, _ domain.Millis) error {
		ops = append(ops, w.t.DeleteOp(id)) // Scan keeps to the prefix
		return nil
	})
	if err != nil || len(ops) == 0 {
		return err
	}
	return w.t.KV().Commit(ctx, ops...)
}

// Requeue writes a queued message's accept record again with what changed (a message that
// waited for its contact, now sent through the session the contact wrote to: its session,
// phone, via and reason). The record is also its history entry, so both change at once; it is
// written at the same key (the user and acceptance time the outbox knows it by), with the
// Idempotency-Key's body hash it carries, and its pending mark, if any, stays.
func (o *Outbox) Requeue(ctx context.Context, e domain.OutboxEntry) error {
	cur, hash, err := o.get(e.ID, false)
	if err != nil {
		return err
	}
	e.UserID, e.CreatedAt = cur.UserID, cur.CreatedAt
	op, err := o.acceptOp(ctx, e, hash)
	if err != nil {
		return err
	}
	return o.kv.Commit(ctx, op)
}
