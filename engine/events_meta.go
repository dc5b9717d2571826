package engine

import (
	"fmt"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
)

// Webhook subscriptions of format meta (DESIGN.md section 20): the body of each delivery is
// Meta's webhook payload for the event (cloudapi.StatusNotification, MessageNotification,
// ReactionNotification), made from the standard body's data; the subscription's actor signs it
// X-Hub-Signature-256 (actors/webhook). The business number's phone comes from the session.

// SetNumbers gives the facet the phone of a session by its id (the engine's sessions), for
// the metadata of Meta's payloads; until then it is empty.
func (e *Events) SetNumbers(phone func(sessionID string) string) { e.numbers.Store(&phone) }

func (e *Events) number(sessionID string) cloudapi.Number {
	n := cloudapi.Number{SessionID: sessionID}
	if f := e.numbers.Load(); f != nil {
		n.Phone = (*f)(sessionID)
	}
	return n
}

// metaBody is the Meta payload of the event whose standard body is body (its id evID); ok is
// false when the event has none (a status Meta has no word for, a reaction of the session's
// own).
func (e *Events) metaBody(t domain.EventType, evID string, body []byte) (out []byte, ok bool, err error) {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, false, err
	}
	var n cloudapi.Notification
	switch t {
	case domain.EventMessageStatus:
		var d domain.MessageStatusData
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return nil, false, err
		}
		if n, ok = cloudapi.StatusNotification(e.number(d.SessionID), d); !ok {
			return nil, false, nil
		}
	case domain.EventMessageReceived:
		var d domain.InboundMessage
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return nil, false, err
		}
		n = cloudapi.MessageNotification(e.number(d.SessionID), d)
	case domain.EventMessageReaction:
		var d domain.ReactionData
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return nil, false, err
		}
		if d.FromMe {
			return nil, false, nil
		}
		n = cloudapi.ReactionNotification(e.number(d.SessionID), evID, d)
	default:
		return nil, false, nil
	}
	out, err = json.Marshal(n)
	if err != nil {
		return nil, false, fmt.Errorf("meta payload: %w", err)
	}
	return out, true, nil
}
